"""``BoundModel``: a provider's wire format bound to a connection pool and its options.

It is all the engine reads of a model (the worker, the exchange, delivery and the drivers
take a ``BoundModel``), at the bottom of the engine. The model users hold,
:class:`~.chat.ChatModel`, adds the calls that run on the drivers (``complete``,
``embed``), so nothing below the drivers reaches up to them.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Optional

from .._http import Transport, url_masks
from .._kit import WireFormat
from ..errors import BlazenError
from .masks import Masks
from .options import ModelOptions

if TYPE_CHECKING:
    from .._kit import EmbeddingWire

__all__ = ["MIN_SECRET_LENGTH", "BoundModel", "close_all_models"]

#: Keys shorter than this are placeholders, not secrets, and are not masked.
MIN_SECRET_LENGTH = 8

_live_models: weakref.WeakSet[BoundModel] = weakref.WeakSet()


class BoundModel:
    """A wire format bound to a connection pool, its options and its masks.

    What a stream needs of a model; safe to share between threads. Every model is a
    :class:`~.chat.ChatModel`, which adds the calls.
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
        #: How requests are built and payloads read (see :class:`blazen._kit.WireFormat`).
        self.wire = wire
        self._options = options
        #: This model's pooled connections (and the proxy they go through, if any).
        self.transport = Transport(
            max_connections=options.max_connections, verify=options.verify, url=base_url
        )
        # What every error, log line and repr passes through: (secret, shown instead). A
        # placeholder key such as "ollama", "none" or "x" guards nothing, and masking it
        # would rewrite honest text ("ollama" in an answer): only credential-length keys
        # count. Passwords in base_url or the proxy URL are masked in every form they take.
        proxy = self.transport.proxy
        self._masks = Masks(
            (
                *url_masks(base_url),
                *(url_masks(proxy.url) if proxy is not None else ()),
                *((s, "***") for s in secrets if len(s) >= MIN_SECRET_LENGTH),
            )
        )
        self.model = model
        self.base_url = base_url
        #: The provider's embedding endpoint (set by ``Providers``), or None where it has
        #: none blazen knows.
        self.embedder: Optional[EmbeddingWire] = None
        _live_models.add(self)

    @property
    def provider(self) -> str:
        """The provider's name, as used in errors ("openai", "groq"...)."""
        return self.wire.provider

    @property
    def chain(self) -> tuple[BoundModel, ...]:
        """The models a stream on this model tries, in order: this one (a fallback: more)."""
        return (self,)

    def switches(self, err: BlazenError) -> bool:
        """Whether a stream moves on to the next model of :attr:`chain` after ``err``."""
        return False

    @property
    def masks(self) -> tuple[tuple[str, str], ...]:
        """What :meth:`redact` replaces: (secret, shown instead) pairs."""
        return self._masks.pairs

    @property
    def options(self) -> ModelOptions:
        """The options this model was built with."""
        return self._options

    def redact(self, text: str) -> str:
        """``text`` with this model's keys and passwords masked: every message passes here."""
        return self._masks.redact(text)

    def scrub(self, err: BlazenError) -> BlazenError:
        """Mask this model's keys everywhere in ``err`` (see :meth:`Masks.scrub`)."""
        return self._masks.scrub(err)

    def close(self) -> None:
        """Close this model's pooled connections (it reconnects if used again)."""
        self.transport.close()


def close_all_models() -> None:
    """Close the pooled connections of every live model."""
    for model in list(_live_models):
        model.close()
