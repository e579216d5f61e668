"""``Fallback``: a model that starts the same request on the next model when one fails first.

Built by ``Providers.fallback(primary, *others, on=...)``. The stream's worker tries each
member in turn (each with its own retries, time limits and connection pool), and moves on
only while no chunk has been handed to the caller and the failure is one of ``on``: a
chunk already shown would be shown twice. The stream still ends with exactly one terminal:
the answer of the member that answered (``resp.provider``, ``resp.model`` say which), or
one error naming every attempt (``err.attempts`` holds them, in order).

A ``Fallback`` is a :class:`~.chat.ChatModel`, so it goes wherever one does
(``Streaming.complete``, ``start``, ``complete_async``, ``stream``, ``batch.run``,
``Agent``), and pickles as its members' factory calls (Dask workers rebuild it).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from .._kit import EmbeddingWire
from .._types import EmbeddingResponse
from ..errors import (
    BlazenError,
    CallbackError,
    ConnectionError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    TimeoutError,
    safe_str,
)
from .chat import ChatModel
from .masks import Masks
from .options import ModelOptions

__all__ = ["DEFAULT_SWITCH_ON", "Fallback", "SwitchOn"]

#: What makes a fallback move on by default: rate limits, overloads (529), connection
#: failures, connect and read timeouts before the first chunk; and any 5xx (below).
DEFAULT_SWITCH_ON: tuple[type[BlazenError], ...] = (
    RateLimitError,
    OverloadedError,
    ConnectionError,
    TimeoutError,
)

#: ``on=``: error classes, or a predicate that sees the error.
SwitchOn = Union[tuple[type[BaseException], ...], Callable[[BlazenError], bool]]

#: Margin of the fallback's own idle limit over its members': a member's silent socket
#: times out (and the next member starts) before the caller's idle clock runs out.
_IDLE_MARGIN = 2.0


def _switch_rule(on: Optional[SwitchOn]) -> Callable[[BlazenError], bool]:
    if on is None:

        def default(err: BlazenError) -> bool:
            if isinstance(err, DEFAULT_SWITCH_ON):
                return True
            status = err.status
            return isinstance(err, ProviderError) and status is not None and 500 <= status < 600

        return default
    if callable(on) and not isinstance(on, type):
        return on
    classes = (on,) if isinstance(on, type) else on
    if not isinstance(classes, tuple) or not classes or not all(
        isinstance(c, type) and issubclass(c, BaseException) for c in classes
    ):
        msg = "on= must be an error class, a tuple of error classes, or a function of the error"
        raise TypeError(msg)
    return lambda err: isinstance(err, classes)


def _options(members: tuple[ChatModel, ...], timeout: Optional[float]) -> ModelOptions:
    idles = [m.options.idle_timeout for m in members]
    idle = None if any(i is None for i in idles) else max(i or 0.0 for i in idles) + _IDLE_MARGIN
    return ModelOptions(
        max_retries=0,  # each member retries on its own
        connect_timeout=max((m.options.connect_timeout or 0.0) for m in members) or None,
        idle_timeout=idle,
        timeout=timeout,
        max_connections=min(m.options.max_connections for m in members),
    )


class Fallback(ChatModel):
    """A chain of models tried in order, before the first chunk, on the failures ``on`` names.

    Example::

        model = Providers.fallback(
            Providers.openai(model="gpt-4o-mini", max_retries=0),
            Providers.anthropic(model="claude-sonnet-4-6"),
        )
        resp = Streaming.complete(model, req, on_chunk=show)
        print(resp.provider, resp.model)        # who answered
    """

    def __init__(
        self,
        members: tuple[ChatModel, ...],
        *,
        on: Optional[SwitchOn] = None,
        timeout: Optional[float] = None,
    ) -> None:
        if len(members) < 2 or not all(isinstance(m, ChatModel) for m in members):
            msg = "Providers.fallback needs at least two models built by blazen.Providers"
            raise TypeError(msg)
        flat: list[ChatModel] = []
        for member in members:
            # A fallback of fallbacks is one longer chain.
            flat.extend(member.members if isinstance(member, Fallback) else (member,))
        self.members: tuple[ChatModel, ...] = tuple(flat)
        self._rule = _switch_rule(on)
        self._on = on
        primary = self.members[0]
        super().__init__(
            wire=primary.wire,
            model=primary.model,
            base_url=primary.base_url,
            options=_options(self.members, timeout),
            secrets=(),
        )
        # Every member's keys and passwords are masked in whatever this model reports.
        self._masks = Masks(tuple(mask for m in self.members for mask in m.masks))
        self.embedder: Optional[EmbeddingWire] = primary.embedder

    def embed(self, inputs: Any, **kwargs: Any) -> EmbeddingResponse:
        """The primary's :meth:`ChatModel.embed`: embeddings never fall back, since two
        models' vectors live in different spaces and cannot be mixed in one index."""
        return self.members[0].embed(inputs, **kwargs)

    async def embed_async(self, inputs: Any, **kwargs: Any) -> EmbeddingResponse:
        """The primary's :meth:`ChatModel.embed_async` (embeddings never fall back)."""
        return await self.members[0].embed_async(inputs, **kwargs)

    @property
    def chain(self) -> tuple[ChatModel, ...]:
        """The models a stream tries, in order."""
        return self.members

    def switches(self, err: BlazenError) -> bool:
        """Whether a stream moves on to the next member after ``err`` (the ``on=`` rule).

        A rule of the caller's that raises is a :class:`~blazen.CallbackError` (its cause
        the exception), not blazen's own failure: the stream ends with it.
        """
        try:
            return bool(self._rule(err))
        except Exception as exc:
            msg = (
                f"the fallback's on= rule raised {type(exc).__name__}: {safe_str(exc)} when "
                f"asked about {type(err).__name__}; the stream stopped without trying the "
                "next model (fix the rule)"
            )
            raise CallbackError(msg) from exc

    @property
    def provider(self) -> str:
        """``"fallback"``: the member that answered is on the response and its usage."""
        return "fallback"

    def close(self) -> None:
        """Close every member's pooled connections."""
        for member in self.members:
            member.close()
        super().close()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as the members (each as its factory call), ``on`` and the time limit."""
        return _rebuild, (self.members, self._on, self.options.timeout)

    def __repr__(self) -> str:
        return "Fallback(" + ", ".join(repr(m) for m in self.members) + ")"


def _rebuild(
    members: tuple[ChatModel, ...], on: Optional[SwitchOn], timeout: Optional[float]
) -> Fallback:
    return Fallback(members, on=on, timeout=timeout)
