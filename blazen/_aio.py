"""The asyncio driver of the delivery protocol: callbacks run on the event loop thread."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Optional

from ._cancel import CancelToken
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
from ._streaming import tokens_for
from ._types import CompletionRequest, CompletionResponse
from ._worker import EXIT, Run

__all__ = ["complete_async"]


async def complete_async(
    model: ChatModel,
    req: CompletionRequest,
    *,
    on_chunk: Optional[ChunkCallback],
    on_done: Optional[DoneCallback],
    on_error: Optional[ErrorCallback],
    cancel: Optional[CancelToken],
    timeout: Optional[float],
    stream: bool = True,
) -> Optional[CompletionResponse]:
    """Run one request on a worker thread and deliver its events on the running loop."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()

    def put(item: tuple[int, Any]) -> None:
        # The worker's only way into the loop; raises RuntimeError once the loop is closed.
        loop.call_soon_threadsafe(events.put_nowait, item)

    run = Run(model, req, put, stream=stream)
    delivery = Delivery(
        model,
        run,
        on_chunk=on_chunk,
        on_done=on_done,
        on_error=on_error,
        tokens=tokens_for(cancel),
        timeout=timeout,
    )
    exited = False

    async def wait_exit() -> None:
        nonlocal exited
        while not exited:
            tag, _ = await events.get()
            exited = tag == EXIT
        # EXIT is the worker's last act; the thread ends a few instructions later. Wait for
        # that off the loop, so that no worker outlives the call.
        if run.thread.is_alive():
            await loop.run_in_executor(None, run.thread.join)

    unsubscribe = delivery.subscribe()
    try:
        # Thread.start() waits for the new thread to run; hundreds of streams starting at
        # once would stall the loop for that long, so the wait happens off the loop.
        await loop.run_in_executor(None, run.thread.start)
        steps = delivery.steps()
        op = next(steps)
        try:
            while True:
                code = op[0]
                if code == WAIT:
                    if not events.empty():
                        item: Any = events.get_nowait()
                    elif op[1] is None:
                        item = await events.get()
                    else:
                        try:
                            item = await asyncio.wait_for(events.get(), op[1])
                        except asyncio.TimeoutError:
                            item = None
                    if item is not None and item[0] == EXIT:
                        exited = True
                    op = steps.send(item)
                elif code == CALL:
                    try:
                        result = op[1](op[2])
                        if inspect.isawaitable(result):
                            await result
                    except Exception as exc:
                        op = steps.send(exc)
                    else:
                        op = steps.send(None)
                elif code == FINAL:
                    result = op[1](*op[2])
                    if inspect.isawaitable(result):
                        await result
                    op = steps.send(None)
                else:
                    if code == STOP:
                        run.abort.abort()
                    elif code != JOIN:  # pragma: no cover
                        msg = f"unknown delivery operation {code}"
                        raise AssertionError(msg)
                    await wait_exit()
                    op = steps.send(None)
        except StopIteration as stop:
            response: Optional[CompletionResponse] = stop.value
            return response
    except asyncio.CancelledError:
        err = delivery.interrupted("cancellation of the asyncio task")
        if err is not None:
            # The socket is already shut down; the worker exits at once. Waiting for it
            # here keeps the promise that no worker outlives the call.
            await asyncio.shield(wait_exit())
            if delivery.on_error is not None:
                result = delivery.on_error(delivery.finish(err))
                if inspect.isawaitable(result):
                    await result
        raise
    finally:
        for unsub in unsubscribe:
            unsub()
        if not delivery.ended:
            run.abort.abort()
