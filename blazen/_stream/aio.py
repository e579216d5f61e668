"""The asyncio driver of the delivery protocol: callbacks run on the event loop thread."""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Optional

from .._cancel import CancelToken, tokens_for
from .._types import CompletionRequest, CompletionResponse
from ..errors import BlazenError
from .checks import check_reentry, start_delivering, stop_delivering
from .delivery import ChunkCallback, Delivery, DoneCallback, ErrorCallback
from .events import Call, Deliver, Exit, Join, Stop, Wait, WorkerEvent
from .worker import Run

if TYPE_CHECKING:
    from .model import ChatModel

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
    check_reentry(model)
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[WorkerEvent] = asyncio.Queue()

    def put(item: WorkerEvent) -> None:
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
            exited = isinstance(await events.get(), Exit)
        # EXIT is the worker's last act; the thread ends a few instructions later. Wait for
        # that off the loop, so that no worker outlives the call.
        if run.thread.is_alive():
            await loop.run_in_executor(None, run.thread.join)

    unsubscribe = delivery.subscribe()
    entered = start_delivering(delivery)
    # A chunk callback's SystemExit ends the stream like any raise, then propagates once the
    # terminal callback has run.
    propagate: Optional[BaseException] = None
    try:
        # Thread.start() waits for the new thread to run; hundreds of streams starting at
        # once would stall the loop for that long, so the wait happens off the loop.
        # Shielded: a task cancelled while the start is still queued in the executor must
        # not cancel the start, or no worker would ever post the EXIT it waits for.
        await asyncio.shield(loop.run_in_executor(None, run.thread.start))
        steps = delivery.steps()
        op = next(steps)
        try:
            while True:
                if isinstance(op, Wait):
                    item: Optional[WorkerEvent]
                    if not events.empty():
                        item = events.get_nowait()
                    elif op.seconds is None:
                        item = await events.get()
                    else:
                        try:
                            item = await asyncio.wait_for(events.get(), op.seconds)
                        except asyncio.TimeoutError:
                            item = None
                    if isinstance(item, Exit):
                        exited = True
                    op = steps.send(item)
                elif isinstance(op, Deliver):
                    fn = op.fn
                    raised: Optional[BaseException] = None
                    for chunk in op.chunks:
                        if delivery.cancelled:
                            break  # cancel() has returned: not one more chunk
                        try:
                            result = fn(chunk)
                            if inspect.isawaitable(result):
                                await result
                        except asyncio.CancelledError as exc:
                            if _task_cancelling():
                                raise  # the task is being cancelled: handled below
                            raised = exc  # the callback's own raise, like any other
                            break
                        except KeyboardInterrupt:
                            raise  # Ctrl-C, wherever it lands: the stream is cancelled (below)
                        except BaseException as exc:
                            raised = exc
                            if isinstance(exc, SystemExit):
                                propagate = exc
                            break
                    op = steps.send(raised)
                elif isinstance(op, Call):
                    result = op.fn(*op.args)
                    if inspect.isawaitable(result):
                        await result
                    op = steps.send(None)
                else:
                    if isinstance(op, Stop):
                        run.abort.abort()
                    else:
                        assert isinstance(op, Join)
                    await wait_exit()
                    delivery.worker_gone = True
                    op = steps.send(None)
        except StopIteration as stop:
            if propagate is not None:
                raise propagate from None
            response: Optional[CompletionResponse] = stop.value
            return response
        except BlazenError:
            if propagate is not None:
                raise propagate from None
            raise
    except (asyncio.CancelledError, KeyboardInterrupt) as exc:
        # Whenever the task is cancelled or Ctrl-C lands (a read, a callback, the worker
        # finishing after done), the caller gets exactly one terminal before it propagates.
        how = (
            "cancellation of the asyncio task"
            if isinstance(exc, asyncio.CancelledError)
            else "Ctrl-C (KeyboardInterrupt)"
        )
        delivery.interrupt(how)
        # The socket is already shut down; the worker exits at once. Waiting for it here
        # keeps the promise that no worker outlives the call.
        await asyncio.shield(wait_exit())
        owed = delivery.owed()
        if owed is not None:
            result = owed.fn(*owed.args)
            if inspect.isawaitable(result):
                await result
        raise
    finally:
        stop_delivering(entered)
        for unsub in unsubscribe:
            unsub()
        if not delivery.ended:
            run.abort.abort()


def _task_cancelling() -> bool:
    """Whether the running task is being cancelled (assumed so before Python 3.11)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return cancelling is None or bool(cancelling())
