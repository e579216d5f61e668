"""Ollama's native /api/chat NDJSON: wire fixtures over a real socket, and the request."""

from __future__ import annotations

import json

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.providers.ollama import OllamaWire
from blazen.testing import Recorder, Reply, split_bytes

from .conftest import fixture_bytes, ndjson_reply, stream


@pytest.fixture
def model(server):
    return blazen.Providers.ollama(base_url=server.url, max_retries=0)


def test_text_stream_ends_on_done_line_with_counts_as_usage(server, model, req):
    """Content lines stream; the done line carries done_reason and the token counts."""
    rec, resp = stream(server, model, req, ndjson_reply("text.ndjson"))
    assert rec.text == "Why did the scarecrow win an award? He was outstanding in his field."
    assert rec.kinds == ["chunk"] * 5 + ["done"]
    reason, usage = rec.done
    assert reason == "stop" and resp.raw_finish_reason == "stop"
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (31, 17, 48)
    assert resp.model == "llama3.2"


def test_lines_split_across_tcp_writes_are_reassembled(server, model, req):
    """A line cut anywhere between writes still arrives whole."""
    blob = fixture_bytes("ollama", "text.ndjson")
    for cut in (1, 40, len(blob) // 2, len(blob) - 3):
        reply = Reply(
            headers={"Content-Type": "application/x-ndjson"}, body=split_bytes(blob, [cut])
        )
        rec, _ = stream(server, model, req, reply)
        assert rec.kinds[-1] == "done", cut
        assert rec.text.endswith("outstanding in his field."), cut


def test_application_json_content_type_is_accepted(server, model, req):
    """Some proxies relabel Ollama's stream as application/json; it still parses."""
    reply = Reply(
        headers={"Content-Type": "application/json; charset=utf-8"},
        body=[fixture_bytes("ollama", "text.ndjson")],
    )
    rec, resp = stream(server, model, req, reply)
    assert rec.kinds[-1] == "done" and resp.content.startswith("Why did")


def test_whole_tool_calls_with_object_arguments_keep_their_ids(server, model, req):
    """Calls arrive whole with object arguments; stop after them means tool_calls."""
    rec, resp = stream(server, model, req, ndjson_reply("parallel_tool_calls.ndjson"))
    assert [(c.id, c.name, c.arguments()) for c in resp.tool_calls] == [
        ("call_k3dl9q2w", "get_weather", {"location": "Paris"}),
        ("call_v8mx1p0r", "get_time", {"tz": "Europe/Paris"}),
    ]
    assert rec.done[0] == "tool_calls" and resp.raw_finish_reason == "stop"


def test_tool_calls_without_ids_get_distinct_ids_and_empty_arguments_are_an_object(
    server, model, req
):
    """Older servers send no id, one call per line: each call is new, {} stays {}."""
    rec, resp = stream(server, model, req, ndjson_reply("tool_calls_no_id.ndjson"))
    calls = resp.tool_calls
    assert [(c.name, c.arguments_json) for c in calls] == [
        ("get_weather", '{"location": "Paris"}'),
        ("get_time", "{}"),
    ]
    assert calls[0].id != calls[1].id and all(c.id.startswith("call_") for c in calls)
    assert [len(c.tool_calls) for c in rec.chunks] == [1, 2, 2]


def test_message_thinking_is_reasoning(server, model, req):
    """message.thinking arrives as reasoning_delta."""
    _rec, resp = stream(server, model, req, ndjson_reply("thinking.ndjson"))
    assert resp.reasoning == "The user asks 27 * 453. 27 * 453 = 12231."
    assert resp.content == "27 * 453 = 12,231"


def test_length_done_reason_is_length(server, model, req):
    """done_reason length stays length."""
    rec, _resp = stream(server, model, req, ndjson_reply("max_tokens.ndjson"))
    assert rec.done[0] == "length"


def test_error_line_mid_stream_is_one_error_with_partial_text(server, model, req):
    """An {"error": "..."} line ends the stream with one error carrying the text so far."""
    rec, _resp = stream(server, model, req, ndjson_reply("error_midstream.ndjson"))
    assert rec.kinds == ["chunk", "chunk", "error"]
    assert type(rec.error) is blazen.ProviderError
    assert "unexpected EOF" in rec.error.message
    assert rec.error.partial == "Once upon a time"


def test_eof_without_done_line_is_truncation(server, model, req):
    """A stream that ends before done: true is an error, never a done."""
    rec, _resp = stream(server, model, req, ndjson_reply("truncated.ndjson", transfer="close"))
    assert rec.kinds == ["chunk", "chunk", "error"]
    assert isinstance(rec.error, blazen.ConnectionError)


# -- the request -------------------------------------------------------------------------


def test_request_shape_with_system_images_tools_and_a_tool_round_trip(server, model):
    """messages with base64 images, tool_calls with object arguments, tool_name, options."""
    weather = Llm.tool("get_weather", "Weather for a city", {"type": "object", "properties": {}})
    call = blazen.ToolCall("call_1", "get_weather", '{"location": "Paris"}')
    req = Llm.completion_request(
        [
            Llm.user(
                "What is this, and the weather?",
                images=[
                    "data:image/jpeg;base64,/9j/4AAQ",
                    Llm.image(data="iVBORw0KGgo=", media_type="image/png"),
                ],
            ),
            Llm.assistant(tool_calls=[call]),
            Llm.tool_result("call_1", {"temp_c": 18}),
        ],
        system="You are terse.",
        tools=[weather],
        tool_choice="auto",
        max_tokens=300,
        temperature=0.5,
        stop=["END"],
        response_format={"type": "json_object"},
    )
    stream(server, model, req, ndjson_reply("text.ndjson"))
    sent = server.requests[0]
    assert sent.path == "/api/chat"
    assert sent.header("Authorization") is None
    assert sent.json() == {
        "model": "llama3.2",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": "What is this, and the weather?",
                "images": ["/9j/4AAQ", "iVBORw0KGgo="],
            },
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"name": "get_weather", "arguments": {"location": "Paris"}}}
                ],
            },
            {"role": "tool", "content": '{"temp_c": 18}', "tool_name": "get_weather"},
        ],
        "stream": True,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        ],
        "options": {"num_predict": 300, "temperature": 0.5, "stop": ["END"]},
        "format": "json",
    }


def test_a_key_when_given_is_sent_as_bearer_token(server, req):
    """Ollama needs no key; one given (for a proxy) is a bearer token."""
    m = blazen.Providers.ollama(api_key="olk-SECRET", base_url=server.url)
    stream(server, m, req, ndjson_reply("text.ndjson"))
    assert server.requests[0].header("Authorization") == "Bearer olk-SECRET"


@pytest.mark.parametrize(
    "req_kwargs",
    [
        {"messages": [Llm.user("look", images=["https://example.com/cat.png"])]},
        {"messages": [Llm.user("hi")], "tools": [Llm.tool("t")], "tool_choice": "required"},
        {"messages": [Llm.user("hi")], "tools": [Llm.tool("t")], "tool_choice": "t"},
    ],
    ids=["image-url", "tool-choice-required", "tool-choice-named"],
)
def test_what_ollama_cannot_take_is_unsupported_before_sending(server, model, req_kwargs):
    """Image URLs and forced tool choices raise UnsupportedError; nothing is sent."""
    messages = req_kwargs.pop("messages")
    req = Llm.completion_request(messages, **req_kwargs)
    rec = Recorder()
    Streaming.complete(model, req, rec.handler)
    assert isinstance(rec.error, blazen.UnsupportedError)
    assert rec.error.provider == "ollama"
    assert server.requests == []


def test_tool_choice_none_leaves_the_tools_out():
    """Ollama has no tool_choice: "none" is honoured by not offering the tools."""
    wire = OllamaWire(base_url="http://x", api_key="", model="m", headers={})
    req = Llm.completion_request([Llm.user("hi")], tools=[Llm.tool("t")], tool_choice="none")
    assert "tools" not in wire.body(req, stream=True)


def test_parse_response_reads_a_whole_chat_response():
    """A non-streaming /api/chat body becomes the same CompletionResponse."""
    wire = OllamaWire(base_url="http://x", api_key="", model="m", headers={})
    body = {
        "model": "llama3.2",
        "message": {"role": "assistant", "content": "Hi"},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 3,
        "eval_count": 1,
    }
    resp = wire.parse_response(json.dumps(body))
    assert (resp.content, resp.finish_reason, resp.usage.total_tokens) == ("Hi", "stop", 4)
