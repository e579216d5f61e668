"""The delivery protocol's operations, carried out once for every driver.

:meth:`~.delivery.Delivery.steps` says what each worker event means, as operations
(:data:`~.events.Op`). :func:`carry_out` performs every operation that is the same for
all drivers (calling the chunk callback for each chunk, the terminal callback once,
tearing the connection down, SystemExit held back until the terminal ran) and yields to
its driver only what depends on how the driver waits (a :data:`Need`):

- :class:`~.events.Wait`: send back the next worker event, or None after ``seconds``
  (the blocking and pull drivers take it from a queue, the asyncio ones await it);
- :data:`~.events.JOIN`: wait until the worker has exited, then send back None;
- :class:`Returned`: a callback returned something. The asyncio drivers await a
  coroutine, the blocking driver refuses one, and the pull drivers' chunk callback
  returns the chunk, which they hand to their loop. Send back None, or throw in what
  awaiting it raised.

The generator returns the response on success; it raises the stream's error when there
is no ``on_error``, and an interrupt (Ctrl-C, a cancelled task) out of a callback.
"""

from __future__ import annotations

from collections.abc import Generator
from time import monotonic
from typing import Any, Callable, Optional, Union

from .._types import CompletionResponse
from ..errors import BlazenError
from .delivery import Delivery
from .events import JOIN, Call, Deliver, Join, Stop, Wait

__all__ = ["Ended", "Need", "Returned", "carry_out", "is_interrupt"]


class Returned:
    """A callback returned ``value`` (not None); ``of`` names the callback for messages."""

    __slots__ = ("of", "value")

    def __init__(self, value: Any, of: str) -> None:
        self.value = value
        self.of = of


Need = Union[Wait, Join, Returned]


class Ended:
    """:func:`carry_out` returned: the stream succeeded with ``response`` (None: no response).

    A coroutine cannot let the generator's StopIteration through (PEP 479), so the asyncio
    drivers hand this on instead.
    """

    __slots__ = ("response",)

    def __init__(self, response: Optional[CompletionResponse]) -> None:
        self.response = response


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` out of a callback interrupts the caller rather than failing the stream.

    Ctrl-C ends the stream as cancelled wherever it lands (as in a read), then propagates.
    """
    return isinstance(exc, KeyboardInterrupt)


def _resolve(
    value: Any, interrupts: Callable[[BaseException], bool]
) -> Generator[Need, Any, Optional[BaseException]]:
    """Hand a chunk callback's return value to the driver; what resolving it raised, or None."""
    try:
        yield Returned(value, "on_chunk")
    except GeneratorExit:
        raise  # the generator is being closed, not the callback raising
    except BaseException as exc:
        if interrupts(exc):
            raise
        return exc
    return None


def carry_out(
    delivery: Delivery, interrupts: Callable[[BaseException], bool] = is_interrupt
) -> Generator[Need, Any, Optional[CompletionResponse]]:
    """Carry out ``delivery``'s operations, yielding what the driver must do (see above).

    ``interrupts`` tells an interrupt from a callback's own raise (the asyncio drivers add
    the cancellation of their task).
    """
    steps = delivery.steps()
    send = steps.send
    abort = delivery.run.abort.abort
    # A chunk callback's SystemExit ends the stream like any raise, then propagates once
    # the terminal callback has run.
    propagate: Optional[BaseException] = None
    try:
        op = next(steps)
        while True:
            if isinstance(op, Wait):
                op = send((yield op))
            elif isinstance(op, Deliver):
                fn = op.fn
                raised: Optional[BaseException] = None
                # One batch holds every event of one socket read, a whole stream for a
                # slow caller: the total timeout is checked between its chunks too.
                deadline = delivery.deadline
                for chunk in op.chunks:
                    if delivery.cancelled:
                        break  # cancel() has returned: not one more chunk
                    if deadline is not None and monotonic() >= deadline:
                        break  # the steps see the deadline passed and end the stream
                    try:
                        returned = fn(chunk)
                    except BaseException as exc:
                        if interrupts(exc):
                            raise  # the driver's interrupt handling ends the stream
                        raised = exc
                        break
                    if returned is not None:  # the common None costs one compare
                        raised = yield from _resolve(returned, interrupts)
                        if raised is not None:
                            break
                if isinstance(raised, SystemExit):
                    propagate = raised
                op = send(raised)
            elif isinstance(op, Call):
                # Settled as the callback is entered, at most once: see call_once. What it
                # raises (or what awaiting its result raises) propagates to the caller.
                for returned in delivery.call(op):
                    if returned is not None:
                        yield Returned(returned, "on_done or on_error")
                op = send(None)
            else:
                if isinstance(op, Stop):
                    abort()
                yield JOIN
                delivery.worker_gone = True
                op = send(None)
    except StopIteration as stop:
        if propagate is not None:
            raise propagate from None
        response: Optional[CompletionResponse] = stop.value
        return response
    except BlazenError:
        # No error handler: the error is raised, unless a SystemExit from a callback was
        # waiting to propagate.
        if propagate is not None:
            raise propagate from None
        raise
