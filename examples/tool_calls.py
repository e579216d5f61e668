"""The seeds' tool-call example: each chunk carries the cumulative tool-call snapshot.

Replace your state with ``chunk.tool_calls`` on every chunk; never append.

    python examples/tool_calls.py
"""

from __future__ import annotations

import json
import sys

from _demo import model_or_demo, paced

from blazen import Llm, Streaming, ToolCall
from blazen.testing import Reply, sse

weather = Llm.tool(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def delta(tool_calls: list, finish: str | None = None) -> dict:
    return {"choices": [{"index": 0, "delta": {"tool_calls": tool_calls}, "finish_reason": finish}]}


recorded = sse(
    delta(
        [
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": ""},
            }
        ]
    ),
    *[
        delta([{"index": 0, "function": {"arguments": part}}])
        for part in ['{"ci', 'ty": "Os', 'lo"}']
    ],
    delta(
        [
            {
                "index": 1,
                "id": "call_2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Lima"}'},
            }
        ]
    ),
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
)
model = model_or_demo([Reply.sse(paced(recorded))])
req = Llm.completion_request(
    messages=[Llm.user("What is the weather in Oslo and in Lima?")],
    tools=[weather],
    tool_choice="auto",
)

tool_calls: tuple[ToolCall, ...] = ()


def handler(kind: str, *args: object) -> None:
    global tool_calls
    if kind == "chunk":
        chunk = args[0]
        if chunk.tool_calls:  # type: ignore[attr-defined]
            tool_calls = chunk.tool_calls  # type: ignore[attr-defined]
            print(f"snapshot: {[(t.name, t.arguments_json) for t in tool_calls]}")
        print(chunk.content_delta or "", end="")  # type: ignore[attr-defined]
    elif kind == "done":
        reason, _usage = args
        if reason == "tool_calls":
            for tc in tool_calls:
                print(f"[tool call] {tc.name}({json.dumps(tc.arguments())})")
    elif kind == "error":
        print(args[0], file=sys.stderr)


sys.exit(0 if Streaming.complete(model, req, handler) is not None else 1)
