"""Pull style: ``with Streaming.stream(...) as chunks: for chunk in chunks``, and its async twin.

Each is a driver of the delivery protocol in its own right: the loop that asks for the next
chunk carries the operations out (:func:`~.driving.carry_out`, on the caller's thread or
in the caller's task), so a pull stream uses one worker thread and nothing else. Its chunk
callback returns the chunk, which the driver hands to the loop; a failed stream's error is
raised from the loop (``for chunk in chunks``) or is its last value (``chunks.events()``).

``break`` leaves the stream running: another loop in the same block goes on where the
first stopped. Leaving the block (or dropping the object) ends the stream, which closes
its socket; only that ending is absorbed there: an interrupt or a cancel aimed at the
caller always propagates.
"""

from __future__ import annotations

import queue
import sys
from collections.abc import AsyncIterator, Generator, Iterator
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from .._cancel import CancelToken
from .._types import (
    ChunkEvent,
    CompletionRequest,
    CompletionResponse,
    DoneEvent,
    ErrorEvent,
    StreamChunk,
    StreamEvent,
)
from ..errors import BlazenError
from . import aio
from .blocking import advance, how, settle
from .checks import check_reentry
from .delivery import INTERRUPT_RETRIES, Delivery, leaving, new_gate
from .driving import Ended, Need, carry_out
from .events import WorkerEvent
from .worker import start_soon

if TYPE_CHECKING:
    from .model import BoundModel

__all__ = ["AsyncChunkStream", "ChunkStream"]

Ops = Generator[Need, Any, Optional[CompletionResponse]]
#: What the next pull gives: a chunk, the terminal (once), or None once it was given.
Pulled = Union[StreamChunk, DoneEvent, ErrorEvent, None]


def _offer(chunk: StreamChunk) -> StreamChunk:
    """The pull drivers' chunk callback: the chunk goes back to the driver, then to the loop."""
    return chunk


def _open(
    model: BoundModel,
    req: CompletionRequest,
    put: Callable[[WorkerEvent], Any],
    cancel: Optional[CancelToken],
    timeout: Optional[float],
) -> Delivery:
    """A pull stream's delivery: chunks come back to the driver, the terminal is the loop's."""
    check_reentry(model)
    return Delivery.open(
        model,
        req,
        put,
        stream=True,
        on_chunk=_offer,
        on_done=None,  # the terminal is the loop's end (or the last event), not a callback
        on_error=None,
        cancel=cancel,
        timeout=timeout,
    )


def _done(response: Optional[CompletionResponse]) -> DoneEvent:
    assert response is not None  # a stream (not a single response) always assembles one
    return DoneEvent(response.finish_reason, response.usage, response)


class ChunkStream:
    """The chunks of one stream, pulled by a ``for`` loop; made by ``Streaming.stream``.

    ``for chunk in chunks`` yields the chunks and raises the stream's error;
    ``chunks.events()`` yields :class:`~blazen.ChunkEvent` values, then exactly one
    :class:`~blazen.DoneEvent` or :class:`~blazen.ErrorEvent`. ``response`` is the
    :class:`CompletionResponse` once the stream has succeeded.
    """

    def __init__(
        self,
        model: BoundModel,
        req: CompletionRequest,
        cancel: Optional[CancelToken],
        timeout: Optional[float],
    ) -> None:
        self._args = (model, req, cancel, timeout)
        self._events: queue.SimpleQueue[WorkerEvent] = queue.SimpleQueue()
        self._delivery: Optional[Delivery] = None
        self._ops: Optional[Ops] = None
        #: The terminal was handed out, or the stream was ended: nothing more to pull.
        self._over = False
        self.response: Optional[CompletionResponse] = None

    def __enter__(self) -> ChunkStream:
        if self._delivery is not None:
            msg = "a stream can be entered once: call Streaming.stream(...) again"
            raise RuntimeError(msg)
        model, req, cancel, timeout = self._args
        # An exception the caller is handling as it enters: not an interrupt of this stream.
        outer = sys.exc_info()[1]
        try:
            delivery = self._delivery = _open(model, req, self._events.put, cancel, timeout)
            self._ops = carry_out(delivery)
            delivery.subscribe()
            # Thread.start waits for the thread, and Ctrl-C may land there.
            delivery.run.start()
        finally:
            # The block is not entered if this raises, so __exit__ will not run: end the
            # stream here. A finally whose first statement is a try, as in the blocking
            # driver: Python 3.10 runs a pending signal handler at an except clause's entry.
            try:
                exc = leaving(outer)
                if exc is not None:
                    self._end(how(exc))
            except BaseException:  # a second interrupt: end it as leaving the block does
                self.__exit__(BaseException, None, None)
        return self

    def __iter__(self) -> Iterator[StreamChunk]:
        self._check_entered()
        return _Chunks(self)

    def events(self) -> Iterator[StreamEvent]:
        """Every event in one loop: chunk values, then exactly one done or error value.

        Example::

            with Streaming.stream(model, req) as chunks:
                for event in chunks.events():
                    match event:
                        case blazen.ChunkEvent(chunk):
                            print(chunk.content_delta or "", end="")
                        case blazen.DoneEvent(reason, usage):
                            print(f"\\n[{reason}]")
                        case blazen.ErrorEvent(err):
                            print(f"\\nfailed: {err}")
        """
        self._check_entered()
        return _Events(self)

    def _check_entered(self) -> None:
        if self._delivery is None:
            msg = "use Streaming.stream(...) in a with block: `with ... as chunks:`"
            raise RuntimeError(msg)

    def pull(self) -> Pulled:
        """The next chunk, then the terminal once, then None; waits on this thread.

        Ctrl-C (or a signal handler's raise) while waiting ends the stream, then propagates.
        """
        delivery, ops = self._delivery, self._ops
        if self._over or delivery is None or ops is None:
            return None
        try:
            got = advance(ops, self._events.get, delivery.run)
        except BlazenError as err:
            self._over = True
            return ErrorEvent(err)
        except BaseException as exc:
            self._end(how(exc))
            raise
        if isinstance(got, Ended):
            self._over = True
            done = _done(got.response)
            self.response = done.response
            return done
        chunk: StreamChunk = got.value
        return chunk

    def _end(self, how: str) -> None:
        """End the stream unless it has ended, wait for its worker, and unsubscribe.

        Idempotent: after an interrupt anywhere inside it, calling it again finishes it.
        """
        self._over = True
        delivery = self._delivery
        if delivery is not None and not (delivery.ended and delivery.worker_gone):
            settle(delivery, None, how, new_gate())
        if delivery is not None:
            delivery.unsubscribe()

    def close(self) -> None:
        """End the stream unless it has ended, and wait for its worker thread."""
        self.__exit__(None, None, None)

    def __exit__(self, exc_type: object, *exc: object) -> None:
        # Ctrl-C may land anywhere in here, pressed again while a first one leaves the
        # block: each try starts the idempotent ending over, and every call is inside a
        # try (the loop's own too: iterating a tuple calls nothing). Once the stream has
        # ended, an interrupt absorbed meanwhile is raised, unless one is already leaving.
        absorbed: Optional[BaseException] = None
        try:
            for _ in INTERRUPT_RETRIES:
                try:
                    self._end("leaving the with block")
                    break
                except BaseException as interrupt:
                    absorbed = interrupt if absorbed is None else absorbed
        except BaseException as interrupt:  # landed on the loop's jump back: once more
            absorbed = interrupt if absorbed is None else absorbed
            # Not contextlib.suppress(): building it is a call, outside any try.
            try:  # noqa: SIM105
                self._end("leaving the with block")
            except BaseException:
                pass
        if absorbed is not None and exc_type is None:
            raise absorbed

    def __del__(self) -> None:
        # Collected with the stream unfinished (never left by a with block, or an interrupt
        # at the very entry of __exit__): hang up without waiting; the worker ends itself.
        delivery = getattr(self, "_delivery", None)
        if delivery is not None and not (delivery.ended and delivery.worker_gone):
            delivery.interrupt("the stream being garbage collected")
        if delivery is not None:
            delivery.unsubscribe()


class _Chunks:
    """``for chunk in chunks``: the chunks, then the stream's error raised."""

    __slots__ = ("_stream",)

    def __init__(self, stream: ChunkStream) -> None:
        self._stream = stream

    def __iter__(self) -> _Chunks:
        return self

    def __next__(self) -> StreamChunk:
        item = self._stream.pull()
        if isinstance(item, StreamChunk):
            return item
        if isinstance(item, ErrorEvent):
            raise item.error
        raise StopIteration


class _Events:
    """``chunks.events()``: chunk values, then the terminal value."""

    __slots__ = ("_stream",)

    def __init__(self, stream: ChunkStream) -> None:
        self._stream = stream

    def __iter__(self) -> _Events:
        return self

    def __next__(self) -> StreamEvent:
        item = self._stream.pull()
        if isinstance(item, StreamChunk):
            return ChunkEvent(item)
        if item is None:
            raise StopIteration
        return item


class AsyncChunkStream:
    """The chunks of one stream, pulled by ``async for``; made by ``Streaming.stream_async``.

    The same as :class:`ChunkStream`, in the caller's task: no task of its own, so
    cancelling the caller's task (or an ``asyncio.timeout`` expiring) ends the stream and
    propagates, wherever it lands.
    """

    def __init__(
        self,
        model: BoundModel,
        req: CompletionRequest,
        cancel: Optional[CancelToken],
        timeout: Optional[float],
    ) -> None:
        self._args = (model, req, cancel, timeout)
        self._inbox: Optional[aio.Inbox] = None
        self._delivery: Optional[Delivery] = None
        self._ops: Optional[Ops] = None
        self._over = False
        self.response: Optional[CompletionResponse] = None

    async def __aenter__(self) -> AsyncChunkStream:
        if self._delivery is not None:
            msg = "a stream can be entered once: call Streaming.stream_async(...) again"
            raise RuntimeError(msg)
        model, req, cancel, timeout = self._args
        inbox = self._inbox = aio.Inbox()
        delivery = self._delivery = _open(model, req, inbox.put, cancel, timeout)
        self._ops = carry_out(delivery, aio.interrupts)
        delivery.subscribe()
        # blazen's starter thread starts the worker: the loop does not wait for Thread.start.
        start_soon(delivery.run)
        return self

    def __aiter__(self) -> AsyncIterator[StreamChunk]:
        self._check_entered()
        return _AsyncChunks(self)

    def events(self) -> AsyncIterator[StreamEvent]:
        """Every event in one ``async for``: chunk values, then exactly one done or error."""
        self._check_entered()
        return _AsyncEvents(self)

    def _check_entered(self) -> None:
        if self._delivery is None:
            msg = "use Streaming.stream_async(...) in an async with block"
            raise RuntimeError(msg)

    async def pull(self) -> Pulled:
        """The next chunk, then the terminal once, then None; waits in the caller's task.

        A cancel of the task while waiting ends the stream, then propagates.
        """
        delivery, ops, inbox = self._delivery, self._ops, self._inbox
        if self._over or delivery is None or ops is None or inbox is None:
            return None
        try:
            got = await aio.advance(ops, inbox, delivery.run)
        except BlazenError as err:
            self._over = True
            return ErrorEvent(err)
        except GeneratorExit:
            # The coroutine is being closed (its task collected): nothing may be awaited.
            self._over = True
            delivery.interrupt("the coroutine being closed")
            raise
        except BaseException as exc:
            # Raised as it came: a second cancel absorbed while ending is the same one.
            await self._end(aio.how(exc))
            raise
        if isinstance(got, Ended):
            self._over = True
            done = _done(got.response)
            self.response = done.response
            return done
        chunk: StreamChunk = got.value
        return chunk

    async def _end(self, how: str) -> Optional[BaseException]:
        """End the stream unless it has ended and wait for its worker; what was absorbed."""
        self._over = True
        delivery, inbox = self._delivery, self._inbox
        try:
            if delivery is None or inbox is None or (delivery.ended and delivery.worker_gone):
                return None
            return await aio.settle(delivery, inbox, how)
        finally:
            if delivery is not None:
                delivery.unsubscribe()

    async def aclose(self) -> None:
        """End the stream unless it has ended, and wait for its worker thread.

        The stream's own ending is absorbed; a cancel of the caller's task that lands
        meanwhile (an ``asyncio.timeout`` expiring, say) is raised once the worker is gone.
        """
        absorbed = await self._end("leaving the async with block")
        if absorbed is not None:
            raise absorbed

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        delivery = getattr(self, "_delivery", None)
        if delivery is not None and not getattr(self, "_over", True):
            delivery.interrupt("the stream being garbage collected")
            delivery.unsubscribe()


class _AsyncChunks:
    """``async for chunk in chunks``: the chunks, then the stream's error raised."""

    __slots__ = ("_stream",)

    def __init__(self, stream: AsyncChunkStream) -> None:
        self._stream = stream

    def __aiter__(self) -> _AsyncChunks:
        return self

    async def __anext__(self) -> StreamChunk:
        item = await self._stream.pull()
        if isinstance(item, StreamChunk):
            return item
        if isinstance(item, ErrorEvent):
            raise item.error
        raise StopAsyncIteration


class _AsyncEvents:
    """``async for event in chunks.events()``: chunk values, then the terminal value."""

    __slots__ = ("_stream",)

    def __init__(self, stream: AsyncChunkStream) -> None:
        self._stream = stream

    def __aiter__(self) -> _AsyncEvents:
        return self

    async def __anext__(self) -> StreamEvent:
        item = await self._stream.pull()
        if isinstance(item, StreamChunk):
            return ChunkEvent(item)
        if item is None:
            raise StopAsyncIteration
        return item
