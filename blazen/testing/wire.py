"""Wire bytes to script replies with: SSE events, whole OpenAI streams, and split writes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Optional, Union

__all__ = ["openai_sse", "openai_tool_sse", "split_bytes", "sse", "sse_event"]


def sse_event(data: Union[str, Mapping[str, Any]], event: Optional[str] = None) -> bytes:
    """One SSE event: ``event: name`` (optional) and ``data: ...``, ended by a blank line."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def sse(*payloads: Union[str, Mapping[str, Any]], done: bool = True) -> list[bytes]:
    """A list of SSE events, one per payload, with ``data: [DONE]`` appended if ``done``."""
    events = [sse_event(p) for p in payloads]
    if done:
        events.append(b"data: [DONE]\n\n")
    return events


def _openai_head(model: str) -> dict[str, Any]:
    return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": model}


def _openai_chunk(
    model: str, delta: Mapping[str, Any], finish: Optional[str] = None
) -> dict[str, Any]:
    choice = {"index": 0, "delta": dict(delta), "finish_reason": finish}
    return {**_openai_head(model), "choices": [choice]}


def _openai_usage(model: str, usage: Mapping[str, int]) -> dict[str, Any]:
    # With stream_options.include_usage, OpenAI sends usage last, in a chunk with no choices.
    return {**_openai_head(model), "choices": [], "usage": dict(usage)}


def openai_sse(
    text_parts: Iterable[str] = (),
    *,
    finish_reason: str = "stop",
    usage: Optional[Mapping[str, int]] = None,
    model: str = "test-model",
    done: bool = True,
) -> list[bytes]:
    """The events of an OpenAI chat-completions stream that says ``text_parts``."""
    payloads: list[Mapping[str, Any]] = [_openai_chunk(model, {"role": "assistant", "content": ""})]
    payloads += [_openai_chunk(model, {"content": t}) for t in text_parts]
    payloads.append(_openai_chunk(model, {}, finish_reason))
    if usage is not None:
        payloads.append(_openai_usage(model, usage))
    return sse(*payloads, done=done)


def openai_tool_sse(
    calls: Iterable[tuple[str, str, Union[str, Mapping[str, Any]]]],
    *,
    text: str = "",
    usage: Optional[Mapping[str, int]] = None,
    model: str = "test-model",
) -> list[bytes]:
    """The events of an OpenAI stream that calls tools: ``calls`` holds ``(id, name, arguments)``.

    ``arguments`` is a dict or JSON text; it is streamed in small fragments, as real servers
    do, so callbacks see the snapshot grow. Use it to script an agent's turns::

        Reply.sse(openai_tool_sse([("call_1", "get_weather", {"city": "Paris"})]))
    """
    payloads: list[Mapping[str, Any]] = [
        _openai_chunk(model, {"role": "assistant", "content": text or None})
    ]
    for index, (call_id, name, arguments) in enumerate(calls):
        args = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
        # The first delta of a call carries its id, type and name; later ones only arguments.
        head = {"index": index, "id": call_id, "type": "function"}
        function = {"name": name, "arguments": ""}
        payloads.append(_openai_chunk(model, {"tool_calls": [{**head, "function": function}]}))
        for start in range(0, len(args), 8):
            piece = {"index": index, "function": {"arguments": args[start : start + 8]}}
            payloads.append(_openai_chunk(model, {"tool_calls": [piece]}))
    payloads.append(_openai_chunk(model, {}, "tool_calls"))
    if usage is not None:
        payloads.append(_openai_usage(model, usage))
    return sse(*payloads)


def split_bytes(data: Union[bytes, Iterable[bytes]], cuts: Iterable[int]) -> list[bytes]:
    """Join ``data`` and cut it at the given byte offsets into separate writes."""
    blob = data if isinstance(data, bytes) else b"".join(data)
    out: list[bytes] = []
    prev = 0
    # Offsets outside the data, or repeated, would only make empty writes: drop them.
    for cut in sorted({c for c in cuts if 0 < c < len(blob)}):
        out.append(blob[prev:cut])
        prev = cut
    out.append(blob[prev:])
    return [p for p in out if p]
