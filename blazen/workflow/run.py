"""One workflow run: a dispatcher on the caller's thread, each step call on its own thread.

Step threads never touch the run's bookkeeping: they put what happened (an output, a
published event, an exception) on one queue, and the dispatcher, the only reader, routes
events, starts step calls, watches the deadlines and decides how the run ends. So events
are observed in one order, and a run can end at once (time budget, cancel, failure) without
waiting for a step: each step call runs under its own ``CancelToken`` as the ambient token,
which the dispatcher cancels to stop the streams inside, and the step's thread is left to
finish on its own.

How one call runs (a thread, or an ``async`` step's task on a loop) is :mod:`.stepcall`'s.
"""

from __future__ import annotations

import contextvars
import functools
import queue
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from .._cancel import CancelToken
from .._telemetry import operation_span
from ..errors import CancelledError, TimeoutError, ValidationError, WorkflowError
from .backlog import Backlog
from .context import Shared
from .events import (
    START_EVENT,
    STOP_EVENT,
    Event,
    Step,
    WorkflowResult,
    result_of,
)
from .handoff import (
    Message,
    Published,
    RunAborted,
    RunCancelled,
    StepCall,
    StepRaised,
    StepReturned,
)
from .stepcall import step_task, step_thread

if TYPE_CHECKING:
    import asyncio

__all__ = ["WorkflowRun", "observer_error"]


class WorkflowRun:
    """The dispatcher of one run. Build it, then call :meth:`drive` once."""

    def __init__(
        self,
        *,
        workflow: str,
        steps: tuple[Step, ...],
        timeout_ms: Optional[float],
        max_workers: int,
        on_event: Optional[Callable[[Event], Any]],
        tokens: tuple[CancelToken, ...],
        loop: Optional[asyncio.AbstractEventLoop] = None,
    ) -> None:
        self.shared = Shared(workflow)
        self.workflow = workflow
        self.timeout_ms = timeout_ms
        self.max_workers = max_workers
        self.on_event = on_event
        self.tokens = tokens
        #: The loop async steps run on (run_async's), or None: each on its thread's own.
        self.loop = loop
        self.takers: dict[str, list[Step]] = {}
        for step in steps:
            for event_type in step.accepts:
                self.takers.setdefault(event_type, []).append(step)
        self.backlog = Backlog()
        self.running: dict[StepCall, None] = {}  # insertion-ordered set
        self.seen = 0
        self.last: Optional[tuple[str, str, list[str]]] = None
        self.started = 0.0

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.shared.run_id

    def abort(self, err: BaseException) -> None:
        """End the run with ``err`` as soon as the dispatcher wakes. Any thread."""
        self.shared.post(RunAborted(err))

    def drive(self, data: Any) -> WorkflowResult:
        """Run to the StopEvent and return the result, or raise how the run failed."""
        attributes = {
            "gen_ai.operation.name": "invoke_workflow",
            "blazen.workflow.name": self.workflow,
            "blazen.workflow.run_id": self.run_id,
        }
        with operation_span(f"invoke_workflow {self.workflow}", attributes):
            return self._drive(data)

    def _drive(self, data: Any) -> WorkflowResult:
        start = Event.create(START_EVENT, data)
        self.started = time.monotonic()
        deadline = None if self.timeout_ms is None else self.started + self.timeout_ms / 1000.0
        post = self.shared.post
        unsubscribe = [t.subscribe(functools.partial(post, RunCancelled(t))) for t in self.tokens]
        try:
            for token in self.tokens:
                if token.cancelled:
                    raise self._cancelled(token)
            stop = self._route(None, (start,))
            while stop is None:
                self._start_calls()
                if not self.running:
                    raise self._went_quiet()
                now = time.monotonic()
                wake = deadline
                for running in self.running:
                    if running.deadline is not None and (wake is None or running.deadline < wake):
                        wake = running.deadline
                if wake is not None and now >= wake:
                    raise self._timed_out(deadline, now)
                try:
                    message = (
                        self.shared.queue.get(timeout=wake - now)
                        if wake is not None
                        else self.shared.queue.get()
                    )
                except queue.Empty:
                    continue
                stop = self._handle(message)
            return WorkflowResult(
                result=result_of(stop),
                event=stop,
                events=self.seen,
                elapsed_ms=(time.monotonic() - self.started) * 1000.0,
                run_id=self.run_id,
            )
        finally:
            self.shared.end()
            for unsub in unsubscribe:
                unsub()
            # Abandon whatever still runs: its streams are cancelled, its output ignored.
            for call in self.running:
                call.token.cancel(f"workflow {self.workflow!r} run {self.run_id} has ended")
            self._drain()

    def _handle(self, message: Message) -> Optional[Event]:
        """Act on one message; return the StopEvent when it ends the run."""
        if isinstance(message, RunCancelled):
            raise self._cancelled(message.token)
        if isinstance(message, RunAborted):
            raise message.error
        call = message.call
        if isinstance(message, Published):
            self._observe(message.event)  # publish refuses once its call is over
            return None
        if call not in self.running:  # an abandoned call's output or failure is ignored
            return None
        del self.running[call]
        self.backlog.done(call.step)
        step, event_type = call.step.name, call.event.event_type
        if isinstance(message, StepRaised):
            exc = message.error
            err = WorkflowError(
                f"step {step!r} of workflow {self.workflow!r} raised {type(exc).__name__} "
                f"while handling {event_type!r}: {exc}",
                workflow=self.workflow,
                step=step,
                event_type=event_type,
            )
            raise err from exc
        assert isinstance(message, StepReturned)
        events = message.events
        self.last = (step, event_type, [e.event_type for e in events])
        return self._route(call, events)

    def _route(self, call: Optional[StepCall], events: tuple[Event, ...]) -> Optional[Event]:
        """Observe each event in order and queue it for its takers; return a StopEvent."""
        source = "the run" if call is None else f"step {call.step.name!r}"
        for event in events:
            kind = event.event_type
            if call is not None:
                emits = call.step.emits
                if emits is not None and kind not in emits:
                    raise ValidationError(
                        f"step {call.step.name!r} emitted {kind!r}, which is not in its "
                        f"emits={list(emits)!r}"
                    )
                if kind == START_EVENT:
                    raise ValidationError(
                        f"step {call.step.name!r} emitted {START_EVENT}; only the run emits it"
                    )
            if kind == STOP_EVENT:
                # What publish accepted until now is shown before the StopEvent; from
                # now on it refuses, so a publish that returned was seen.
                self.shared.end()
                for published in self._drain():
                    self._observe(published.event)
            self._observe(event)
            if kind == STOP_EVENT:
                return event
            takers = self.takers.get(kind)
            if not takers:
                raise WorkflowError(
                    f"event {kind!r} from {source} was left: no step of workflow "
                    f"{self.workflow!r} accepts it",
                    workflow=self.workflow,
                    step=None if call is None else call.step.name,
                    event_type=kind,
                )
            for step in takers:
                self.backlog.add(step, event)
        return None

    def _drain(self) -> list[Published]:
        """Empty the queue of an ended run; the events published by calls still running."""
        published: list[Published] = []
        while True:
            try:
                message = self.shared.queue.get_nowait()
            except queue.Empty:
                return published
            if isinstance(message, Published) and message.call in self.running:
                published.append(message)

    def _observe(self, event: Event) -> None:
        self.seen += 1
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception as exc:
            raise observer_error(self.workflow, event, exc) from exc

    def _start_calls(self) -> None:
        """Start waiting calls, oldest first, within the pool and each step's limit."""
        while len(self.running) < self.max_workers:
            taken = self.backlog.take()
            if taken is None:
                return
            step, event = taken
            deadline = (
                None if step.timeout_ms is None else time.monotonic() + step.timeout_ms / 1000.0
            )
            call = StepCall(step, event, deadline)
            self.running[call] = None
            if step.is_async and self.loop is not None:
                self._start_task(call, self.loop)
                continue
            # Each call gets a copy of this thread's context, so the ambient token it sets
            # (and any contextvar the caller set) belongs to that call alone.
            thread = threading.Thread(
                target=contextvars.copy_context().run,
                args=(step_thread, self.shared, call),
                name=f"blazen-step-{step.name}",
                daemon=True,
            )
            thread.start()

    def _start_task(self, call: StepCall, loop: asyncio.AbstractEventLoop) -> None:
        import asyncio

        # The task runs in a copy of this thread's context (call_soon_threadsafe takes
        # one), as a step thread does.
        try:
            asyncio.run_coroutine_threadsafe(step_task(self.shared, call), loop)
        except RuntimeError as exc:  # the caller's loop has closed: the call cannot run
            self.shared.finish(StepRaised(call, exc))

    def _cancelled(self, token: CancelToken) -> CancelledError:
        reason = f": {token.reason}" if token.reason else ""
        return CancelledError(f"workflow {self.workflow!r} was cancelled{reason}")

    def _went_quiet(self) -> WorkflowError:
        if self.last is None:
            left = "no step ran"
        else:
            step, handled, emitted = self.last
            what = "emitted nothing" if not emitted else f"emitted {emitted!r}"
            left = f"the last event left was {handled!r}: step {step!r} handled it and {what}"
        with self.shared.lock:
            partial = [
                f"{len(kept)} {kind!r}" for kind, kept in self.shared.collected.items() if kept
            ]
        if partial:
            left += f"; ctx.collect is still holding {', '.join(partial)} event(s)"
        return WorkflowError(
            f"workflow {self.workflow!r} went quiet without a {STOP_EVENT}: no step is "
            f"running and no event is waiting ({left})",
            workflow=self.workflow,
            step=None if self.last is None else self.last[0],
            event_type=None if self.last is None else self.last[1],
        )

    def _timed_out(self, deadline: Optional[float], now: float) -> TimeoutError:
        running = ", ".join(sorted({repr(c.step.name) for c in self.running})) or "none"
        if deadline is not None and now >= deadline and self.timeout_ms is not None:
            return TimeoutError(
                f"workflow {self.workflow!r} did not finish within its timeout_ms="
                f"{self.timeout_ms:g}; the steps still running ({running}) were cancelled "
                "and abandoned",
                limit="workflow",
                seconds=self.timeout_ms / 1000.0,
            )
        call = min(
            (c for c in self.running if c.deadline is not None),
            key=lambda c: c.deadline or 0.0,
        )
        ms = call.step.timeout_ms or 0.0
        return TimeoutError(
            f"step {call.step.name!r} of workflow {self.workflow!r} did not finish handling "
            f"{call.event.event_type!r} within its timeout_ms={ms:g}; the steps still "
            f"running ({running}) were cancelled and abandoned",
            limit="step",
            seconds=ms / 1000.0,
        )


def observer_error(workflow: str, event: Event, exc: Exception) -> WorkflowError:
    """The error that ends a run whose ``on_event`` raised ``exc``."""
    return WorkflowError(
        f"on_event raised {type(exc).__name__} while observing {event.event_type!r}: {exc}; "
        f"workflow {workflow!r} was stopped",
        workflow=workflow,
        event_type=event.event_type,
    )
