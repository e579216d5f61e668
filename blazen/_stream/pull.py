"""Pull style: ``with Streaming.stream(...) as chunks: for chunk in chunks``, and its async twin.

Both sit on the push drivers: the blocking form on a :class:`StreamHandle` (its callbacks
put on a queue the loop takes from), the asyncio form on a task running
``complete_async``. Leaving the block early, ``break`` or garbage collection cancel the
stream, which closes its socket; the error of a failed stream raises from the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, Optional, Union

from .._cancel import CancelToken
from .._types import CompletionRequest, CompletionResponse, StreamChunk
from ..errors import BlazenError

if TYPE_CHECKING:
    from .handle import StreamHandle
    from .model import ChatModel

__all__ = ["AsyncChunkStream", "ChunkStream"]


class _End:
    """The terminal, on the queue after the last chunk."""

    __slots__ = ("error",)

    def __init__(self, error: Optional[BlazenError]) -> None:
        self.error = error


Item = Union[StreamChunk, _End]


class ChunkStream:
    """The chunks of one stream, pulled by a ``for`` loop; made by ``Streaming.stream``.

    ``response`` is the :class:`CompletionResponse` once the loop has ended normally.
    """

    def __init__(
        self,
        model: ChatModel,
        req: CompletionRequest,
        cancel: Optional[CancelToken],
        timeout: Optional[float],
    ) -> None:
        self._args = (model, req, cancel, timeout)
        self._queue: queue.SimpleQueue[Item] = queue.SimpleQueue()
        self._handle: Optional[StreamHandle] = None
        self._ended = False
        self.response: Optional[CompletionResponse] = None

    def __enter__(self) -> ChunkStream:
        from .handle import StreamHandle

        model, req, cancel, timeout = self._args
        put = self._queue.put
        self._handle = StreamHandle.launch(
            model,
            req,
            on_chunk=put,
            on_done=lambda reason, usage: put(_End(None)),
            on_error=lambda err: put(_End(err)),
            cancel=cancel,
            timeout=timeout,
        )
        return self

    def __iter__(self) -> Iterator[StreamChunk]:
        if self._handle is None:
            msg = "use Streaming.stream(...) in a with block: `with ... as chunks:`"
            raise RuntimeError(msg)
        while not self._ended:
            item = self._queue.get()
            if isinstance(item, _End):
                self._ended = True
                if item.error is not None:
                    raise item.error
                self.response = self._handle.result()
                return
            yield item

    def close(self) -> None:
        """Cancel the stream unless it has ended, and wait for its thread."""
        handle = self._handle
        if handle is not None:
            if not handle.done():
                handle.cancel()
            handle.join()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None and not handle.done():
            handle.cancel()  # garbage collected mid-stream: hang up; the thread ends itself


class AsyncChunkStream:
    """The chunks of one stream, pulled by ``async for``; made by ``Streaming.stream_async``."""

    def __init__(
        self,
        model: ChatModel,
        req: CompletionRequest,
        cancel: Optional[CancelToken],
        timeout: Optional[float],
    ) -> None:
        self._args = (model, req, cancel, timeout)
        self._queue: Optional[asyncio.Queue[Item]] = None
        self._task: Optional[asyncio.Task[Any]] = None
        self._ended = False
        self.response: Optional[CompletionResponse] = None

    async def __aenter__(self) -> AsyncChunkStream:
        from .aio import complete_async

        model, req, cancel, timeout = self._args
        q: asyncio.Queue[Item] = asyncio.Queue()
        self._queue = q
        self._task = asyncio.ensure_future(
            complete_async(
                model,
                req,
                on_chunk=q.put_nowait,
                on_done=lambda reason, usage: q.put_nowait(_End(None)),
                on_error=lambda err: q.put_nowait(_End(err)),
                cancel=cancel,
                timeout=timeout,
            )
        )
        return self

    async def __aiter__(self) -> AsyncIterator[StreamChunk]:
        if self._queue is None or self._task is None:
            msg = "use Streaming.stream_async(...) in an async with block"
            raise RuntimeError(msg)
        while not self._ended:
            item = await self._queue.get()
            if isinstance(item, _End):
                self._ended = True
                if item.error is not None:
                    raise item.error
                self.response = await self._task
                return
            yield item

    async def aclose(self) -> None:
        """Cancel the stream unless it has ended, and wait for it."""
        task = self._task
        if task is None:
            return
        if not task.done():
            task.cancel()
        # The stream's own error was raised from the loop already, or it was cancelled here.
        with contextlib.suppress(asyncio.CancelledError, BlazenError):
            await task

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        task = getattr(self, "_task", None)
        if task is not None and not task.done():
            task.cancel()
