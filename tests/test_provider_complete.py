"""model.complete (non-streaming) through every wire format: request and parsed response."""

from __future__ import annotations

import pytest

import blazen
from blazen import Llm
from blazen.testing import Reply

from .conftest import model_for

ANSWERS = {
    "anthropic": {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [
            {"type": "text", "text": "Paris."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": {}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 4},
    },
    "gemini": {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {"text": "Paris."},
                        {"functionCall": {"name": "get_time", "args": {}}},
                    ],
                    "role": "model",
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 4, "totalTokenCount": 14},
        "modelVersion": "gemini-2.5-flash",
    },
    "ollama": {
        "model": "llama3.2",
        "created_at": "2025-08-14T10:21:00.1Z",
        "message": {
            "role": "assistant",
            "content": "Paris.",
            "tool_calls": [{"function": {"name": "get_time", "arguments": {}}}],
        },
        "done_reason": "stop",
        "done": True,
        "prompt_eval_count": 10,
        "eval_count": 4,
    },
}
PATHS = {
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/gemini-2.5-flash:generateContent",
    "ollama": "/api/chat",
}


@pytest.mark.parametrize("provider", sorted(ANSWERS))
def test_complete_sends_a_non_streaming_request_and_parses_the_answer(server, provider):
    """The same CompletionResponse fields as a stream: text, tool calls, reason, usage."""
    server.add(Reply.json(ANSWERS[provider]))
    model = model_for(provider, server)
    resp = model.complete(Llm.completion_request([Llm.user("Capital of France?")]))
    sent = server.requests[0]
    assert sent.path == PATHS[provider]
    assert sent.json().get("stream") in (None, False)
    assert resp.content == "Paris."
    assert [(c.name, c.arguments()) for c in resp.tool_calls] == [("get_time", {})]
    assert resp.finish_reason == "tool_calls"
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (10, 4)


def test_complete_raises_the_same_error_classes(server):
    """A non-streaming 529 from Anthropic raises OverloadedError, as a stream would."""
    server.add(
        Reply.json(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            status=529,
        )
    )
    model = model_for("anthropic", server, max_retries=0)
    with pytest.raises(blazen.OverloadedError):
        model.complete(Llm.completion_request([Llm.user("hi")]))
