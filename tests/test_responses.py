"""The Responses API wire (``api="responses"``): its fixtures replayed over a real socket.

Each fixture in ``tests/fixtures/responses/`` is written from OpenAI's streaming reference
(https://platform.openai.com/docs/api-reference/responses-streaming); it is served whole,
and cut into one-byte writes, through the blocking, asyncio and background forms.
"""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest

import blazen
from blazen import Llm
from blazen.testing import Recorder, Reply, StreamServer

from .conftest import FIXTURES, fixture_bytes

REQ = Llm.completion_request([Llm.user("hi")])


def responses_model(server: StreamServer, **options: Any) -> blazen.ChatModel:
    """``Providers.openai(api="responses")`` pointed at ``server``, retries off."""
    options.setdefault("max_retries", 0)
    return blazen.Providers.openai(
        api_key="sk-test-SECRET-0123456789", base_url=server.base_url, api="responses", **options
    )


def replay(name: str, *, one_byte: bool = False, form: Any = None, req: Any = REQ) -> Any:
    """(Recorder, response) for fixture ``name``, whole or one byte per write."""
    blob = fixture_bytes("responses", name)
    writes: list[Any] = [blob[i : i + 1] for i in range(len(blob))] if one_byte else [blob]
    transfer = "close" if name == "truncated.sse" else "chunked"
    with StreamServer([Reply.sse(writes, transfer=transfer)]) as server:
        rec = Recorder()
        run = form or blazen.Streaming.complete
        resp = run(responses_model(server), req, rec.handler)
        return rec, resp


@pytest.mark.parametrize("one_byte", [False, True], ids=["whole", "1-byte writes"])
def test_text_streams_as_content_deltas_and_ends_stop_with_usage_and_id(complete, one_byte):
    """output_text deltas are content; response.completed is done("stop") with its usage and id."""
    rec, resp = replay("text.sse", one_byte=one_byte, form=complete)
    assert rec.text == "Why did the scarecrow win an award?"
    assert [c.content_delta for c in rec.chunks[:-1]] == [
        "Why did",
        " the scare",
        "crow win",
        " an award?",
    ]
    assert rec.chunks[-1].is_final and rec.kinds[-1] == "done"
    reason, usage = rec.done
    assert reason == "stop" and resp.raw_finish_reason == "completed"
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (24, 9, 33)
    assert usage.cached_tokens == 8
    assert resp.id == "resp_text01" and resp.model == "gpt-5-2025-08-07"


@pytest.mark.parametrize("one_byte", [False, True], ids=["whole", "1-byte writes"])
def test_reasoning_summary_and_a_call_keep_the_encrypted_item_for_the_next_turn(one_byte):
    """Summary deltas are reasoning; the item from output_item.done is kept whole, before its call."""
    rec, resp = replay("reasoning_tool_call.sse", one_byte=one_byte)
    reasoning = "".join(c.reasoning_delta or "" for c in rec.chunks)
    assert reasoning == (
        "**Checking the weather**\n\nThe user wants Paris.\n\nI will call get_weather."
    )
    assert resp.reasoning == reasoning
    (call,) = resp.tool_calls
    assert (call.id, call.name) == ("call_wx01", "get_weather")
    assert call.arguments() == {"location": "Paris", "unit": "celsius"}
    assert rec.done[0] == "tool_calls" and resp.usage.reasoning_tokens == 128
    (part,) = resp.reasoning_parts
    item = json.loads(part.data)
    assert item["id"] == "rs_think01" and item["encrypted_content"].startswith("gAAAAABpLm0r")
    assert len(item["encrypted_content"]) > 100  # the whole one, not the added event's prefix
    assert (part.provider, part.tool_call_id) == ("openai-responses", "call_wx01")
    assert resp.message.reasoning_parts == (part,)


def test_reasoning_text_of_open_models_is_reasoning_too():
    """reasoning_text deltas (gpt-oss on vLLM, LM Studio) are reasoning, kept as a thinking part."""
    rec, resp = replay("reasoning_text.sse")
    assert resp.reasoning == "We need a haiku." and resp.content == "Autumn moon rises"
    (part,) = resp.reasoning_parts
    assert part.kind == "thinking" and part.text == "We need a haiku."


@pytest.mark.parametrize("one_byte", [False, True], ids=["whole", "1-byte writes"])
def test_parallel_calls_with_interleaved_deltas_are_told_apart_by_output_index(one_byte):
    """Argument deltas of two calls arrive interleaved; each goes to its own call, snapshots grow."""
    rec, resp = replay("parallel_tool_calls.sse", one_byte=one_byte)
    assert [(c.id, c.name, c.arguments()) for c in resp.tool_calls] == [
        ("call_A", "get_weather", {"location": "Paris"}),
        ("call_B", "get_time", {"tz": "Europe/Paris"}),
    ]
    snapshots = [c.tool_calls for c in rec.chunks if c.tool_calls]
    lengths = [sum(len(t.arguments_json) for t in s) for s in snapshots]
    assert lengths == sorted(lengths) and [len(s) for s in snapshots][:2] == [1, 2]
    assert rec.chunks[-1].tool_calls == resp.tool_calls and rec.done[0] == "tool_calls"


def test_a_custom_tool_call_is_a_tool_call_with_its_free_text_input():
    """custom_tool_call input deltas make a call whose arguments are the raw input."""
    _, resp = replay("custom_tool_call.sse")
    (call,) = resp.tool_calls
    assert (call.id, call.name, call.arguments_json) == (
        "call_C",
        "run_python",
        "print(sum(range(10)))",
    )


def test_a_refusal_streams_as_refusal_deltas_and_ends_content_filter():
    """refusal deltas are refusal_delta, never content; the answer ends content_filter."""
    rec, resp = replay("refusal.sse")
    assert (
        "".join(c.refusal_delta or "" for c in rec.chunks) == "I'm sorry, I can't help with that."
    )
    assert rec.text == "" and rec.done[0] == "content_filter"
    assert (
        resp.refusal == "I'm sorry, I can't help with that."
        and resp.raw_finish_reason == "completed"
    )


@pytest.mark.parametrize(
    ("name", "finish", "raw"),
    [
        ("incomplete_length.sse", "length", "max_output_tokens"),
        ("incomplete_content_filter.sse", "content_filter", "content_filter"),
    ],
)
def test_an_incomplete_response_is_done_with_its_reason(complete, name, finish, raw):
    """response.incomplete is a done: length for max_output_tokens, content_filter; raw kept."""
    rec, resp = replay(name, form=complete)
    assert rec.done[0] == finish and resp.raw_finish_reason == raw
    assert rec.terminals == 1 and rec.text


@pytest.mark.parametrize(
    ("name", "error", "partial"),
    [
        ("failed_midstream.sse", blazen.ProviderError, "Partial "),
        ("failed_rate_limit.sse", blazen.RateLimitError, ""),
        ("error_before_content.sse", blazen.RateLimitError, ""),
        ("error_after_content.sse", blazen.ProviderError, "Some text"),
        ("error_context_length.sse", blazen.ContextLengthError, ""),
        ("truncated.sse", blazen.ConnectionError, "The answer is forty"),
    ],
)
def test_each_failure_is_one_typed_error(complete, name, error, partial):
    """response.failed, an error event (flat or nested) and a cut stream end in one typed error."""
    rec, resp = replay(name, form=complete)
    assert resp is None and rec.terminals == 1 and rec.kinds[-1] == "error"
    assert isinstance(rec.error, error), rec.error
    assert rec.text == partial


def test_a_failed_response_says_what_failed():
    """The message of response.failed's error reaches the caller, with its code."""
    rec, _ = replay("failed_midstream.sse")
    assert "The model produced invalid content." in rec.error.message
    assert rec.error.error_type == "server_error"


def test_unknown_event_types_are_ignored():
    """Events added after this was written (and their deltas) change nothing."""
    rec, resp = replay("unknown_events.sse")
    assert resp.content == "Still fine." and rec.done[0] == "stop"


def test_a_server_that_sends_only_finished_items_is_read_from_them():
    """No deltas at all: the text and the call come from response.output_item.done."""
    _, resp = replay("items_without_deltas.sse")
    assert resp.content == "Whole at once."
    assert [(c.id, c.name, c.arguments()) for c in resp.tool_calls] == [
        ("call_N", "lookup", {"q": 1})
    ]


def test_a_built_in_tool_is_never_a_tool_call_and_the_turn_is_kept_whole():
    """A web_search_call runs on OpenAI's side: no tool call; chunks show it run; kept whole."""
    rec, resp = replay("web_search_citations.sse")
    assert resp.tool_calls == () and rec.done[0] == "stop"
    assert resp.content == "A sea turtle nest was found."
    events = [(c.server_tool.name, c.server_tool.status) for c in rec.chunks if c.server_tool]
    assert events == [("web_search", "running"), ("web_search", "done")]
    assert all(not c.tool_calls for c in rec.chunks)
    (kept,) = resp.provider_items
    assert (kept.provider, kept.kind) == ("openai-responses", "output")
    assert [item["type"] for item in kept.data] == ["web_search_call", "message"]
    assert resp.message.provider_items == (kept,)


def test_url_citations_are_collected_with_their_span_of_the_answer():
    """response.output_text.annotation.added is a Citation: url, title, the span it supports."""
    _, resp = replay("web_search_citations.sse")
    (cite,) = resp.citations
    assert (cite.provider, cite.kind) == ("openai-responses", "url_citation")
    assert (cite.url, cite.title) == ("https://example.com/good-news", "Good news")
    assert resp.content[cite.text_start : cite.text_end] == "A sea turtle nest was found"


# -- non-streaming ----------------------------------------------------------------------


def _final_response(name: str) -> dict[str, Any]:
    """The response object of a fixture's terminal event (what a non-streamed call returns)."""
    for line in fixture_bytes("responses", name).decode().splitlines():
        if line.startswith("data:"):
            obj = json.loads(line[5:])
            if obj["type"] in ("response.completed", "response.incomplete", "response.failed"):
                last = obj["response"]
    return last


@pytest.mark.parametrize(
    "name",
    [
        "text.sse",
        "reasoning_tool_call.sse",
        "parallel_tool_calls.sse",
        "incomplete_length.sse",
        "web_search_citations.sse",
        "other_events.sse",
    ],
)
def test_a_whole_response_reads_as_its_stream_does(name):
    """model.complete(req) on the response object gives what streaming gives."""
    _, streamed = replay(name)
    with StreamServer([Reply.json(_final_response(name))]) as server:
        whole = responses_model(server).complete(REQ)
        assert server.requests[0].json().get("stream") is None
    assert whole.content == streamed.content and whole.tool_calls == streamed.tool_calls
    assert whole.reasoning == streamed.reasoning and whole.usage == streamed.usage
    assert (whole.finish_reason, whole.raw_finish_reason) == (
        streamed.finish_reason,
        streamed.raw_finish_reason,
    )
    assert whole.reasoning_parts == streamed.reasoning_parts and whole.id == streamed.id
    assert whole.citations == streamed.citations
    assert whole.provider_items == streamed.provider_items


def test_a_whole_failed_response_is_its_typed_error():
    """A non-streamed response with status failed raises the error for its code."""
    with (
        StreamServer([Reply.json(_final_response("failed_rate_limit.sse"))]) as server,
        pytest.raises(blazen.RateLimitError, match="Rate limit reached"),
    ):
        responses_model(server).complete(REQ)


# -- the other ways of running a stream --------------------------------------------------


def test_a_pull_stream_yields_the_same_chunks_and_response():
    """Streaming.stream on the Responses wire: the chunks in a loop, then the response."""
    with StreamServer([Reply.sse(fixture_bytes("responses", "reasoning_tool_call.sse"))]) as s:
        with blazen.Streaming.stream(responses_model(s), REQ) as chunks:
            seen = list(chunks)
        resp = chunks.response
    assert seen[-1].is_final and resp.tool_calls[0].id == "call_wx01"
    assert "".join(c.reasoning_delta or "" for c in seen) == resp.reasoning


def test_a_batch_run_reads_every_item_from_the_responses_wire(tmp_path):
    """blazen.batch.run with a Responses model: each item's text and usage in the file."""
    from blazen import batch

    replies = [Reply.sse(fixture_bytes("responses", "text.sse")) for _ in range(3)]
    with StreamServer(replies) as server:
        items = [(f"q{i}", REQ) for i in range(3)]
        out = tmp_path / "r.jsonl"
        report = batch.run(responses_model(server), items, concurrency=2, out=out)
    records = sorted(batch.read(out), key=lambda r: r["id"])
    assert (
        report.ok == 3
        and [r["text"] for r in records] == ["Why did the scarecrow win an award?"] * 3
    )
    assert records[0]["usage"]["cached_tokens"] == 8


def test_every_built_in_tool_runs_on_openais_side_and_is_never_a_tool_call():
    """Code interpreter, MCP, file search, image generation: events on chunks, no tool calls."""
    rec, resp = replay("built_in_tools.sse")
    assert resp.tool_calls == () and all(not c.tool_calls for c in rec.chunks)
    done = [
        c.server_tool.name for c in rec.chunks if c.server_tool and c.server_tool.status == "done"
    ]
    assert done == ["code_interpreter", "mcp", "file_search", "image_generation"]
    assert resp.content == "1024, a 4, and a picture." and rec.done[0] == "stop"
    (kept,) = resp.provider_items
    assert [i["type"] for i in kept.data] == [
        "code_interpreter_call",
        "mcp_call",
        "file_search_call",
        "image_generation_call",
        "message",
    ]
    assert kept.data[1]["arguments"] == '{"sides":6}'  # the MCP call's, kept, not run here


def test_annotations_only_on_the_finished_item_are_still_citations():
    """A server that sends no annotation events: the done item's annotations are read."""
    events = fixture_bytes("responses", "web_search_citations.sse").split(b"\n\n")
    kept = b"\n\n".join(e for e in events if b"annotation.added" not in e)
    with StreamServer([Reply.sse(kept)]) as server:
        resp = blazen.Streaming.complete(responses_model(server), REQ)
    _, streamed = replay("web_search_citations.sse")
    assert resp.citations == streamed.citations and len(resp.citations) == 1


def test_argument_deltas_that_name_only_their_item_id_reach_their_call():
    """A delta with item_id but no output_index goes to the call that item announced."""
    blob = fixture_bytes("responses", "parallel_tool_calls.sse").decode()
    lines = []
    for line in blob.split("\n"):
        if line.startswith("data:") and "function_call_arguments.delta" in line:
            obj = json.loads(line[5:])
            del obj["output_index"]
            line = "data: " + json.dumps(obj)
        lines.append(line)
    with StreamServer([Reply.sse("\n".join(lines).encode())]) as server:
        resp = blazen.Streaming.complete(responses_model(server), REQ)
    _, whole = replay("parallel_tool_calls.sse")
    assert resp.tool_calls == whole.tool_calls


def test_every_event_type_of_the_openai_sdk_is_replayed_by_a_fixture():
    """Each type in the openai SDK's ResponseStreamEvent union is in some fixture here.

    Fails when the SDK learns an event type no fixture has yet: write one from OpenAI's
    streaming reference, and say what blazen does with it.
    """
    from openai.types.responses import ResponseStreamEvent

    (union, *_) = typing.get_args(ResponseStreamEvent)
    documented = {
        typing.get_args(event.model_fields["type"].annotation)[0]
        for event in typing.get_args(union)
    }
    replayed = set()
    for path in (FIXTURES / "responses").glob("*.sse"):
        for line in path.read_text().splitlines():
            if line.startswith("data:"):
                replayed.add(json.loads(line[5:]).get("type"))
    assert documented - replayed == set()


def test_mcp_lists_shell_runs_compaction_and_audio_events_are_no_tool_calls_and_no_text():
    """Items OpenAI made on its side are kept for the next turn; audio events add no text."""
    rec, resp = replay("other_events.sse")
    assert resp.content == "The die server failed; a.txt is there." and rec.done[0] == "stop"
    assert resp.tool_calls == () and all(not c.tool_calls for c in rec.chunks)
    assert "NOT TEXT" not in rec.text and resp.reasoning is None
    done = [
        c.server_tool.name for c in rec.chunks if c.server_tool and c.server_tool.status == "done"
    ]
    assert done == [
        "compaction",
        "mcp_list_tools",
        "mcp_list_tools",
        "mcp",
        "shell",
        "shell_call_output",
    ]
    (kept,) = resp.provider_items
    assert [i["type"] for i in kept.data] == [
        "compaction",
        "mcp_list_tools",
        "mcp_list_tools",
        "mcp_call",
        "shell_call",
        "shell_call_output",
        "message",
    ]
    # The compaction's encrypted content is the finished item's, to go back as it came.
    assert kept.data[0]["encrypted_content"].startswith("gAAAAABpCMP")
    assert kept.data[3]["status"] == "failed"


def _outcome(rec: Recorder, resp: Any) -> Any:
    """What a caller sees of one stream: the callbacks' kinds and text, and the response."""
    summary = None
    if resp is not None:
        summary = (
            resp.content,
            resp.reasoning,
            resp.refusal,
            resp.tool_calls,
            resp.raw_finish_reason,
            resp.usage,
            resp.reasoning_parts,
            resp.citations,
            resp.provider_items,
        )
    error = None if rec.error is None else (type(rec.error), rec.error.message)
    return [k for k in rec.kinds if k != "chunk"], rec.text, rec.done, error, summary


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "responses").glob("*.sse")))
def test_every_fixture_reads_the_same_in_one_byte_writes_as_whole(name):
    """Every event type and ending, one byte per write: the same terminal, text and response."""
    whole = _outcome(*replay(name))
    assert _outcome(*replay(name, one_byte=True)) == whole


def _failed_codes() -> list[str]:
    """Every error code of a failed response, as the openai SDK's ResponseError lists them."""
    from openai.types.responses import ResponseError

    return sorted(typing.get_args(ResponseError.model_fields["code"].annotation))


#: The codes of a failure on OpenAI's side, worth another try before any content.
_TRANSIENT = {"server_error", "vector_store_timeout"}
_POLICY = {
    "invalid_prompt",
    "bio_policy",
    "image_content_policy_violation",
    "misalignment_policy_violation",
}


@pytest.mark.parametrize("code", _failed_codes())
def test_every_code_of_a_failed_response_is_its_typed_error(code):
    """Each documented code is typed; only a fault on OpenAI's side is retried.

    Fails when the SDK learns a code that would be read as an unlabelled, retried error.
    """
    failed = {
        "type": "response.failed",
        "sequence_number": 1,
        "response": {
            "id": "resp_f",
            "object": "response",
            "status": "failed",
            "output": [],
            "error": {"code": code, "message": f"it failed ({code})"},
        },
    }
    with StreamServer([Reply.sse(blazen.testing.sse_event(failed, "response.failed"))]) as s:
        rec = Recorder()
        blazen.Streaming.complete(responses_model(s), REQ, rec.handler)
    err = rec.error
    assert f"it failed ({code})" in err.message and code in (err.body or "")
    if code in _TRANSIENT:
        assert type(err) is blazen.ProviderError and err.retryable
    elif code == "rate_limit_exceeded":
        assert isinstance(err, blazen.RateLimitError)
    elif code in _POLICY:
        assert isinstance(err, blazen.ContentPolicyError) and not err.retryable
    else:  # the request's own inputs: sending it again will not help
        assert isinstance(err, blazen.InvalidRequestError) and not err.retryable


def _incomplete_reasons() -> list[str]:
    """Every reason of an incomplete response, as the openai SDK's Response lists them."""
    from openai.types.responses.response import IncompleteDetails

    (literal, _none) = typing.get_args(IncompleteDetails.model_fields["reason"].annotation)
    return sorted(typing.get_args(literal))


@pytest.mark.parametrize("reason", _incomplete_reasons())
def test_every_reason_of_an_incomplete_response_has_its_documented_ending(reason, caplog):
    """response.incomplete with each documented reason: done as the table says, raw kept.

    Fails when the SDK learns a reason the finish-reason table has no row for.
    """
    from blazen._kit.finish import FINISH_REASONS

    assert reason in FINISH_REASONS["responses"]
    incomplete = {
        "type": "response.incomplete",
        "sequence_number": 1,
        "response": {
            "id": "resp_i",
            "object": "response",
            "status": "incomplete",
            "output": [],
            "incomplete_details": {"reason": reason},
        },
    }
    event = blazen.testing.sse_event(incomplete, "response.incomplete")
    with caplog.at_level("WARNING", logger="blazen"), StreamServer([Reply.sse(event)]) as s:
        rec = Recorder()
        resp = blazen.Streaming.complete(responses_model(s), REQ, rec.handler)
    assert rec.done[0] == FINISH_REASONS["responses"][reason]
    assert resp.raw_finish_reason == reason and resp.stop_details.category == reason
    assert "does not know the finish reason" not in caplog.text


# OpenAI's overload inside a 200 stream, in the shapes its servers send it; OpenAI's own
# client (codex-rs/codex-api/src/sse/responses.rs) reads server_is_overloaded and slow_down
# as an overload.
_OVERLOADED = {
    "error event": {
        "type": "error",
        "sequence_number": 2,
        "error": {
            "type": "service_unavailable_error",
            "code": "server_is_overloaded",
            "message": "Our servers are currently overloaded. Please try again later.",
            "param": None,
        },
    },
    "failed response": {
        "type": "response.failed",
        "sequence_number": 3,
        "response": {
            "id": "resp_o",
            "object": "response",
            "status": "failed",
            "output": [],
            "error": {
                "code": "server_is_overloaded",
                "message": "Our servers are currently overloaded. Please try again later.",
            },
        },
    },
    "slow down": {
        "type": "error",
        "sequence_number": 2,
        "code": "slow_down",
        "message": "Slow down",
    },
}


@pytest.mark.parametrize("shape", list(_OVERLOADED))
def test_openais_overload_in_the_stream_is_an_overloaded_error_retried_before_content(shape):
    """server_is_overloaded / slow_down: OverloadedError, and sent again before any chunk."""
    event = _OVERLOADED[shape]
    overloaded = Reply.sse(blazen.testing.sse_event(event, event["type"]))
    with StreamServer([overloaded]) as server:
        rec = Recorder()
        blazen.Streaming.complete(responses_model(server), REQ, rec.handler)
    assert isinstance(rec.error, blazen.OverloadedError) and rec.error.retryable
    again = Reply.sse(blazen.testing.sse_event(event, event["type"]))
    with StreamServer([again, Reply.sse(fixture_bytes("responses", "text.sse"))]) as server:
        resp = blazen.Streaming.complete(responses_model(server, max_retries=1), REQ)
        assert len(server.requests) == 2
    assert resp.content == "Why did the scarecrow win an award?"


@pytest.mark.parametrize(
    "name", ["reasoning_tool_call.sse", "web_search_citations.sse", "other_events.sse"]
)
def test_a_jsonl_transcript_of_the_responses_wire_reads_back_as_the_same_events(name, tmp_path):
    """Reasoning, calls and built-in tool events through a sink: the file holds what was seen."""
    from blazen.sinks import JsonlSink, read_jsonl, tee

    path = tmp_path / "t.jsonl"
    with StreamServer([Reply.sse(fixture_bytes("responses", name))]) as server:
        rec = Recorder()
        blazen.Streaming.complete(responses_model(server), REQ, tee(rec, JsonlSink(path)))
    events = list(read_jsonl(path))
    assert [k for k, _ in events] == rec.kinds and rec.kinds[-1] == "done"
    assert [a[0] for k, a in events if k == "chunk"] == rec.chunks
    assert events[-1] == ("done", rec.done)


def test_a_workflow_step_streams_from_the_responses_wire():
    """A step that streams a Responses answer and buffers it: the run's result is the text."""
    with StreamServer([Reply.sse(fixture_bytes("responses", "text.sse"))]) as server:
        model = responses_model(server)
        wf = blazen.workflow("responses_step")

        @wf.step("ask", accepts=["blazen::StartEvent"], emits=["blazen::StopEvent"])
        def ask(_event: Any) -> Any:
            resp = blazen.Streaming.complete(model, REQ)
            data = {"result": {"text": resp.content, "id": resp.id}}
            return blazen.StepOutput.single(
                blazen.Event.create(event_type="blazen::StopEvent", data=data)
            )

        result = wf.run()
    assert result.result == {"text": "Why did the scarecrow win an award?", "id": "resp_text01"}


@pytest.mark.parametrize("usage", [{"input_tokens": 30, "output_tokens": 7}, [1, 2], "garbage"])
def test_a_failed_response_s_usage_is_the_errors_usage(usage):
    """The usage response.failed reports is err.usage (not an estimate); a malformed one
    never hides why it failed."""
    failed = {
        "type": "response.failed",
        "sequence_number": 1,
        "response": {
            "id": "resp_fu",
            "object": "response",
            "status": "failed",
            "output": [],
            "error": {"code": "server_error", "message": "It broke."},
            "usage": usage,
        },
    }
    with StreamServer([Reply.sse(blazen.testing.sse_event(failed, "response.failed"))]) as s:
        rec = Recorder()
        blazen.Streaming.complete(responses_model(s), REQ, rec.handler)
    err = rec.error
    assert type(err) is blazen.ProviderError and "It broke." in err.message
    if isinstance(usage, dict):
        assert (err.usage.prompt_tokens, err.usage.completion_tokens) == (30, 7)
        assert err.usage.total_tokens == 37 and err.usage.partial
        assert not err.usage.estimated
    else:
        assert err.usage.estimated


@pytest.mark.parametrize("one_byte", [False, True], ids=["whole", "1-byte writes"])
def test_an_answer_only_in_the_terminal_response_is_delivered_not_dropped(one_byte):
    """Items that no event announced, found only in response.completed's output, are the answer."""
    rec, resp = replay("terminal_only.sse", one_byte=one_byte)
    assert rec.text == resp.content == "Whole at once."
    assert resp.reasoning == "Look it up."
    assert [(c.id, c.name, c.arguments()) for c in resp.tool_calls] == [
        ("call_N", "lookup", {"q": 1})
    ]
    assert rec.chunks[-1].is_final and rec.done[0] == "tool_calls"
    assert [(p.kind, json.loads(p.data)["id"]) for p in resp.reasoning_parts] == [
        ("thinking", "rs_term")
    ]
    assert resp.id == "resp_term01" and resp.usage.reasoning_tokens == 3
