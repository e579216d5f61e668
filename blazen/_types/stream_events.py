"""A stream's events as values, for one loop that sees them all: ``chunks.events()``.

The Swift seed's ``for await`` loop sees ``.chunk``, ``.done(reason, usage)`` and an error;
these are the Python shapes of the three, matched by class (``case DoneEvent(reason,
usage, response)``) or by ``kind``, the string a block handler receives.
"""

from __future__ import annotations

from typing import ClassVar, Optional, Union

import attrs

from ..errors import BlazenError
from .completion import CompletionResponse, StreamChunk, TokenUsage
from .frozen import by_value, immutable

__all__ = ["ChunkEvent", "DoneEvent", "ErrorEvent", "StreamEvent"]


@immutable
@by_value
@attrs.frozen(repr=False, eq=False)
class ChunkEvent:
    """One chunk of the stream (what ``on_chunk`` receives)."""

    kind: ClassVar[str] = "chunk"

    chunk: StreamChunk


@immutable
@by_value
@attrs.frozen(repr=False, eq=False)
class DoneEvent:
    """The stream ended with the provider's end signal: the last value, only on success."""

    kind: ClassVar[str] = "done"

    finish_reason: str
    usage: Optional[TokenUsage]
    #: The assembled answer, as ``Streaming.complete`` returns it.
    response: CompletionResponse


@immutable
@by_value
@attrs.frozen(repr=False, eq=False)
class ErrorEvent:
    """The stream failed (after any retries): the last value, only on failure."""

    kind: ClassVar[str] = "error"

    error: BlazenError


#: One value of ``chunks.events()``: chunks, then exactly one done or error.
StreamEvent = Union[ChunkEvent, DoneEvent, ErrorEvent]
