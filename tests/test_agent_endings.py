"""Two-turn agent runs on today's endings: Claude's server tools that pause, Claude's adaptive
thinking with a tool call, Gemini's parallel calls with one signature.

Each scripts the provider's bytes on a real local server and checks the JSON the agent sent
on the second turn; each runs through ``Agent.run`` and ``Agent.run_async``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import blazen
from blazen import Agent, Llm, tool
from blazen.testing import Reply

from .conftest import fixture_bytes, model_for

CITIES = {"Paris": "18 C", "London": "14 C"}


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return CITIES.get(city, "unknown")


@tool
def lookup(q: str) -> str:
    """Look a fact up."""
    return "Io orbits Jupiter in 1.77 days."


def anthropic_text(text: str) -> bytes:
    return (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_2",'
        b'"type":"message","role":"assistant","model":"claude-opus-4-8","content":[],'
        b'"usage":{"input_tokens":50,"output_tokens":1}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"' + text.encode() + b'"}}\n\n'
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
        b'"end_turn"},"usage":{"output_tokens":9}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )


def gemini_text(text: str) -> bytes:
    return (
        b'data: {"candidates":[{"content":{"parts":[{"text":"' + text.encode() + b'"}],'
        b'"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":90,'
        b'"candidatesTokenCount":8,"totalTokenCount":98}}\r\n\r\n'
    )


def run(agent: Agent, question: str, mode: str) -> blazen.AgentResult:
    if mode == "sync":
        return agent.run(question)
    return asyncio.run(agent.run_async(question))


MODES = ["sync", "async"]


@pytest.mark.parametrize("mode", MODES)
def test_claude_web_search_pauses_and_the_run_continues_it(server, mode):
    """A paused turn (continuing off in the stream) is the run's next turn, content verbatim."""
    model = model_for("anthropic", server, max_retries=0, max_continuations=0)
    server.add(
        Reply.sse(fixture_bytes("anthropic", "pause_turn_web_search.sse")),
        Reply.sse(fixture_bytes("anthropic", "pause_turn_continued.sse")),
    )
    agent = Agent(model, tools=[get_weather, Llm.server_tool("web_search", max_uses=3)])
    result = run(agent, "Quantum news?", mode)
    assert result.iterations == 2 and result.finish_reason == "stop"
    assert result.text.startswith("IBM unveiled")
    assert result.tool_calls == ()  # the search ran on Anthropic's side
    first, second = (r.json() for r in server.requests)
    assert [t.get("type", "function") for t in first["tools"]] == [
        "function",
        "web_search_20260318",
    ]
    assert second["messages"][-1]["role"] == "assistant"
    blocks = [b["type"] for b in second["messages"][-1]["content"]]
    assert blocks == ["text", "server_tool_use", "web_search_tool_result"]


@pytest.mark.parametrize("mode", MODES)
def test_claude_web_search_pause_continues_inside_one_turn_by_default(server, mode):
    """With the default max_continuations the stream continues it: one turn of the run."""
    model = model_for("anthropic", server, max_retries=0)
    server.add(
        Reply.sse(fixture_bytes("anthropic", "pause_turn_web_search.sse")),
        Reply.sse(fixture_bytes("anthropic", "pause_turn_continued.sse")),
    )
    agent = Agent(model, tools=[Llm.server_tool("web_search")])
    result = run(agent, "Quantum news?", mode)
    assert result.iterations == 1 and len(server.requests) == 2
    assert result.usage.completion_tokens == 120 + 85
    (answer,) = [m for m in result.messages if m.role == "assistant"]
    assert len(answer.provider_items[0].data) == 5


@pytest.mark.parametrize("mode", MODES)
def test_claude_adaptive_thinking_with_a_tool_call_sends_the_signed_thinking_back(server, mode):
    """Adaptive thinking, display omitted: the empty signed thinking goes back before tool_use."""
    model = model_for("anthropic", server, max_retries=0)
    server.add(
        Reply.sse(fixture_bytes("anthropic", "adaptive_thinking_omitted.sse")),
        Reply.sse(anthropic_text("Io takes 1.77 days.")),
    )
    agent = Agent(
        model,
        tools=[lookup],
        reasoning_budget="adaptive",
        reasoning_display="omitted",
        reasoning_effort="high",
    )
    result = run(agent, "How long is Io's orbit?", mode)
    assert result.text == "Io takes 1.77 days." and result.iterations == 2
    first, second = (r.json() for r in server.requests)
    assert first["thinking"] == {"type": "adaptive", "display": "omitted"}
    assert first["output_config"] == {"effort": "high"}
    turn = second["messages"][1]
    assert turn["role"] == "assistant"
    thinking, text, call = turn["content"]
    assert thinking["type"] == "thinking" and thinking["thinking"] == ""
    assert thinking["signature"].startswith("EqQB")
    assert (text["type"], call["type"], call["input"]) == ("text", "tool_use", {"q": "orbit of Io"})
    (results,) = second["messages"][2:]
    assert results["content"][0]["tool_use_id"] == "toolu_01AdaptLookup5"


@pytest.mark.parametrize("mode", MODES)
def test_gemini_parallel_calls_send_the_one_signature_back_on_the_first_call(server, mode):
    """Two calls, one signature: the next turn signs the first call's part alone."""
    model = model_for("gemini", server, max_retries=0)
    server.add(
        Reply.sse(fixture_bytes("gemini", "parallel_calls_one_signature.sse")),
        Reply.sse(gemini_text("Paris 18 C, London 14 C.")),
    )
    agent = Agent(model, tools=[get_weather])
    result = run(agent, "Weather in Paris and London?", mode)
    assert result.text == "Paris 18 C, London 14 C." and result.iterations == 2
    assert [r.output for r in result.tool_results] == ["18 C", "14 C"]
    second: dict[str, Any] = server.requests[1].json()
    model_turn, answers = second["contents"][1:]
    calls = [p for p in model_turn["parts"] if "functionCall" in p]
    assert [c["functionCall"]["args"] for c in calls] == [{"city": "Paris"}, {"city": "London"}]
    assert [("thoughtSignature" in c) for c in calls] == [True, False]
    assert [p["functionResponse"]["name"] for p in answers["parts"]] == ["get_weather"] * 2
