"""The blocking driver of the delivery protocol: callbacks run on the calling thread.

A worker thread (:class:`~.worker.Run`) does the I/O; :class:`~.delivery.Delivery` decides
what each event means; this driver carries its operations out on the calling thread: it
waits on a queue in a way Ctrl-C interrupts, runs the callbacks one at a time, and never
returns while the worker is still running.
"""

from __future__ import annotations

import queue
from typing import TYPE_CHECKING, Optional

from .._cancel import CancelToken, tokens_for
from .._types import CompletionRequest, CompletionResponse
from .delivery import ChunkCallback, Delivery, DoneCallback, ErrorCallback
from .events import Call, Deliver, Join, Stop, Wait, WorkerEvent
from .worker import Run

if TYPE_CHECKING:
    from .model import ChatModel

__all__ = ["complete_blocking"]


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
    events: queue.SimpleQueue[WorkerEvent] = queue.SimpleQueue()
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
    delivery: Delivery, events: queue.SimpleQueue[WorkerEvent]
) -> Optional[CompletionResponse]:
    """Carry out the delivery protocol's operations on the calling thread."""
    run = delivery.run
    get = events.get
    steps = delivery.steps()
    send = steps.send
    op = next(steps)
    try:
        while True:
            if isinstance(op, Wait):
                # SimpleQueue.get is interruptible: Ctrl-C raises KeyboardInterrupt here.
                item: Optional[WorkerEvent]
                try:
                    item = get() if op.seconds is None else get(timeout=op.seconds)
                except queue.Empty:
                    item = None
                op = send(item)
            elif isinstance(op, Deliver):
                fn = op.fn
                raised: Optional[Exception] = None
                for chunk in op.chunks:
                    try:
                        fn(chunk)
                    except Exception as exc:
                        raised = exc
                        break
                op = send(raised)
            elif isinstance(op, Call):
                op.fn(*op.args)
                op = send(None)
            else:
                if isinstance(op, Stop):
                    run.abort.abort()
                else:
                    assert isinstance(op, Join)
                run.thread.join()
                op = send(None)
    except StopIteration as stop:
        result: Optional[CompletionResponse] = stop.value
        return result
