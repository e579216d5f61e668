"""Workflows: named steps that route events from a StartEvent to a StopEvent.

:mod:`.events` holds the values (steps, events, step outputs, results), :mod:`.builder`
the ``workflow(...)`` builder and its ``run``, :mod:`.validate` the checks that refuse a
broken workflow, :mod:`.run` the engine that drives one run, :mod:`.context` what a step
sees of its run, and :mod:`.handoff` the typed messages from step threads to the engine.
Nothing here knows HTTP; a step that streams reaches the run's cancel token through
:func:`blazen.cancel_scope`.
"""

from __future__ import annotations

from .builder import Workflow, workflow
from .context import Context
from .events import START_EVENT, STOP_EVENT, Event, StepOutput, WorkflowResult

__all__ = [
    "START_EVENT",
    "STOP_EVENT",
    "Context",
    "Event",
    "StepOutput",
    "Workflow",
    "WorkflowResult",
    "workflow",
]
