"""Hostile and malformed bytes: a clear error or the right answer, never a crash.

Each payload has the wrong JSON type somewhere a provider promises text or a count, or is
nested past Python's recursion limit. The stream must end in one
``on_error(ProviderError)`` of type ``malformed_payload``: never a bare TypeError, an
InternalError, a number handed to ``on_chunk``, or an ``is_final`` chunk followed by an
error. Framing that the SSE specification allows is read as it allows.
"""

from __future__ import annotations

import json

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Pause, Recorder, Reply, StreamServer, openai_sse, sse, sse_event

from ..conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])


def _openai(server: StreamServer, **options: object) -> blazen.ChatModel:
    options.setdefault("max_retries", 0)
    return blazen.Providers.openai_compat("test", server.base_url, api_key=KEY_FOR_TESTS, **options)


def _anthropic(server: StreamServer) -> blazen.ChatModel:
    return blazen.Providers.anthropic(
        api_key=KEY_FOR_TESTS, base_url=server.base_url, max_retries=0
    )


def _delta(delta: dict, finish: object = None, **extra: object) -> dict:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


OPENAI_BAD = {
    "content is a number": [_delta({"content": 5})],
    "tool id is a number": [
        _delta({"tool_calls": [{"index": 0, "id": 5, "function": {"name": "f", "arguments": ""}}]})
    ],
    "tool name is a list": [
        _delta({"tool_calls": [{"index": 0, "id": "c", "function": {"name": ["x"]}}]})
    ],
    "finish_reason is a number": [_delta({"content": "hi"}), _delta({}, finish=7)],
    "usage counts are text": [
        _delta({"content": "hi"}, finish="stop"),
        {"choices": [], "usage": {"prompt_tokens": "5", "completion_tokens": 6}},
    ],
    "usage count is negative": [
        _delta({"content": "hi"}, finish="stop"),
        {"choices": [], "usage": {"prompt_tokens": -1, "completion_tokens": 6}},
    ],
}


def _assert_malformed(rec: Recorder) -> None:
    assert rec.terminals == 1 and rec.kinds[-1] == "error", rec.kinds
    err = rec.error
    assert type(err) is blazen.ProviderError and err.error_type == "malformed_payload", repr(err)
    assert not any(c.is_final for c in rec.chunks)
    for chunk in rec.chunks:  # whatever was delivered is what the contract promises
        assert chunk.content_delta is None or type(chunk.content_delta) is str
        assert chunk.reasoning_delta is None or type(chunk.reasoning_delta) is str
        assert all(type(c.id) is str and type(c.name) is str for c in chunk.tool_calls)


@pytest.mark.parametrize("case", list(OPENAI_BAD))
def test_a_wrong_json_type_is_a_malformed_payload(case):
    with StreamServer([Reply.sse(sse(*OPENAI_BAD[case]))]) as server:
        rec = Recorder()
        Streaming.complete(_openai(server), REQ, rec.handler)
    _assert_malformed(rec)


def test_tolerated_shapes_give_the_right_answer():
    """Arguments sent as an object become their JSON text; a non-text reasoning is dropped."""
    call = {
        "index": 0,
        "id": "c",
        "type": "function",
        "function": {"name": "f", "arguments": {"a": 1}},
    }
    body = sse(
        _delta({"reasoning_content": ["x"], "content": "hi"}),
        _delta({"tool_calls": [call]}, finish="tool_calls"),
    )
    with StreamServer([Reply.sse(body)]) as server:
        resp = Streaming.complete(_openai(server), REQ)
    assert resp is not None and resp.content == "hi" and resp.reasoning is None
    assert resp.tool_calls[0].arguments() == {"a": 1}


ANTHROPIC_BAD = {
    "text block starts with a number": {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": 5},
    },
    "thinking delta is a number": {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "thinking_delta", "thinking": 7},
    },
    "partial_json is a number": {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": 5},
    },
}


@pytest.mark.parametrize("case", list(ANTHROPIC_BAD))
def test_a_wrong_json_type_in_an_anthropic_stream_is_a_malformed_payload(case):
    start = {"type": "message_start", "message": {"id": "m", "model": "c", "usage": {}}}
    block = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    if "partial_json" in case:
        block["content_block"] = {"type": "tool_use", "id": "t", "name": "f", "input": {}}
    events = [sse_event(start, "message_start"), sse_event(block, "content_block_start")]
    bad = ANTHROPIC_BAD[case]
    events.append(sse_event(bad, bad["type"]))
    with StreamServer([Reply.sse(events)]) as server:
        rec = Recorder()
        Streaming.complete(_anthropic(server), REQ, rec.handler)
    _assert_malformed(rec)


def test_json_nested_past_the_recursion_limit_is_a_malformed_payload():
    deep = "[" * 100_000 + "]" * 100_000
    body = [b'data: {"choices": ' + deep.encode() + b"}\n\n"]
    with StreamServer([Reply.sse(body)]) as server:
        rec = Recorder()
        Streaming.complete(_openai(server), REQ, rec.handler)
    _assert_malformed(rec)
    assert "nested too deeply" in rec.error.message


@pytest.mark.parametrize("split", [0, 1, 2, 3], ids=lambda n: f"bom-split-at-{n}")
def test_a_byte_order_mark_at_the_start_of_a_stream_is_not_part_of_the_first_event(split):
    """The SSE specification lets a stream open with a UTF-8 BOM; the first event survives."""
    events = sse(_delta({"content": "Hel"}), _delta({"content": "lo"}, finish="stop"))
    whole = b"\xef\xbb\xbf" + b"".join(events)
    body = [whole[:split], whole[split:]] if split else [whole]
    with StreamServer([Reply.sse(body)]) as server:
        resp = Streaming.complete(_openai(server), REQ)
    assert resp is not None and resp.content == "Hello"


def test_keep_alives_between_events_never_add_up_to_an_oversize_event():
    """max_event_bytes counts one event's bytes, not a long run of pings before it."""
    events = openai_sse(["a", "b"])
    pings = [b": ping\n\n", Pause(0.001)] * 300
    body = [events[0], events[1], *pings, *events[2:]]
    with StreamServer([Reply.sse(body)]) as server:
        rec = Recorder()
        resp = Streaming.complete(_openai(server, max_event_bytes=1024), REQ, rec.handler)
    assert resp is not None and resp.content == "ab", rec.error


def test_an_event_over_the_cap_is_still_refused():
    big = json.dumps(_delta({"content": "x" * 4000}))
    with StreamServer([Reply.sse([f"data: {big}\n\n".encode()])]) as server:
        rec = Recorder()
        Streaming.complete(_openai(server, max_event_bytes=1024), REQ, rec.handler)
    assert isinstance(rec.error, blazen.ProviderError)
    assert rec.error.error_type == "event_too_large"


@pytest.mark.parametrize(
    "ending",
    ["lf-then-crlf", "crlf", "cr", "crlf-split-across-writes"],
)
def test_any_mix_of_line_endings_frames_the_events_the_spec_says(ending):
    """LF, CRLF and CR end lines, in any mix (an LF line ended by a CRLF blank line too)."""
    events = [
        json.dumps(_delta({"content": "Hel"})),
        json.dumps(_delta({"content": "lo"}, finish="stop")),
        "[DONE]",
    ]
    if ending == "lf-then-crlf":
        body = [f"data: {e}\n\r\n".encode() for e in events]
    elif ending == "crlf":
        body = [f"data: {e}\r\n\r\n".encode() for e in events]
    elif ending == "cr":
        body = [f"data: {e}\r\r".encode() for e in events]
    else:
        whole = b"".join(f"data: {e}\r\n\r\n".encode() for e in events)
        cut = whole.index(b"\r\n") + 1  # between the CR and the LF
        body = [whole[:cut], whole[cut:]]
    with StreamServer([Reply.sse(body)]) as server:
        rec = Recorder()
        resp = Streaming.complete(_openai(server), REQ, rec.handler)
    assert resp is not None and resp.content == "Hello", rec.error


def test_a_broken_chunk_size_line_keeps_the_text_before_it_in_partial():
    event = b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    raw = head + f"{len(event):x}\r\n".encode() + event + b"\r\nzz\r\nxx\r\n"
    with StreamServer([Reply(raw=True, body=[raw])]) as server:
        rec = Recorder()
        Streaming.complete(_openai(server), REQ, rec.handler, timeout=5)
    assert isinstance(rec.error, blazen.ConnectionError)
    assert rec.error.partial == "Hel" and rec.text == "Hel"


def test_two_tool_calls_sharing_an_index_but_not_an_id_are_two_calls():
    """Some compatible servers number every call 0; their ids tell the calls apart."""

    def call(call_id: str, name: str, args: str) -> dict:
        fn = {"name": name, "arguments": args}
        return _delta(
            {"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": fn}]}
        )

    def more(args: str) -> dict:
        return _delta({"tool_calls": [{"index": 0, "function": {"arguments": args}}]})

    body = sse(
        call("c1", "f", '{"a"'),
        more(": 1}"),
        call("c2", "g", '{"b"'),
        more(": 2}"),
        _delta({}, finish="tool_calls"),
    )
    with StreamServer([Reply.sse(body)]) as server:
        resp = Streaming.complete(_openai(server), REQ)
    assert resp is not None
    assert [(c.id, c.name, c.arguments()) for c in resp.tool_calls] == [
        ("c1", "f", {"a": 1}),
        ("c2", "g", {"b": 2}),
    ]


def test_tool_call_snapshots_cost_linear_memory_even_when_every_chunk_is_kept():
    """20,000 calls, every chunk kept: the snapshots share their calls, no copy per chunk.

    A tuple per chunk would hold 20,000 x 10,000 references on average (1.6 GB); the
    bound below allows 2 KB per call, its two kept chunks included.
    """
    import tracemalloc

    from blazen._kit import StreamState

    n = 20_000
    state = StreamState()
    kept = []
    tracemalloc.start()
    try:
        for i in range(n):
            state.tool_delta(i, f"call_{i}", "lookup", None)
            kept.append(state.emit(None, None))
            state.tool_delta(i, None, None, f'{{"q": {i}}}')
            kept.append(state.emit(None, None))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < n * 2_000, f"{peak / n:.0f} bytes per call"
    # Every kept chunk still shows the calls as they stood when it was delivered.
    early, late = kept[1], kept[-1]
    assert len(early.tool_calls) == 1 and early.tool_calls[0].arguments() == {"q": 0}
    assert len(late.tool_calls) == n and late.tool_calls[-1].arguments() == {"q": n - 1}
    assert kept[2].tool_calls[1].arguments_json == "" and len(kept[2].tool_calls) == 2
    assert late.tool_calls == tuple(late.tool_calls) and late.tool_calls[5].id == "call_5"
    response = state.response()
    assert type(response.tool_calls) is tuple and len(response.tool_calls) == n


def test_a_call_taken_up_again_after_others_started_keeps_every_snapshot_right():
    """Interleaved fragments (calls 0, 1, 2, then 0 again): old snapshots do not change."""
    from blazen._kit import StreamState

    state = StreamState()
    seen = []
    for step, (index, args) in enumerate(
        [(0, '{"a"'), (1, '{"b": 1}'), (2, '{"c": 2}'), (0, ": 0}"), (3, "{}"), (1, "")]
    ):
        state.tool_delta(index, f"c{index}" if step < 5 else None, f"f{index}", args)
        chunk = state.emit(None, None)
        seen.append([c.arguments_json for c in chunk.tool_calls] if chunk else None)
    assert seen[:5] == [
        ['{"a"'],
        ['{"a"', '{"b": 1}'],
        ['{"a"', '{"b": 1}', '{"c": 2}'],
        ['{"a": 0}', '{"b": 1}', '{"c": 2}'],
        ['{"a": 0}', '{"b": 1}', '{"c": 2}', "{}"],
    ]


def test_an_ndjson_stream_whose_last_line_has_no_newline_still_ends_properly():
    lines = [
        {"model": "m", "message": {"role": "assistant", "content": "hi"}, "done": False},
        {
            "model": "m",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
        },
    ]
    body = "\n".join(json.dumps(line) for line in lines).encode()  # no newline at the end
    reply = Reply(headers={"Content-Type": "application/x-ndjson"}, body=[body], transfer="close")
    with StreamServer([reply]) as server:
        model = blazen.Providers.ollama(base_url=server.base_url, max_retries=0)
        resp = Streaming.complete(model, REQ)
    assert resp is not None and resp.content == "hi" and resp.finish_reason == "stop"


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": 5},
        {"type": "object", "required": 5},
        {"type": "object", "properties": {"a": {"type": "strng"}}},
        {"type": "object", "properties": {"a": 5}},
        {"type": "object", "properties": {"a": {"type": "array", "items": {"type": []}}}},
    ],
    ids=["type-5", "required-5", "misspelt-type", "property-not-a-schema", "empty-type-list"],
)
def test_a_nonsense_tool_schema_is_refused_when_the_tool_is_built(parameters):
    """Before anything is sent: for a hand-written tool and for a decorated function."""
    with pytest.raises(blazen.ValidationError):
        Llm.tool("f", "does f", parameters)

    def f(a: str) -> str:
        return a

    with pytest.raises(blazen.ValidationError):
        blazen.tool(f, parameters=parameters)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")], ids=str)
def test_nan_or_infinity_in_a_request_is_refused_when_it_is_built(bad):
    """JSON has no word for them: a provider would refuse the request after it was sent."""
    schema = {"type": "object", "properties": {"a": {"type": "number", "maximum": bad}}}
    with pytest.raises(blazen.ValidationError, match="NaN or infinity"):
        Llm.tool("f", "", schema)
    with pytest.raises(blazen.ValidationError, match="NaN or infinity"):
        Llm.completion_request([Llm.user("hi")], response_format={"type": "json_schema", "x": bad})


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize(
    "data",
    ['{"error": {"message": "boom"}}', '{"message": "boom"}', '"boom"', "boom", "[1, 2]", "{}"],
)
def test_an_sse_error_event_is_the_providers_error_whatever_its_shape(wire, data):
    body = [b"event: error\ndata: " + data.encode() + b"\n\n"]
    with StreamServer([Reply.sse(body)]) as server:
        model = _openai(server) if wire == "openai" else _anthropic(server)
        rec = Recorder()
        Streaming.complete(model, REQ, rec.handler)
    err = rec.error
    assert rec.kinds == ["error"] and isinstance(err, blazen.ProviderError), repr(err)
    assert err.error_type != "malformed_payload" and "stream error" in err.message
    if "boom" in data:
        assert "boom" in err.message


@pytest.mark.parametrize(
    "interim", [b"103 Early Hints\r\nLink: </a.css>; rel=preload", b"102 Processing"]
)
def test_interim_1xx_responses_before_the_real_one_are_passed_over(interim):
    body = b"".join(openai_sse(["Hel", "lo"]))
    raw = (
        b"HTTP/1.1 " + interim + b"\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    with StreamServer([Reply(raw=True, body=[raw])]) as server:
        rec = Recorder()
        resp = Streaming.complete(_openai(server), REQ, rec.handler, timeout=5)
    assert resp is not None and resp.content == "Hello", rec.error


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compressed_stream_is_decoded_as_it_arrives(encoding):
    """blazen asks for identity; a server or proxy that compresses anyway is still read."""
    import gzip
    import zlib

    plain = b"".join(openai_sse(["Hel", "lo"]))
    packed = gzip.compress(plain) if encoding == "gzip" else zlib.compress(plain)
    body = [packed[:10], Pause(0.01), packed[10:]]
    reply = Reply(
        headers={"Content-Type": "text/event-stream", "Content-Encoding": encoding}, body=body
    )
    with StreamServer([reply]) as server:
        rec = Recorder()
        resp = Streaming.complete(_openai(server), REQ, rec.handler, timeout=5)
    assert resp is not None and resp.content == "Hello", rec.error


def test_an_event_whose_blank_line_comes_in_its_own_write_still_ends_there():
    """max_event_bytes counts one event even when the line that ends it is a separate write."""
    events = [e[:-1] for e in openai_sse([f"part {i} " for i in range(40)])]  # drop one "\n"
    body = [part for event in events for part in (event, Pause(0.001), b"\n")]
    with StreamServer([Reply.sse(body)]) as server:
        rec = Recorder()
        resp = Streaming.complete(_openai(server, max_event_bytes=1024), REQ, rec.handler)
    assert resp is not None and resp.content.startswith("part 0 "), rec.error


def test_endless_interim_responses_end_in_an_error_not_a_wait():
    interim = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
    with StreamServer([Reply(raw=True, body=[interim * 200])]) as server:
        rec = Recorder()
        Streaming.complete(_openai(server), REQ, rec.handler, timeout=5)
    assert isinstance(rec.error, blazen.ConnectionError) and "interim" in rec.error.message
