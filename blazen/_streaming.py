"""``Streaming``: the entry points, and the blocking driver of the delivery protocol.

A worker thread (``_worker.Run``) does the I/O; :class:`~blazen._delivery.Delivery` decides
what each event means; this module's driver carries its operations out on the calling
thread: it waits on a queue in a way Ctrl-C interrupts, runs the callbacks one at a time,
and never returns while the worker is still running.
"""

from __future__ import annotations

import functools
import queue
from typing import TYPE_CHECKING, Any, Callable, Optional

from ._cancel import CancelToken, ambient_token
from ._delivery import (
    CALL,
    FINAL,
    JOIN,
    STOP,
    WAIT,
    ChunkCallback,
    Delivery,
    DoneCallback,
    ErrorCallback,
)
from ._model import ChatModel
from ._types import CompletionRequest, CompletionResponse
from ._worker import Run

if TYPE_CHECKING:
    from ._handle import StreamHandle

__all__ = ["Streaming", "complete_blocking"]

Handler = Callable[..., Any]


def _check_callable(name: str, fn: Any) -> None:
    if fn is not None and not callable(fn):
        msg = f"{name} must be callable or None, got {type(fn).__name__}"
        raise TypeError(msg)


def _validate(
    model: Any,
    req: Any,
    callbacks: dict[str, Any],
    cancel: Any,
    timeout: Any,
) -> None:
    """Programming mistakes raise here, before any thread or socket exists."""
    if not isinstance(model, ChatModel):
        msg = f"model must come from blazen.Providers, got {type(model).__name__}"
        raise TypeError(msg)
    if not isinstance(req, CompletionRequest):
        msg = f"req must be built with blazen.Llm.completion_request(...), got {type(req).__name__}"
        raise TypeError(msg)
    check_controls(callbacks, cancel, timeout)


def check_controls(callbacks: dict[str, Any], cancel: Any, timeout: Any) -> None:
    """Callbacks callable (or None), ``cancel`` a CancelToken, ``timeout`` positive seconds."""
    for name, fn in callbacks.items():
        _check_callable(name, fn)
    if cancel is not None and not isinstance(cancel, CancelToken):
        msg = f"cancel must be a blazen.CancelToken, got {type(cancel).__name__}"
        raise TypeError(msg)
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
    ):
        msg = f"timeout must be a positive number of seconds, got {timeout!r}"
        raise ValueError(msg)


def _prepare(
    model: Any,
    req: Any,
    handler: Optional[Handler],
    on_chunk: Optional[ChunkCallback],
    on_done: Optional[DoneCallback],
    on_error: Optional[ErrorCallback],
    cancel: Optional[CancelToken],
    timeout: Optional[float],
) -> dict[str, Any]:
    """Validate an entry point's arguments and fan the block handler out per kind.

    A keyword callback wins over the block handler for its kind.
    """
    callbacks = {"handler": handler, "on_chunk": on_chunk, "on_done": on_done}
    _validate(model, req, {**callbacks, "on_error": on_error}, cancel, timeout)
    if handler is not None:
        on_chunk = on_chunk or functools.partial(handler, "chunk")
        on_done = on_done or functools.partial(handler, "done")
        on_error = on_error or functools.partial(handler, "error")
    return {
        "on_chunk": on_chunk,
        "on_done": on_done,
        "on_error": on_error,
        "cancel": cancel,
        "timeout": timeout,
    }


def tokens_for(cancel: Optional[CancelToken]) -> list[CancelToken]:
    """The explicit token and the ambient one (a workflow's budget), without duplicates."""
    ambient = ambient_token()
    return [t for t in (cancel, ambient if ambient is not cancel else None) if t is not None]


def complete_blocking(
    model: ChatModel,
    req: CompletionRequest,
    *,
    on_chunk: Optional[ChunkCallback] = None,
    on_done: Optional[DoneCallback] = None,
    on_error: Optional[ErrorCallback] = None,
    cancel: Optional[CancelToken] = None,
    timeout: Optional[float] = None,
    stream: bool = True,
) -> Optional[CompletionResponse]:
    """Run one request on a worker thread and deliver its events on this thread."""
    events: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()
    run = Run(model, req, events.put, stream=stream)
    delivery = Delivery(
        model,
        run,
        on_chunk=on_chunk,
        on_done=on_done,
        on_error=on_error,
        tokens=tokens_for(cancel),
        timeout=timeout,
    )
    unsubscribe = delivery.subscribe()
    run.thread.start()
    try:
        return _drive(delivery, events)
    except KeyboardInterrupt:
        err = delivery.interrupted("Ctrl-C (KeyboardInterrupt)")
        if err is not None:
            run.thread.join()
            if delivery.on_error is not None:
                delivery.on_error(delivery.finish(err))
        raise
    finally:
        for unsub in unsubscribe:
            unsub()
        if not delivery.ended:
            run.abort.abort()
        if run.thread.is_alive():
            run.thread.join()


def _drive(
    delivery: Delivery, events: queue.SimpleQueue[tuple[int, Any]]
) -> Optional[CompletionResponse]:
    """Carry out the delivery protocol's operations on the calling thread."""
    run = delivery.run
    get = events.get
    steps = delivery.steps()
    send = steps.send
    op = next(steps)
    try:
        while True:
            code = op[0]
            if code == WAIT:
                # SimpleQueue.get is interruptible: Ctrl-C raises KeyboardInterrupt here.
                try:
                    item = get() if op[1] is None else get(timeout=op[1])
                except queue.Empty:
                    item = None
                op = send(item)
            elif code == CALL:
                try:
                    op[1](op[2])
                except Exception as exc:
                    op = send(exc)
                else:
                    op = send(None)
            elif code == FINAL:
                op[1](*op[2])
                op = send(None)
            else:
                if code == STOP:
                    run.abort.abort()
                elif code != JOIN:  # pragma: no cover - the protocol has no other operation
                    msg = f"unknown delivery operation {code}"
                    raise AssertionError(msg)
                run.thread.join()
                op = send(None)
    except StopIteration as stop:
        result: Optional[CompletionResponse] = stop.value
        return result


class Streaming:
    """Streamed completions delivered through callbacks.

    Example::

        def handler(kind, *args):
            if kind == "chunk":
                print(args[0].content_delta or "", end="", flush=True)
            elif kind == "done":
                reason, usage = args
            elif kind == "error":
                print("failed:", args[0])

        response = Streaming.complete(model, req, handler)
    """

    @staticmethod
    def complete(
        model: ChatModel,
        req: CompletionRequest,
        handler: Optional[Handler] = None,
        *,
        on_chunk: Optional[ChunkCallback] = None,
        on_done: Optional[DoneCallback] = None,
        on_error: Optional[ErrorCallback] = None,
        cancel: Optional[CancelToken] = None,
        timeout: Optional[float] = None,
    ) -> Optional[CompletionResponse]:
        """Stream ``req`` from ``model``, calling back on this thread; block until it ends.

        ``handler(kind, *args)`` receives every kind (``"chunk"``, ``"done"``, ``"error"``);
        a keyword callback wins over it for its kind. Exactly one of done or error fires.
        Returns the :class:`CompletionResponse` on success; on failure returns None if an
        error handler was given, else raises the error.
        """
        kwargs = _prepare(model, req, handler, on_chunk, on_done, on_error, cancel, timeout)
        return complete_blocking(model, req, **kwargs)

    @staticmethod
    async def complete_async(
        model: ChatModel,
        req: CompletionRequest,
        handler: Optional[Handler] = None,
        *,
        on_chunk: Optional[ChunkCallback] = None,
        on_done: Optional[DoneCallback] = None,
        on_error: Optional[ErrorCallback] = None,
        cancel: Optional[CancelToken] = None,
        timeout: Optional[float] = None,
    ) -> Optional[CompletionResponse]:
        """The same contract on asyncio: callbacks run on the event loop, one at a time.

        A callback may be a coroutine function; it is awaited before the next event.
        Cancelling the awaiting task cancels the stream (``on_error(CancelledError)``),
        then ``asyncio.CancelledError`` propagates. Example::

            resp = await Streaming.complete_async(model, req, on_chunk=send_to_client)
        """
        from ._aio import complete_async

        kwargs = _prepare(model, req, handler, on_chunk, on_done, on_error, cancel, timeout)
        return await complete_async(model, req, **kwargs)

    @staticmethod
    def start(
        model: ChatModel,
        req: CompletionRequest,
        handler: Optional[Handler] = None,
        *,
        on_chunk: Optional[ChunkCallback] = None,
        on_done: Optional[DoneCallback] = None,
        on_error: Optional[ErrorCallback] = None,
        cancel: Optional[CancelToken] = None,
        timeout: Optional[float] = None,
    ) -> StreamHandle:
        """Start streaming and return at once; callbacks run in order on a background thread.

        The :class:`StreamHandle` is a ``concurrent.futures.Future``: ``result()`` gives the
        response or raises the stream's error, and ``cancel()`` ends the stream. Example::

            handle = Streaming.start(model, req, on_chunk=ui.append)
            ...
            handle.cancel()
        """
        from ._handle import StreamHandle

        kwargs = _prepare(model, req, handler, on_chunk, on_done, on_error, cancel, timeout)
        return StreamHandle._start(model, req, **kwargs)
