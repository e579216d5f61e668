"""What a step sees of its run: the :class:`Context` handed to ``handler(event, ctx)``.

A context is one step call's window on what every call of its run shares (state, fan-in
groups, the run's queue). It is used from the step's thread, or any thread the step starts,
so it only takes the run's lock and posts to the queue; the dispatcher does the rest.

What is posted is decided under the run's lock: once a call is over (its step returned or
raised) ``publish`` refuses for it, and once the run has ended nothing more is posted. So an
event that ``publish`` accepted is on the queue before its call's outcome and before the
end, and the dispatcher can show every one of them; nothing is left behind in a queue that
no one reads.
"""

from __future__ import annotations

import queue
import threading
import uuid
from typing import Any, Optional, Union

from .._cancel import CancelToken
from ..errors import CancelledError, ValidationError
from .events import START_EVENT, STOP_EVENT, Event
from .handoff import Message, Published, StepCall, StepRaised, StepReturned

__all__ = ["Context", "Shared"]


class Shared:
    """What every step of one run shares."""

    __slots__ = ("collected", "ended", "lock", "queue", "run_id", "state", "workflow")

    def __init__(self, workflow: str) -> None:
        self.workflow = workflow
        self.run_id = uuid.uuid4().hex
        self.lock = threading.Lock()
        self.state: dict[str, Any] = {}
        self.collected: dict[str, list[Event]] = {}
        self.queue: queue.SimpleQueue[Message] = queue.SimpleQueue()
        #: Set under ``lock`` by the dispatcher when the run ends: nothing is posted after.
        self.ended = False

    def post(self, message: Message) -> None:
        """Put ``message`` on the run's queue, unless the run has ended. Any thread."""
        with self.lock:
            if not self.ended:
                self.queue.put(message)

    def finish(self, message: Union[StepReturned, StepRaised]) -> None:
        """Post a call's outcome; its context's ``publish`` refuses from now on."""
        with self.lock:
            message.call.over = True
            if not self.ended:
                self.queue.put(message)

    def end(self) -> None:
        """Refuse every later post: once this returns, the queue holds all it ever will."""
        with self.lock:
            self.ended = True


class Context:
    """What a step sees of its run: shared state, the run id, and a way to publish events.

    Safe to use from any thread the step starts. ``publish`` works until the step returns;
    a step that starts threads to publish should wait for them before it returns. Example::

        @wf.step("answer", accepts=["blazen::StartEvent"], emits=["blazen::StopEvent"])
        def answer(event, ctx):
            ctx.set("question", event.data)
            Streaming.complete(model, req, on_chunk=lambda c: ctx.publish(
                Event.create(event_type="Delta", data=c.content_delta)))
            ...
    """

    __slots__ = ("_call", "_shared")

    def __init__(self, shared: Shared, call: StepCall) -> None:
        self._shared = shared
        self._call = call

    @property
    def run_id(self) -> str:
        """This run's id: unique per ``run`` call."""
        return self._shared.run_id

    @property
    def workflow(self) -> str:
        """The workflow's name."""
        return self._shared.workflow

    @property
    def step(self) -> str:
        """The name of the step being run."""
        return self._call.step.name

    @property
    def cancel_token(self) -> CancelToken:
        """Cancelled once this call is over: its step returned, or the run abandoned it.

        The run abandons the calls still running when it ends, whether by its StopEvent, a
        failure, its time budget or a cancel; the streams under the token stop.
        """
        return self._call.token

    @property
    def cancelled(self) -> bool:
        """Whether this call is over: its step returned, or its run abandoned it or ended.

        A long step, and any thread it starts, should check it and stop: once it is true,
        ``publish`` raises :class:`blazen.CancelledError`.
        """
        call = self._call
        return call.over or self._shared.ended or call.token.cancelled

    def get(self, key: str, default: Any = None) -> Any:
        """The shared value stored under ``key``, or ``default``."""
        with self._shared.lock:
            return self._shared.state.get(key, default)

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key`` for every step of this run."""
        with self._shared.lock:
            self._shared.state[key] = value

    def publish(self, event: Event) -> None:
        """Show ``event`` to the run's ``on_event`` observer now, mid-step; it is not routed.

        Works from the step's thread and any thread it starts, until the step returns; an
        event it accepted is shown before ``run`` returns (unless the run fails). Raises
        :class:`blazen.CancelledError` once :attr:`cancelled` is true: after the step has
        returned, or once the run has abandoned it or ended.
        """
        if not isinstance(event, Event):
            msg = f"ctx.publish takes an Event, got {type(event).__name__}"
            raise TypeError(msg)
        if event.event_type in (START_EVENT, STOP_EVENT):
            msg = (
                f"step {self.step!r} published {event.event_type}; only the run emits "
                "the StartEvent, and a StopEvent must be returned to end the run"
            )
            raise ValidationError(msg)
        call, shared = self._call, self._shared
        with shared.lock:
            if not (call.over or shared.ended or call.token.cancelled):
                shared.queue.put(Published(call, event))
                return
        if call.over:
            msg = (
                f"step {self.step!r} published {event.event_type!r} after it had returned: "
                "ctx.publish works only while the step runs; have the step wait for the "
                "threads it starts before it returns"
            )
        else:
            reason = call.token.reason or f"run {shared.run_id} has ended"
            msg = f"step {self.step!r} was abandoned by its run: {reason}"
        raise CancelledError(msg)

    def collect(self, event: Event, count: int) -> Optional[list[Event]]:
        """Fan-in: keep ``event``; once ``count`` events of its type are kept, return them.

        Returns None until then. Events come back in arrival order and are forgotten,
        so the next ``count`` start a new group.
        """
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            msg = f"count must be a positive int, got {count!r}"
            raise ValueError(msg)
        with self._shared.lock:
            kept = self._shared.collected.setdefault(event.event_type, [])
            kept.append(event)
            if len(kept) < count:
                return None
            group, kept[:] = kept[:count], kept[count:]
            return group
