"""Differential tests: the official SDKs, as test-only oracles, read the same fixture bytes.

Each fixture is served twice over a real socket: once to the official ``openai`` or
``anthropic`` package's own stream accumulator, once to blazen. Where the SDK is right
the two must agree on text, tool calls and usage; where it is wrong, the test is named
after the SDK's bug and pins down both behaviours.
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Reply, StreamServer

from .conftest import fixture_bytes

OPENAI_MAJOR = int(openai.__version__.split(".")[0])

MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]


def _reply(provider: str, name: str) -> Reply:
    transfer = "close" if name == "truncated.sse" else "chunked"
    return Reply.sse(fixture_bytes(provider, name), transfer=transfer)


def blazen_reads(provider: str, name: str) -> tuple[Any, Any]:
    """(response, error) from blazen for a fixture."""
    with StreamServer([_reply(provider, name)]) as server:
        if provider == "anthropic":
            model = blazen.Providers.anthropic(api_key="k", base_url=server.url, max_retries=0)
        else:
            model = blazen.Providers.openai(api_key="k", base_url=server.base_url, max_retries=0)
        errors: list[Any] = []
        resp = Streaming.complete(
            model, Llm.completion_request([Llm.user("hi")]), on_error=errors.append
        )
        return resp, (errors[0] if errors else None)


def openai_reads(provider: str, name: str) -> Any:
    """The openai SDK's accumulated snapshot (its stream helper's own state)."""
    # The client is closed too: its pooled sockets must not be left for the collector.
    with (
        StreamServer([_reply(provider, name)]) as server,
        openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0) as client,
        client.chat.completions.stream(model="m", messages=MESSAGES) as stream,
    ):
        for _ in stream:
            pass
        return stream.current_completion_snapshot


def anthropic_reads(name: str) -> Any:
    """The anthropic SDK's final message (built by its accumulate_event)."""
    with (
        StreamServer([_reply("anthropic", name)]) as server,
        anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0) as client,
        client.messages.stream(model="m", max_tokens=10, messages=MESSAGES) as stream,
    ):
        return stream.get_final_message()


# -- openai ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "text.sse",
        "parallel_tool_calls.sse",
        pytest.param(
            "duplicate_index_whole_call.sse",
            marks=pytest.mark.xfail(
                OPENAI_MAJOR < 3,
                reason="openai<3 (the newest on Python 3.9) drops the second fragment of a "
                "tool-call index repeated within one chunk",
                strict=True,
            ),
        ),
        "reasoning_content.sse",
        "finish_length.sse",
        "azure_empty_choices.sse",
        "utf8.sse",
        "crlf.sse",
        "no_space.sse",
        "refusal_structured_output.sse",
        "refusal_plain.sse",
        "refusal_after_content.sse",
        "three_choices_text.sse",
        "three_choices_tool_calls.sse",
        "cached_usage.sse",
    ],
)
def test_openai_sdk_and_blazen_agree(name):
    """Same text, refusal, tool calls, usage and finish reason as the openai SDK's choice 0."""
    snap = openai_reads("openai", name)
    resp, err = blazen_reads("openai", name)
    assert err is None
    choice = next(c for c in snap.choices if c.index == 0)
    message = choice.message
    assert resp.content == (message.content or "")
    assert resp.refusal == message.refusal
    sdk_calls = [(t.id, t.function.name, t.function.arguments) for t in message.tool_calls or ()]
    assert [(c.id, c.name, c.arguments_json) for c in resp.tool_calls] == sdk_calls
    assert resp.raw_finish_reason == choice.finish_reason
    if snap.usage is None:
        assert resp.usage is None
    else:
        u = snap.usage
        assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (
            u.prompt_tokens,
            u.completion_tokens,
        )
        assert resp.usage.total_tokens == u.total_tokens
        details = u.prompt_tokens_details
        assert resp.usage.cached_tokens == ((details and details.cached_tokens) or 0)
    extra = (message.model_extra or {}).get("reasoning_content")
    assert resp.reasoning == extra


def test_openai_sdk_bug_concatenates_id_and_name_repeated_by_llama_cpp():
    """llama.cpp repeats id and name on every delta; the SDK joins them, blazen sets them once."""
    (call,) = openai_reads("openai", "repeated_id_name.sse").choices[0].message.tool_calls
    assert call.id == "call_f2c1" * 5 and call.function.name == "get_weather" * 5
    assert call.function.arguments == '{"city":"Oslo"}'
    resp, _ = blazen_reads("openai", "repeated_id_name.sse")
    assert [(c.id, c.name, c.arguments_json) for c in resp.tool_calls] == [
        ("call_f2c1", "get_weather", '{"city":"Oslo"}')
    ]


def test_openai_sdk_bug_crashes_on_tool_deltas_without_index():
    """Servers that omit the tool-call index crash the SDK; blazen keys calls by id."""
    with pytest.raises(TypeError, match="list indices"):
        openai_reads("openai", "missing_index.sse")
    resp, _ = blazen_reads("openai", "missing_index.sse")
    assert [c.name for c in resp.tool_calls] == ["add", "mul"]


def test_openai_sdk_bug_decodes_empty_data_frames_as_json():
    """An event whose data is empty is not dispatched (WHATWG SSE); the SDK json-decodes it."""
    with pytest.raises(ValueError, match="Expecting value"):
        openai_reads("openai", "keepalive_comments.sse")
    resp, _ = blazen_reads("openai", "keepalive_comments.sse")
    assert resp.content == "Keep alive"


def test_openai_sdk_bug_accepts_a_truncated_stream_as_complete():
    """EOF before [DONE]: the SDK hands back partial text with no finish reason, no error."""
    snap = openai_reads("openai", "truncated.sse")
    assert snap.choices[0].message.content == "The answer is forty"
    assert snap.choices[0].finish_reason is None
    resp, err = blazen_reads("openai", "truncated.sse")
    assert resp is None and isinstance(err, blazen.ConnectionError)
    assert err.partial == "The answer is forty"


def test_openai_sdk_ignores_groq_usage_that_blazen_reads():
    """Groq's x_groq.usage is a vendor extension the SDK does not know; blazen reads it."""
    snap = openai_reads("groq", "x_groq_usage.sse")
    assert snap.usage is None and snap.choices[0].message.content == "Hello there"
    resp, _ = blazen_reads("groq", "x_groq_usage.sse")
    assert resp.content == "Hello there" and resp.usage.total_tokens == 43


# -- anthropic ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "text.sse",
        "parallel_tool_calls.sse",
        "tool_empty_input.sse",
        "thinking.sse",
        "max_tokens.sse",
        "cached_usage.sse",
        "cache_write_usage.sse",
        "unknown_events.sse",
        "refusal.sse",
        "refusal_without_details.sse",
    ],
)
def test_anthropic_sdk_and_blazen_agree(name):
    """Same text, thinking, tool calls, usage, stop reason and refusal as the anthropic SDK."""
    message = anthropic_reads(name)
    resp, err = blazen_reads("anthropic", name)
    assert err is None
    blocks = message.content
    assert resp.content == "".join(b.text for b in blocks if b.type == "text")
    assert (resp.reasoning or "") == "".join(b.thinking for b in blocks if b.type == "thinking")
    sdk_calls = [(b.id, b.name, b.input) for b in blocks if b.type == "tool_use"]
    assert [(c.id, c.name, c.arguments()) for c in resp.tool_calls] == sdk_calls
    assert resp.raw_finish_reason == message.stop_reason
    assert (resp.refusal is not None) == (message.stop_reason == "refusal")
    details = getattr(message, "stop_details", None)  # newer SDKs only
    if details is not None and details.explanation:
        assert resp.refusal == details.explanation
    if details is not None:
        # The typed details carry what the SDK reads, and the whole object as it came.
        assert resp.stop_details is not None
        assert (resp.stop_details.category, resp.stop_details.explanation) == (
            details.category,
            details.explanation,
        )
        assert resp.stop_details.raw == details.model_dump(mode="json", exclude_none=True)
    else:
        assert resp.stop_details is None
    u = message.usage
    # blazen's prompt_tokens counts every input token; Anthropic splits out the cache.
    cache = (u.cache_creation_input_tokens or 0) + (u.cache_read_input_tokens or 0)
    assert resp.usage.prompt_tokens == u.input_tokens + cache
    assert resp.usage.cached_tokens == (u.cache_read_input_tokens or 0)
    assert resp.usage.cache_write_tokens == (u.cache_creation_input_tokens or 0)
    assert resp.usage.completion_tokens == u.output_tokens


def test_anthropic_sdk_bug_in_stream_overloaded_is_not_its_overloaded_error():
    """The SDK raises OverloadedError for HTTP 529 but a bare APIStatusError for the same
    error inside a stream; blazen gives both the same class."""
    with pytest.raises(anthropic.APIStatusError) as info:
        anthropic_reads("error_midstream.sse")
    assert not isinstance(info.value, anthropic.OverloadedError)
    _, err = blazen_reads("anthropic", "error_midstream.sse")
    assert type(err) is blazen.OverloadedError


def test_anthropic_sdk_bug_accepts_a_stream_without_message_stop():
    """EOF before message_stop: the SDK returns a message with stop_reason None; blazen errs."""
    message = anthropic_reads("truncated.sse")
    assert message.stop_reason is None
    assert message.content[0].text == "The answer is forty"
    resp, err = blazen_reads("anthropic", "truncated.sse")
    assert resp is None and isinstance(err, blazen.ConnectionError)
