"""``tee``: one stream into several sinks, in order; and ``QueueSink``, the thread hand-off.

The waits here and what bounds them (tests in ``tests/hostile/test_waits_are_bounded.py``):

| wait                                  | bounded by                                         |
|---------------------------------------|----------------------------------------------------|
| ``QueueSink`` putting on a full queue | its consumer; ``QueueSink(q, timeout=)`` bounds it |
| ``tee``                               | each sink it calls, in turn                         |

Tests: ``test_a_full_queue_holds_a_stream_at_most_the_sinks_timeout`` and
``test_a_full_queue_is_back_pressure_until_its_consumer_takes``; ``tee`` has no wait of its
own. ``JsonlSink`` (:mod:`.jsonl`) waits only for the local disk (write, flush, fsync).
"""

from __future__ import annotations

import inspect
import queue
from typing import Any, Callable, Optional

from .._stream import is_sink, sink_callbacks
from .._types import StreamChunk, TokenUsage
from ..errors import BlazenError, TimeoutError

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
    the error tuple is the last one. A bounded queue that is full blocks the stream's
    callback (back-pressure) for as long as its consumer takes nothing: the stream's own
    ``timeout=`` cannot cut a callback short. ``timeout`` bounds that wait: a put that finds
    no room for ``timeout`` seconds raises :class:`~blazen.TimeoutError`, which aborts the
    stream (``CallbackError``); it needs a queue whose ``put`` takes ``timeout=``
    (``queue.Queue``, ``multiprocessing`` queues). Example::

        q = queue.Queue()
        pool.submit(Streaming.complete, model, req, QueueSink(q))
        while (event := q.get())[0] == "chunk": ...
    """

    __slots__ = ("_put", "_timeout")

    def __init__(self, q: Any, *, timeout: Optional[float] = None) -> None:
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
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
        ):
            msg = f"timeout must be a positive number of seconds or None, got {timeout!r}"
            raise ValueError(msg)
        self._put = put
        self._timeout = timeout

    def _send(self, event: tuple[str, tuple[Any, ...]]) -> None:
        if self._timeout is None:
            self._put(event)
            return
        try:
            self._put(event, timeout=self._timeout)
        except queue.Full:
            msg = (
                f"QueueSink: the queue stayed full for {self._timeout:g} s (timeout=): its "
                "consumer is not taking events"
            )
            raise TimeoutError(msg, limit="queue", seconds=float(self._timeout)) from None

    def on_chunk(self, chunk: StreamChunk) -> None:
        """Put ``("chunk", (chunk,))``."""
        self._send(("chunk", (chunk,)))

    def on_done(self, finish_reason: str, usage: Optional[TokenUsage]) -> None:
        """Put ``("done", (finish_reason, usage))``."""
        self._send(("done", (finish_reason, usage)))

    def on_error(self, err: BlazenError) -> None:
        """Put ``("error", (err,))``."""
        self._send(("error", (err,)))
