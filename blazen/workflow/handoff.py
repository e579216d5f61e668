"""The typed hand-offs of a run: what step threads and cancel subscribers tell the dispatcher.

Every thread that has news for a run (a step call that returned or raised, a step that
published an event, a cancel token that fired, a caller that aborts the run) puts one
:data:`Message` on the run's queue; the dispatcher is its only reader. Each kind is a small
slotted class: the dispatcher tells them apart by class, and mypy checks every field.
"""

from __future__ import annotations

from typing import Optional, Union

from .._cancel import CancelToken
from .events import Event, Step

__all__ = [
    "Message",
    "Published",
    "RunAborted",
    "RunCancelled",
    "StepCall",
    "StepRaised",
    "StepReturned",
]


class StepCall:
    """One call of a step's handler for one event, under a token of its own.

    Compared by identity: the dispatcher keeps the running calls in a dict, and a message
    from a call it has already abandoned finds it missing there.
    """

    __slots__ = ("deadline", "event", "over", "step", "token")

    def __init__(self, step: Step, event: Event, deadline: Optional[float]) -> None:
        self.step = step
        self.event = event
        #: ``time.monotonic()`` by which the call must be done, from the step's timeout_ms.
        self.deadline = deadline
        #: The call's ambient token: the dispatcher cancels it to stop the streams inside.
        self.token = CancelToken()
        #: Set under the run's lock once the handler has returned or raised: from then on
        #: ``ctx.publish`` refuses, so every event it accepted precedes the call's outcome.
        self.over = False


class StepReturned:
    """A step call returned; the events of its output, to be routed in order."""

    __slots__ = ("call", "events")

    def __init__(self, call: StepCall, events: tuple[Event, ...]) -> None:
        self.call = call
        self.events = events


class StepRaised:
    """A step call raised (or returned something that is not an output); the run fails."""

    __slots__ = ("call", "error")

    def __init__(self, call: StepCall, error: BaseException) -> None:
        self.call = call
        self.error = error


class Published:
    """A step called ``ctx.publish(event)``: shown to the observer, not routed."""

    __slots__ = ("call", "event")

    def __init__(self, call: StepCall, event: Event) -> None:
        self.call = call
        self.event = event


class RunCancelled:
    """One of the run's cancel tokens fired (posted by the cancelling thread)."""

    __slots__ = ("token",)

    def __init__(self, token: CancelToken) -> None:
        self.token = token


class RunAborted:
    """End the run with ``error`` (run_async: its observer raised, or its task was cancelled)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


Message = Union[StepReturned, StepRaised, Published, RunCancelled, RunAborted]
