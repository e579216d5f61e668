"""``tee``: one stream into several sinks, in order; and ``QueueSink``, the thread hand-off."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

from .._stream import is_sink, sink_callbacks
from .._types import StreamChunk, TokenUsage
from ..errors import BlazenError

__all__ = ["QueueSink", "Tee", "tee"]


def _calls(methods: list[Callable[..., Any]], is_async: bool) -> Optional[Callable[..., Any]]:
    if not methods:
        return None  # no sink takes this kind: the stream treats it as not handled
    if len(methods) == 1:
        return methods[0]
    if is_async:

        async def call_all_async(*args: Any) -> None:
            for method in methods:
                value = method(*args)
                if inspect.isawaitable(value):
                    await value

        return call_all_async

    def call_all(*args: Any) -> None:
        for method in methods:
            method(*args)

    return call_all


class Tee:
    """Several sinks as one; built by :func:`tee`."""

    __slots__ = ("on_chunk", "on_done", "on_error", "sinks")

    on_chunk: Optional[Callable[..., Any]]
    on_done: Optional[Callable[..., Any]]
    on_error: Optional[Callable[..., Any]]

    def __init__(self, sinks: tuple[Any, ...]) -> None:
        for sink in sinks:
            if not is_sink(sink):
                msg = f"tee() takes sinks (on_chunk/on_done/on_error), got {type(sink).__name__}"
                raise TypeError(msg)
        self.sinks = sinks
        found = [sink_callbacks(s) for s in sinks]
        for name in ("on_chunk", "on_done", "on_error"):
            methods = [m for m in (f[name] for f in found) if m is not None]
            is_async = any(inspect.iscoroutinefunction(m) for m in methods)
            setattr(self, name, _calls(methods, is_async))

    def __repr__(self) -> str:
        return f"tee({', '.join(type(s).__name__ for s in self.sinks)})"


def tee(*sinks: Any) -> Tee:
    """One sink that hands every event to each of ``sinks``, in the order given.

    A sink that raises aborts the stream like any raising callback (the sinks after it do
    not see that event). A kind that no sink takes stays unhandled: without any
    ``on_error`` a failure still raises. If one sink's method is a coroutine function the
    tee's is too (for ``complete_async``). Example::

        Streaming.complete(model, req, tee(JsonlSink("run.jsonl"), RedisStreamSink(r, key)))
    """
    return Tee(sinks)


class QueueSink:
    """Put every event on ``q`` as ``(kind, args)``: the hand-off to another thread.

    ``q`` is anything with ``put`` (``queue.Queue``, ``queue.SimpleQueue``, a
    ``multiprocessing`` queue). The tuples are the block handler's arguments:
    ``("chunk", (chunk,))``, ``("done", (finish_reason, usage))``, ``("error", (err,))``;
    the error tuple is the last one. A bounded queue that is full blocks the stream
    (back-pressure), bounded by the stream's idle and total limits. Example::

        q = queue.Queue()
        pool.submit(Streaming.complete, model, req, QueueSink(q))
        while (event := q.get())[0] == "chunk": ...
    """

    __slots__ = ("_put",)

    def __init__(self, q: Any) -> None:
        put = getattr(q, "put", None)
        if not callable(put):
            msg = f"QueueSink needs an object with put(), got {type(q).__name__}"
            raise TypeError(msg)
        if inspect.iscoroutinefunction(put):
            msg = (
                "QueueSink cannot await an asyncio.Queue's put(); on complete_async pass "
                "on_chunk=q.put (awaited), or use a queue.Queue"
            )
            raise TypeError(msg)
        self._put = put

    def on_chunk(self, chunk: StreamChunk) -> None:
        """Put ``("chunk", (chunk,))``."""
        self._put(("chunk", (chunk,)))

    def on_done(self, finish_reason: str, usage: Optional[TokenUsage]) -> None:
        """Put ``("done", (finish_reason, usage))``."""
        self._put(("done", (finish_reason, usage)))

    def on_error(self, err: BlazenError) -> None:
        """Put ``("error", (err,))``."""
        self._put(("error", (err,)))
