"""Wire bytes for the benchmark streams: OpenAI chat completions, OpenAI's Responses API and
Anthropic Messages, as SSE.

A stream is described by a :class:`Spec`, encoded into the request path so that every client
(whatever URL it appends to its base URL) asks the server for exactly the stream it needs.
Rendering is pure and cached by the server, so serving costs one ``sendall`` per write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["Spec", "expected", "render_events"]

FORMATS = ("openai", "anthropic", "responses")
# Two tool calls, as a model asking for the weather in two cities at once would make.
TOOL_NAMES = ("get_weather", "get_time")


@dataclass(frozen=True)
class Spec:
    """One stream: wire format, size, how it is written, and what it holds."""

    fmt: str = "openai"
    #: Text chunks (content deltas), or argument deltas per tool call when ``tools``.
    n: int = 1000
    #: "all": the whole body in one write; "each": one write per event.
    mode: str = "all"
    #: Pause after each event in "each" mode, in microseconds.
    delay_us: int = 0
    #: Two parallel tool calls of ``n`` argument deltas each instead of text.
    tools: bool = False
    #: Send this many content events, then hold the connection until the client closes it.
    stall: int = 0
    #: Identifies the stream for the close-time query (scenario f).
    tag: str = "-"

    def path(self) -> str:
        """The path prefix that asks the benchmark server for this stream."""
        tools = 1 if self.tools else 0
        return f"/s/{self.fmt}-{self.n}-{self.mode}-{self.delay_us}-{tools}-{self.stall}-{self.tag}"

    @classmethod
    def from_path(cls, path: str) -> Spec:
        """The spec a request path asks for (the inverse of :meth:`path`)."""
        part = path.split("/")[2]
        fmt, n, mode, delay, tools, stall, tag = part.split("-", 6)
        return cls(fmt, int(n), mode, int(delay), tools == "1", int(stall), tag)

    def with_tag(self, tag: str) -> Spec:
        """The same stream under another tag."""
        return replace(self, tag=tag)


def _token(i: int) -> str:
    return f" tok{i % 1000}"


def _args_piece(call: int, i: int, n: int) -> str:
    # A JSON object built from n pieces: '{"q": "' + words + '"}'.
    if i == 0:
        return '{"q": "'
    if i == n - 1:
        return '"}'
    return f"w{call}{i % 100} "


def expected(spec: Spec) -> tuple[str, tuple[str, ...]]:
    """The text and the tool-call arguments a correct client assembles from ``spec``."""
    if spec.tools:
        return "", tuple("".join(_args_piece(c, i, spec.n) for i in range(spec.n)) for c in (0, 1))
    n = spec.stall or spec.n
    return "".join(_token(i) for i in range(n)), ()


def _sse(data: Any, event: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def _openai(spec: Spec) -> list[bytes]:
    base = {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": "gpt-4o-mini-2024-07-18",
        "service_tier": "default",
        "system_fingerprint": "fp_06737a9306",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse({**base, "choices": [choice], "usage": None})

    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    if spec.tools:
        for call in (0, 1):
            fn = {"name": TOOL_NAMES[call], "arguments": ""}
            tc = {"index": call, "id": f"call_{call}abc", "type": "function", "function": fn}
            events.append(chunk({"tool_calls": [tc]}))
        for i in range(spec.n):
            for call in (0, 1):
                tc = {"index": call, "function": {"arguments": _args_piece(call, i, spec.n)}}
                events.append(chunk({"tool_calls": [tc]}))
        finish = "tool_calls"
    else:
        events.extend(chunk({"content": _token(i)}) for i in range(spec.n))
        finish = "stop"
    if spec.stall:
        return events[: spec.stall + 1]
    events.append(chunk({}, finish))
    usage = {"prompt_tokens": 12, "completion_tokens": spec.n, "total_tokens": spec.n + 12}
    events.append(_sse({**base, "choices": [], "usage": usage}))
    events.append(_sse("[DONE]"))
    return events


def _anthropic(spec: Spec) -> list[bytes]:
    message = {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-20250514",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    events = [
        _sse({"type": "message_start", "message": message}, "message_start"),
        _sse({"type": "ping"}, "ping"),
    ]

    def delta(index: int, body: dict[str, Any]) -> bytes:
        return _sse(
            {"type": "content_block_delta", "index": index, "delta": body}, "content_block_delta"
        )

    def block_start(index: int, block: dict[str, Any]) -> bytes:
        return _sse(
            {"type": "content_block_start", "index": index, "content_block": block},
            "content_block_start",
        )

    def block_stop(index: int) -> bytes:
        return _sse({"type": "content_block_stop", "index": index}, "content_block_stop")

    if spec.tools:
        # Anthropic streams parallel tool calls as consecutive content blocks.
        for call in (0, 1):
            block = {
                "type": "tool_use",
                "id": f"toolu_{call}abc",
                "name": TOOL_NAMES[call],
                "input": {},
            }
            events.append(block_start(call, block))
            events.extend(
                delta(
                    call, {"type": "input_json_delta", "partial_json": _args_piece(call, i, spec.n)}
                )
                for i in range(spec.n)
            )
            events.append(block_stop(call))
        stop = "tool_use"
    else:
        events.append(block_start(0, {"type": "text", "text": ""}))
        events.extend(delta(0, {"type": "text_delta", "text": _token(i)}) for i in range(spec.n))
        if spec.stall:
            return events[: spec.stall + 3]
        events.append(block_stop(0))
        stop = "end_turn"
    events.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": spec.n},
            },
            "message_delta",
        )
    )
    events.append(_sse({"type": "message_stop"}, "message_stop"))
    return events


def _responses(spec: Spec) -> list[bytes]:
    # https://platform.openai.com/docs/api-reference/responses-streaming: every event typed
    # and numbered; text deltas name their item and part, argument deltas their item.
    head = {
        "id": "resp_68c1d9e2b0a48190a5c6",
        "object": "response",
        "created_at": 1757534690,
        "model": "gpt-5-mini-2025-08-07",
    }
    seq = [0]

    def event(kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": seq[0], **fields}
        seq[0] += 1
        return _sse(payload, kind)

    events = [event("response.created", response={**head, "status": "in_progress", "output": []})]
    output: list[dict[str, Any]] = []
    if spec.tools:
        # Two parallel calls, their deltas interleaved as in the chat-completions stream.
        calls = []
        for call in (0, 1):
            item = {
                "id": f"fc_{call}abc",
                "type": "function_call",
                "status": "in_progress",
                "arguments": "",
                "call_id": f"call_{call}abc",
                "name": TOOL_NAMES[call],
            }
            calls.append(item)
            events.append(event("response.output_item.added", output_index=call, item=item))
        for i in range(spec.n):
            for call in (0, 1):
                events.append(
                    event(
                        "response.function_call_arguments.delta",
                        item_id=f"fc_{call}abc",
                        output_index=call,
                        delta=_args_piece(call, i, spec.n),
                    )
                )
        for call, item in enumerate(calls):
            args = "".join(_args_piece(call, i, spec.n) for i in range(spec.n))
            done = {**item, "status": "completed", "arguments": args}
            events.append(
                event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=call,
                    arguments=args,
                )
            )
            events.append(event("response.output_item.done", output_index=call, item=done))
            output.append(done)
    else:
        msg = {"id": "msg_68c1d9e3", "type": "message", "role": "assistant"}
        events.append(
            event(
                "response.output_item.added",
                output_index=0,
                item={**msg, "status": "in_progress", "content": []},
            )
        )
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        events.append(
            event(
                "response.content_part.added",
                item_id=msg["id"],
                output_index=0,
                content_index=0,
                part=part,
            )
        )
        events.extend(
            event(
                "response.output_text.delta",
                item_id=msg["id"],
                output_index=0,
                content_index=0,
                delta=_token(i),
                logprobs=[],
            )
            for i in range(spec.n)
        )
        if spec.stall:
            return events[: spec.stall + 3]
        text = "".join(_token(i) for i in range(spec.n))
        events.append(
            event(
                "response.output_text.done",
                item_id=msg["id"],
                output_index=0,
                content_index=0,
                text=text,
                logprobs=[],
            )
        )
        whole = {**part, "text": text}
        events.append(
            event(
                "response.content_part.done",
                item_id=msg["id"],
                output_index=0,
                content_index=0,
                part=whole,
            )
        )
        done = {**msg, "status": "completed", "content": [whole]}
        events.append(event("response.output_item.done", output_index=0, item=done))
        output.append(done)
    usage = {
        "input_tokens": 12,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": spec.n,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": spec.n + 12,
    }
    final = {**head, "status": "completed", "output": output, "usage": usage}
    events.append(event("response.completed", response=final))
    return events


def render_events(spec: Spec) -> list[bytes]:
    """Each SSE event of the stream, as its wire bytes."""
    if spec.fmt == "openai":
        return _openai(spec)
    if spec.fmt == "anthropic":
        return _anthropic(spec)
    if spec.fmt == "responses":
        return _responses(spec)
    msg = f"unknown format {spec.fmt!r}"
    raise ValueError(msg)
