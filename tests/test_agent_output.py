"""``Agent(output=...)``: tools first, then a typed final answer, on OpenAI and Anthropic."""

from __future__ import annotations

import json

import pytest

import blazen
from blazen import OutputValidationError
from blazen.testing import Reply, openai_tool_sse

from .conftest import model_for, sse_reply
from .test_output import ANSWER, EXPECTED, STRICT_SCHEMA, Weather


def lookup(city: str) -> str:
    """Look the weather up.

    Args:
        city: The city.
    """
    return f"18.5 C, wind 12 km/h W, cloudy in {city}"


def _content_sse(text: str) -> Reply:
    frames = [
        {"choices": [{"index": 0, "delta": {"content": text}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    return Reply.sse(("".join(f"data: {json.dumps(f)}\n\n" for f in frames) + "data: [DONE]\n\n").encode())


def test_an_openai_agent_calls_tools_then_answers_with_a_validated_instance(server):
    """The tool turn has no output; the answer turn's Weather is the result's output."""
    model = model_for("openai", server, max_retries=0)
    server.add(
        Reply.sse(openai_tool_sse([("call_1", "lookup", {"city": "Paris"})])),
        sse_reply("structured_output.sse"),
    )
    agent = blazen.Agent(model, tools=[lookup], output=Weather)
    result = agent.run("Weather in Paris?")
    assert result.output == EXPECTED and result.text == ANSWER
    assert result.iterations == 2 and result.tool_results[0].content.startswith("18.5 C")
    for sent in server.requests:
        assert sent.json()["response_format"]["json_schema"]["schema"] == STRICT_SCHEMA


def test_an_anthropic_agent_may_call_its_tools_or_the_answers_tool(server):
    """With the forced-tool mode, tools plus output= send both tools with tool_choice any; the
    answer tool ends the run."""
    model = model_for("anthropic", server, max_retries=0, structured_output="tool")
    tool_turn = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"city": "Paris"}}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    server.add(
        _anthropic_sse(tool_turn),
        sse_reply("structured_output.sse", "anthropic"),
    )
    result = blazen.Agent(model, tools=[lookup], output=Weather).run("Weather in Paris?")
    assert result.output == EXPECTED and result.iterations == 2
    first = server.requests[0].json()
    assert [t["name"] for t in first["tools"]] == ["lookup", "Weather"]
    assert first["tool_choice"] == {"type": "any"}


def test_an_answer_that_is_not_the_type_ends_the_run_with_the_validation_error(server):
    """The agent's run fails with OutputValidationError, its raw text kept."""
    model = model_for("openai", server, max_retries=0)
    server.add(_content_sse("It is sunny."))
    with pytest.raises(OutputValidationError) as info:
        blazen.Agent(model, output=Weather).run("Weather in Paris?")
    assert info.value.raw == "It is sunny."


def test_an_agent_output_type_is_checked_when_the_agent_is_built(server):
    """A type a strict schema cannot be, or a tool of the same name, fails at Agent(...)."""
    model = model_for("openai", server)
    with pytest.raises(TypeError, match="output= must be"):
        blazen.Agent(model, output=str)

    def Weather(city: str) -> str:
        """Clash."""
        return city

    with pytest.raises(ValueError, match="named 'Weather'"):
        blazen.Agent(model, tools=[Weather], output=globals()["Weather"])


def _anthropic_sse(message: dict) -> Reply:
    """``message`` (one tool_use block) streamed as Anthropic's events."""
    block = message["content"][0]
    events = [
        ("message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"]}, "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return Reply.sse("".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events).encode())

