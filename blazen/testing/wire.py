"""Wire bytes to script replies with: SSE events, whole OpenAI streams, and split writes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Optional, Union

__all__ = ["openai_sse", "openai_tool_sse", "responses_sse", "split_bytes", "sse", "sse_event"]


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


class _Responses:
    """The events of one Responses API stream, numbered in order as OpenAI numbers them."""

    def __init__(self, model: str, response_id: str) -> None:
        self.events: list[bytes] = []
        self.output: list[dict[str, Any]] = []
        self.head = {"id": response_id, "object": "response", "created_at": 0, "model": model}
        self.add("response.created", response={**self.head, "status": "in_progress", "output": []})

    def add(self, kind: str, **fields: Any) -> None:
        payload = {"type": kind, "sequence_number": len(self.events), **fields}
        self.events.append(sse_event(payload, kind))

    def item(
        self, added: dict[str, Any], deltas: list[tuple[str, dict[str, Any]]], done: Any
    ) -> None:
        index = len(self.output)
        self.add("response.output_item.added", output_index=index, item=added)
        for kind, fields in deltas:
            self.add(kind, item_id=added["id"], output_index=index, **fields)
        self.add("response.output_item.done", output_index=index, item=done)
        self.output.append(done)

    def end(self, usage: Optional[Mapping[str, int]]) -> list[bytes]:
        final = {**self.head, "status": "completed", "output": self.output}
        final["usage"] = dict(usage) if usage is not None else None
        self.add("response.completed", response=final)
        return self.events


def responses_sse(
    text_parts: Iterable[str] = (),
    *,
    calls: Iterable[tuple[str, str, Union[str, Mapping[str, Any]]]] = (),
    usage: Optional[Mapping[str, int]] = None,
    model: str = "test-model",
) -> list[bytes]:
    """The events of an OpenAI Responses API stream: a message of ``text_parts``, then calls.

    ``calls`` holds ``(call_id, name, arguments)`` as for :func:`openai_tool_sse`; ``usage``
    is the response's (``input_tokens``, ``output_tokens``, ``total_tokens``). Use it with a
    model made with ``api="responses"``::

        Reply.sse(responses_sse(["Hel", "lo"]))
    """
    stream = _Responses(model, "resp_test")
    parts = list(text_parts)
    if parts:
        text = "".join(parts)
        part = {"type": "output_text", "text": text, "annotations": []}
        deltas = [
            ("response.content_part.added", {"content_index": 0, "part": {**part, "text": ""}}),
            *(("response.output_text.delta", {"content_index": 0, "delta": t}) for t in parts),
            ("response.output_text.done", {"content_index": 0, "text": text}),
        ]
        message = {"id": "msg_test", "type": "message", "role": "assistant"}
        stream.item(
            {**message, "status": "in_progress", "content": []},
            deltas,
            {**message, "status": "completed", "content": [part]},
        )
    for number, (call_id, name, arguments) in enumerate(calls):
        args = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
        call = {"id": f"fc_test{number}", "type": "function_call", "call_id": call_id, "name": name}
        pieces = [args[i : i + 8] for i in range(0, len(args), 8)]
        stream.item(
            {**call, "status": "in_progress", "arguments": ""},
            [("response.function_call_arguments.delta", {"delta": p}) for p in pieces],
            {**call, "status": "completed", "arguments": args},
        )
    return stream.end(usage)
