"""``Streaming``: the entry points of the contract, for blocking, asyncio and background callers."""

from __future__ import annotations

import functools
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from .._cancel import CancelToken
from .._types import CompletionRequest, CompletionResponse
from .blocking import complete_blocking
from .chat import ChatModel
from .checks import check_blocking_callbacks, check_controls, check_request
from .coro import cancel_safe
from .delivery import ChunkCallback, DoneCallback, ErrorCallback
from .sink import AnySink, is_sink, sink_callbacks

if TYPE_CHECKING:
    from .handle import StreamHandle
    from .pull import AsyncChunkStream, ChunkStream

__all__ = ["Streaming"]

Handler = Callable[..., Any]
#: What the positional argument of the entry points takes: a block handler or a sink object.
HandlerOrSink = Union[Handler, AnySink]


def _prepare(
    model: Any,
    req: Any,
    handler: Optional[HandlerOrSink],
    on_chunk: Optional[ChunkCallback],
    on_done: Optional[DoneCallback],
    on_error: Optional[ErrorCallback],
    cancel: Optional[CancelToken],
    timeout: Optional[float],
    blocking: str = "",
) -> dict[str, Any]:
    """Validate an entry point's arguments and fan the block handler out per kind.

    ``handler`` is a block handler, or a sink object whose methods are taken once here (so
    a sink costs nothing per chunk). A keyword callback wins over the block handler or the
    sink's method for its kind. ``blocking`` names a blocking entry point, whose callbacks
    may not be coroutine functions.
    """
    if not isinstance(model, ChatModel):
        msg = f"model must come from blazen.Providers, got {type(model).__name__}"
        raise TypeError(msg)
    check_request(req)
    if handler is not None and is_sink(handler):
        methods = sink_callbacks(handler)
        if blocking:
            check_blocking_callbacks({f"the sink's {k}": v for k, v in methods.items()}, blocking)
        on_chunk = on_chunk or methods["on_chunk"]
        on_done = on_done or methods["on_done"]
        on_error = on_error or methods["on_error"]
        handler = None
    elif handler is not None and not callable(handler):
        msg = (
            "handler must be callable, or a sink (an object with on_chunk, on_done or "
            f"on_error), got {type(handler).__name__}"
        )
        raise TypeError(msg)
    callbacks = {"handler": handler, "on_chunk": on_chunk, "on_done": on_done}
    check_controls({**callbacks, "on_error": on_error}, cancel, timeout)
    if blocking:
        check_blocking_callbacks({**callbacks, "on_error": on_error}, blocking)
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
        handler: Optional[HandlerOrSink] = None,
        *,
        on_chunk: Optional[ChunkCallback] = None,
        on_done: Optional[DoneCallback] = None,
        on_error: Optional[ErrorCallback] = None,
        cancel: Optional[CancelToken] = None,
        timeout: Optional[float] = None,
    ) -> Optional[CompletionResponse]:
        """Stream ``req`` from ``model``, calling back on this thread; block until it ends.

        ``handler(kind, *args)`` receives every kind (``"chunk"``, ``"done"``, ``"error"``);
        it may instead be a sink object (:class:`blazen.Sink`: ``on_chunk``, ``on_done``,
        ``on_error`` methods). A keyword callback wins over either for its kind. Exactly
        one of done or error fires.
        Returns the :class:`CompletionResponse` on success; on failure returns None if an
        error handler was given, else raises the error. Example::

            resp = Streaming.complete(
                model, req, on_chunk=lambda c: print(c.content_delta or "", end=""), timeout=60
            )
            print(resp.finish_reason, resp.usage)
        """
        kwargs = _prepare(
            model, req, handler, on_chunk, on_done, on_error, cancel, timeout, "complete"
        )
        return complete_blocking(model, req, **kwargs)

    @staticmethod
    @cancel_safe
    def complete_async(
        model: ChatModel,
        req: CompletionRequest,
        handler: Optional[HandlerOrSink] = None,
        *,
        on_chunk: Optional[ChunkCallback] = None,
        on_done: Optional[DoneCallback] = None,
        on_error: Optional[ErrorCallback] = None,
        cancel: Optional[CancelToken] = None,
        timeout: Optional[float] = None,
    ) -> Coroutine[Any, Any, Optional[CompletionResponse]]:
        """The same contract on asyncio: callbacks run on the event loop, one at a time.

        A callback may be a coroutine function; it is awaited before the next event.
        Cancelling the awaiting task cancels the stream (``on_error(CancelledError)``),
        then ``asyncio.CancelledError`` propagates. Example::

            resp = await Streaming.complete_async(model, req, on_chunk=send_to_client)

        The arguments are checked when it is called, before anything is awaited.
        """
        kwargs = _prepare(model, req, handler, on_chunk, on_done, on_error, cancel, timeout)
        from .aio import complete_async

        return complete_async(model, req, **kwargs)

    @staticmethod
    def start(
        model: ChatModel,
        req: CompletionRequest,
        handler: Optional[HandlerOrSink] = None,
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
        from .handle import StreamHandle

        kwargs = _prepare(
            model, req, handler, on_chunk, on_done, on_error, cancel, timeout, "start"
        )
        return StreamHandle.launch(model, req, **kwargs)

    @staticmethod
    def stream(
        model: ChatModel,
        req: CompletionRequest,
        *,
        cancel: Optional[CancelToken] = None,
        timeout: Optional[float] = None,
    ) -> ChunkStream:
        """Pull style: the chunks as a ``for`` loop, inside a ``with`` block.

        The same contract, carried out by the loop on this thread (one worker thread does
        the I/O): a failed stream raises its error from the loop, and ``chunks.response``
        holds the response after it. ``chunks.events()`` yields every event instead:
        :class:`~blazen.ChunkEvent` values, then exactly one :class:`~blazen.DoneEvent` or
        :class:`~blazen.ErrorEvent`. ``break`` leaves the stream running for another loop;
        leaving the block or dropping the object cancels it and closes its socket::

            with Streaming.stream(model, req) as chunks:
                for chunk in chunks:
                    print(chunk.content_delta or "", end="")
            print(chunks.response.usage)
        """
        from .pull import ChunkStream

        _prepare(model, req, None, None, None, None, cancel, timeout, "stream")
        return ChunkStream(model, req, cancel, timeout)

    @staticmethod
    def stream_async(
        model: ChatModel,
        req: CompletionRequest,
        *,
        cancel: Optional[CancelToken] = None,
        timeout: Optional[float] = None,
    ) -> AsyncChunkStream:
        """Pull style on asyncio: ``async with Streaming.stream_async(...) as chunks``.

        ``async for chunk in chunks`` (or ``async for event in chunks.events()``) inside it;
        the same contract as :meth:`stream`, carried out in the caller's task: cancelling
        that task ends the stream and propagates, leaving the block included. Example::

            async with Streaming.stream_async(model, req) as chunks:
                async for chunk in chunks:
                    await websocket.send(chunk.content_delta or "")
            print(chunks.response.usage)
        """
        from .pull import AsyncChunkStream

        _prepare(model, req, None, None, None, None, cancel, timeout)
        return AsyncChunkStream(model, req, cancel, timeout)
