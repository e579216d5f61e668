"""The Responses API wire under attack: cut streams, errors early and late, garbage, and
servers that will not let go. Every case ends in exactly one terminal, typed, and fast.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import blazen
from blazen import Llm, Streaming
from blazen.testing import Drop, Pause, Recorder, Reply, Stall, StreamServer, sse_event

from ..conftest import KEY_FOR_TESTS, fixture_bytes
from .texts import everything_about

REQ = Llm.completion_request([Llm.user("hi")])


def _model(server: StreamServer, **options: Any) -> blazen.ChatModel:
    options.setdefault("max_retries", 0)
    return blazen.Providers.openai_compat(
        "test", server.base_url, api_key=KEY_FOR_TESTS, api="responses", **options
    )


def _run(*replies: Reply, **options: Any) -> tuple[Recorder, Any, StreamServer]:
    with StreamServer(replies) as server:
        rec = Recorder()
        resp = Streaming.complete(_model(server, **options), REQ, rec.handler)
        return rec, resp, server


def _events(name: str) -> list[bytes]:
    """A fixture's events, one write each."""
    return [e + b"\n\n" for e in fixture_bytes("responses", name).split(b"\n\n") if e]


def _head(name: str, count: int) -> list[bytes]:
    return _events(name)[:count]


def test_an_error_event_before_any_content_is_retried_and_the_retry_answers():
    """A rate-limit error event first, then a good stream: one done, no error seen."""
    rec, resp, server = _run(
        Reply.sse(fixture_bytes("responses", "error_before_content.sse")),
        Reply.sse(fixture_bytes("responses", "text.sse")),
        max_retries=1,
    )
    assert rec.kinds.count("done") == 1 and rec.errors == []
    assert resp.content == "Why did the scarecrow win an award?" and len(server.requests) == 2


@pytest.mark.parametrize(
    ("name", "partial"),
    [("failed_midstream.sse", "Partial "), ("error_after_content.sse", "Some text")],
)
def test_a_failure_after_content_is_never_retried(name, partial):
    """Once text reached a callback, response.failed or an error event (a retryable one,
    before content) ends the stream: no second request."""
    rec, resp, server = _run(
        Reply.sse(fixture_bytes("responses", name)),
        Reply.sse(fixture_bytes("responses", "text.sse")),
        max_retries=3,
    )
    assert resp is None and rec.terminals == 1 and len(server.requests) == 1
    assert rec.text == partial and isinstance(rec.error, blazen.ProviderError)
    assert rec.error.retryable  # retried, had it come first: content alone stops it


@pytest.mark.parametrize("cut", [1, 3, 5, 8])
def test_a_stream_cut_before_its_terminal_is_an_error_never_a_done(cut):
    """Any prefix of a good stream, then the connection closes: a ConnectionError."""
    rec, resp, _ = _run(Reply.sse([*_head("text.sse", cut), Drop()]))
    assert resp is None and rec.kinds[-1] == "error" and rec.terminals == 1
    assert isinstance(rec.error, blazen.ConnectionError)


def test_a_server_that_keeps_the_connection_open_after_completed_returns_within_a_second():
    """response.completed, then the server stalls: the call returns at once, done."""
    with StreamServer([Reply.sse([*_events("text.sse"), Stall()])]) as server:
        rec = Recorder()
        start = time.monotonic()
        resp = Streaming.complete(_model(server), REQ, rec.handler)
        took = time.monotonic() - start
    assert rec.kinds[-1] == "done" and resp is not None
    assert took < 3.0, took  # about a second; generous under a loaded machine


def test_a_server_that_trickles_after_completed_does_not_hold_the_call():
    """Keep-alive bytes for seconds after the terminal event: the call returns quickly."""
    trickle = [b": keep-alive\n\n", Pause(0.3)] * 30
    with StreamServer([Reply.sse([*_events("text.sse"), *trickle])]) as server:
        start = time.monotonic()
        resp = Streaming.complete(_model(server), REQ)
        took = time.monotonic() - start
    assert resp.content and took < 3.0, took


def _event(kind: str, **fields: Any) -> bytes:
    return sse_event({"type": kind, "sequence_number": 0, **fields}, kind)


GARBAGE = {
    "text delta is a number": _event("response.output_text.delta", output_index=0, delta=5),
    "reasoning delta is a list": _event(
        "response.reasoning_summary_text.delta", output_index=0, summary_index=0, delta=["x"]
    ),
    "refusal delta is an object": _event(
        "response.refusal.delta", output_index=0, content_index=0, delta={"a": 1}
    ),
    "item without a type": _event("response.output_item.added", output_index=0, item={"id": "x"}),
    "item index is text": _event(
        "response.output_item.added", output_index="0", item={"type": "message"}
    ),
    "payload is not JSON": b"event: response.output_text.delta\ndata: {not json\n\n",
    "payload is a list": b"event: response.output_text.delta\ndata: [1, 2]\n\n",
}


@pytest.mark.parametrize("what", list(GARBAGE))
def test_garbage_in_an_event_is_one_malformed_payload_error(what):
    """A delta or item of the wrong shape: one ProviderError, never a number in a chunk."""
    head = _head("text.sse", 4)
    rec, resp, _ = _run(Reply.sse([*head, GARBAGE[what]]))
    assert resp is None and rec.terminals == 1 and rec.kinds[-1] == "error"
    assert isinstance(rec.error, blazen.ProviderError), rec.error
    assert rec.error.error_type == "malformed_payload"
    assert all(c.content_delta is None or isinstance(c.content_delta, str) for c in rec.chunks)


def test_call_arguments_of_the_wrong_type_are_malformed():
    """A function call's arguments delta that is a number: a malformed payload, no snapshot."""
    added = _event(
        "response.output_item.added",
        output_index=0,
        item={"type": "function_call", "call_id": "c", "name": "f", "arguments": ""},
    )
    bad = _event("response.function_call_arguments.delta", output_index=0, delta=42)
    rec, resp, _ = _run(Reply.sse([*_head("text.sse", 1), added, bad]))
    assert resp is None and rec.error.error_type == "malformed_payload"


def test_arguments_for_an_index_no_item_announced_are_ignored():
    """Deltas for an output index that is no function call (or unknown) call nothing."""
    stray = _event("response.function_call_arguments.delta", output_index=9, delta='{"a":1}')
    events = _events("text.sse")
    rec, resp, _ = _run(Reply.sse([*events[:3], stray, *events[3:]]))
    assert resp.tool_calls == () and rec.done[0] == "stop"


def test_a_key_echoed_in_an_error_event_shows_nowhere():
    """The server echoes the key in every field of an error event: it appears nowhere."""
    echo = _event("error", code=KEY_FOR_TESTS, message=f"bad {KEY_FOR_TESTS}", param=KEY_FOR_TESTS)
    rec, _, _ = _run(Reply.sse([echo]))
    assert isinstance(rec.error, blazen.BlazenError)
    assert KEY_FOR_TESTS not in everything_about(rec.error)


def test_a_key_echoed_in_a_failed_response_shows_nowhere():
    """response.failed whose message carries the key: scrubbed like any error body."""
    failed = _event(
        "response.failed",
        response={"id": "r", "status": "failed", "error": {"code": "x", "message": KEY_FOR_TESTS}},
    )
    rec, _, _ = _run(Reply.sse([failed]))
    assert KEY_FOR_TESTS not in everything_about(rec.error)


def test_a_raising_chunk_callback_aborts_the_stream_with_one_callback_error():
    """The callback raises on the first text delta: on_error(CallbackError), server hung up."""
    errors: list[Any] = []

    def boom(_chunk: Any) -> None:
        raise RuntimeError("caller bug")

    with StreamServer([Reply.sse([*_head("text.sse", 5), Stall()])]) as server:
        Streaming.complete(_model(server), REQ, on_chunk=boom, on_error=errors.append)
        assert server.wait_closed(5.0)
    (err,) = errors
    assert isinstance(err, blazen.CallbackError) and isinstance(err.__cause__, RuntimeError)


FIXTURES = [
    "text.sse",
    "reasoning_tool_call.sse",
    "parallel_tool_calls.sse",
    "custom_tool_call.sse",
    "web_search_citations.sse",
    "refusal.sse",
]


def _summary(resp: Any) -> Any:
    return (
        resp.content,
        resp.reasoning,
        resp.refusal,
        [(c.id, c.name, c.arguments_json) for c in resp.tool_calls],
        resp.finish_reason,
        resp.usage,
        resp.reasoning_parts,
        resp.citations,
        resp.provider_items,
    )


WHOLE: dict[str, Any] = {}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(FIXTURES),
    cuts=st.lists(st.integers(min_value=1, max_value=20_000), max_size=12),
)
def test_any_split_of_the_bytes_reads_as_the_whole_stream(name, cuts):
    """Whatever TCP writes the bytes arrive in, the response is the one of the whole body."""
    blob = fixture_bytes("responses", name)
    if name not in WHOLE:
        WHOLE[name] = _summary(_run(Reply.sse(blob))[1])
    points = sorted({c % len(blob) for c in cuts} - {0})
    writes = [blob[a:b] for a, b in zip([0, *points], [*points, len(blob)])]
    _, resp, _ = _run(Reply.sse(writes))
    assert _summary(resp) == WHOLE[name]


def test_unknown_event_types_with_any_payload_change_nothing():
    """Made-up event types, whatever they carry, are ignored between real ones."""
    odd = [
        _event("response.brand_new.delta", output_index=0, delta="NOT TEXT"),
        _event("response.output_text.delta.v2", output_index=0, delta="nor this"),
        sse_event(json.dumps({"type": "response.mystery", "x": [None, {"y": 1}]}), "mystery"),
    ]
    events = _events("text.sse")
    _, resp, _ = _run(Reply.sse([*events[:4], *odd, *events[4:]]))
    assert resp.content == "Why did the scarecrow win an award?"
