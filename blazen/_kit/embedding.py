"""What an embedding endpoint is made of: build the request, read the vectors. No I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional, Protocol

import attrs

from .._http import HttpRequest
from .._types import TokenUsage, Vector, immutable
from ..errors import ProviderError

__all__ = ["EmbeddingBatch", "EmbeddingWire"]


@immutable
@attrs.frozen(kw_only=True, weakref_slot=False)
class EmbeddingBatch:
    """One response's vectors, in the order of the texts sent, and what it reported."""

    vectors: tuple[Vector, ...]
    usage: Optional[TokenUsage] = None
    model: Optional[str] = None


class EmbeddingWire(Protocol):
    """One provider's embedding endpoint: build the request, read the response. No I/O."""

    #: Name used in errors and logs.
    provider: str
    #: The embedding model used when the call names none.
    model: str
    #: The most texts one request may carry (the provider's documented limit, or less).
    batch_size: int
    #: The most requests in flight at once for one call (a server that cannot take more).
    concurrency: int

    def build(self, texts: Sequence[str], *, model: str, dimensions: Optional[int]) -> HttpRequest:
        """The HTTP request that embeds ``texts``."""
        ...

    def parse(self, body: str, count: int) -> EmbeddingBatch:
        """The vectors of a success body for ``count`` texts (a ProviderError if not)."""
        ...

    def error(self, status: int, headers: Mapping[str, str], body: str) -> ProviderError:
        """The error for a non-success HTTP response."""
        ...
