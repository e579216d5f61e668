"""The asyncio driver of the delivery protocol: callbacks run on the event loop thread."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from contextvars import Token
from typing import TYPE_CHECKING, Any, Callable, Optional

from .._cancel import CancelToken
from .._types import CompletionRequest, CompletionResponse
from ..errors import BlazenError
from .checks import check_reentry, start_delivering, stop_delivering
from .coro import cancelled_unstarted
from .delivery import (
    INTERRUPT_RETRIES,
    ChunkCallback,
    Delivery,
    DoneCallback,
    ErrorCallback,
    not_started,
)
from .events import Call, Deliver, Exit, Join, Stop, Wait, WorkerEvent
from .worker import start_soon

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
    exited = False
    handed = False  # the worker was handed to the starter thread
    delivery: Optional[Delivery] = None
    unsubscribe: list[Callable[[], None]] = []
    entered: Optional[Token[Any]] = None

    async def wait_exit() -> None:
        nonlocal exited
        assert delivery is not None
        run = delivery.run
        if not handed:
            return  # interrupted before its worker was handed to the starter
        while not exited:
            exited = isinstance(await events.get(), Exit)
        # EXIT is the worker's last act; the thread ends a few instructions later. Poll for
        # that rather than join in an executor: the application's executor may be busy, and
        # no worker may outlive the call.
        while run.thread.is_alive():
            await asyncio.sleep(0.0005)

    # A chunk callback's SystemExit ends the stream like any raise, then propagates once the
    # terminal callback has run.
    propagate: Optional[BaseException] = None
    try:
        # Set up inside the try: an interrupt may land anywhere, and still gets a terminal.
        def put(item: WorkerEvent) -> None:
            # The worker's only way into the loop; raises RuntimeError once the loop closed.
            loop.call_soon_threadsafe(events.put_nowait, item)

        delivery = Delivery.open(
            model,
            req,
            put,
            stream=stream,
            on_chunk=on_chunk,
            on_done=on_done,
            on_error=on_error,
            cancel=cancel,
            timeout=timeout,
        )
        unsubscribe = delivery.subscribe()
        entered = start_delivering(delivery)
        # Thread.start() waits for the new thread to run; hundreds of streams starting at
        # once would stall the loop for that long, so blazen's own starter thread does it
        # (never the application's executor, which may be busy for seconds).
        if cancelled_unstarted():
            # The task was cancelled before it ran: the worker returns without sending.
            delivery.run.abort.abort()
        start_soon(delivery.run)
        handed = True
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
                    # Settled as it is entered, at most once (an interrupt owes nothing then).
                    for result in delivery.call(op):
                        if inspect.isawaitable(result):
                            await result
                    op = steps.send(None)
                else:
                    if isinstance(op, Stop):
                        delivery.run.abort.abort()
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
    except GeneratorExit:
        # The coroutine is being closed (a pending task collected, its loop gone): nothing
        # may be awaited now. End the stream and say its terminal without waiting.
        if delivery is not None:
            delivery.interrupt("the coroutine being closed")
            owed = delivery.owed()
            if owed is not None:
                _call_now(delivery.call, owed)
        elif on_error is not None:
            _call_now(on_error, not_started("the coroutine being closed"))
        raise
    except BaseException as exc:
        # Whenever the task is cancelled, Ctrl-C lands or a signal handler raises (a read, a
        # callback, the worker finishing after done), the caller gets exactly one terminal
        # before it propagates. After the terminal (an error raised for want of on_error,
        # a raising on_done) nothing is owed.
        if delivery is None:
            await _not_started(on_error, _how(exc))
            raise
        # The socket is then shut down; the worker exits at once. Waiting for it here keeps
        # the promise that no worker outlives the call, and a second cancel of the task
        # (wait_for's, say) or a second Ctrl-C must not skip the terminal still owed: each
        # step is idempotent, so an interrupt inside one starts it over.
        for _ in INTERRUPT_RETRIES:
            try:
                delivery.interrupt(_how(exc))
                waiting = asyncio.ensure_future(wait_exit())
                while not waiting.done():
                    with contextlib.suppress(BaseException):
                        await asyncio.shield(waiting)
                owed = delivery.owed()
                if owed is not None:
                    for result in delivery.call(owed):
                        if inspect.isawaitable(result):
                            await result
                break
            except BaseException:  # the first interrupt is the one that propagates
                pass
        raise
    finally:
        if entered is not None:
            # Closed by the collector, the coroutine may run in another context than the
            # one it entered: nothing to undo there.
            with contextlib.suppress(ValueError):
                stop_delivering(entered)
        for unsub in unsubscribe:
            unsub()
        if delivery is not None and not delivery.ended:
            delivery.run.abort.abort()


def _call_now(fn: Callable[..., Any], *args: Any) -> None:
    # No awaiting while a coroutine closes: an async callback's coroutine is closed unrun.
    try:
        result = fn(*args)
    except Exception:
        return  # it cannot propagate out of a close; the close itself goes on
    if inspect.iscoroutine(result):
        result.close()


def _how(exc: BaseException) -> str:
    if isinstance(exc, asyncio.CancelledError):
        return "cancellation of the asyncio task"
    if isinstance(exc, KeyboardInterrupt):
        return "Ctrl-C (KeyboardInterrupt)"
    return f"{type(exc).__name__} raised on the event loop (by a signal handler?)"


async def _not_started(on_error: Optional[ErrorCallback], how: str) -> None:
    # Interrupted while the stream was being set up: nothing was sent, and the one
    # terminal is said here.
    if on_error is not None:
        result = on_error(not_started(how))
        if inspect.isawaitable(result):
            await result


def _task_cancelling() -> bool:
    """Whether the running task is being cancelled (assumed so before Python 3.11)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return cancelling is None or bool(cancelling())
