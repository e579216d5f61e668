"""Prompt caching: Anthropic cache_control breakpoints, and cache counts from every provider."""

from __future__ import annotations

import json

import attrs
import pytest

import blazen
from blazen import Llm, Streaming
from blazen._kit import StreamState
from blazen.providers.anthropic import AnthropicWire
from blazen.testing import Recorder

from .conftest import model_for, sse_reply, stream

EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture
def anthropic(server):
    return model_for("anthropic", server, max_retries=0)


# -- usage: what each provider says was read from or written to its cache ----------------


def test_anthropic_stream_reports_cache_reads_as_cached_tokens(server, anthropic, req):
    """cache_read_input_tokens is cached_tokens; nothing written is cache_write_tokens 0."""
    _rec, resp = stream(server, anthropic, req, sse_reply("cached_usage.sse", "anthropic"))
    usage = resp.usage
    assert (usage.cached_tokens, usage.cache_write_tokens) == (1834, 0)
    assert usage.cached_input_tokens == 1834  # the older name still reads


def test_anthropic_stream_reports_cache_writes_as_cache_write_tokens(server, anthropic, req):
    """cache_creation_input_tokens is cache_write_tokens; prompt_tokens counts all three."""
    rec, resp = stream(server, anthropic, req, sse_reply("cache_write_usage.sse", "anthropic"))
    usage = resp.usage
    assert (usage.cached_tokens, usage.cache_write_tokens) == (1834, 2051)
    assert usage.prompt_tokens == 12 + 2051 + 1834
    assert usage.total_tokens == 12 + 2051 + 1834 + 7
    assert rec.done[1] == usage


def test_anthropic_cache_counts_first_reported_in_message_delta_are_read():
    """Counts that arrive only in message_delta's usage replace message_start's."""
    wire = AnthropicWire(base_url="http://x", api_key="k", model="m", headers={})
    state = StreamState()
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 5}}}
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {
            "cache_creation_input_tokens": 40,
            "cache_read_input_tokens": 9,
            "output_tokens": 2,
        },
    }
    fold = wire.start(state)
    fold.fold("message_start", json.dumps(start))
    fold.fold("message_delta", json.dumps(delta))
    assert state.usage is not None
    assert (state.usage.cached_tokens, state.usage.cache_write_tokens) == (9, 40)
    assert state.usage.prompt_tokens == 5 + 40 + 9


def test_anthropic_whole_response_reports_cache_reads_and_writes():
    """A non-streaming response's usage carries the same cache counts."""
    wire = AnthropicWire(base_url="http://x", api_key="k", model="m", headers={})
    body = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 3,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 50,
            "output_tokens": 1,
        },
    }
    usage = wire.parse_response(json.dumps(body)).usage
    assert usage is not None
    assert (usage.cached_tokens, usage.cache_write_tokens, usage.prompt_tokens) == (50, 100, 153)


def test_openai_stream_reports_prompt_tokens_details_cached_tokens(server, req):
    """prompt_tokens_details.cached_tokens is cached_tokens; OpenAI reports no cache writes."""
    model = model_for("openai", server, max_retries=0)
    _rec, resp = stream(server, model, req, sse_reply("cached_usage.sse", "openai"))
    usage = resp.usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens) == (2006, 1920, 0)


def test_gemini_stream_reports_cached_content_token_count(server, req):
    """usageMetadata.cachedContentTokenCount is cached_tokens (implicit caching)."""
    model = model_for("gemini", server, max_retries=0)
    reply = sse_reply("cached_usage.sse", "gemini", transfer="close")
    _rec, resp = stream(server, model, req, reply)
    usage = resp.usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens) == (4211, 4096, 0)


def test_usage_sum_adds_cache_reads_and_writes():
    """An agent's total usage adds cached_tokens and cache_write_tokens like every count."""
    a = blazen.TokenUsage(prompt_tokens=10, cached_tokens=4, cache_write_tokens=6)
    b = blazen.TokenUsage(prompt_tokens=20, cached_tokens=16, cache_write_tokens=1)
    total = a + b
    assert (total.prompt_tokens, total.cached_tokens, total.cache_write_tokens) == (30, 20, 7)
    assert total.cached_input_tokens == 20


def test_cached_input_tokens_is_a_read_only_alias():
    """cached_input_tokens reads cached_tokens and cannot be set or given apart from it."""
    usage = blazen.TokenUsage(cached_tokens=3)
    assert usage.cached_input_tokens == 3
    with pytest.raises(AttributeError):
        usage.cached_input_tokens = 4  # type: ignore[misc]
    assert "cached_input_tokens" not in {f.name for f in attrs.fields(blazen.TokenUsage)}


def test_cache_counts_must_be_whole_numbers():
    """A cache count that is not a whole number of at least 0 is a TypeError."""
    with pytest.raises(TypeError, match="whole number"):
        blazen.TokenUsage(cache_write_tokens=-1)
    with pytest.raises(TypeError, match="whole number"):
        blazen.TokenUsage(cached_tokens="5")  # type: ignore[arg-type]


# -- requests: where the breakpoints go ----------------------------------------------------


def _sent(server, model, req):
    _rec, _resp = stream(server, model, req, sse_reply("text.sse", "anthropic"))
    return server.requests[-1].body


def test_cached_system_prompt_goes_top_level_as_a_block_with_cache_control(server, anthropic):
    """Llm.system(cache=True): ``system`` becomes text blocks, the breakpoint on that one."""
    req = Llm.completion_request(
        [Llm.system("Long rules.", cache=True), Llm.user("Hi")], system="You are terse."
    )
    expected = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "Hi"}],
        "system": [
            {"type": "text", "text": "You are terse."},
            {"type": "text", "text": "Long rules.", "cache_control": EPHEMERAL},
        ],
        "stream": True,
    }
    assert _sent(server, anthropic, req) == json.dumps(expected).encode()


def test_cached_user_message_marks_its_last_block(server, anthropic):
    """Llm.user(cache=True): the breakpoint sits on the message's last block (an image here)."""
    req = Llm.completion_request(
        [
            Llm.user("A long document.", cache=True),
            Llm.assistant("Read it."),
            Llm.user(
                "And this picture?",
                images=[Llm.image(data="iVBORw0KGgo=", media_type="image/png")],
                cache=True,
            ),
        ]
    )
    expected = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 4096,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "A long document.", "cache_control": EPHEMERAL}
                ],
            },
            {"role": "assistant", "content": "Read it."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "And this picture?"},
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": "iVBORw0KGgo=",
                        },
                        "cache_control": EPHEMERAL,
                    },
                ],
            },
        ],
        "stream": True,
    }
    assert _sent(server, anthropic, req) == json.dumps(expected).encode()


def test_without_cache_the_anthropic_body_is_unchanged(server, anthropic):
    """No cache=True: the system prompt stays a string and one text block a string."""
    req = Llm.completion_request([Llm.system("Rules."), Llm.user("Hi")])
    expected = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "Hi"}],
        "system": "Rules.",
        "stream": True,
    }
    assert _sent(server, anthropic, req) == json.dumps(expected).encode()


def test_four_breakpoints_are_sent(server, anthropic):
    """Four messages marked cache=True, the most the API allows, all reach the wire."""
    req = Llm.completion_request(
        [
            Llm.system("Rules.", cache=True),
            Llm.user("one", cache=True),
            Llm.assistant("ok"),
            Llm.user("two", cache=True),
            Llm.assistant("ok"),
            Llm.user("three", cache=True),
        ]
    )
    assert _sent(server, anthropic, req).count(b'"cache_control"') == 4


def test_a_fifth_breakpoint_is_a_validation_error_before_sending(server, anthropic):
    """Five messages marked cache=True raise ValidationError and nothing reaches the server."""
    messages = [Llm.system("Rules.", cache=True)]
    for i in range(4):
        messages += [Llm.user(f"turn {i}", cache=True), Llm.assistant("ok")]
    req = Llm.completion_request([*messages, Llm.user("last")])
    rec = Recorder()
    Streaming.complete(anthropic, req, rec.handler)
    assert isinstance(rec.error, blazen.ValidationError)
    assert not isinstance(rec.error, blazen.ProviderError)
    assert "at most 4" in str(rec.error) and "5" in str(rec.error)
    assert server.requests == []
    with pytest.raises(blazen.ValidationError, match="cache"):
        anthropic.complete(req)
    assert server.requests == []


@pytest.mark.parametrize("name", ["openai", "gemini", "ollama"])
def test_providers_that_cache_by_themselves_ignore_the_flag(server, name):
    """OpenAI, Gemini and Ollama send the same bytes with and without cache=True."""
    model = model_for(name, server, max_retries=0)
    plain = Llm.completion_request([Llm.system("Rules."), Llm.user("Hi")])
    cached = Llm.completion_request([Llm.system("Rules.", cache=True), Llm.user("Hi", cache=True)])
    wire = model.wire
    assert wire.build(plain, stream=True).body == wire.build(cached, stream=True).body


def test_cache_flag_is_a_frozen_field_of_the_message():
    """ChatMessage.cache defaults to False, is part of equality, and must be a bool."""
    assert Llm.user("x").cache is False
    assert Llm.user("x", cache=True).cache is True
    assert Llm.user("x", cache=True) != Llm.user("x")
    assert Llm.system("x", cache=True) == blazen.ChatMessage(role="system", content="x", cache=True)
    with pytest.raises(TypeError, match="cache"):
        blazen.ChatMessage(role="user", content="x", cache="yes")  # type: ignore[arg-type]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Llm.user("x").cache = True  # type: ignore[misc]


def test_deepseek_prompt_cache_hit_tokens_are_cached_tokens():
    """DeepSeek's own name for cache reads, prompt_cache_hit_tokens, fills cached_tokens."""
    wire = blazen.Providers.deepseek(api_key="k").wire
    body = {
        "id": "x",
        "object": "chat.completion",
        "model": "deepseek-chat",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok"},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 1200,
            "completion_tokens": 3,
            "total_tokens": 1203,
            "prompt_cache_hit_tokens": 1152,
            "prompt_cache_miss_tokens": 48,
        },
    }
    usage = wire.parse_response(json.dumps(body)).usage
    assert usage is not None and (usage.prompt_tokens, usage.cached_tokens) == (1200, 1152)
