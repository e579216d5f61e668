"""Two-turn agent conversations in each provider's own wire format: the model asks for two
tools at once, the agent sends both results back in that provider's shape, the model answers.

Each case scripts the provider's real bytes on the local test server and asserts on the JSON
the agent actually sent; each runs through ``Agent.run`` and ``Agent.run_async``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import attrs
import pytest

import blazen
from blazen import Agent, tool
from blazen.testing import RecordedRequest, Reply, StreamServer, openai_sse

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
    call_ids: tuple[str, str]
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


WIRES = {
    "openai": Wire(
        model=lambda server: blazen.Providers.openai(api_key="sk-test", base_url=server.base_url),
        replies=(
            Reply.sse(fixture_bytes("openai", "parallel_tool_calls.sse")),
            Reply.sse(openai_sse(["It is 18 C and sunny ", "in Paris; it is 14:05."])),
        ),
        answer="It is 18 C and sunny in Paris; it is 14:05.",
        call_ids=("call_Bq2hFiTEKnN1RrG0LDRvRgm8", "call_Ux4mZ8VfO2tPqA1bN9cD3eFg"),
        check_second_request=check_openai,
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
    assert [(c.id, c.name, c.arguments()) for c in result.tool_calls] == [
        (wire.call_ids[0], "get_weather", {"location": "Paris"}),
        (wire.call_ids[1], "get_time", {"tz": "Europe/Paris"}),
    ]
    assert [r.content for r in result.tool_results] == [WEATHER, TIME]
    kinds = [k for k, _ in events]
    assert kinds.count("done") == 1 and kinds[-1] == "done" and "error" not in kinds
    assert [e.call.id for k, e in events if k == "tool_result"] == list(wire.call_ids)
    assert len(requests) == 2
    wire.check_second_request(requests[1])
