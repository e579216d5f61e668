"""``ChatModel``: a provider's wire format bound to a connection pool and its options."""

from __future__ import annotations

import weakref
from typing import Optional

from .._cancel import CancelToken
from .._http import Transport
from .._types import CompletionRequest, CompletionResponse
from ..errors import BlazenError, redact
from .blocking import complete_blocking
from .checks import check_controls, check_request
from .options import ModelOptions
from .wire import WireFormat

__all__ = ["ChatModel", "close_all_models"]

_live_models: weakref.WeakSet[ChatModel] = weakref.WeakSet()


class ChatModel:
    """A model you can stream from; safe to share between threads.

    Build one with ``Providers.openai(...)`` (or any other provider) and hand it to
    ``Streaming.complete``.
    """

    def __init__(
        self,
        *,
        wire: WireFormat,
        model: str,
        base_url: str,
        options: ModelOptions,
        secrets: tuple[str, ...],
    ) -> None:
        #: How requests are built and payloads read (see :class:`~.wire.WireFormat`).
        self.wire = wire
        self._options = options
        self._secrets = tuple(s for s in secrets if s)
        #: This model's pooled connections.
        self.transport = Transport(
            max_connections=options.max_connections, verify=options.verify
        )
        self.model = model
        self.base_url = base_url
        _live_models.add(self)

    @property
    def provider(self) -> str:
        """The provider's name, as used in errors ("openai", "groq"...)."""
        return self.wire.provider

    @property
    def options(self) -> ModelOptions:
        """The options this model was built with."""
        return self._options

    def complete(
        self,
        req: CompletionRequest,
        *,
        timeout: Optional[float] = None,
        cancel: Optional[CancelToken] = None,
    ) -> CompletionResponse:
        """One non-streaming completion: the same errors, retries and response fields.

        Blocks until the response arrives; cancel, ``timeout`` and Ctrl-C behave as with
        ``Streaming.complete``. Raises the error on failure. Example::

            print(model.complete(Llm.completion_request([Llm.user("Hi")])).content)
        """
        check_request(req)
        check_controls({}, cancel, timeout)
        response = complete_blocking(self, req, cancel=cancel, timeout=timeout, stream=False)
        assert response is not None  # without an error handler failures raise
        return response

    def redact(self, text: str) -> str:
        """``text`` with this model's keys masked: every message passes through here."""
        return redact(text, self._secrets) if self._secrets else text

    def scrub(self, err: BlazenError) -> BlazenError:
        """Mask this model's keys everywhere in ``err``, whatever path built it."""
        if self._secrets:
            err.message = self.redact(err.message)
            err.args = (err.message,)
            if err.body:
                err.body = self.redact(err.body)
            err.partial = self.redact(err.partial)
            err.partial_reasoning = self.redact(err.partial_reasoning)
        return err

    def close(self) -> None:
        """Close this model's pooled connections (it reconnects if used again)."""
        self.transport.close()

    def __repr__(self) -> str:
        return (
            f"ChatModel(provider={self.provider!r}, model={self.model!r}, "
            f"base_url={self.base_url!r})"
        )


def close_all_models() -> None:
    """Close the pooled connections of every live model."""
    for model in list(_live_models):
        model.close()
