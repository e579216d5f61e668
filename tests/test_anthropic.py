"""Anthropic Messages API: wire fixtures replayed over a real socket, and the request sent."""

from __future__ import annotations

import json

import pytest

import blazen
from blazen import Llm, Streaming
from blazen._kit import StreamState
from blazen.providers.anthropic import AnthropicWire
from blazen.testing import Recorder

from .conftest import sse_reply, stream

KEY = "sk-ant-api03-SECRET-0123456789"


@pytest.fixture
def model(server):
    return blazen.Providers.anthropic(api_key=KEY, base_url=server.url, max_retries=0)


def reply(name, **kw):
    return sse_reply(name, "anthropic", **kw)


def test_text_stream_delivers_deltas_usage_and_end_turn(server, model, req):
    """Text deltas arrive in order; ping delivers nothing; end_turn is a stop."""
    rec, resp = stream(server, model, req, reply("text.sse"))
    assert rec.text == "Why did the scarecrow win an award? He was outstanding in his field."
    assert rec.kinds == ["chunk"] * 4 + ["done"]
    assert rec.chunks[-1].is_final
    reason, usage = rec.done
    assert reason == "stop" and resp.raw_finish_reason == "end_turn"
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (14, 17, 31)
    assert resp.model == "claude-sonnet-4-5-20250929"


def test_parallel_tool_calls_assemble_input_json_fragments(server, model, req):
    """Two tool_use blocks after a text block: snapshots grow, ids and names set once."""
    rec, resp = stream(server, model, req, reply("parallel_tool_calls.sse"))
    assert resp.content == "I'll check the weather and the time."
    snapshots = [c.tool_calls for c in rec.chunks if c.tool_calls]
    assert [len(s) for s in snapshots] == sorted(len(s) for s in snapshots)
    growth = [s[0].arguments_json for s in snapshots if len(s) == 1]
    assert growth == ["", '{"locati', '{"location": "Par', '{"location": "Paris"}']
    assert [(c.id, c.name, c.arguments()) for c in resp.tool_calls] == [
        ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", {"location": "Paris"}),
        ("toolu_01WmDvrQjxbrnrRd6pGEFXuu", "get_time", {"tz": "Europe/Paris"}),
    ]
    assert rec.done[0] == "tool_calls" and resp.raw_finish_reason == "tool_use"
    assert rec.chunks[-1].tool_calls == resp.tool_calls


def test_tool_without_input_fragments_gets_empty_object_arguments(server, model, req):
    """A tool called with no arguments streams only an empty fragment: its input is {}."""
    _rec, resp = stream(server, model, req, reply("tool_empty_input.sse"))
    (call,) = resp.tool_calls
    assert (call.name, call.arguments_json, call.arguments()) == ("get_time", "{}", {})


def test_thinking_deltas_are_reasoning_and_signature_is_not_text(server, model, req):
    """thinking_delta becomes reasoning_delta; the signature never shows up as reasoning."""
    rec, resp = stream(server, model, req, reply("thinking.sse"))
    assert [c.reasoning_delta for c in rec.chunks if c.reasoning_delta] == [
        "The user asks 27 * 453.",
        " 27 * 453 = 12231.",
    ]
    assert resp.reasoning == "The user asks 27 * 453. 27 * 453 = 12231."
    assert "EqQB" not in resp.reasoning
    assert resp.content == "27 * 453 = 12,231"


def test_max_tokens_is_length(server, model, req):
    """stop_reason max_tokens normalises to length; the raw value is kept."""
    rec, resp = stream(server, model, req, reply("max_tokens.sse"))
    assert rec.done[0] == "length" and resp.raw_finish_reason == "max_tokens"
    assert resp.content == "Once upon a time, in a land far"


def test_refusal_stop_streams_its_explanation_as_a_refusal_delta(server, model, req):
    """stop_reason refusal: the text before it stays content, stop_details' explanation is
    the refusal, streamed as it arrives, and the answer ends content_filter."""
    rec, resp = stream(server, model, req, reply("refusal.sse"))
    explanation = "This request was declined because it could enable cyber harm."
    assert rec.text == resp.content == "Hello.."
    assert [c.refusal_delta for c in rec.chunks if c.refusal_delta] == [explanation]
    assert resp.refusal == explanation
    assert rec.done[0] == "content_filter" and resp.raw_finish_reason == "refusal"
    assert resp.usage.completion_tokens == 5


def test_refusal_stop_without_details_still_says_the_model_refused(server, model, req):
    """Without stop_details the refusal names the stop, so a refusal is never blank."""
    rec, resp = stream(server, model, req, reply("refusal_without_details.sse"))
    assert resp.content == "" and "refusal" in resp.refusal
    assert [c.refusal_delta for c in rec.chunks[:-1]] == [resp.refusal]
    assert rec.done[0] == "content_filter"


def test_parse_response_reads_a_refusal_and_its_explanation():
    """A non-streaming refusal carries the same refusal text as the streamed one."""
    wire = AnthropicWire(base_url="http://x", api_key="k", model="m", headers={})
    body = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "Hello.."}],
        "stop_reason": "refusal",
        "stop_details": {"type": "refusal", "category": "cyber", "explanation": "Declined."},
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    resp = wire.parse_response(json.dumps(body))
    assert (resp.content, resp.refusal, resp.finish_reason) == (
        "Hello..",
        "Declined.",
        "content_filter",
    )


def test_usage_counts_cached_input_and_takes_cumulative_message_delta(server, model, req):
    """Cache reads count as prompt tokens; message_delta totals replace, never add."""
    _rec, resp = stream(server, model, req, reply("cached_usage.sse"))
    usage = resp.usage
    assert usage.prompt_tokens == 21 + 1834
    assert usage.cached_input_tokens == 1834
    assert usage.completion_tokens == 5
    assert usage.total_tokens == 21 + 1834 + 5


def test_unknown_events_and_citation_deltas_are_ignored(server, model, req):
    """Event types added later, and citation deltas, neither break nor deliver."""
    rec, _resp = stream(server, model, req, reply("unknown_events.sse"))
    assert rec.text == "Hello there"
    assert rec.kinds[-1] == "done" and rec.terminals == 1


def test_overloaded_error_event_after_content_is_overloaded_error(server, model, req):
    """An in-stream overloaded_error is an OverloadedError, as HTTP 529 is; text is kept."""
    rec, resp = stream(server, model, req, reply("error_midstream.sse"))
    assert resp is None and rec.kinds == ["chunk", "chunk", "error"]
    err = rec.error
    assert type(err) is blazen.OverloadedError
    assert err.status is None and err.error_type == "overloaded_error"
    assert err.partial == "Once upon a time"
    assert len(server.requests) == 1


def test_overloaded_error_event_before_content_is_retried(server, req, monkeypatch):
    """An error event before any content is retried; the retry's text is delivered once."""
    monkeypatch.setattr("blazen._http.retry.BASE_DELAY", 0.001)
    model = blazen.Providers.anthropic(api_key=KEY, base_url=server.url, max_retries=1)
    rec, resp = stream(server, model, req, reply("error_before_content.sse"), reply("text.sse"))
    assert rec.kinds[-1] == "done" and rec.errors == []
    assert resp.content.startswith("Why did the scarecrow")
    assert len(server.requests) == 2


def test_truncation_before_message_stop_is_an_error(server, model, req):
    """EOF without message_stop is a ConnectionError with the partial text, never a done."""
    rec, _resp = stream(server, model, req, reply("truncated.sse", transfer="close"))
    assert rec.kinds == ["chunk", "chunk", "error"]
    assert isinstance(rec.error, blazen.ConnectionError)
    assert rec.error.partial == "The answer is forty"


# -- the request -------------------------------------------------------------------------


def tool_turn_request():
    """A request with every kind of part: system, images, tools, a call and its result."""
    weather = Llm.tool(
        "get_weather",
        "Weather for a city",
        {"type": "object", "properties": {"location": {"type": "string"}}},
    )
    call = blazen.ToolCall("toolu_01A", "get_weather", '{"location": "Paris"}')
    return Llm.completion_request(
        [
            Llm.user(
                "What is in these pictures, and the weather?",
                images=[
                    "https://example.com/cat.jpg",
                    Llm.image(data="iVBORw0KGgo=", media_type="image/png"),
                ],
            ),
            Llm.assistant("Let me check.", tool_calls=[call]),
            Llm.tool_result("toolu_01A", {"temp_c": 18}),
            Llm.user("Thanks!"),
        ],
        system="You are terse.",
        tools=[weather],
        tool_choice="get_weather",
        max_tokens=300,
        stop=["END"],
        temperature=0.5,
    )


def test_request_shape_with_system_images_tools_and_a_tool_round_trip(server, model):
    """The JSON body and headers blazen sends for a full tool-use conversation."""
    stream(server, model, tool_turn_request(), reply("text.sse"))
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.header("x-api-key") == KEY
    assert sent.header("anthropic-version") == "2023-06-01"
    assert sent.header("Authorization") is None
    assert sent.json() == {
        "model": "claude-sonnet-4-6",
        "max_tokens": 300,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in these pictures, and the weather?"},
                    {
                        "type": "image",
                        "source": {"type": "url", "url": "https://example.com/cat.jpg"},
                    },
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": "iVBORw0KGgo=",
                        },
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me check."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01A",
                        "name": "get_weather",
                        "input": {"location": "Paris"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01A",
                        "content": '{"temp_c": 18}',
                    },
                    {"type": "text", "text": "Thanks!"},
                ],
            },
        ],
        "system": "You are terse.",
        "temperature": 0.5,
        "stop_sequences": ["END"],
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather for a city",
                "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}},
            }
        ],
        "tool_choice": {"type": "tool", "name": "get_weather"},
        "stream": True,
    }


def test_max_tokens_is_always_sent_and_system_messages_are_lifted(server, model):
    """No max_tokens in the request: the default is sent; system messages go top-level."""
    req = Llm.completion_request([Llm.system("Be brief."), Llm.user("Hi")])
    stream(server, model, req, reply("text.sse"))
    body = server.requests[0].json()
    assert body["max_tokens"] == 4096
    assert body["system"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [("auto", {"type": "auto"}), ("required", {"type": "any"}), ("none", {"type": "none"})],
)
def test_tool_choice_translates(choice, expected):
    """auto, required and none map to Anthropic's tool_choice types."""
    wire = AnthropicWire(base_url="http://x", api_key="k", model="m", headers={})
    req = Llm.completion_request([Llm.user("hi")], tools=[Llm.tool("t")], tool_choice=choice)
    assert wire.body(req, stream=True)["tool_choice"] == expected


def test_image_type_anthropic_cannot_read_is_unsupported_before_sending(server, model):
    """A BMP image is refused with UnsupportedError and nothing reaches the server."""
    req = Llm.completion_request(
        [Llm.user("look", images=[Llm.image(data="Qk0=", media_type="image/bmp")])]
    )
    rec = Recorder()
    Streaming.complete(model, req, rec.handler)
    assert isinstance(rec.error, blazen.UnsupportedError)
    assert server.requests == []


def test_parse_response_reads_text_thinking_and_tool_use():
    """A non-streaming Messages response becomes the same CompletionResponse."""
    wire = AnthropicWire(base_url="http://x", api_key="k", model="m", headers={})
    body = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "abc"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_9", "name": "get_time", "input": {}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    resp = wire.parse_response(json.dumps(body))
    assert (resp.content, resp.reasoning, resp.finish_reason) == ("Checking.", "hmm", "tool_calls")
    assert [(c.id, c.arguments()) for c in resp.tool_calls] == [("toolu_9", {})]
    assert resp.usage.total_tokens == 15


def test_fold_is_io_free_and_ignores_server_tool_input():
    """server_tool_use input fragments are not the caller's tool calls; the start is an event."""
    wire = AnthropicWire(base_url="http://x", api_key="k", model="m", headers={})
    state = StreamState()
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"},
    }
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"query": "x"}'},
    }
    fold = wire.start(state)
    chunk = fold.fold("content_block_start", json.dumps(start))
    assert chunk.server_tool.status == "running" and chunk.tool_calls == ()
    assert fold.fold("content_block_delta", json.dumps(delta)) is None
    assert state.tool_calls == ()
