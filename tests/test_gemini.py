"""Gemini streamGenerateContent?alt=sse: wire fixtures over a real socket, and the request."""

from __future__ import annotations

import json

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.providers.gemini import GeminiWire
from blazen.testing import Recorder

from .conftest import sse_reply, stream
from .test_anthropic import tool_turn_request

KEY = "AIzaSy-SECRET-0123456789abcdef"


@pytest.fixture
def model(server):
    return blazen.Providers.gemini(api_key=KEY, base_url=server.url + "/v1beta", max_retries=0)


def reply(name, **kw):
    return sse_reply(name, "gemini", transfer="close", **kw)


def test_text_stream_ends_at_eof_after_finish_reason(server, model, req):
    """No sentinel: a finishReason then EOF is a done, with usage counting thoughts."""
    rec, resp = stream(server, model, req, reply("text.sse"))
    assert rec.text == "Why did the scarecrow win an award? He was outstanding in his field."
    assert rec.kinds == ["chunk"] * 4 + ["done"]
    reason, usage = rec.done
    assert reason == "stop" and resp.raw_finish_reason == "STOP"
    assert usage.prompt_tokens == 9
    assert usage.completion_tokens == 15 + 211 and usage.reasoning_tokens == 211
    assert usage.total_tokens == 9 + 15 + 211
    assert resp.model == "gemini-2.5-flash"


def test_whole_function_calls_get_distinct_ids_and_stop_means_tool_calls(server, model, req):
    """Two functionCall parts are two calls with synthesised ids; STOP after them is tool_calls."""
    rec, resp = stream(server, model, req, reply("parallel_tool_calls.sse"))
    calls = resp.tool_calls
    assert [(c.name, c.arguments()) for c in calls] == [
        ("get_weather", {"location": "Paris"}),
        ("get_time", {"tz": "Europe/Paris"}),
    ]
    assert all(c.id.startswith("call_") for c in calls) and calls[0].id != calls[1].id
    assert rec.done[0] == "tool_calls" and resp.raw_finish_reason == "STOP"
    assert rec.chunks[0].tool_calls == calls


def test_thought_parts_are_reasoning(server, model, req):
    """Parts marked thought: true arrive as reasoning_delta, the rest as content."""
    rec, resp = stream(server, model, req, reply("thinking.sse"))
    assert resp.reasoning == "**Multiplying**\n\nThe user wants 27 * 453. 27 * 453 = 12231."
    assert resp.content == "27 * 453 = 12,231"
    assert rec.chunks[0].reasoning_delta and rec.chunks[0].content_delta is None


def test_max_tokens_is_length(server, model, req):
    """MAX_TOKENS normalises to length."""
    rec, resp = stream(server, model, req, reply("max_tokens.sse"))
    assert rec.done[0] == "length" and resp.raw_finish_reason == "MAX_TOKENS"


def test_safety_finish_is_a_content_filter_done(server, model, req):
    """A SAFETY finish ends the stream normally, with finish reason content_filter."""
    rec, resp = stream(server, model, req, reply("safety_finish.sse"))
    assert rec.done[0] == "content_filter" and resp.content == "I can"


def test_blocked_prompt_is_content_policy_error(server, model, req):
    """promptFeedback.blockReason with no candidates is a ContentPolicyError."""
    rec, _resp = stream(server, model, req, reply("prompt_blocked.sse"))
    assert rec.kinds == ["error"]
    err = rec.error
    assert type(err) is blazen.ContentPolicyError
    assert "PROHIBITED_CONTENT" in err.message
    assert len(server.requests) == 1


def test_error_payload_mid_stream_is_one_error_with_partial_text(server, model, req):
    """A google.rpc error inside the stream after content: one error, not retried."""
    rec, _resp = stream(server, model, req, reply("error_midstream.sse"))
    assert rec.kinds == ["chunk", "chunk", "error"]
    assert type(rec.error) is blazen.ProviderError
    assert rec.error.error_type == "INTERNAL"
    assert rec.error.partial == "Once upon a time"


def test_eof_without_finish_reason_is_truncation(server, model, req):
    """A stream that ends before any finishReason is an error, never a done."""
    rec, _resp = stream(server, model, req, reply("truncated.sse"))
    assert rec.kinds == ["chunk", "chunk", "error"]
    assert isinstance(rec.error, blazen.ConnectionError)
    assert rec.error.partial == "The answer is forty"


# -- the request -------------------------------------------------------------------------


def test_key_travels_in_header_never_in_url(server, model, req):
    """x-goog-api-key carries the key; the URL is models/{model}:streamGenerateContent?alt=sse."""
    stream(server, model, req, reply("text.sse"))
    sent = server.requests[0]
    assert sent.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert sent.header("x-goog-api-key") == KEY
    assert KEY not in sent.path and "key=" not in sent.path
    assert sent.header("Authorization") is None


def test_request_shape_with_system_images_tools_and_a_tool_round_trip(server, model):
    """contents/parts, systemInstruction, functionDeclarations, toolConfig, functionResponse."""
    stream(server, model, tool_turn_request(), reply("text.sse"))
    assert server.requests[0].json() == {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "What is in these pictures, and the weather?"},
                    {
                        "fileData": {
                            "mimeType": "image/jpeg",
                            "fileUri": "https://example.com/cat.jpg",
                        }
                    },
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {"text": "Let me check."},
                    {"functionCall": {"name": "get_weather", "args": {"location": "Paris"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "get_weather", "response": {"temp_c": 18}}},
                    {"text": "Thanks!"},
                ],
            },
        ],
        "systemInstruction": {"parts": [{"text": "You are terse."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "Weather for a city",
                        "parametersJsonSchema": {
                            "type": "object",
                            "properties": {"location": {"type": "string"}},
                        },
                    }
                ]
            }
        ],
        "toolConfig": {
            "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}
        },
        "generationConfig": {"maxOutputTokens": 300, "temperature": 0.5, "stopSequences": ["END"]},
    }


@pytest.mark.parametrize(
    ("choice", "mode"), [("auto", "AUTO"), ("required", "ANY"), ("none", "NONE")]
)
def test_tool_choice_translates_to_function_calling_mode(choice, mode):
    """auto, required and none map to AUTO, ANY and NONE."""
    wire = GeminiWire(base_url="http://x", api_key="k", model="m", headers={})
    req = Llm.completion_request([Llm.user("hi")], tools=[Llm.tool("t")], tool_choice=choice)
    assert wire.body(req)["toolConfig"] == {"functionCallingConfig": {"mode": mode}}


def test_text_tool_result_is_wrapped_in_an_object_and_data_urls_become_inline_data():
    """functionResponse.response must be an object; a data: URL is sent as inlineData."""
    wire = GeminiWire(base_url="http://x", api_key="k", model="m", headers={})
    call = blazen.ToolCall("call_1", "lookup", "{}")
    req = Llm.completion_request(
        [
            Llm.user("see", images=["data:image/jpeg;base64,/9j/4AAQ"]),
            Llm.assistant(tool_calls=[call]),
            Llm.tool_result("call_1", "plain text"),
        ]
    )
    contents = wire.body(req)["contents"]
    assert contents[0]["parts"][1] == {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/4AAQ"}}
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "lookup", "response": {"result": "plain text"}}}
    ]


def test_tool_result_without_its_call_is_refused_before_sending(server, model):
    """Gemini answers calls by name: a result for an unknown call id is a ValidationError."""
    req = Llm.completion_request([Llm.user("hi"), Llm.tool_result("call_x", "42")])
    rec = Recorder()
    Streaming.complete(model, req, rec.handler)
    assert isinstance(rec.error, blazen.ValidationError)
    assert server.requests == []


def test_json_response_format_sets_response_mime_type_and_schema():
    """response_format json_schema becomes responseMimeType plus responseJsonSchema."""
    wire = GeminiWire(base_url="http://x", api_key="k", model="m", headers={})
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    req = Llm.completion_request(
        [Llm.user("hi")],
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    )
    assert wire.body(req)["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }


def test_parse_response_reads_a_whole_generate_content_response():
    """A non-streaming generateContent body becomes the same CompletionResponse."""
    wire = GeminiWire(base_url="http://x", api_key="k", model="m", headers={})
    body = {
        "candidates": [
            {
                "content": {"parts": [{"text": "Hi"}, {"text": " there"}], "role": "model"},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5},
        "modelVersion": "gemini-2.5-flash",
    }
    resp = wire.parse_response(json.dumps(body))
    assert (resp.content, resp.finish_reason, resp.usage.total_tokens) == ("Hi there", "stop", 5)
    assert wire.build(Llm.completion_request([Llm.user("x")]), stream=False).url == (
        "http://x/models/m:generateContent"
    )


def test_malformed_function_call_finish_is_an_error_not_a_stop(server, model, req):
    """finishReason MALFORMED_FUNCTION_CALL: the model failed; one ProviderError, never done."""
    rec, resp = stream(server, model, req, reply("malformed_function_call.sse"))
    assert resp is None and rec.kinds == ["error"]
    assert type(rec.error) is blazen.ProviderError
    assert rec.error.error_type == "MALFORMED_FUNCTION_CALL"
