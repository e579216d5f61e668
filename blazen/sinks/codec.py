"""Events as JSON objects and back, losslessly: the one format of transcripts and Redis.

An event is ``(kind, args)``, the block handler's arguments: ``("chunk", (chunk,))``,
``("done", (finish_reason, usage))`` or ``("error", (err,))``. Its JSON object::

    {"kind": "chunk", "content": "Hel", "reasoning": "...", "refusal": "...",
     "tool_calls": [["call_1", "get_weather", "{\\"city\\": "]], "final": true,
     "server_tool": {"provider": "anthropic", "name": "web_search", "status": "running",
                     "id": "srvtoolu_1", "raw": {...}}}
    {"kind": "done", "finish_reason": "stop", "usage": {"prompt_tokens": 5, ...}}
    {"kind": "error", "error": {"class": "RateLimitError", "kind": "rate_limit",
     "message": "...", "status": 429, "retry_after": 2.0, "partial": "Hel", ...}}

A chunk's fields at their default (None, no tool calls, not final) are left out.
An error travels as its class name, kind, message, status, ``retry_after``, provider,
request id and partial text, nothing else: not its body, headers, request or cause, so a
key that a provider echoed somewhere else cannot travel with it (the message was already
scrubbed of the model's secrets before any callback saw it).
"""

from __future__ import annotations

import json
from typing import Any, Optional

import attrs

from .. import errors
from .._types import ServerToolEvent, StreamChunk, TokenUsage, ToolCall
from ..errors import BlazenError, ValidationError

__all__ = [
    "Event",
    "decode",
    "dumps",
    "encode",
    "encode_chunk",
    "encode_done",
    "encode_error",
]

#: ``(kind, args)``: what a block handler receives, as a value.
Event = tuple[str, tuple[Any, ...]]

_USAGE = tuple(a.name for a in attrs.fields(TokenUsage))
_ERROR_FIELDS = ("status", "retry_after", "provider", "request_id", "partial", "partial_reasoning")


#: One encoder for every event: ``json.dumps`` with options builds a new one per call.
dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def encode_chunk(chunk: StreamChunk) -> dict[str, Any]:
    """A chunk as a JSON object; fields at their default (None, empty, False) are left out."""
    obj: dict[str, Any] = {"kind": "chunk"}
    if chunk.content_delta is not None:
        obj["content"] = chunk.content_delta
    if chunk.reasoning_delta is not None:
        obj["reasoning"] = chunk.reasoning_delta
    if chunk.refusal_delta is not None:
        obj["refusal"] = chunk.refusal_delta
    if chunk.tool_calls:
        obj["tool_calls"] = [[c.id, c.name, c.arguments_json] for c in chunk.tool_calls]
    if chunk.is_final:
        obj["final"] = True
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


def encode_done(finish_reason: str, usage: Optional[TokenUsage]) -> dict[str, Any]:
    """The success terminal as a JSON object."""
    return {
        "kind": "done",
        "finish_reason": finish_reason,
        "usage": None if usage is None else {n: getattr(usage, n) for n in _USAGE},
    }


def encode_error(err: BaseException) -> dict[str, Any]:
    """The failure terminal as a JSON object (only the fields listed in the module doc)."""
    body: dict[str, Any] = {
        "class": type(err).__name__,
        "kind": getattr(err, "kind", "error"),
        "message": str(err),
    }
    for name in _ERROR_FIELDS:
        body[name] = getattr(err, name, None)
    return {"kind": "error", "error": body}


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


def _error(body: dict[str, Any]) -> BlazenError:
    cls = getattr(errors, str(body.get("class")), None)
    if not (isinstance(cls, type) and issubclass(cls, BlazenError)):
        cls = BlazenError  # a class this version does not know: keep the kind and message
    err = cls(
        str(body.get("message", "")),
        status=body.get("status"),
        retry_after=body.get("retry_after"),
        provider=body.get("provider"),
        request_id=body.get("request_id"),
    )
    kind = body.get("kind")
    if isinstance(kind, str) and kind != err.kind:
        err.kind = kind  # an instance's own kind (``producer_lost``) travels too
    err.partial = body.get("partial") or ""
    err.partial_reasoning = body.get("partial_reasoning") or ""
    return err


def _server_tool(obj: Any) -> Optional[ServerToolEvent]:
    if obj is None:
        return None
    return ServerToolEvent(
        provider=obj["provider"],
        name=obj["name"],
        status=obj["status"],
        id=obj.get("id"),
        raw=obj.get("raw"),
    )


def decode(obj: Any) -> Event:
    """A JSON object back to ``(kind, args)`` with real values; ``ValidationError`` if malformed."""
    try:
        kind = obj["kind"]
        if kind == "chunk":
            chunk = StreamChunk(
                content_delta=obj.get("content"),
                reasoning_delta=obj.get("reasoning"),
                refusal_delta=obj.get("refusal"),
                tool_calls=tuple(ToolCall(i, n, a) for i, n, a in obj.get("tool_calls") or ()),
                is_final=bool(obj.get("final")),
                server_tool=_server_tool(obj.get("server_tool")),
            )
            return "chunk", (chunk,)
        if kind == "done":
            usage = obj.get("usage")
            return "done", (obj["finish_reason"], None if usage is None else TokenUsage(**usage))
        if kind == "error":
            return "error", (_error(obj["error"]),)
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"not a blazen event: {type(exc).__name__}: {exc}"
        raise ValidationError(msg) from None
    msg = f"not a blazen event: unknown kind {kind!r}"
    raise ValidationError(msg)
