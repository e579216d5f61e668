"""Every raw finish reason of every wire, and the one it is reported as. No I/O.

The table is the documentation: the docs' finish-reason table is generated from it
(:func:`finish_reason_table`; a test keeps the two the same). ``"error"`` marks a raw
reason the wire turns into a typed error instead of a ``done`` (Gemini's failed calls).
A raw reason in no row is reported as ``""`` with the raw value kept on the response and
logged once (never a guess such as ``"stop"``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Optional

__all__ = ["FINISH_REASONS", "finish_reason_table", "normalise_finish_reason"]

logger = logging.getLogger("blazen")

#: ``{wire: {raw reason: normalised}}``, each wire's reasons as its API reference lists them.
FINISH_REASONS: Mapping[str, Mapping[str, str]] = {
    # https://platform.openai.com/docs/api-reference/chat/object (choices[].finish_reason)
    "openai": {
        "stop": "stop",
        "length": "length",
        "tool_calls": "tool_calls",
        "content_filter": "content_filter",
        "function_call": "tool_calls",
    },
    # https://platform.claude.com/docs/en/api/handling-stop-reasons
    "anthropic": {
        "end_turn": "stop",
        "stop_sequence": "stop",
        "tool_use": "tool_calls",
        "max_tokens": "length",
        "model_context_window_exceeded": "length",
        "refusal": "content_filter",
        "pause_turn": "paused",
    },
    # https://ai.google.dev/api/generate-content#FinishReason
    "gemini": {
        "STOP": "stop",
        "MAX_TOKENS": "length",
        "SAFETY": "content_filter",
        "RECITATION": "content_filter",
        "BLOCKLIST": "content_filter",
        "PROHIBITED_CONTENT": "content_filter",
        "SPII": "content_filter",
        "IMAGE_SAFETY": "content_filter",
        "IMAGE_PROHIBITED_CONTENT": "content_filter",
        "IMAGE_RECITATION": "content_filter",
        # An unsupported language, "other reasons", no image made: a stop that names no
        # cause blazen has a word for, so "" (the raw value says which).
        "LANGUAGE": "",
        "OTHER": "",
        "IMAGE_OTHER": "",
        "NO_IMAGE": "",
        "FINISH_REASON_UNSPECIFIED": "",
        "MALFORMED_FUNCTION_CALL": "error",
        "UNEXPECTED_TOOL_CALL": "error",
        "TOO_MANY_TOOL_CALLS": "error",
    },
    # https://platform.openai.com/docs/api-reference/responses/object: a finished answer's
    # status, else its incomplete_details.reason (response.incomplete).
    "responses": {
        "completed": "stop",
        "max_output_tokens": "length",
        "content_filter": "content_filter",
        # A cap on the messages of a run, and a stop for a WebSocket steer (which blazen
        # never sends): no cause blazen has a word for, so "" (the raw value says which).
        "max_messages": "",
        "steered": "",
    },
    # https://github.com/ollama/ollama/blob/main/docs/api.md (done_reason)
    "ollama": {"stop": "stop", "length": "length", "load": "", "unload": ""},
}

# Stop-like reasons become "tool_calls" when the answer has calls: Gemini and Ollama say
# "stop" there.
_STOPS = frozenset({"stop"})
_LOOKUP: dict[str, str] = {
    raw.lower(): normal
    for table in FINISH_REASONS.values()
    for raw, normal in table.items()
    if normal != "error"
}
# OpenAI-compatible servers (llama.cpp, vLLM, TGI) that say what their engine says.
_LOOKUP.update({"eos": "stop", "eos_token": "stop", "finished": "stop", "model_length": "length"})

# Unknown reasons already logged; bounded, as a stream of made-up reasons must not grow it.
_logged: set[str] = set()
_logged_lock = threading.Lock()
_LOGGED_MAX = 64


def _unknown(raw: str) -> None:
    with _logged_lock:
        if raw in _logged or len(_logged) >= _LOGGED_MAX:
            return
        _logged.add(raw)
    logger.warning(
        "blazen does not know the finish reason %r: reported as '' (the raw value is on "
        "response.raw_finish_reason)",
        raw[:100],
    )


def normalise_finish_reason(raw: Optional[str], has_tool_calls: bool) -> str:
    """Map a provider's finish reason to ``stop``, ``tool_calls``, ``length``,
    ``content_filter``, ``paused`` or ``""``.

    ``""`` when none was reported, or for a reason that names no cause blazen has a word
    for, or for one in no table (logged once). A stop-like reason after tool calls is
    ``tool_calls``.
    """
    if not raw:
        return ""
    normal = _LOOKUP.get(raw) or _LOOKUP.get(raw.lower())
    if normal is None:
        if raw.lower() not in _LOOKUP:
            _unknown(raw)
        return ""
    if normal in _STOPS and has_tool_calls:
        return "tool_calls"
    return normal


def finish_reason_table() -> str:
    """The Markdown table of :data:`FINISH_REASONS`, as the docs show it (streaming styles)."""
    lines = ["| wire | raw finish reason | reported as |", "|---|---|---|"]
    for wire, table in FINISH_REASONS.items():
        for raw, normal in table.items():
            shown = "a typed error" if normal == "error" else f'`"{normal}"`'
            lines.append(f"| {wire} | `{raw}` | {shown} |")
    return "\n".join(lines)
