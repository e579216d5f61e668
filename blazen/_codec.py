"""One JSON form for stream events and errors: sinks, ``blazen chat --json`` and batch files.

Every writer of events writes the same object for the same event (version ``"v": 1``)::

    {"v": 1, "kind": "chunk", "content": "Hel", "reasoning": "...", "refusal": "...",
     "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": "{\\"city\\": "}],
     "is_final": true, "server_tool": {"provider": "anthropic", "name": "web_search",
     "status": "running", "id": "srvtoolu_1", "raw": {...}}}
    {"v": 1, "kind": "done", "finish_reason": "stop", "usage": {"prompt_tokens": 5, ...}}
    {"v": 1, "kind": "error", "error": {"type": "RateLimitError", "kind": "rate_limit",
     "message": "...", "status": 429, "retry_after": 2.0, "provider": "openai",
     "request_id": "req_1", "partial": "Hel", "partial_reasoning": "",
     "usage": {"prompt_tokens": 12, ..., "partial": true}}}

A chunk's fields at their default (None, no tool calls, not final) are left out, and so is
a tool call's ``"caller"`` (who made the call, see :attr:`~blazen.ToolCall.caller`) when it
is None. An error
travels as its class name, kind, message and the fields shown, nothing else: not its body,
headers, request or cause, so a key a provider echoed somewhere cannot travel with it.

The writer policy (one for every writer): **what goes in comes back out**. Text is written
as UTF-8; text that UTF-8 cannot carry (a lone surrogate, from a server that split an
escaped emoji pair across two events) makes that one object be written with ASCII
``\\uXXXX`` escapes instead, which JSON defines for exactly this and which every JSON
reader (Python's, a browser's) turns back into the same string (one exception, by JSON's
own rules: a high surrogate right before a low one, the two halves of one character that
arrived in two events, reads back as that one character). U+0085, U+2028 and U+2029,
which JSON lets stand raw but ``str.splitlines`` breaks lines at, are always escaped, so
one object is one line for every line reader. Nothing is dropped, no
writer raises for any text, and a terminal is always written. Only a terminal shown to a
person replaces what its encoding cannot show, with ``?`` (see :mod:`blazen.cli.output`).

Reading is as strict as writing is lenient: :func:`loads` and :func:`decode` turn anything
that is not such an object (bad UTF-8, bad JSON, nesting too deep, a field of the wrong
type) into :class:`~blazen.ValidationError`, never another exception. Objects written
before version 1 (no ``"v"``: ``"class"`` for ``"type"``, ``"final"`` for ``"is_final"``,
tool calls as ``[id, name, arguments]`` lists) are read too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, Optional, Union

import attrs

from . import errors
from ._types import ServerToolEvent, StreamChunk, TokenUsage, ToolCall
from .errors import BlazenError, ValidationError

__all__ = [
    "VERSION",
    "HandlerCall",
    "decode",
    "decode_error",
    "dumps",
    "encode",
    "encode_chunk",
    "encode_done",
    "encode_error",
    "error_body",
    "error_object",
    "line",
    "loads",
    "usage_object",
]

#: The version written as ``"v"`` in every object; objects without one are version 0.
VERSION = 1

#: ``(kind, args)``: what a block handler receives, as a value.
HandlerCall = tuple[str, tuple[Any, ...]]

_USAGE = tuple(a.name for a in attrs.fields(TokenUsage))

# One encoder each: ``json.dumps`` with options builds a new encoder per call.
_utf8 = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_ascii = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode


#: Line breaks to Python's ``str.splitlines`` (and to JavaScript before ES2019) that JSON
#: lets stand raw inside a string: written escaped, so one event is always one line.
_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def _one_line(text: str) -> str:
    if "\x85" in text or "\u2028" in text or "\u2029" in text:
        return text.translate(_BREAKS)  # only inside strings: nothing else is non-ASCII
    return text


def dumps(obj: Any, *, ascii_only: bool = False) -> str:
    """``obj`` as compact JSON text on one line that always encodes to UTF-8 (the policy)."""
    if ascii_only:
        return _ascii(obj)
    text = _utf8(obj)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return _ascii(obj)  # a lone surrogate: escaped, so it reads back the same
        return _one_line(text)
    return text


def line(obj: Any) -> bytes:
    """``obj`` as one JSON line in UTF-8 bytes, newline included: what files get."""
    text = _utf8(obj)
    if text.isascii():
        return (text + "\n").encode("ascii")
    try:
        return (_one_line(text) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (_ascii(obj) + "\n").encode("ascii")


def loads(data: Union[bytes, str], where: str = "JSON") -> Any:
    """Parse one JSON text; :class:`~blazen.ValidationError` for anything that is not JSON."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        return json.loads(text)
    except UnicodeDecodeError as exc:
        msg = f"{where} is not UTF-8 (byte {exc.start})"
    except RecursionError:
        msg = f"{where} is nested too deeply to read"
    except ValueError as exc:
        msg = f"{where} is not JSON ({exc})"
    raise ValidationError(msg)


# -- writing -------------------------------------------------------------------------------


def _call_object(call: ToolCall) -> dict[str, Any]:
    obj: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments_json}
    if call.caller is not None:
        obj["caller"] = call.caller
    return obj


def encode_chunk(chunk: StreamChunk) -> dict[str, Any]:
    """A chunk as a JSON object; fields at their default (None, empty, False) are left out."""
    obj: dict[str, Any] = {"v": VERSION, "kind": "chunk"}
    if chunk.content_delta is not None:
        obj["content"] = chunk.content_delta
    if chunk.reasoning_delta is not None:
        obj["reasoning"] = chunk.reasoning_delta
    if chunk.refusal_delta is not None:
        obj["refusal"] = chunk.refusal_delta
    if chunk.tool_calls:
        obj["tool_calls"] = [_call_object(c) for c in chunk.tool_calls]
    if chunk.is_final:
        obj["is_final"] = True
    tool = chunk.server_tool
    if tool is not None:
        obj["server_tool"] = {
            "provider": tool.provider,
            "name": tool.name,
            "status": tool.status,
            "id": tool.id,
            "raw": tool.raw,
        }
    return obj


def usage_object(usage: Optional[TokenUsage]) -> Optional[dict[str, int]]:
    """Usage as a JSON object of every count, or None."""
    return None if usage is None else {n: getattr(usage, n) for n in _USAGE}


def encode_done(finish_reason: str, usage: Optional[TokenUsage]) -> dict[str, Any]:
    """The success terminal as a JSON object."""
    return {
        "v": VERSION,
        "kind": "done",
        "finish_reason": finish_reason,
        "usage": usage_object(usage),
    }


def error_object(
    type_name: str,
    kind: str,
    message: str,
    *,
    status: Optional[int] = None,
    retry_after: Optional[float] = None,
    provider: Optional[str] = None,
    request_id: Optional[str] = None,
    partial: str = "",
    partial_reasoning: str = "",
) -> dict[str, Any]:
    """An error's JSON body from its parts (for a failure that is not a BlazenError)."""
    return {
        "type": type_name,
        "kind": kind,
        "message": message,
        "status": status,
        "retry_after": retry_after,
        "provider": provider,
        "request_id": request_id,
        "partial": partial,
        "partial_reasoning": partial_reasoning,
    }


def error_body(err: BaseException) -> dict[str, Any]:
    """An error's JSON body: only the fields listed in the module doc.

    The usage the stream had reported (or estimated) before it failed travels as
    ``"usage"`` when there is one (``err.usage``: a cancelled or cut stream still says what
    it cost).
    """
    status = getattr(err, "status", None)
    retry_after: Any = getattr(err, "retry_after", None)
    body = error_object(
        type(err).__name__,
        str(getattr(err, "kind", "error")),
        str(err),
        status=status if isinstance(status, int) else None,
        retry_after=float(retry_after) if _finite(retry_after) else None,
        provider=_str_or_none(getattr(err, "provider", None)),
        request_id=_str_or_none(getattr(err, "request_id", None)),
        partial=str(getattr(err, "partial", "") or ""),
        partial_reasoning=str(getattr(err, "partial_reasoning", "") or ""),
    )
    usage = getattr(err, "usage", None)
    if isinstance(usage, TokenUsage):
        body["usage"] = usage_object(usage)
    return body


def encode_error(err: BaseException) -> dict[str, Any]:
    """The failure terminal as a JSON object."""
    return {"v": VERSION, "kind": "error", "error": error_body(err)}


def encode(kind: str, args: tuple[Any, ...]) -> dict[str, Any]:
    """``(kind, args)`` as a JSON object."""
    if kind == "chunk":
        return encode_chunk(args[0])
    if kind == "done":
        return encode_done(args[0], args[1])
    if kind == "error":
        return encode_error(args[0])
    msg = f"unknown event kind {kind!r}: expected 'chunk', 'done' or 'error'"
    raise ValueError(msg)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _str_or_none(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


# -- reading -------------------------------------------------------------------------------
# Each field has one check: it returns the value to use or raises TypeError naming what it
# wanted. A field added to the format is one more row in a table below.


def _opt_str(value: Any) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise TypeError("a string or null")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("a string")
    return value


def _text(value: Any) -> str:  # absent or null partial text is ""
    return "" if value is None else _str(value)


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError("true or false")
    return value


def _status(value: Any) -> Optional[int]:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError("an integer or null")
    return value


def _seconds(value: Any) -> Optional[float]:
    if value is None:
        return None
    if not _finite(value) or value < 0:
        raise TypeError("a finite number of seconds, at least 0, or null")
    return float(value)


def _tool_call(value: Any) -> ToolCall:
    if isinstance(value, list) and len(value) == 3:  # version 0: [id, name, arguments]
        value = dict(zip(("id", "name", "arguments"), value))
    if not isinstance(value, dict):
        raise TypeError('tool calls as {"id", "name", "arguments"} objects')
    try:
        caller = value.get("caller")
        if caller is not None and not isinstance(caller, dict):
            raise TypeError("a tool call's caller as an object or null")
        return ToolCall(
            _str(value["id"]), _str(value["name"]), _str(value["arguments"]), caller=caller
        )
    except KeyError as exc:
        msg = f"a tool call with {exc.args[0]!r}"
        raise TypeError(msg) from None


def _tool_calls(value: Any) -> tuple[ToolCall, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise TypeError("a list of tool calls")
    return tuple(_tool_call(v) for v in value)


def _usage(value: Any) -> Optional[TokenUsage]:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError("an object of token counts or null")
    # Counts a newer version added are left out; TokenUsage checks each count it knows.
    try:
        return TokenUsage(**{n: value[n] for n in _USAGE if n in value})
    except TypeError:
        raise TypeError("an object of whole token counts of at least 0") from None


def _server_tool(value: Any) -> Optional[ServerToolEvent]:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError('an object {"provider", "name", "status", "id", "raw"} or null')
    try:
        return ServerToolEvent(
            provider=_str(value.get("provider")),
            name=_str(value.get("name")),
            status=_str(value.get("status")),
            id=value.get("id"),
            raw=value.get("raw"),
        )
    except (TypeError, ValueError):
        raise TypeError("a server tool event with a provider, name and status") from None


_Check = Callable[[Any], Any]

#: Chunk fields: JSON name (and its version-0 name), StreamChunk field, check.
_CHUNK: tuple[tuple[str, str, str, _Check], ...] = (
    ("content", "content", "content_delta", _opt_str),
    ("reasoning", "reasoning", "reasoning_delta", _opt_str),
    ("refusal", "refusal", "refusal_delta", _opt_str),
    ("tool_calls", "tool_calls", "tool_calls", _tool_calls),
    ("is_final", "final", "is_final", lambda v: v is not None and _bool(v)),
    ("server_tool", "server_tool", "server_tool", _server_tool),
)

#: Error body fields: JSON name, check (applied to the value, None when absent).
_ERROR: tuple[tuple[str, _Check], ...] = (
    ("kind", _opt_str),
    ("message", _text),
    ("status", _status),
    ("retry_after", _seconds),
    ("provider", _opt_str),
    ("request_id", _opt_str),
    ("partial", _text),
    ("partial_reasoning", _text),
)


def _field(obj: dict[str, Any], name: str, check: _Check, old: Optional[str] = None) -> Any:
    value = obj.get(name)
    if value is None and old is not None:
        value = obj.get(old)
    try:
        return check(value)
    except TypeError as exc:
        msg = f"{name!r} must be {exc}, got {type(value).__name__}"
        raise ValidationError(msg) from None


def decode_error(body: Any) -> BlazenError:
    """An error body back to the same :class:`~blazen.BlazenError` subclass, kind included.

    A class this version does not know (or a failure that was not a BlazenError, such as
    the ``ImportError`` of ``blazen chat``) comes back as :class:`~blazen.BlazenError`
    with its kind and message.
    """
    if not isinstance(body, dict):
        msg = f"an error must be an object, got {type(body).__name__}"
        raise ValidationError(msg)
    name = body.get("type", body.get("class"))
    values = {n: _field(body, n, check) for n, check in _ERROR}
    cls = getattr(errors, name, None) if isinstance(name, str) else None
    if not (isinstance(cls, type) and issubclass(cls, BlazenError)):
        cls = BlazenError
    err = cls(
        values["message"],
        status=values["status"],
        retry_after=values["retry_after"],
        provider=values["provider"],
        request_id=values["request_id"],
    )
    if values["kind"] is not None and values["kind"] != err.kind:
        err.kind = values["kind"]  # an instance's own kind (``producer_lost``) travels too
    err.partial = values["partial"]
    err.partial_reasoning = values["partial_reasoning"]
    if body.get("usage") is not None:
        err.usage = _field(body, "usage", _usage)
    return err


def decode(obj: Any) -> HandlerCall:
    """A JSON object back to ``(kind, args)`` with real values; ``ValidationError`` if not one."""
    if not isinstance(obj, dict):
        msg = f"not a blazen event: a {type(obj).__name__}, not an object"
        raise ValidationError(msg)
    kind = obj.get("kind")
    try:
        if kind == "chunk":
            fields = {attr: _field(obj, name, check, old) for name, old, attr, check in _CHUNK}
            return "chunk", (StreamChunk(**fields),)
        if kind == "done":
            reason = _field(obj, "finish_reason", _str)
            return "done", (reason, _field(obj, "usage", _usage))
        if kind == "error":
            return "error", (decode_error(obj.get("error")),)
    except ValidationError as exc:
        msg = f"not a blazen {kind} event: {exc}"
        raise ValidationError(msg) from None
    msg = f"not a blazen event: unknown kind {kind!r}"
    raise ValidationError(msg)
