"""What a step sees of its run: the :class:`Context` handed to ``handler(event, ctx)``.

A context is one step call's window on what every call of its run shares (state, fan-in
groups, the run's queue). It is used from the step's thread, or any thread the step starts,
so it only takes the run's lock and posts to the queue; the dispatcher does the rest.
"""

from __future__ import annotations

import queue
import threading
import uuid
from typing import Any, Optional

from .._cancel import CancelToken
from ..errors import CancelledError, ValidationError
from .events import START_EVENT, STOP_EVENT, Event
from .handoff import Message, Published, StepCall

__all__ = ["Context", "Shared"]


class Shared:
    """What every step of one run shares."""

    __slots__ = ("collected", "lock", "queue", "run_id", "state", "workflow")

    def __init__(self, workflow: str) -> None:
        self.workflow = workflow
        self.run_id = uuid.uuid4().hex
        self.lock = threading.Lock()
        self.state: dict[str, Any] = {}
        self.collected: dict[str, list[Event]] = {}
        self.queue: queue.SimpleQueue[Message] = queue.SimpleQueue()


class Context:
    """What a step sees of its run: shared state, the run id, and a way to publish events.

    Safe to use from any thread the step starts. Example::

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
        """Cancelled when the run stops needing this step (time budget, cancel, failure, end)."""
        return self._call.token

    @property
    def cancelled(self) -> bool:
        """Whether the run has abandoned this step; a long step should check and return."""
        return self._call.token.cancelled

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

        Raises :class:`blazen.CancelledError` once the run has abandoned this step.
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
        if self._call.token.cancelled:
            msg = f"step {self.step!r} was abandoned by its run: {self._call.token.reason}"
            raise CancelledError(msg)
        self._shared.queue.put(Published(self._call, event))

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
