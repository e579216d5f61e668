"""Workflows: named steps that route events from a StartEvent to a StopEvent.

:mod:`.events` holds the values (steps, events, step outputs, results), :mod:`.builder`
the ``workflow(...)`` builder and its ``run``, :mod:`.validate` the checks that refuse a
broken workflow, :mod:`.run` the engine that drives one run (with :mod:`.backlog`, its
calls waiting for a worker, and :mod:`.stepcall`, how one call runs: a thread, or an
``async`` step's task), :mod:`.context` what a step sees of its run, and
:mod:`.handoff` the typed messages from step threads to the engine.
Nothing here knows HTTP; a step that streams reaches the run's cancel token through
:func:`blazen.cancel_scope`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .builder import Workflow, workflow
from .events import START_EVENT, STOP_EVENT, Event, StepHandler, StepOutput, WorkflowResult

if TYPE_CHECKING:
    from .context import Context

__all__ = [
    "START_EVENT",
    "STOP_EVENT",
    "Context",
    "Event",
    "StepHandler",
    "StepOutput",
    "Workflow",
    "WorkflowResult",
    "workflow",
]


def __getattr__(name: str) -> Any:
    # The engine (run, context, hand-offs) loads with the first run or the first look at
    # Context: `import blazen` does not pay for threads, queues and run ids it may not use.
    if name != "Context":
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = importlib.import_module(".context", __name__).Context
    globals()[name] = value
    return value
