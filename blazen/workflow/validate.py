"""The checks that refuse a broken workflow before any step runs.

``Workflow.step`` checks its arguments here as the step is added, so a mistake points at the
line that made it; :func:`problems` checks the graph of steps as a whole when a run starts
(a step added later may still supply a missing event type until then).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Callable, Optional, Union

from ..errors import ValidationError
from .events import START_EVENT, STOP_EVENT, Step, StepHandler, canonical_event_type

__all__ = [
    "handler_wants_ctx",
    "is_coroutine_function",
    "milliseconds",
    "positive_int",
    "problems",
    "step_callable",
    "step_types",
]


def milliseconds(name: str, value: Optional[float]) -> Optional[float]:
    """``value`` as a float number of milliseconds, or None; refuses zero, NaN and infinity."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        msg = f"{name} must be a number of milliseconds or None, got {type(value).__name__}"
        raise TypeError(msg)
    if not value > 0 or math.isinf(value):
        msg = f"{name} must be a positive, finite number of milliseconds (or None), got {value}"
        raise ValueError(msg)
    return float(value)


def positive_int(name: str, value: Optional[int], *, allow_none: bool) -> Optional[int]:
    """``value`` when it is an int of at least 1 (or None, when allowed); bools are refused."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        also = " or None" if allow_none else ""
        msg = f"{name} must be an int of at least 1{also}, got {value!r}"
        raise ValueError(msg)
    return value


def _types(what: str, step: str, value: Union[str, Iterable[str]]) -> tuple[str, ...]:
    # A lone string is one type name, not a sequence of one-letter types.
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, Iterable):
        msg = f"{what} of step {step!r} must be a list of event type names"
        raise TypeError(msg)
    out = tuple(dict.fromkeys(canonical_event_type(item) for item in items))
    for item in out:
        if not isinstance(item, str) or not item:
            msg = f"{what} of step {step!r} must hold non-empty strings, got {item!r}"
            raise TypeError(msg)
    return out


def step_types(
    name: str, accepts: Union[str, Iterable[str]], emits: Union[str, Iterable[str], None]
) -> tuple[tuple[str, ...], Optional[tuple[str, ...]]]:
    """What step ``name`` accepts and emits (None: undeclared), without duplicates.

    Refuses a step that accepts nothing or the StopEvent, or that emits the StartEvent.
    """
    accepted = _types("accepts", name, accepts)
    emitted = None if emits is None else _types("emits", name, emits)
    if not accepted:
        raise ValidationError(f"step {name!r} accepts no event type")
    if STOP_EVENT in accepted:
        raise ValidationError(
            f"step {name!r} accepts {STOP_EVENT}, which ends the run and reaches no step"
        )
    if emitted is not None and START_EVENT in emitted:
        raise ValidationError(f"step {name!r} emits {START_EVENT}; only the run emits it")
    return accepted, emitted


def is_coroutine_function(fn: Any) -> bool:
    """Whether ``fn`` is an ``async def`` function, or an object whose ``__call__`` is one."""
    import inspect  # on first use: `import blazen` does not pay for it

    call = getattr(fn, "__call__", None)  # noqa: B004 - async callable objects count too
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def step_callable(name: str, handler: Union[Callable[..., Any], StepHandler]) -> Callable[..., Any]:
    """What a call of step ``name`` calls: the function, or a :class:`StepHandler`'s ``invoke``.

    Refuses a class (its ``invoke`` would be unbound) and what is neither callable nor has
    a callable ``invoke``.
    """
    if isinstance(handler, type):
        msg = (
            f"the handler of step {name!r} is the class {handler.__name__}; "
            f"pass an instance: {handler.__name__}(...)"
        )
        raise TypeError(msg)
    if callable(handler):
        return handler
    invoke = getattr(handler, "invoke", None)
    if not callable(invoke):
        msg = (
            f"the handler of step {name!r} must be a function or an object with "
            f"invoke(event[, ctx]), got {type(handler).__name__}"
        )
        raise TypeError(msg)
    return invoke  # type: ignore[no-any-return]


def handler_wants_ctx(name: str, handler: Union[Callable[..., Any], StepHandler]) -> bool:
    """Whether step ``name``'s handler takes ``(event, ctx)`` rather than ``(event)``.

    ``handler`` may be a function or a :class:`StepHandler` (its ``invoke`` is checked),
    plain or ``async``. Refuses what is neither, and a function taking no event.
    """
    handler = step_callable(name, handler)
    import inspect

    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return True
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    if not positional:
        msg = f"the handler of step {name!r} must take the event (and optionally the context)"
        raise TypeError(msg)
    return len(positional) >= 2


def problems(steps: tuple[Step, ...]) -> list[str]:
    """Everything that would stop a run of these steps, named by step and event type."""
    found: list[str] = []
    if not any(START_EVENT in s.accepts for s in steps):
        found.append(f"no step accepts {START_EVENT}, so nothing would run")
    undeclared = [s.name for s in steps if s.emits is None]
    emitted = {t for s in steps for t in (s.emits or ())}
    accepted = {t for s in steps for t in s.accepts}
    if not undeclared:
        found += [
            f"step {s.name!r} accepts {t!r}, but no step emits it"
            for s in steps
            for t in s.accepts
            if t != START_EVENT and t not in emitted
        ]
    found += [
        f"step {s.name!r} emits {t!r}, but no step accepts it"
        for s in steps
        for t in s.emits or ()
        if t != STOP_EVENT and t not in accepted
    ]
    if steps and not found:
        reached: dict[str, Step] = {}
        types = {START_EVENT}
        grew = True
        while grew:
            grew = False
            for s in steps:
                if s.name not in reached and types.intersection(s.accepts):
                    reached[s.name] = s
                    types.update(s.emits or ())
                    grew = True
        if STOP_EVENT not in types and not any(s.emits is None for s in reached.values()):
            found.append(
                f"no step can reach {STOP_EVENT}: from {START_EVENT} the run reaches steps "
                f"{list(reached)!r}, which emit only {sorted(types - {START_EVENT})!r}"
            )
    return found
