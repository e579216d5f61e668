"""Sink objects: one object whose methods are the callbacks, accepted wherever a handler is.

A sink has one or more of ``on_chunk(chunk)``, ``on_done(finish_reason, usage)`` and
``on_error(err)``; a kind it has no method for (or whose attribute is None) is not
handled, exactly as a callback left out. The methods are taken once, when a stream is
started, so the per-chunk path calls a bound method and nothing more.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol, Union

from .._types import StreamChunk, TokenUsage
from ..errors import BlazenError

__all__ = [
    "SINK_METHODS",
    "AnySink",
    "ChunkSink",
    "DoneSink",
    "ErrorSink",
    "Sink",
    "is_sink",
    "sink_callbacks",
]

#: The methods that make an object a sink, in the order a stream calls them.
SINK_METHODS = ("on_chunk", "on_done", "on_error")


class ChunkSink(Protocol):
    """A sink that takes chunks: ``on_chunk(chunk)`` (a coroutine on ``complete_async``)."""

    def on_chunk(self, chunk: StreamChunk, /) -> Any:
        """One chunk, in order."""


class DoneSink(Protocol):
    """A sink that takes the success terminal: ``on_done(finish_reason, usage)``."""

    def on_done(self, finish_reason: str, usage: Optional[TokenUsage], /) -> Any:
        """The stream ended well; nothing follows."""


class ErrorSink(Protocol):
    """A sink that takes the failure terminal: ``on_error(err)``."""

    def on_error(self, err: BlazenError, /) -> Any:
        """The stream failed with ``err``; nothing follows."""


class Sink(ChunkSink, DoneSink, ErrorSink, Protocol):
    """An object that takes every event of a stream: pass it where a handler goes.

    Example::

        class Transcript:
            def on_chunk(self, chunk): ...
            def on_done(self, finish_reason, usage): ...
            def on_error(self, err): ...

        Streaming.complete(model, req, Transcript())

    A sink may leave a method out (the kind is then not handled; without ``on_error`` a
    failure raises). Keyword callbacks win over the sink's method for their kind.
    """


#: Any object with at least one of the sink methods.
AnySink = Union[ChunkSink, DoneSink, ErrorSink]


def is_sink(obj: Any) -> bool:
    """Whether ``obj`` has one of the sink methods (so it is taken as a sink, not called)."""
    return any(getattr(obj, name, None) is not None for name in SINK_METHODS)


def sink_callbacks(sink: Any) -> dict[str, Optional[Callable[..., Any]]]:
    """The sink's methods by callback name; ``TypeError`` if one is there but not callable."""
    found: dict[str, Optional[Callable[..., Any]]] = {}
    for name in SINK_METHODS:
        method = getattr(sink, name, None)
        if method is not None and not callable(method):
            msg = f"the sink's {name} must be a method (callable), got {type(method).__name__}"
            raise TypeError(msg)
        found[name] = method
    return found
