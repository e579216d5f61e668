"""OpenAI-format wire fixtures replayed over a real socket, asserting what users receive."""

from __future__ import annotations

import json

import pytest

import blazen
from blazen import Streaming
from blazen.testing import Recorder, Reply, StreamServer, split_bytes

from .conftest import fixture_bytes, sse_reply


def run(server: StreamServer, model: blazen.ChatModel, req: blazen.CompletionRequest, reply: Reply):
    server.add(reply)
    rec = Recorder()
    resp = Streaming.complete(model, req, rec.handler)
    return rec, resp


def test_text_stream_skips_role_only_chunk_and_reads_usage_only_final_chunk(server, model, req):
    """The role-only first chunk delivers nothing; the usage-only final chunk fills usage."""
    rec, resp = run(server, model, req, sse_reply("text.sse"))
    assert rec.text == "Why did the scarecrow win an award?"
    assert rec.kinds == ["chunk"] * 9 + ["done"]
    assert all(c.content_delta for c in rec.chunks[:-1])
    assert rec.chunks[-1].is_final and not any(c.is_final for c in rec.chunks[:-1])
    reason, usage = rec.done
    assert reason == "stop"
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (24, 9, 33)
    assert (usage.input_tokens, usage.output_tokens) == (24, 9)
    assert resp.content == rec.text
    assert resp.model == "gpt-4o-mini-2024-07-18"
    assert resp.raw_finish_reason == "stop"


def test_azure_first_chunk_with_empty_choices_is_ignored(server, model, req):
    """Azure's prompt_filter_results chunk (choices: []) neither breaks nor delivers."""
    rec, resp = run(server, model, req, sse_reply("azure_empty_choices.sse"))
    assert rec.text == "Hello there"
    assert rec.done == ("stop", None)


def test_parallel_tool_calls_split_over_many_deltas_build_cumulative_snapshots(server, model, req):
    """Each chunk carries the whole snapshot so far; the last one has both complete calls."""
    rec, resp = run(server, model, req, sse_reply("parallel_tool_calls.sse"))
    chunks = rec.chunks
    first_tool = next(i for i, c in enumerate(chunks) if c.tool_calls)
    assert all(c.tool_calls for c in chunks[first_tool:])
    sizes = [len(c.tool_calls) for c in chunks[first_tool:]]
    assert sizes == sorted(sizes) and sizes[-1] == 2
    args_growth = [c.tool_calls[0].arguments_json for c in chunks[first_tool : first_tool + 5]]
    assert args_growth == ["", '{"lo', '{"location', '{"location": "Par', '{"location": "Paris"}']
    final = chunks[-1].tool_calls
    assert [(t.id, t.name) for t in final] == [
        ("call_Bq2hFiTEKnN1RrG0LDRvRgm8", "get_weather"),
        ("call_Ux4mZ8VfO2tPqA1bN9cD3eFg", "get_time"),
    ]
    assert final[0].arguments() == {"location": "Paris"}
    assert final[1].arguments() == {"tz": "Europe/Paris"}
    assert rec.done[0] == "tool_calls"
    assert resp.tool_calls == final


def test_repeated_id_and_name_on_every_delta_are_set_once(server, model, req):
    """llama.cpp repeats id and name on each delta: they must not be concatenated."""
    rec, resp = run(server, model, req, sse_reply("repeated_id_name.sse"))
    (call,) = resp.tool_calls
    assert (call.id, call.name) == ("call_f2c1", "get_weather")
    assert call.arguments() == {"city": "Oslo"}


def test_tool_deltas_without_index_follow_id_then_current_call(server, model, req):
    """No index: a new id starts a call, a delta without id continues the current one."""
    rec, resp = run(server, model, req, sse_reply("missing_index.sse"))
    assert [(c.id, c.name, c.arguments()) for c in resp.tool_calls] == [
        ("call_a1", "add", {"a": 1, "b": 2}),
        ("call_b2", "mul", {"a": 3, "b": 4}),
    ]


def test_duplicate_index_in_one_chunk_and_whole_call_in_one_delta(server, model, req):
    """Two fragments of the same index in one chunk merge; a whole call in one delta works."""
    rec, resp = run(server, model, req, sse_reply("duplicate_index_whole_call.sse"))
    assert [(c.id, c.name, c.arguments()) for c in resp.tool_calls] == [
        ("call_d1", "lookup", {"q": "blazen"}),
        ("call_d2", "now", {}),
    ]


def test_midstream_error_after_content_is_one_error_with_partial_text(server, model, req):
    """An error event after content: exactly one error, not retried, partial text kept."""
    rec, resp = run(server, model, req, sse_reply("midstream_error.sse"))
    assert resp is None
    assert rec.kinds == ["chunk", "chunk", "error"]
    err = rec.error
    assert type(err) is blazen.ProviderError
    assert err.status is None and err.error_type == "server_error"
    assert "The server had an error" in err.message
    assert err.partial == "Once upon a time"
    assert len(server.requests) == 1


def test_finish_length_is_normalised_and_raw_kept(server, model, req):
    """finish_reason 'length' arrives as 'length' with usage."""
    rec, resp = run(server, model, req, sse_reply("finish_length.sse"))
    assert rec.done[0] == "length"
    assert resp.raw_finish_reason == "length"
    assert resp.usage.completion_tokens == 5


@pytest.mark.parametrize("name", ["crlf.sse", "no_space.sse", "keepalive_comments.sse"])
def test_framing_variants_deliver_the_same_text(server, model, req, name):
    """CRLF line endings, 'data:' without a space, comments and empty frames all parse."""
    rec, resp = run(server, model, req, sse_reply(name))
    expected = (
        "Keep alive" if name.startswith("keepalive") else "Why did the scarecrow win an award?"
    )
    assert rec.text == expected
    assert rec.kinds[-1] == "done" and rec.terminals == 1


def test_utf8_characters_split_across_tcp_writes_arrive_whole(server, model, req):
    """A multi-byte character cut between two TCP writes is reassembled, at every cut."""
    blob = fixture_bytes("openai", "utf8.sse")
    cuts = [i for i in range(1, len(blob)) if (blob[i] & 0xC0) == 0x80]
    assert len(cuts) > 10
    for cut in cuts[::3]:
        rec, _ = run(server, model, req, Reply.sse(split_bytes(blob, [cut])))
        assert rec.text == "Grüße, 世界 🦀🐍", cut


def test_truncation_without_done_is_an_error_never_a_done(server, model, req):
    """EOF before [DONE] ends in ConnectionError carrying the partial text."""
    rec, resp = run(server, model, req, sse_reply("truncated.sse", transfer="close"))
    assert rec.kinds == ["chunk", "chunk", "error"]
    assert isinstance(rec.error, blazen.ConnectionError)
    assert "before its end signal" in rec.error.message
    assert rec.error.partial == "The answer is forty"


def test_reasoning_content_deltas_become_reasoning_delta(server, model, req):
    """DeepSeek/vLLM reasoning_content arrives as reasoning_delta and on the response."""
    rec, resp = run(server, model, req, sse_reply("reasoning_content.sse"))
    assert [c.reasoning_delta for c in rec.chunks[:2]] == ["Let me think.", " 2+2=4."]
    assert resp.reasoning == "Let me think. 2+2=4."
    assert resp.content == "4"


def test_request_body_asks_for_usage_in_the_stream(server, model, req):
    """OpenAI requests ask for usage with stream_options.include_usage."""
    run(server, model, req, sse_reply("text.sse"))
    sent = server.requests[0]
    body = sent.json()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert sent.path == "/v1/chat/completions"
    assert sent.header("Authorization") == "Bearer sk-test-SECRET-0123456789"
    assert sent.header("Accept") == "text/event-stream"


def test_stream_usage_can_be_turned_off_for_servers_that_reject_it(server, req):
    """stream_usage=False leaves stream_options out."""
    m = blazen.Providers.openai_compat("strict", server.base_url, stream_usage=False)
    run(server, m, req, sse_reply("text.sse"))
    assert "stream_options" not in server.requests[0].json()
    assert server.requests[0].header("Authorization") is None


def test_every_fixture_is_valid_sse_json_apart_from_known_cases():
    """Guard against typos in fixtures: every data line is JSON or [DONE]."""
    from .conftest import FIXTURES

    for path in (FIXTURES / "openai").glob("*.sse"):
        for line in path.read_bytes().decode().splitlines():
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                json.loads(line[5:])


# -- refusals and several choices ----------------------------------------------------------


def _refusal(rec: Recorder) -> str:
    return "".join(c.refusal_delta or "" for c in rec.chunks)


def test_structured_output_refusal_streams_as_refusal_deltas_and_ends_content_filter(
    server, model, req
):
    """A refusal under a JSON schema streams delta by delta and ends content_filter, not stop."""
    rec, resp = run(server, model, req, sse_reply("refusal_structured_output.sse"))
    deltas = [c.refusal_delta for c in rec.chunks if c.refusal_delta]
    assert deltas[:3] == ["I'm", " very", " sorry"] and len(deltas) == 12
    refusal = "I'm very sorry, but I can't assist with that request."
    assert _refusal(rec) == refusal and resp.refusal == refusal
    assert rec.text == "" and resp.content == ""
    assert rec.done[0] == "content_filter" and resp.finish_reason == "content_filter"
    assert resp.raw_finish_reason == "stop"
    assert resp.usage.total_tokens == 91 and rec.done[1] == resp.usage
    assert rec.kinds[-1] == "done" and rec.terminals == 1


def test_refusal_without_structured_output_is_reported_the_same_way(server, model, req):
    """A compatible server's refusal in one delta (no usage) is still a refusal."""
    rec, resp = run(server, model, req, sse_reply("refusal_plain.sse"))
    assert [c.refusal_delta for c in rec.chunks[:-1]] == ["I can't help with that."]
    assert resp.refusal == "I can't help with that." and resp.content == ""
    assert rec.done == ("content_filter", None)


def test_refusal_after_some_content_keeps_both_apart(server, model, req):
    """Text streamed before the refusal stays content; the refusal is its own field."""
    rec, resp = run(server, model, req, sse_reply("refusal_after_content.sse"))
    assert rec.text == resp.content == "Here is the"
    assert _refusal(rec) == resp.refusal == " Sorry, I cannot continue."
    assert not any(c.content_delta and c.refusal_delta for c in rec.chunks)
    assert resp.finish_reason == "content_filter" and resp.usage.total_tokens == 39


def test_an_answer_with_no_refusal_has_none(server, model, req):
    """``"refusal": null`` on the first chunk is no refusal: the response says None."""
    rec, resp = run(server, model, req, sse_reply("text.sse"))
    assert resp.refusal is None and not any(c.refusal_delta for c in rec.chunks)
    assert resp.finish_reason == "stop"


def test_a_non_streaming_refusal_is_read_from_the_message(server, model, req):
    """``message.refusal`` of a whole response is the response's refusal."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "refusal": "I can't."},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
    server.add(Reply.json(body))
    resp = model.complete(req)
    assert resp.refusal == "I can't." and resp.content == ""
    assert resp.finish_reason == "content_filter" and resp.raw_finish_reason == "stop"


def test_three_interleaved_choices_follow_choice_zero_only(server, model, req):
    """Choices 1 and 2 are ignored: text, finish reason and usage are choice 0's alone."""
    rec, resp = run(server, model, req, sse_reply("three_choices_text.sse"))
    assert rec.text == resp.content == "Red sky at night."
    assert [c.content_delta for c in rec.chunks[:-1]] == ["Red", " sky", " at", " night", "."]
    assert rec.done[0] == "stop" and resp.raw_finish_reason == "stop"
    assert resp.usage.total_tokens == 26


def test_three_interleaved_choices_with_tool_calls_give_choice_zeros_calls(server, model, req):
    """Each choice numbers its calls from 0; only choice 0's call is assembled."""
    rec, resp = run(server, model, req, sse_reply("three_choices_tool_calls.sse"))
    assert [(c.id, c.name, c.arguments_json) for c in resp.tool_calls] == [
        ("call_qX1aB2cD3eF4gH5iJ6kL7mN8", "get_weather", '{"city": "Paris"}')
    ]
    assert all(len(c.tool_calls) == 1 for c in rec.chunks)
    assert rec.text == "" and resp.raw_finish_reason == "tool_calls"
    assert rec.done[0] == "tool_calls" and resp.usage.total_tokens == 105
