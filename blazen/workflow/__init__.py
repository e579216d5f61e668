"""Workflows: named steps that route events from a StartEvent to a StopEvent.

:mod:`.events` holds the values (events, step outputs, results), :mod:`.builder` the
``workflow(...)`` builder and its ``run``, and :mod:`.run` the engine that drives one run.
Nothing here knows HTTP; a step that streams reaches the run's cancel token through
:func:`blazen.cancel_scope`.
"""

from __future__ import annotations

from .builder import Workflow, workflow
from .events import START_EVENT, STOP_EVENT, Event, StepOutput, WorkflowResult
from .run import Context

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
