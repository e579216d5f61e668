"""Two-turn agent conversations in each provider's own wire format: the model asks for two
tools at once, the agent sends both results back in that provider's shape, the model answers.

Each case scripts the provider's real bytes on the local test server and asserts on the JSON
the agent actually sent; each runs through ``Agent.run`` and ``Agent.run_async``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, Optional

import attrs
import pytest

import blazen
from blazen import Agent, tool
from blazen.testing import RecordedRequest, Reply, StreamServer, openai_sse, sse_event

from .conftest import fixture_bytes

QUESTION = "What's the weather and the time in Paris?"
WEATHER = "18 C and sunny in Paris"
TIME = "14:05 in Europe/Paris"


@tool
def get_weather(location: str) -> str:
    """Current weather at a location.

    Args:
        location: A city name.
    """
    return WEATHER if location == "Paris" else "unknown"


@tool
def get_time(tz: str) -> str:
    """The local time in an IANA time zone."""
    return TIME if tz == "Europe/Paris" else "unknown"


@attrs.frozen
class Wire:
    """One provider's script: its model, its two replies, and how results must come back."""

    model: Callable[[StreamServer], blazen.ChatModel]
    replies: tuple[Reply, Reply]
    answer: str
    #: The ids the provider gave the calls; None where blazen makes them up (Gemini).
    call_ids: Optional[tuple[str, str]]
    check_second_request: Callable[[RecordedRequest], None]


def check_openai(sent: RecordedRequest) -> None:
    body = sent.json()
    assert sent.path == "/v1/chat/completions"
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["messages"][1] == {"role": "user", "content": QUESTION}
    assistant = body["messages"][2]
    assert assistant["role"] == "assistant"
    assert [
        (c["id"], c["type"], c["function"]["name"], c["function"]["arguments"])
        for c in assistant["tool_calls"]
    ] == [
        ("call_Bq2hFiTEKnN1RrG0LDRvRgm8", "function", "get_weather", '{"location": "Paris"}'),
        ("call_Ux4mZ8VfO2tPqA1bN9cD3eFg", "function", "get_time", '{"tz": "Europe/Paris"}'),
    ]
    # One tool message per call, in call order, each naming the call it answers.
    assert body["messages"][3:] == [
        {"role": "tool", "tool_call_id": "call_Bq2hFiTEKnN1RrG0LDRvRgm8", "content": WEATHER},
        {"role": "tool", "tool_call_id": "call_Ux4mZ8VfO2tPqA1bN9cD3eFg", "content": TIME},
    ]
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather", "get_time"]


ANSWER = ["It is 18 C and sunny ", "in Paris; it is 14:05."]


def check_anthropic(sent: RecordedRequest) -> None:
    body = sent.json()
    assert sent.path == "/v1/messages"
    assert body["system"] == "Be brief."
    assert body["messages"][0] == {"role": "user", "content": QUESTION}
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "I'll check the weather and the time."},
            {
                "type": "tool_use",
                "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                "name": "get_weather",
                "input": {"location": "Paris"},
            },
            {
                "type": "tool_use",
                "id": "toolu_01WmDvrQjxbrnrRd6pGEFXuu",
                "name": "get_time",
                "input": {"tz": "Europe/Paris"},
            },
        ],
    }
    # Both results in one user turn, right after the calls, as the Messages API requires.
    assert body["messages"][2:] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                    "content": WEATHER,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01WmDvrQjxbrnrRd6pGEFXuu",
                    "content": TIME,
                },
            ],
        }
    ]
    assert [t["name"] for t in body["tools"]] == ["get_weather", "get_time"]
    assert body["tools"][0]["input_schema"] == get_weather.parameters


def anthropic_answer() -> list[bytes]:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_02",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 620, "output_tokens": 1},
        },
    }
    events = [
        sse_event(start, "message_start"),
        sse_event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        ),
    ]
    events += [
        sse_event(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
            "content_block_delta",
        )
        for t in ANSWER
    ]
    events += [
        sse_event({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        sse_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 14},
            },
            "message_delta",
        ),
        sse_event({"type": "message_stop"}, "message_stop"),
    ]
    return events


def check_gemini(sent: RecordedRequest) -> None:
    body = sent.json()
    assert sent.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert body["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": QUESTION}]},
        {
            "role": "model",
            # The first call's thoughtSignature comes back on the same part, as it came.
            "parts": [
                {
                    "functionCall": {"name": "get_weather", "args": {"location": "Paris"}},
                    "thoughtSignature": "CiQB0e2Kb8ZqY3pT1uVw0sLh3gR2mZkQpXyN4a1bC2dE3fG4hI0KZgHR7Ypq",
                },
                {"functionCall": {"name": "get_time", "args": {"tz": "Europe/Paris"}}},
            ],
        },
        # Gemini answers calls by name, all in one turn; a response must be an object.
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"result": WEATHER}}},
                {"functionResponse": {"name": "get_time", "response": {"result": TIME}}},
            ],
        },
    ]
    declarations = body["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declarations] == ["get_weather", "get_time"]


def gemini_answer() -> list[bytes]:
    def candidate(text: str, finish: Optional[str] = None) -> dict[str, Any]:
        cand: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
        if finish:
            cand["finishReason"] = finish
        return {"candidates": [cand], "modelVersion": "gemini-2.5-flash"}

    last = candidate(ANSWER[1], "STOP")
    last["usageMetadata"] = {
        "promptTokenCount": 160,
        "candidatesTokenCount": 14,
        "totalTokenCount": 174,
    }
    return [sse_event(candidate(ANSWER[0])), sse_event(last)]


def check_ollama(sent: RecordedRequest) -> None:
    body = sent.json()
    assert sent.path == "/api/chat"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"name": "get_weather", "arguments": {"location": "Paris"}}},
                {"function": {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}},
            ],
        },
        # Ollama matches a result to its call by tool name.
        {"role": "tool", "content": WEATHER, "tool_name": "get_weather"},
        {"role": "tool", "content": TIME, "tool_name": "get_time"},
    ]
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather", "get_time"]


def ollama_answer() -> list[bytes]:
    def line(obj: dict[str, Any]) -> bytes:
        return (
            json.dumps({"model": "qwen3:8b", "created_at": "2025-08-14T10:21:02Z", **obj}).encode()
            + b"\n"
        )

    lines = [line({"message": {"role": "assistant", "content": t}, "done": False}) for t in ANSWER]
    lines.append(
        line(
            {
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": 260,
                "eval_count": 14,
            }
        )
    )
    return lines


WIRES = {
    "openai": Wire(
        model=lambda server: blazen.Providers.openai(api_key="sk-test", base_url=server.base_url),
        replies=(
            Reply.sse(fixture_bytes("openai", "parallel_tool_calls.sse")),
            Reply.sse(openai_sse(ANSWER)),
        ),
        answer="It is 18 C and sunny in Paris; it is 14:05.",
        call_ids=("call_Bq2hFiTEKnN1RrG0LDRvRgm8", "call_Ux4mZ8VfO2tPqA1bN9cD3eFg"),
        check_second_request=check_openai,
    ),
    "anthropic": Wire(
        model=lambda server: blazen.Providers.anthropic(api_key="sk-ant-test", base_url=server.url),
        replies=(
            Reply.sse(fixture_bytes("anthropic", "parallel_tool_calls.sse")),
            Reply.sse(anthropic_answer()),
        ),
        answer="".join(ANSWER),
        call_ids=("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "toolu_01WmDvrQjxbrnrRd6pGEFXuu"),
        check_second_request=check_anthropic,
    ),
    "gemini": Wire(
        model=lambda server: blazen.Providers.gemini(
            api_key="gm-test", base_url=server.url + "/v1beta"
        ),
        replies=(
            Reply.sse(fixture_bytes("gemini", "parallel_tool_calls.sse"), transfer="close"),
            Reply.sse(gemini_answer(), transfer="close"),
        ),
        answer="".join(ANSWER),
        call_ids=None,
        check_second_request=check_gemini,
    ),
    "ollama": Wire(
        model=lambda server: blazen.Providers.ollama(base_url=server.url),
        replies=(
            Reply(
                headers={"Content-Type": "application/x-ndjson"},
                body=[fixture_bytes("ollama", "parallel_tool_calls.ndjson")],
            ),
            Reply(headers={"Content-Type": "application/x-ndjson"}, body=ollama_answer()),
        ),
        answer="".join(ANSWER),
        call_ids=("call_k3dl9q2w", "call_v8mx1p0r"),
        check_second_request=check_ollama,
    ),
}


def run_agent(agent: Agent, mode: str, **callbacks: Any) -> Any:
    if mode == "sync":
        return agent.run(QUESTION, **callbacks)
    return asyncio.run(agent.run_async(QUESTION, **callbacks))


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("wire", list(WIRES.values()), ids=list(WIRES))
def test_parallel_tool_call_round_trips_in_the_providers_format(wire: Wire, mode: str) -> None:
    """Two calls in one turn run, their results go back in the provider's shape, the model
    answers, and exactly one done reports it."""
    events: list[tuple[str, Any]] = []
    with StreamServer(wire.replies) as server:
        agent = Agent(wire.model(server), tools=[get_weather, get_time], system_prompt="Be brief.")
        result = run_agent(
            agent,
            mode,
            on_chunk=lambda c: events.append(("chunk", c)),
            on_tool_call=lambda c: events.append(("tool_call", c)),
            on_tool_result=lambda r: events.append(("tool_result", r)),
            on_done=lambda r: events.append(("done", r)),
            on_error=lambda e: events.append(("error", e)),
        )
        requests = list(server.requests)
    assert result is not None, [e for k, e in events if k == "error"]
    assert result.text == result.output == wire.answer
    assert result.iterations == 2 and result.finish_reason == "stop"
    ids = tuple(c.id for c in result.tool_calls)
    assert ids == wire.call_ids if wire.call_ids else len(set(ids)) == 2 and all(ids)
    assert [(c.name, c.arguments()) for c in result.tool_calls] == [
        ("get_weather", {"location": "Paris"}),
        ("get_time", {"tz": "Europe/Paris"}),
    ]
    assert [r.content for r in result.tool_results] == [WEATHER, TIME]
    kinds = [k for k, _ in events]
    assert kinds.count("done") == 1 and kinds[-1] == "done" and "error" not in kinds
    assert [e.call.id for k, e in events if k == "tool_result"] == list(ids)
    assert len(requests) == 2
    wire.check_second_request(requests[1])
