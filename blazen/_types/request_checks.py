"""What a ``CompletionRequest`` field may hold: one check per field, in one table.

``CompletionRequest(...)`` is built directly too (the Swift and Kotlin seeds build theirs
that way, and ``attrs.evolve`` / ``__replace__`` do), so the constructor itself turns
every field into an immutable value and refuses a wrong type (``TypeError``) or a value
out of range (``ValueError``) before anything is sent, with the words
``Llm.completion_request`` uses. A field added to ``CompletionRequest`` is one more row of
:data:`FIELD_CHECKS` (a test fails for a field without one); checks that read two fields
at once are in :data:`REQUEST_CHECKS`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Callable, Optional

from .._json import json_copy
from .calls import ToolDefinition
from .messages import ChatMessage
from .provider import ServerTool

__all__ = [
    "DISPLAYS",
    "EFFORTS",
    "FIELD_CHECKS",
    "REQUEST_CHECKS",
    "TOOL_CHOICES",
    "check_count",
    "check_number",
]

TOOL_CHOICES = ("auto", "none", "required")
# Every level some provider documents; each wire refuses the ones its API does not take.
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
DISPLAYS = ("omitted", "summarized")


def check_number(name: str, value: Any, low: float, high: float) -> Optional[float]:
    """None, or ``value`` as a float in ``[low, high]``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        msg = f"{name} must be a number, got {type(value).__name__}"
        raise TypeError(msg)
    if not (low <= value <= high) or math.isnan(value):
        msg = f"{name} must be between {low} and {high}, got {value}"
        raise ValueError(msg)
    return float(value)


def check_count(name: str, value: Any, low: int = 1) -> Optional[int]:
    """None, or an int (not a bool) of at least ``low``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{name} must be an int, got {type(value).__name__}"
        raise TypeError(msg)
    if value < low:
        msg = f"{name} must be at least {low}, got {value}"
        raise ValueError(msg)
    return value


def _messages(value: Any) -> tuple[ChatMessage, ...]:
    if isinstance(value, (str, ChatMessage)) or not isinstance(value, Sequence):
        msg = "messages must be a list of Llm.system/user/assistant/tool_result messages"
        raise TypeError(msg)
    msgs = tuple(value)
    for m in msgs:
        if not isinstance(m, ChatMessage):
            msg = f"messages must be ChatMessage values (Llm.user(...)), not {type(m).__name__}"
            raise TypeError(msg)
    return msgs


def _stop(value: Any) -> tuple[str, ...]:
    stops = (value,) if isinstance(value, str) else () if value is None else value
    if not isinstance(stops, Sequence) or not all(isinstance(s, str) and s for s in stops):
        msg = f"stop must be a non-empty string or a list of them, got {value!r}"
        raise ValueError(msg)
    return tuple(stops)


def _items(name: str, cls: type, what: str) -> Callable[[Any], tuple[Any, ...]]:
    def check(value: Any) -> tuple[Any, ...]:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            msg = f"{name} must be a list of {what} values, got {type(value).__name__}"
            raise TypeError(msg)
        for item in value:
            if not isinstance(item, cls):
                msg = f"{name} must be {what} values, got {type(item).__name__}"
                raise TypeError(msg)
        return tuple(value)

    return check


def _text(name: str) -> Callable[[Any], Optional[str]]:
    def check(value: Any) -> Optional[str]:
        if value is not None and not isinstance(value, str):
            msg = f"{name} must be a string, got {type(value).__name__}"
            raise TypeError(msg)
        return value

    return check


def _choice(name: str, allowed: tuple[str, ...]) -> Callable[[Any], Optional[str]]:
    def check(value: Any) -> Optional[str]:
        if value is not None and value not in allowed:
            msg = f"{name} must be one of {', '.join(allowed)}; got {value!r}"
            raise ValueError(msg)
        return None if value is None else str(value)

    return check


def _response_format(value: Any) -> Optional[dict[str, Any]]:
    if value is None:
        return None
    if not isinstance(value, dict):
        msg = "response_format must be a dict such as {'type': 'json_object'}"
        raise TypeError(msg)
    copy: dict[str, Any] = json_copy(value, "response_format")  # the request's own copy
    return copy


def _budget(value: Any) -> Any:
    return value if value == "adaptive" else check_count("reasoning_budget", value)


def _same(value: Any) -> Any:
    return value  # converted (and checked) by the field's own attrs converter


#: Field name -> its check: the value to store, or TypeError / ValueError.
FIELD_CHECKS: dict[str, Callable[[Any], Any]] = {
    "messages": _messages,
    "max_tokens": lambda v: check_count("max_tokens", v),
    "temperature": lambda v: check_number("temperature", v, 0.0, 2.0),
    "top_p": lambda v: check_number("top_p", v, 0.0, 1.0),
    "stop": _stop,
    "tools": _items("tools", ToolDefinition, "Llm.tool(...)"),
    "server_tools": _items("server_tools", ServerTool, "Llm.server_tool(...)"),
    "tool_choice": _text("tool_choice"),
    "response_format": _response_format,
    "model": _text("model"),
    "system": _text("system"),
    "reasoning_effort": _choice("reasoning_effort", EFFORTS),
    "reasoning_budget": _budget,
    "reasoning_display": _choice("reasoning_display", DISPLAYS),
    "max_continuations": lambda v: check_count("max_continuations", v, 0),
    "output": _same,
    "previous_response_id": _text("previous_response_id"),
}


def _some_message(fields: dict[str, Any]) -> None:
    if not fields["messages"] and not fields["system"]:
        msg = "a completion request needs at least one message"
        raise ValueError(msg)


def _known_tool_choice(fields: dict[str, Any]) -> None:
    choice = fields["tool_choice"]
    names = {t.name for t in fields["tools"]}
    if choice is not None and choice not in TOOL_CHOICES and choice not in names:
        msg = (
            f"tool_choice must be one of {', '.join(TOOL_CHOICES)} or the name of a "
            f"tool in tools; got {choice!r}"
        )
        raise ValueError(msg)


#: Checks of the whole request, after every field's own.
REQUEST_CHECKS: tuple[Callable[[dict[str, Any]], None], ...] = (
    _some_message,
    _known_tool_choice,
)
