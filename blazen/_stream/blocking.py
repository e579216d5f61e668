"""The blocking driver of the delivery protocol: callbacks run on the calling thread.

A worker thread (:class:`~.worker.StreamWorker`) does the I/O; :class:`~.delivery.Delivery` decides
what each event means; this driver carries its operations out on the calling thread: it
waits on a queue in a way Ctrl-C interrupts, runs the callbacks one at a time, and never
returns while the worker is still running.
"""

from __future__ import annotations

import queue
import sys
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from .._cancel import CancelToken
from .._types import CompletionRequest, CompletionResponse
from .checks import check_reentry, start_delivering, stop_delivering
from .delivery import (
    INTERRUPT_RETRIES,
    ChunkCallback,
    Delivery,
    DoneCallback,
    ErrorCallback,
    call_once,
    leaving,
    new_gate,
    not_started,
)
from .driving import Ended, Need, Returned, carry_out
from .events import Join, Wait, WorkerEvent

if TYPE_CHECKING:
    from .model import BoundModel
    from .worker import StreamWorker

__all__ = ["advance", "complete_blocking", "how", "refusal", "settle"]


def complete_blocking(
    model: BoundModel,
    req: CompletionRequest,
    *,
    on_chunk: Optional[ChunkCallback] = None,
    on_done: Optional[DoneCallback] = None,
    on_error: Optional[ErrorCallback] = None,
    cancel: Optional[CancelToken] = None,
    timeout: Optional[float] = None,
    stream: bool = True,
    on_start: Optional[Callable[[Delivery], None]] = None,
) -> Optional[CompletionResponse]:
    """Run one request on a worker thread and deliver its events on this thread.

    ``on_start`` sees the stream's :class:`Delivery` before anything starts (a handle asks
    it whether a cancel came in time).
    """
    check_reentry(model)
    delivery: Optional[Delivery] = None
    unstarted = new_gate()  # the terminal of a stream interrupted before it was set up
    # An exception the caller is handling while it calls: not an interrupt of this stream.
    outer = sys.exc_info()[1]
    try:
        # Set up inside the try: an interrupt may land anywhere, and still gets a terminal.
        events: queue.SimpleQueue[WorkerEvent] = queue.SimpleQueue()
        delivery = Delivery.open(
            model,
            req,
            events.put,
            stream=stream,
            on_chunk=on_chunk,
            on_done=on_done,
            on_error=on_error,
            cancel=cancel,
            timeout=timeout,
        )
        run = delivery.run
        if on_start is not None:
            on_start(delivery)
        delivery.subscribe()
        # Thread.start waits for the thread, and Ctrl-C may land there.
        run.start()
        start_delivering(delivery)
        return _drive(delivery, events)
    finally:
        # Ctrl-C, or whatever a signal handler raises (sys.exit() on SIGTERM, a SIGALRM
        # deadline), whenever it strikes (a read, the worker finishing after done): the
        # caller gets exactly one terminal before it propagates. After the terminal (an
        # error raised for want of on_error, a raising on_done) nothing is owed.
        # A finally, not an except, and its first statement a try: Python 3.10 runs a
        # pending signal handler as an exception reaches a handler, before the handler's
        # first instruction unless that instruction sets up a try. A second Ctrl-C landing
        # there skipped an except clause (and the terminal) whole.
        # A second interrupt may land anywhere in here: every step is idempotent, so it
        # starts over, and the first interrupt is the one that propagates. The terminal
        # goes through a one-shot gate (call_once): made at most once, and still owed until
        # it was entered. A signal handler runs where a function starts or a call into C
        # returns, so every call here is inside a try, the loop's own too: iterating a
        # tuple calls nothing, and its jump back is covered by the outer try.
        try:
            for _ in INTERRUPT_RETRIES:
                try:
                    _finish(delivery, on_error, unstarted, outer)
                    break
                except BaseException:  # the next try starts the step over
                    continue
        except BaseException:  # landed on the loop's jump back: one try more
            # Not contextlib.suppress(): building it is a call, outside any try.
            try:  # noqa: SIM105
                _finish(delivery, on_error, unstarted, outer)
            except BaseException:
                pass


def _finish(
    delivery: Optional[Delivery],
    on_error: Optional[ErrorCallback],
    unstarted: Iterator[bool],
    outer: Optional[BaseException],
) -> None:
    """Leave :func:`complete_blocking`: settle the stream if an exception is leaving, then
    unsubscribe, forget the delivery and wait for the worker. Idempotent, so a retry after
    an interrupt anywhere in it finishes it.
    """
    exc = leaving(outer)
    if exc is not None:
        settle(delivery, on_error, how(exc), unstarted)
    if delivery is not None:
        delivery.unsubscribe()
        stop_delivering(delivery)
        if not delivery.ended:
            delivery.run.abort.abort()
        delivery.run.wait_exit()


def settle(
    delivery: Optional[Delivery],
    on_error: Optional[ErrorCallback],
    how: str,
    unstarted: Iterator[bool],
) -> None:
    """After an interrupt: end the stream, wait for its worker, make the terminal still owed.

    Every step is idempotent, and the terminal's gate closes as it is entered.
    """
    if delivery is None:
        if on_error is not None:
            call_once(unstarted, on_error, (not_started(how),))
        return
    delivery.interrupt(how)
    delivery.run.wait_exit()
    owed = delivery.owed()
    if owed is not None:
        delivery.call(owed)


def refusal(returned: Returned) -> Optional[TypeError]:
    """The TypeError for a callback that returned a coroutine, which a blocking call cannot await.

    An ``async def`` behind a decorator that hides it passes the check made up front;
    its coroutine would otherwise be dropped, every chunk lost without a word. Any other
    value a callback returns is ignored.
    """
    result = returned.value
    if not hasattr(result, "__await__"):
        return None
    if hasattr(result, "close"):
        result.close()  # never awaited: close it, or Python warns about it
    msg = (
        f"{returned.of} returned a coroutine, which a blocking call cannot await: use "
        "`await Streaming.complete_async(...)`, or pass a plain function"
    )
    return TypeError(msg)


def how(exc: BaseException) -> str:
    """What interrupted a stream on the calling thread, for its CancelledError."""
    if isinstance(exc, KeyboardInterrupt):
        return "Ctrl-C (KeyboardInterrupt)"
    return f"{type(exc).__name__} raised on the calling thread (by a signal handler?)"


def advance(
    ops: Generator[Need, Any, Optional[CompletionResponse]],
    get: Callable[..., WorkerEvent],
    run: StreamWorker,
    throw: Optional[BaseException] = None,
) -> Union[Returned, Ended]:
    """Resume ``ops`` (throwing ``throw`` in) and answer what it needs on this thread, until
    a callback returned something or the stream succeeded. The stream's error propagates.

    ``get`` is the queue's: ``SimpleQueue.get`` is interruptible, so Ctrl-C raises
    KeyboardInterrupt in it.
    """
    try:
        need = ops.send(None) if throw is None else ops.throw(throw)
        while True:
            if isinstance(need, Wait):
                item: Optional[WorkerEvent]
                try:
                    item = get() if need.seconds is None else get(timeout=need.seconds)
                except queue.Empty:
                    item = None
                need = ops.send(item)
            elif isinstance(need, Join):
                run.wait_exit()
                need = ops.send(None)
            else:
                return need
    except StopIteration as stop:
        return Ended(stop.value)


def _drive(
    delivery: Delivery, events: queue.SimpleQueue[WorkerEvent]
) -> Optional[CompletionResponse]:
    """Carry out the delivery protocol's operations on the calling thread."""
    run = delivery.run
    get = events.get
    ops = carry_out(delivery)
    throw: Optional[TypeError] = None
    while True:
        got = advance(ops, get, run, throw)
        if isinstance(got, Ended):
            return got.response
        throw = refusal(got)
