"""The agent loop on the Responses API wire: reasoning items go back, byte for byte, every turn."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import blazen
from blazen import Agent, tool
from blazen.testing import Reply, StreamServer

from .conftest import fixture_bytes

QUESTION = "What's the weather and the time in Paris?"


@tool
def get_weather(location: str, unit: str = "celsius") -> str:
    """Current weather at a location."""
    return f"18 {unit} in {location}"


@tool
def get_time(tz: str) -> str:
    """The local time in an IANA time zone."""
    return f"14:05 in {tz}"


def _reasoning_item(name: str) -> dict[str, Any]:
    """The reasoning item of a fixture's response.output_item.done, as OpenAI sent it."""
    for line in fixture_bytes("responses", name).decode().splitlines():
        if line.startswith("data:"):
            obj = json.loads(line[5:])
            if obj["type"] == "response.output_item.done" and obj["item"]["type"] == "reasoning":
                item: dict[str, Any] = obj["item"]
                return item
    raise AssertionError(name)


def _run(agent: Agent, mode: str) -> Any:
    if mode == "sync":
        return agent.run(QUESTION)
    return asyncio.run(agent.run_async(QUESTION))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_each_turn_sends_back_every_earlier_reasoning_item_and_call_output(mode):
    """Three turns (reason+call, reason+call, answer): each request carries what came before."""
    replies = [
        Reply.sse(fixture_bytes("responses", name))
        for name in (
            "reasoning_tool_call.sse",
            "reasoning_tool_call_2.sse",
            "reasoning_text_answer.sse",
        )
    ]
    with StreamServer(replies) as server:
        model = blazen.Providers.openai(
            api_key="k", base_url=server.base_url, model="gpt-5", api="responses", max_retries=0
        )
        agent = Agent(model, tools=[get_weather, get_time], system_prompt="Be brief.")
        result = _run(agent, mode)
        bodies = [r.json() for r in server.requests]
    assert result.text == "It is 18 °C in Paris." and result.iterations == 3
    assert [c.id for c in result.tool_calls] == ["call_wx01", "call_tm03"]
    first_item = _reasoning_item("reasoning_tool_call.sse")
    second_item = _reasoning_item("reasoning_tool_call_2.sse")
    for body in bodies:
        # Stateless: nothing is stored, the encrypted reasoning is asked for each time.
        assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
        assert body["instructions"] == "Be brief."
    assert bodies[0]["input"] == [{"role": "user", "content": QUESTION}]
    second = bodies[1]["input"]
    assert second[1] == first_item  # the reasoning item, exactly as output_item.done gave it
    assert second[2] == {
        "type": "function_call",
        "call_id": "call_wx01",
        "name": "get_weather",
        "arguments": '{"location":"Paris","unit":"celsius"}',
    }
    assert second[3] == {
        "type": "function_call_output",
        "call_id": "call_wx01",
        "output": "18 celsius in Paris",
    }
    third = bodies[2]["input"]
    assert third[:4] == second
    assert third[4] == second_item and third[5]["call_id"] == "call_tm03"
    assert third[6] == {
        "type": "function_call_output",
        "call_id": "call_tm03",
        "output": "14:05 in Europe/Paris",
    }
    # The encrypted content goes back as the very text it came as.
    raw = server.requests[2].body.decode()
    assert raw.count(first_item["encrypted_content"]) == 1
    assert raw.count(second_item["encrypted_content"]) == 1
