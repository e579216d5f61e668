"""The values of a workflow: the steps it is built from and what its runs pass around.

``Event``, ``StepOutput`` and ``WorkflowResult`` are what users build and read; ``Step`` is
what ``Workflow.step`` registers. All are frozen attrs values, safe to share between the
step threads of a run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Callable, Optional, Protocol, Union

import attrs

from .._types import immutable
from ..errors import ValidationError

__all__ = [
    "START_EVENT",
    "STOP_EVENT",
    "Event",
    "Step",
    "StepOutput",
    "StepHandler",
    "WorkflowResult",
    "canonical_event_type",
    "result_of",
]

START_EVENT = "blazen::StartEvent"
"""The event a run starts with; its data is what ``run(data)`` was given."""
STOP_EVENT = "blazen::StopEvent"
"""The event that ends a run; ``{"result": ...}`` in its data is the run's result."""

# The Swift seed names them without the prefix (Event(eventType: "StopEvent", ...)), the
# Kotlin seed with it: both spellings mean the same two events.
_SHORT_NAMES = {"StartEvent": START_EVENT, "StopEvent": STOP_EVENT}


def canonical_event_type(value: Any) -> Any:
    """``value`` with ``"StartEvent"``/``"StopEvent"`` spelled as the ``blazen::`` names."""
    if isinstance(value, str):
        return _SHORT_NAMES.get(value, value)
    return value


def _check_event_type(value: Any) -> None:
    if not isinstance(value, str) or not value:
        msg = f"event_type must be a non-empty string, got {value!r}"
        raise TypeError(msg)


# attrs calls a validator with (instance, attribute, value), after every field is set.
def _event_type(_event: object, _field: object, value: Any) -> None:
    _check_event_type(value)


def _json_text(_event: object, _field: object, value: Any) -> None:
    if not isinstance(value, str):
        msg = f"data_json must be a JSON string, got {type(value).__name__}"
        raise TypeError(msg)
    try:
        json.loads(value)
    except ValueError as exc:
        msg = f"data_json is not valid JSON: {exc}"
        raise ValidationError(msg) from exc


@immutable
@attrs.frozen
class Event:
    """One event of a workflow run: a type name and JSON data.

    The data is stored as JSON text, so an event is immutable and every reader of
    :attr:`data` gets its own copy. ``"StartEvent"`` and ``"StopEvent"`` (the Swift
    spelling) are stored as ``"blazen::StartEvent"`` and ``"blazen::StopEvent"``. Example::

        Event.create(event_type="blazen::StopEvent", data={"result": {"content": "Hi"}})
    """

    event_type: str = attrs.field(converter=canonical_event_type, validator=_event_type)
    data_json: str = attrs.field(default="null", validator=_json_text)

    @classmethod
    def create(cls, event_type: str, data: Any = None) -> Event:
        """An event of ``event_type`` carrying ``data``, which must be JSON-serialisable."""
        _check_event_type(event_type)
        try:
            text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            msg = f"the data of event {event_type!r} is not JSON-serialisable: {exc}"
            raise ValidationError(msg) from exc
        return cls(event_type, text)

    @property
    def data(self) -> Any:
        """The data, decoded afresh from :attr:`data_json` on every read."""
        return json.loads(self.data_json)


def _events(value: Iterable[Any]) -> tuple[Event, ...]:
    """The converter of ``StepOutput.events``: any iterable of events, as a tuple."""
    if isinstance(value, (str, bytes, Event)) or not isinstance(value, Iterable):
        msg = f"expected a list of Event, got {type(value).__name__}"
        raise TypeError(msg)
    events = tuple(value)
    for item in events:
        if not isinstance(item, Event):
            msg = f"expected only Event items, got {type(item).__name__}"
            raise TypeError(msg)
    return events


@immutable
@attrs.frozen
class StepOutput:
    """What a step hands back: zero or more events, routed in order.

    A handler may also return an :class:`Event`, a list of them, or ``None``.
    """

    events: tuple[Event, ...] = attrs.field(default=(), converter=_events)

    @classmethod
    def single(cls, event: Event) -> StepOutput:
        """One event."""
        return cls((event,))

    @classmethod
    def multiple(cls, events: Iterable[Event]) -> StepOutput:
        """Several events, routed in the order given (fan-out)."""
        return cls(tuple(events))

    @classmethod
    def none(cls) -> StepOutput:
        """No event: the step is done and the run goes on with whatever else is pending."""
        return cls(())

    @classmethod
    def of(cls, value: Union[StepOutput, Event, Iterable[Event], None]) -> StepOutput:
        """Whatever a handler returned, as a ``StepOutput``; ``TypeError`` if it is not one."""
        if isinstance(value, StepOutput):
            return value
        if value is None:
            return cls(())
        if isinstance(value, Event):
            return cls((value,))
        if isinstance(value, (list, tuple)):
            return cls(tuple(value))
        msg = (
            f"a step returned {type(value).__name__}; return an Event, a list of Events, "
            "a StepOutput or None"
        )
        raise TypeError(msg)


# A result may hold anything: compared and hashed by identity (eq=False).
@immutable
@attrs.frozen(kw_only=True, eq=False)
class WorkflowResult:
    """How a run ended: its result, the StopEvent, and how much happened on the way."""

    #: ``data["result"]`` of the StopEvent when its data is a dict holding ``"result"``
    #: (as in ``Event.create(event_type="blazen::StopEvent", data={"result": ...})``),
    #: else the StopEvent's whole data.
    result: Any
    #: The StopEvent itself.
    event: Event
    #: How many events the run saw, StartEvent, published events and StopEvent included.
    events: int
    #: Milliseconds from the start of the run to its StopEvent.
    elapsed_ms: float
    #: The run's id (also ``ctx.run_id`` inside steps).
    run_id: str

    @property
    def data(self) -> Any:
        """The StopEvent's whole data."""
        return self.event.data


class StepHandler(Protocol):
    """A step handler that is an object, as in the Swift and Kotlin seeds.

    Its ``invoke(event)`` or ``invoke(event, ctx)`` is called as a handler function would
    be, and returns what one returns. Example::

        class Greet:
            def invoke(self, event):
                return Event.create("StopEvent", {"result": "hi"})

        wf.step("greet", accepts=["StartEvent"], emits=["StopEvent"], handler=Greet())
    """

    @property
    def invoke(self) -> Callable[..., Any]:
        """The handler: called with the event, and the context if it takes two arguments."""


@immutable
@attrs.frozen(kw_only=True)
class Step:
    """A registered step (see ``Workflow.step``)."""

    name: str
    accepts: tuple[str, ...]
    #: None when the step did not declare what it emits: then nothing is checked.
    emits: Optional[tuple[str, ...]]
    #: What each call calls: the function, or the ``invoke`` of a :class:`StepHandler`.
    handler: Callable[..., Any]
    wants_ctx: bool
    timeout_ms: Optional[float]
    max_concurrency: Optional[int]
    #: Whether the handler is a coroutine function: awaited on an event loop.
    is_async: bool = False


def result_of(stop: Event) -> Any:
    """The result a StopEvent carries (see :attr:`WorkflowResult.result`)."""
    data = stop.data
    if isinstance(data, dict) and "result" in data:
        return data["result"]
    return data
