"""How one step call runs: a plain handler on its own thread, an ``async`` one as a task.

The dispatcher (:mod:`.run`) starts each call; what the call returned or raised goes back
to it as one message on the run's queue, and the call's token is cancelled once it is
over. An ``async`` handler's task runs on the event loop of ``run_async``'s caller, or on a
loop of the call's own thread under ``run``; cancelling its token cancels the task.
"""

from __future__ import annotations

import contextlib
from typing import Any, Union

from .._cancel import cancel_scope
from .._telemetry import operation_span
from .context import Context, Shared
from .events import StepOutput
from .handoff import StepCall, StepRaised, StepReturned

__all__ = ["step_task", "step_thread"]


def _attributes(call: StepCall) -> dict[str, Any]:
    return {"blazen.workflow.step": call.step.name, "blazen.workflow.event": call.event.event_type}


def _invoke(shared: Shared, call: StepCall) -> Any:
    step = call.step
    if step.wants_ctx:
        return step.handler(call.event, Context(shared, call))
    return step.handler(call.event)


def _finish(shared: Shared, call: StepCall, outcome: Union[StepReturned, StepRaised]) -> None:
    shared.finish(outcome)
    # The call is over: what its token still reaches (a stream in a thread the step left
    # behind) works for nobody now.
    did = "returned" if isinstance(outcome, StepReturned) else "raised"
    call.token.cancel(f"step {call.step.name!r} has {did}")


def step_thread(shared: Shared, call: StepCall) -> None:
    """Run one step call on this (its own) thread; post its outcome to the run."""
    if call.step.is_async:
        import asyncio  # only runs with async steps pay for it

        # A loop of this call's own: the step may await complete_async and the like.
        asyncio.run(step_task(shared, call))
        return
    outcome: Union[StepReturned, StepRaised]
    try:
        # The step thread runs in a copy of the dispatcher's context: the run's span is
        # current, and this step's span its child.
        with operation_span(f"step {call.step.name}", _attributes(call)), cancel_scope(call.token):
            value = _invoke(shared, call)
        outcome = StepReturned(call, StepOutput.of(value).events)
    except BaseException as exc:  # the dispatcher decides what any failure means
        outcome = StepRaised(call, exc)
    _finish(shared, call, outcome)


async def step_task(shared: Shared, call: StepCall) -> None:
    """An async step call, as a task on some loop; cancelled when its token is."""
    import asyncio

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def cancel_task() -> None:  # any thread: the dispatcher cancels tokens on its own
        with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to cancel
            loop.call_soon_threadsafe(task.cancel)

    unsubscribe = call.token.subscribe(cancel_task)
    outcome: Union[StepReturned, StepRaised]
    try:
        with operation_span(f"step {call.step.name}", _attributes(call)), cancel_scope(call.token):
            value = await _invoke(shared, call)
        outcome = StepReturned(call, StepOutput.of(value).events)
    except BaseException as exc:  # asyncio.CancelledError too: the call was abandoned
        outcome = StepRaised(call, exc)
    finally:
        unsubscribe()
    _finish(shared, call, outcome)
