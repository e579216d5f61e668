"""Reasoning round trips: what a thinking model said on one turn comes back on the next.

Anthropic refuses a tool-use turn whose thinking blocks (with their signatures, and
``redacted_thinking`` blocks as they came) are missing; Gemini 2.5 and 3 refuse a function
call whose ``thoughtSignature`` is not back on its part; DeepSeek's thinking mode refuses a
tool-call turn without its ``reasoning_content``. Each case replays the provider's wire bytes
on the loopback server, runs a real two-turn agent (or appends ``resp.message``), and
asserts on the bytes of the second request.
"""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest

import blazen
from blazen import Agent, Llm, ReasoningPart, tool
from blazen.testing import Reply, StreamServer, openai_sse, sse_event

from .conftest import fixture_bytes

SIGNATURE = (
    "EuYBCkQYAiJAgCs1le6/Pol5Z4/JMomVOouGrWdhYNsH3ukzUECbB6iWrSQtsQuRHJID6lWV0iSl09HYgnLvWFFXzcYl"
    "3cPuzTI/RXO4pe0gHGZ1BAAHgR6NmaWQtBYTUkT4S7oJogJphHV5+eZFU3ROD3Z7fAgiqJn/aJT3Ou8A7QAa1TMcbIMO"
    "Mbo0f3j0JY0eDb2+CqN7ihcG/+WPTXpiaREtB4qK+hVyJiO2jFh/9f5/vUk0ZIPO6VM3w4bdoD2Y0g+8Q8G9I9CjXTnG"
    "q0sMjl4c2ae2ZnA=="
)
REDACTED = (
    "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB4URj"
    "/c2c2fL3zYmzKeYxDeIg=="
)
THOUGHT_SIGNATURE = "CiwBjz1rX5W4B1nBqJ3g9FJ2sB8m3oTq0Lh2gYx7tWc8fR5pQ1nK0vZ4eD6uA=="
CALL_SIGNATURE = (
    "CmkBjz1rXx4nTq2Lb7Vw9Fh3Kd8sJ1mP0qR5tY6uZ2vW3xA4yB5zC6dE7fG8hI9jK0lM1nO2pQ3rS4tU5vW6xY7zA8bC9"
    "dE0fG1hI2jK3lM4nO5pQ6rS7tU8vW9xY0zA1bC2dE3fG4hI5jK6"
)
WEATHER = "18 C and sunny in Paris"


@tool
def get_weather(location: str) -> str:
    """Current weather at a location."""
    return WEATHER


@tool(name="get_weather")
def broken_weather(location: str) -> str:
    """Current weather at a location (its backend is down)."""
    raise RuntimeError("weather backend unreachable")


def anthropic_answer(text: str = "It is 18 C and sunny.") -> Reply:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_02",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 620, "output_tokens": 1},
        },
    }
    block = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": text},
    }
    end = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": 9},
    }
    return Reply.sse(
        [
            sse_event(start, "message_start"),
            sse_event(block, "content_block_start"),
            sse_event(delta, "content_block_delta"),
            sse_event({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            sse_event(end, "message_delta"),
            sse_event({"type": "message_stop"}, "message_stop"),
        ]
    )


def gemini_answer(text: str = "It is 18 C and sunny.") -> Reply:
    obj = {
        "candidates": [
            {
                "content": {"parts": [{"text": text}], "role": "model"},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 160,
            "candidatesTokenCount": 9,
            "totalTokenCount": 169,
        },
        "modelVersion": "gemini-3-pro-preview",
    }
    return Reply.sse([sse_event(obj)], transfer="close")


def anthropic(server: StreamServer) -> blazen.ChatModel:
    return blazen.Providers.anthropic(api_key="sk-ant-test", base_url=server.url)


def gemini(server: StreamServer) -> blazen.ChatModel:
    return blazen.Providers.gemini(api_key="gm-test", base_url=server.url + "/v1beta")


# -- Anthropic ----------------------------------------------------------------------------


def test_anthropic_thinking_block_and_signature_come_back_first_in_the_tool_use_turn() -> None:
    """The agent's second request carries the thinking block exactly as streamed, its
    signature byte for byte, before the text and the tool_use of that turn."""
    replies = [Reply.sse(fixture_bytes("anthropic", "thinking_tool_use.sse")), anthropic_answer()]
    with StreamServer(replies) as server:
        result = Agent(anthropic(server), tools=[get_weather]).run("Weather in Paris?")
        second = server.requests[1]
    assert result.text == "It is 18 C and sunny."
    turn = second.json()["messages"][1]
    assert turn == {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "The user wants the weather in Paris. I should call get_weather "
                "with location Paris.",
                "signature": SIGNATURE,
            },
            {"type": "text", "text": "Let me check the weather."},
            {
                "type": "tool_use",
                "id": "toolu_01CswdEQBMshySk6Y9DFKrfq",
                "name": "get_weather",
                "input": {"location": "Paris"},
            },
        ],
    }
    # Byte for byte: the signature's JSON text in the body is the one the server sent.
    assert json.dumps(SIGNATURE).encode() in second.body
    assert second.json()["messages"][2]["content"][0]["tool_use_id"] == (
        "toolu_01CswdEQBMshySk6Y9DFKrfq"
    )


def test_anthropic_redacted_thinking_comes_back_as_it_came_and_in_order() -> None:
    """A redacted_thinking block goes back with its data untouched, before the thinking block
    that followed it, then the tool call."""
    replies = [
        Reply.sse(fixture_bytes("anthropic", "redacted_thinking_tool_use.sse")),
        anthropic_answer(),
    ]
    with StreamServer(replies) as server:
        Agent(anthropic(server), tools=[get_weather]).run("Weather in Paris?")
        second = server.requests[1]
    blocks = second.json()["messages"][1]["content"]
    assert [b["type"] for b in blocks] == ["redacted_thinking", "thinking", "tool_use"]
    assert blocks[0] == {"type": "redacted_thinking", "data": REDACTED}
    assert blocks[1] == {
        "type": "thinking",
        "thinking": "I need the weather tool.",
        "signature": SIGNATURE[::-1],
    }
    assert json.dumps(REDACTED).encode() in second.body


def test_anthropic_streamed_and_whole_responses_give_the_same_turn() -> None:
    """``complete`` (one JSON body) and a stream of the same answer build equal messages."""
    body = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [
            {"type": "redacted_thinking", "data": REDACTED},
            {
                "type": "thinking",
                "thinking": "I need the weather tool.",
                "signature": SIGNATURE[::-1],
            },
            {
                "type": "tool_use",
                "id": "toolu_01Rd4ctedCa11Xq9",
                "name": "get_weather",
                "input": {"location": "Paris"},
            },
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 380, "output_tokens": 71},
    }
    req = Llm.completion_request([Llm.user("Weather in Paris?")], reasoning_budget=2048)
    with StreamServer(
        [
            Reply.json(body),
            Reply.sse(fixture_bytes("anthropic", "redacted_thinking_tool_use.sse")),
        ]
    ) as server:
        model = anthropic(server)
        whole = model.complete(req)
        streamed = blazen.Streaming.complete(model, req)
    assert whole.message == streamed.message
    assert whole.reasoning_parts == (
        ReasoningPart(kind="redacted", data=REDACTED, provider="anthropic"),
        ReasoningPart(
            text="I need the weather tool.", signature=SIGNATURE[::-1], provider="anthropic"
        ),
    )
    assert whole.reasoning == "I need the weather tool."


def test_anthropic_leaves_out_thinking_it_cannot_prove_and_other_providers_parts() -> None:
    """Unsigned thinking (which Claude refuses) and Gemini's signatures are not sent to Claude;
    Claude's signatures are not sent to Gemini or an OpenAI-format server."""
    turn = Llm.assistant(
        "Checking.",
        reasoning_parts=[
            ReasoningPart(text="unsigned", provider="anthropic"),
            ReasoningPart(kind="signature", signature=CALL_SIGNATURE, provider="gemini"),
            ReasoningPart(text="plain reasoning"),
            ReasoningPart(text="signed", signature=SIGNATURE, provider="anthropic"),
        ],
    )
    req = Llm.completion_request([Llm.user("Hi"), turn, Llm.user("Go on")])
    replies = [anthropic_answer(), gemini_answer(), Reply.sse(openai_sse(["ok"]))]
    with StreamServer(replies) as server:
        blazen.Streaming.complete(anthropic(server), req)
        blazen.Streaming.complete(gemini(server), req)
        blazen.Streaming.complete(
            blazen.Providers.openai(api_key="sk-test", base_url=server.base_url), req
        )
        to_claude, to_gemini, to_openai = (r.json() for r in server.requests)
    assert to_claude["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "signed", "signature": SIGNATURE},
        {"type": "text", "text": "Checking."},
    ]
    assert SIGNATURE not in json.dumps(to_gemini) and SIGNATURE not in json.dumps(to_openai)
    assert "plain reasoning" not in json.dumps(to_openai)  # OpenAI reads no reasoning back
    # Gemini gets its own signature back on the text, and nothing of Claude's.
    assert to_gemini["contents"][1] == {
        "role": "model",
        "parts": [{"text": "Checking.", "thoughtSignature": CALL_SIGNATURE}],
    }
    assert CALL_SIGNATURE not in json.dumps(to_claude)


# -- Gemini -------------------------------------------------------------------------------


def test_gemini_thought_and_call_signatures_come_back_on_their_own_parts() -> None:
    """The signed thought (its text streamed over two parts) comes back as one thought part
    with its signature, and the function call's signature on the functionCall part."""
    replies = [
        Reply.sse(fixture_bytes("gemini", "thought_signature_call.sse"), transfer="close"),
        gemini_answer(),
    ]
    with StreamServer(replies) as server:
        result = Agent(gemini(server), tools=[get_weather]).run("Weather in Paris?")
        second = server.requests[1]
    assert result.text == "It is 18 C and sunny."
    body = second.json()
    assert body["contents"][1] == {
        "role": "model",
        "parts": [
            {
                "text": "**Checking the weather**\n\nThe user asks about Paris. I will call "
                "get_weather.",
                "thought": True,
                "thoughtSignature": THOUGHT_SIGNATURE,
            },
            {
                "functionCall": {"name": "get_weather", "args": {"location": "Paris"}},
                "thoughtSignature": CALL_SIGNATURE,
            },
        ],
    }
    assert body["contents"][2] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "get_weather", "response": {"result": WEATHER}}}],
    }
    for signature in (THOUGHT_SIGNATURE, CALL_SIGNATURE):
        assert json.dumps(signature).encode() in second.body


def test_gemini_text_signature_on_a_trailing_empty_part_rides_on_the_answer_text() -> None:
    """Gemini 3 signs a plain answer on a last, empty part: it comes back on the text part."""
    with StreamServer(
        [
            Reply.sse(fixture_bytes("gemini", "text_signature.sse"), transfer="close"),
            gemini_answer(),
        ]
    ) as server:
        model = gemini(server)
        first = blazen.Streaming.complete(model, Llm.completion_request([Llm.user("Weather?")]))
        assert first.content == "It is 18 C and sunny in Paris."
        assert first.reasoning is None
        (part,) = first.reasoning_parts
        assert part.kind == "signature" and part.tool_call_id is None
        again = Llm.completion_request([Llm.user("Weather?"), first.message, Llm.user("Sure?")])
        blazen.Streaming.complete(model, again)
        sent = server.requests[1].json()
    assert sent["contents"][1] == {
        "role": "model",
        "parts": [{"text": "It is 18 C and sunny in Paris.", "thoughtSignature": part.signature}],
    }


def test_gemini_agent_renaming_a_call_keeps_its_signature_on_it() -> None:
    """Gemini gives calls no ids; when the agent renames a repeated id, the call's signature
    follows it to the new id."""
    call = {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {
                            "functionCall": {
                                "id": "c1",
                                "name": "get_weather",
                                "args": {"location": "Paris"},
                            },
                            "thoughtSignature": CALL_SIGNATURE,
                        }
                    ],
                    "role": "model",
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ]
    }
    replies = [
        Reply.sse([sse_event(call)], transfer="close"),
        Reply.sse([sse_event(call)], transfer="close"),
        gemini_answer(),
    ]
    with StreamServer(replies) as server:
        result = Agent(gemini(server), tools=[get_weather]).run("Weather twice?")
        third = server.requests[2].json()
    ids = [c.id for c in result.tool_calls]
    assert ids[0] == "c1" and ids[1] != "c1"
    model_turns = [c for c in third["contents"] if c["role"] == "model"]
    assert [t["parts"][0]["thoughtSignature"] for t in model_turns] == [CALL_SIGNATURE] * 2
    renamed = [m for m in result.messages if m.role == "assistant"][1]
    assert renamed.reasoning_parts[0].tool_call_id == ids[1]


# -- OpenAI-compatible servers ------------------------------------------------------------


def test_deepseek_gets_its_reasoning_content_back_on_the_tool_call_turn() -> None:
    """DeepSeek's thinking mode refuses a tool-call turn without its reasoning_content: the
    agent's second request carries it on the assistant message."""
    replies = [
        Reply.sse(fixture_bytes("deepseek", "reasoning_tool_call.sse")),
        Reply.sse(openai_sse(["It is 18 C."])),
    ]
    with StreamServer(replies) as server:
        model = blazen.Providers.deepseek(api_key="sk-test", base_url=server.base_url)
        Agent(model, tools=[get_weather]).run("Weather in Paris?")
        turn = server.requests[1].json()["messages"][1]
    assert turn["role"] == "assistant"
    assert turn["reasoning_content"] == "The user wants Paris weather. Call get_weather."
    assert turn["tool_calls"][0]["id"] == "call_00_Xq3mT9vB2nL8kR4wP6yZ1cD"


@pytest.mark.parametrize(
    ("factory", "field"),
    [
        (lambda url: blazen.Providers.openai(api_key="k", base_url=url), None),
        (lambda url: blazen.Providers.openrouter(api_key="k", base_url=url), None),
        (
            lambda url: blazen.Providers.openai_compat(
                "kimi", base_url=url, reasoning_field="reasoning_content"
            ),
            "reasoning_content",
        ),
        (
            lambda url: blazen.Providers.deepseek(api_key="k", base_url=url, reasoning_field=None),
            None,
        ),
    ],
    ids=["openai", "openrouter", "compat-option", "deepseek-turned-off"],
)
def test_reasoning_text_goes_back_only_where_the_server_wants_it(factory: Any, field: Any) -> None:
    """Most servers never read reasoning back (and strict ones refuse unknown fields); the
    ``reasoning_field`` option names the field for one that does."""
    turn = Llm.assistant("Answer.", reasoning_parts=[ReasoningPart(text="Because.")])
    req = Llm.completion_request([Llm.user("Q"), turn, Llm.user("Q2")])
    with StreamServer([Reply.sse(openai_sse(["ok"]))]) as server:
        blazen.Streaming.complete(factory(server.base_url), req)
        sent = server.requests[0].json()["messages"][1]
    expected = {"role": "assistant", "content": "Answer."}
    if field is not None:
        expected[field] = "Because."
    assert sent == expected


def test_reasoning_field_option_is_checked_when_the_model_is_built() -> None:
    """A reasoning_field that is not a field name fails at once, saying what it takes."""
    with pytest.raises(TypeError, match="reasoning_field"):
        blazen.Providers.openai_compat("kimi", base_url="http://127.0.0.1:9/v1", reasoning_field=3)
    with pytest.raises(TypeError, match="reasoning_field"):
        blazen.Providers.openai_compat("kimi", base_url="http://127.0.0.1:9/v1", reasoning_field="")


def test_ollama_gets_plain_thinking_back_in_its_thinking_field() -> None:
    """Ollama's chat message has a ``thinking`` field; a thinking model's earlier turn uses it."""
    turn = Llm.assistant("Answer.", reasoning_parts=[ReasoningPart(text="Because.")])
    req = Llm.completion_request([Llm.user("Q"), turn, Llm.user("Q2")])
    line = {
        "model": "qwen3",
        "message": {"role": "assistant", "content": "ok"},
        "done": True,
        "done_reason": "stop",
    }
    reply = Reply(
        headers={"Content-Type": "application/x-ndjson"}, body=[json.dumps(line).encode() + b"\n"]
    )
    with StreamServer([reply]) as server:
        blazen.Streaming.complete(blazen.Providers.ollama(base_url=server.url), req)
        sent = server.requests[0].json()["messages"][1]
    assert sent == {"role": "assistant", "content": "Answer.", "thinking": "Because."}


# -- tool errors --------------------------------------------------------------------------


def test_a_raising_tool_reaches_each_provider_as_an_error_result() -> None:
    """The agent marks a raising tool's result as an error: Anthropic sees ``is_error: true``,
    Gemini an ``error`` response, an OpenAI-format server the text."""
    call_claude = Reply.sse(fixture_bytes("anthropic", "thinking_tool_use.sse"))
    call_gemini = Reply.sse(fixture_bytes("gemini", "thought_signature_call.sse"), transfer="close")
    call_openai = Reply.sse(fixture_bytes("deepseek", "reasoning_tool_call.sse"))
    replies = [
        call_claude,
        anthropic_answer(),
        call_gemini,
        gemini_answer(),
        call_openai,
        Reply.sse(openai_sse(["Sorry."])),
    ]
    tools = [broken_weather]
    with StreamServer(replies) as server:
        for model in (
            anthropic(server),
            gemini(server),
            blazen.Providers.deepseek(api_key="k", base_url=server.base_url),
        ):
            result = Agent(model, tools=tools).run("Weather in Paris?")
            assert result.tool_results[0].is_error
        claude, gem, oai = (server.requests[i].json() for i in (1, 3, 5))
    block = claude["messages"][2]["content"][0]
    assert block["is_error"] is True and "weather backend unreachable" in block["content"]
    response = gem["contents"][2]["parts"][0]["functionResponse"]
    assert set(response["response"]) == {"error"}
    assert "weather backend unreachable" in response["response"]["error"]
    result_msg = oai["messages"][2]
    assert result_msg["role"] == "tool" and "weather backend unreachable" in result_msg["content"]
    assert "is_error" not in result_msg


def test_tool_result_is_error_is_a_flag_of_tool_results_only() -> None:
    """``is_error`` must be a bool, and only a tool result can be an error."""
    assert Llm.tool_result("call_1", "boom", is_error=True).is_error
    assert not Llm.tool_result("call_1", "fine").is_error
    with pytest.raises(TypeError, match="is_error"):
        Llm.tool_result("call_1", "boom", is_error="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only a tool result"):
        blazen.ChatMessage(role="user", content="hi", is_error=True)


# -- the values ---------------------------------------------------------------------------


def test_reasoning_parts_are_checked_values_that_copy_and_pickle() -> None:
    """A ReasoningPart refuses a kind it does not know or a part missing what its kind needs;
    responses and messages holding parts survive pickle and copy equal."""
    with pytest.raises(ValueError, match="kind"):
        ReasoningPart(kind="secret")
    with pytest.raises(ValueError, match="data"):
        ReasoningPart(kind="redacted")
    with pytest.raises(ValueError, match="signature"):
        ReasoningPart(kind="signature")
    with pytest.raises(TypeError, match="signature"):
        ReasoningPart(text="x", signature=b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ReasoningPart"):
        Llm.assistant("x", reasoning_parts=["thinking"])  # type: ignore[list-item]
    resp = blazen.CompletionResponse(
        content="",
        tool_calls=(blazen.ToolCall("c1", "f", "{}"),),
        reasoning_parts=(ReasoningPart(text="t", signature="s", provider="anthropic"),),
    )
    for clone in (pickle.loads(pickle.dumps(resp)), copy.deepcopy(resp)):
        assert clone == resp and clone.message == resp.message
    assert resp.message.content is None and resp.message.tool_calls == resp.tool_calls


def test_message_of_a_refused_answer_holds_the_refusal() -> None:
    """A refused answer's turn reads as it went: the refusal text, not an empty turn."""
    resp = blazen.CompletionResponse(content="", refusal="I can't help with that.")
    assert resp.message.content == "I can't help with that."
    assert blazen.CompletionResponse(content="").message.content == ""


@pytest.mark.parametrize(
    ("part", "why"),
    [
        ({"text": "x", "thoughtSignature": 7}, "thoughtSignature"),
        ({"functionCall": {"name": "f", "args": {}}, "thoughtSignature": ""}, "thoughtSignature"),
        ({"text": 5, "thought": True}, "text"),
    ],
)
def test_a_malformed_gemini_signature_ends_the_stream_with_one_typed_error(
    part: Any, why: str
) -> None:
    """A signature that is not text is a malformed payload: one on_error, no done."""
    obj = {"candidates": [{"content": {"parts": [part], "role": "model"}, "finishReason": "STOP"}]}
    events: list[Any] = []
    with StreamServer([Reply.sse([sse_event(obj)], transfer="close")]) as server:
        blazen.Streaming.complete(
            gemini(server),
            Llm.completion_request([Llm.user("hi")]),
            on_done=lambda *a: events.append(("done", a)),
            on_error=lambda e: events.append(("error", e)),
        )
    assert [k for k, _ in events] == ["error"]
    assert why in str(events[0][1])


def test_a_redacted_block_without_data_is_a_malformed_stream() -> None:
    """Anthropic's redacted_thinking carries its data; one without it is one typed error."""
    raw = fixture_bytes("anthropic", "redacted_thinking_tool_use.sse").replace(
        json.dumps(REDACTED).encode(), b"null"
    )
    events: list[Any] = []
    with StreamServer([Reply.sse(raw)]) as server:
        blazen.Streaming.complete(
            anthropic(server),
            Llm.completion_request([Llm.user("hi")]),
            on_done=lambda *a: events.append(("done", a)),
            on_error=lambda e: events.append(("error", e)),
        )
    assert [k for k, _ in events] == ["error"]
    assert "redacted_thinking" in str(events[0][1])


# -- OpenRouter's reasoning_details ---------------------------------------------------------


def _openrouter_chunk(delta: dict[str, Any], finish: Any = None) -> bytes:
    obj = {
        "id": "gen-1764590400-Kq2Lw9Rt8Yb1Mn3Kp5Vs",
        "provider": "Anthropic",
        "model": "anthropic/claude-sonnet-4.6",
        "object": "chat.completion.chunk",
        "created": 1764590400,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def openrouter_thinking_call() -> list[bytes]:
    """Claude through OpenRouter: reasoning text in two pieces, then its signature, then a call."""
    detail = {"type": "reasoning.text", "format": "anthropic-claude-v1", "index": 0}
    return [
        _openrouter_chunk(
            {
                "role": "assistant",
                "content": "",
                "reasoning": "Paris weather:",
                "reasoning_details": [{**detail, "text": "Paris weather:"}],
            }
        ),
        _openrouter_chunk(
            {
                "reasoning": " call the tool.",
                "reasoning_details": [{**detail, "text": " call the tool."}],
            }
        ),
        _openrouter_chunk({"reasoning_details": [{**detail, "text": "", "signature": SIGNATURE}]}),
        _openrouter_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "toolu_01OrCa11",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
                    }
                ]
            }
        ),
        _openrouter_chunk({}, finish="tool_calls"),
        b"data: [DONE]\n\n",
    ]


def test_openrouter_reasoning_details_come_back_merged_on_the_tool_call_turn() -> None:
    """OpenRouter's streamed reasoning_details pieces are merged by index and the agent's next
    request carries the entry, signature and all, on the assistant message."""
    replies = [Reply.sse(openrouter_thinking_call()), Reply.sse(openai_sse(["It is 18 C."]))]
    with StreamServer(replies) as server:
        model = blazen.Providers.openrouter(api_key="k", base_url=server.base_url)
        result = Agent(model, tools=[get_weather]).run("Weather in Paris?")
        turn = server.requests[1].json()["messages"][1]
    assert turn["reasoning_details"] == [
        {
            "type": "reasoning.text",
            "format": "anthropic-claude-v1",
            "index": 0,
            "text": "Paris weather: call the tool.",
            "signature": SIGNATURE,
        }
    ]
    assert "reasoning" not in turn and "reasoning_content" not in turn
    (part,) = next(m for m in result.messages if m.role == "assistant").reasoning_parts
    assert (part.provider, part.text, part.signature) == (
        "openrouter",
        "Paris weather: call the tool.",
        SIGNATURE,
    )


def test_openrouter_whole_response_details_and_encrypted_entries_round_trip() -> None:
    """A non-streamed answer's reasoning_details (an encrypted entry too) go back as they came,
    and only to OpenRouter: another OpenAI-format server gets none of them."""
    encrypted = {
        "type": "reasoning.encrypted",
        "data": REDACTED,
        "id": "rs_01",
        "format": "openai-responses-v1",
        "index": 0,
    }
    summary = {
        "type": "reasoning.summary",
        "summary": "Checked the tool.",
        "format": "openai-responses-v1",
        "index": 1,
    }
    body = {
        "id": "gen-1",
        "model": "openai/gpt-5",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Done.",
                    "reasoning_details": [encrypted, summary],
                },
                "finish_reason": "stop",
            }
        ],
    }
    with StreamServer(
        [Reply.json(body), Reply.sse(openai_sse(["ok"])), Reply.sse(openai_sse(["ok"]))]
    ) as server:
        router = blazen.Providers.openrouter(api_key="k", base_url=server.base_url)
        resp = router.complete(Llm.completion_request([Llm.user("Q")]))
        kinds = [p.kind for p in resp.reasoning_parts]
        again = Llm.completion_request([Llm.user("Q"), resp.message, Llm.user("Q2")])
        blazen.Streaming.complete(router, again)
        blazen.Streaming.complete(
            blazen.Providers.openai(api_key="k", base_url=server.base_url), again
        )
        to_router, to_openai = (r.json()["messages"][1] for r in server.requests[1:])
    assert kinds == ["redacted", "thinking"]
    assert to_router["reasoning_details"] == [encrypted, summary]
    assert "reasoning_details" not in to_openai


def test_a_hand_built_openrouter_part_without_json_is_a_clear_error() -> None:
    """A part claiming to be OpenRouter's whose data is not its JSON entry fails before sending."""
    turn = Llm.assistant(
        "x", reasoning_parts=[ReasoningPart(text="t", data="not json", provider="openrouter")]
    )
    req = Llm.completion_request([Llm.user("Q"), turn, Llm.user("Q2")])
    with StreamServer([]) as server:
        router = blazen.Providers.openrouter(api_key="k", base_url=server.base_url)
        with pytest.raises(blazen.ValidationError, match="reasoning_details entry as JSON"):
            blazen.Streaming.complete(router, req)
        assert server.requests == []


# -- the answer's id ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reply", "expected"),
    [
        ("openai", Reply.sse(fixture_bytes("openai", "text.sse")), "chatcmpl-"),
        (
            "anthropic",
            Reply.sse(fixture_bytes("anthropic", "thinking_tool_use.sse")),
            "msg_01Th1nkT00lUse8",
        ),
        (
            "gemini",
            Reply.sse(fixture_bytes("gemini", "text_signature.sse"), transfer="close"),
            "tHmQaOvZKYuWxN8Pj9WnqAk",
        ),
    ],
)
def test_the_response_carries_the_providers_id_of_the_answer(
    name: str, reply: Reply, expected: str
) -> None:
    """``CompletionResponse.id`` is the provider's id of the answer (for logs and traces)."""
    with StreamServer([reply]) as server:
        model = {
            "openai": lambda: blazen.Providers.openai(api_key="k", base_url=server.base_url),
            "anthropic": lambda: anthropic(server),
            "gemini": lambda: gemini(server),
        }[name]()
        resp = blazen.Streaming.complete(model, Llm.completion_request([Llm.user("hi")]))
    assert resp.id is not None and resp.id.startswith(expected)
