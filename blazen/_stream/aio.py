"""The asyncio driver of the delivery protocol: callbacks run on the event loop thread.

The worker's events reach the loop through an :class:`Inbox`; :func:`advance` answers
what :func:`~.driving.carry_out` needs by awaiting, and :func:`settle` gives an
interrupted stream its terminal. The pull style's ``async for`` uses the same three.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from .._cancel import CancelToken
from .._types import CompletionRequest, CompletionResponse
from .checks import check_reentry, start_delivering, stop_delivering
from .coro import cancelled_unstarted
from .delivery import (
    INTERRUPT_RETRIES,
    ChunkCallback,
    Delivery,
    DoneCallback,
    ErrorCallback,
    leaving,
    not_started,
)
from .driving import Ended, Need, Returned, carry_out, is_interrupt
from .events import Exit, Join, Wait, WorkerEvent
from .worker import start_soon

if TYPE_CHECKING:
    from .model import BoundModel
    from .worker import StreamWorker

__all__ = ["Inbox", "advance", "complete_async", "how", "interrupts", "settle"]

Ops = Generator[Need, Any, Optional[CompletionResponse]]


class Inbox:
    """A stream's worker events on the running loop: posted from the worker's thread."""

    __slots__ = ("exited", "loop", "queue")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[WorkerEvent] = asyncio.Queue()
        #: The worker's EXIT has been taken from the queue.
        self.exited = False

    def put(self, item: WorkerEvent) -> None:
        """The worker's only way into the loop; raises RuntimeError once the loop closed."""
        self.loop.call_soon_threadsafe(self.queue.put_nowait, item)

    async def get(self, seconds: Optional[float]) -> Optional[WorkerEvent]:
        """The next event, or None after ``seconds`` (None: wait for ever)."""
        events = self.queue
        item: Optional[WorkerEvent]
        if not events.empty():
            item = events.get_nowait()
        elif seconds is None:
            item = await events.get()
        else:
            try:
                item = await asyncio.wait_for(events.get(), seconds)
            except asyncio.TimeoutError:
                item = None
        if isinstance(item, Exit):
            self.exited = True
        return item

    async def wait_exit(self, run: StreamWorker) -> None:
        """Wait until ``run``'s worker has exited (its last event taken, its thread ended)."""
        if not run.queued:
            return  # interrupted before its worker was handed to the starter
        while not self.exited:
            self.exited = isinstance(await self.queue.get(), Exit)
        # EXIT is the worker's last act; the thread ends a few instructions later. Poll for
        # that rather than join in an executor: the application's executor may be busy, and
        # no worker may outlive the call.
        while run.thread.is_alive():
            await asyncio.sleep(0.0005)


def interrupts(exc: BaseException) -> bool:
    """Ctrl-C, or the cancellation of the running task (a callback's own raise is not one)."""
    return is_interrupt(exc) or (isinstance(exc, asyncio.CancelledError) and _task_cancelling())


async def advance(
    ops: Ops, inbox: Inbox, run: StreamWorker, throw: Optional[BaseException] = None
) -> Union[Returned, Ended]:
    """Resume ``ops`` (throwing ``throw`` in) and answer what it needs by awaiting, until a
    callback returned something or the stream succeeded. The stream's error propagates.
    """
    try:
        need = ops.send(None) if throw is None else ops.throw(throw)
        while True:
            if isinstance(need, Wait):
                need = ops.send(await inbox.get(need.seconds))
            elif isinstance(need, Join):
                await inbox.wait_exit(run)
                need = ops.send(None)
            else:
                return need
    except StopIteration as stop:
        return Ended(stop.value)


async def complete_async(
    model: BoundModel,
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
    inbox = Inbox()
    delivery: Optional[Delivery] = None
    # An exception the caller is handling while it awaits: not an interrupt of this stream.
    outer = sys.exc_info()[1]
    try:
        # Set up inside the try: an interrupt may land anywhere, and still gets a terminal.
        delivery = Delivery.open(
            model,
            req,
            inbox.put,
            stream=stream,
            on_chunk=on_chunk,
            on_done=on_done,
            on_error=on_error,
            cancel=cancel,
            timeout=timeout,
        )
        delivery.subscribe()
        start_delivering(delivery)
        if cancelled_unstarted():
            # The task was cancelled before it ran: the worker returns without sending.
            delivery.run.abort.abort()
        # Thread.start() waits for the new thread to run; hundreds of streams starting at
        # once would stall the loop for that long, so blazen's own starter thread does it
        # (never the application's executor, which may be busy for seconds).
        start_soon(delivery.run)
        return await _drive(delivery, inbox)
    finally:
        # Whenever the task is cancelled, Ctrl-C lands or a signal handler raises (a read, a
        # callback, the worker finishing after done), the caller gets exactly one terminal
        # before it propagates. After the terminal (an error raised for want of on_error,
        # a raising on_done) nothing is owed. A finally whose first statement is a try, as
        # in the blocking driver: Python 3.10 runs a pending signal handler at the entry
        # of an except clause, and a second Ctrl-C there skipped the terminal.
        try:
            exc = leaving(outer)
            if exc is not None:
                if isinstance(exc, GeneratorExit):
                    # The coroutine is being closed (a pending task collected, its loop
                    # gone): nothing may be awaited now. End the stream and say its
                    # terminal without waiting.
                    _close_now(delivery, on_error)
                elif delivery is None:
                    await _not_started(on_error, how(exc))
                else:
                    await settle(delivery, inbox, how(exc))
        finally:
            if delivery is not None:
                # Closed by the collector, the coroutine may run in another context than
                # the one it entered: then there is nothing to undo there.
                stop_delivering(delivery)
                delivery.unsubscribe()
                if not delivery.ended:
                    delivery.run.abort.abort()


async def _drive(delivery: Delivery, inbox: Inbox) -> Optional[CompletionResponse]:
    """Carry out the delivery protocol's operations on the loop, awaiting what is awaitable."""
    run = delivery.run
    ops = carry_out(delivery, interrupts)
    throw: Optional[BaseException] = None
    while True:
        got = await advance(ops, inbox, run, throw)
        if isinstance(got, Ended):
            return got.response
        throw = None
        if inspect.isawaitable(got.value):
            try:
                await got.value
            except BaseException as exc:  # the callback's raise: the protocol judges it
                throw = exc


async def settle(delivery: Delivery, inbox: Inbox, how: str) -> Optional[BaseException]:
    """After an interrupt: end the stream, wait for its worker, make the terminal still owed.

    The socket is shut down; the worker exits at once. Waiting for it keeps the promise
    that no worker outlives the call, and a second cancel of the task (wait_for's, say) or
    a second Ctrl-C must not skip the terminal still owed: each step is idempotent, so an
    interrupt inside one starts it over. Returns the first interrupt absorbed meanwhile,
    which the caller raises unless it is already raising one: a cancel aimed at the
    caller's task is never swallowed here.
    """
    absorbed: Optional[BaseException] = None
    for _ in INTERRUPT_RETRIES:
        try:
            delivery.interrupt(how)
            waiting = asyncio.ensure_future(inbox.wait_exit(delivery.run))
            while not waiting.done():
                try:
                    await asyncio.shield(waiting)
                except BaseException as exc:
                    absorbed = exc if absorbed is None else absorbed
            owed = delivery.owed()
            if owed is not None:
                for result in delivery.call(owed):
                    if inspect.isawaitable(result):
                        await result
            break
        except BaseException as exc:  # the next try starts the step over
            absorbed = exc if absorbed is None else absorbed
    return absorbed


def _close_now(delivery: Optional[Delivery], on_error: Optional[ErrorCallback]) -> None:
    """End the stream of a coroutine being closed, and say its terminal without awaiting."""
    if delivery is not None:
        delivery.interrupt("the coroutine being closed")
        owed = delivery.owed()
        if owed is not None:
            _call_now(delivery.call, owed)
    elif on_error is not None:
        _call_now(on_error, not_started("the coroutine being closed"))


def _call_now(fn: Callable[..., Any], *args: Any) -> None:
    # No awaiting while a coroutine closes: an async callback's coroutine is closed unrun.
    try:
        result = fn(*args)
    except Exception:
        return  # it cannot propagate out of a close; the close itself goes on
    if inspect.iscoroutine(result):
        result.close()


def how(exc: BaseException) -> str:
    """What interrupted a stream on the event loop, for its CancelledError."""
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
