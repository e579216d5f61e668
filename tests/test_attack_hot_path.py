"""Attacks on this round's hot-path changes, as a hostile server and a hostile caller.

Each test here either failed before its fix (it says which) or pins a promise no other
test pinned: chunked framing that http.client would read differently, the tool-call
shortcut under interleaved calls and stray deltas, and snapshots that must never change
once delivered.
"""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

import blazen
from blazen import Llm, Streaming
from blazen._http.chunked import ChunkedBody
from blazen.testing import Drop, Recorder, Reply, StreamServer, openai_sse

from .test_transport_fast_paths import _response

REQ = Llm.completion_request([Llm.user("hi")])


def named_sse(obj: dict[str, Any]) -> bytes:
    """One SSE event named by its payload's type (Anthropic's and the Responses API's way)."""
    return b"event: %s\ndata: %s\n\n" % (obj["type"].encode(), json.dumps(obj).encode())


# -- snapshots already delivered never change -------------------------------------------


def test_a_finished_call_that_rewrites_its_arguments_leaves_earlier_snapshots_alone():
    """Responses API: a delta sent before its call was announced is lost, so the finished
    item's whole arguments replace what streamed. The chunks delivered before that must
    still show what had streamed when they were made (each chunk's ``tool_calls`` is the
    snapshot *so far*, an immutable value), read then or later.

    Failed before the fix: ``tool_arguments`` rewrote the list of fragments that earlier
    snapshots share in place, so every chunk already delivered (still unread) showed the
    final arguments, ``{"a":1,"b":2}`` three times instead of ``{"b":`` then ``{"b":2}``;
    and what a callback saw depended on whether it read the value before the worker got to
    ``output_item.done``.
    """
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_a", "name": "f"}
    whole = '{"a":1,"b":2}'
    done_item = {**call, "status": "completed", "arguments": whole}
    events = [
        named_sse({"type": "response.created", "response": {"id": "resp_1", "model": "m"}}),
        # Before output_item.added: no call to give it to yet, so it is dropped.
        named_sse(
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 0,
                "delta": '{"a":1,',
            }
        ),
        named_sse(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**call, "status": "in_progress", "arguments": ""},
            }
        ),
        named_sse(
            {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"b":'}
        ),
        named_sse(
            {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "2}"}
        ),
        named_sse({"type": "response.output_item.done", "output_index": 0, "item": done_item}),
        named_sse(
            {
                "type": "response.completed",
                "response": {
                    "id": "resp_1",
                    "model": "m",
                    "status": "completed",
                    "output": [done_item],
                    "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
                },
            }
        ),
    ]
    kept: list[blazen.StreamChunk] = []
    with StreamServer([Reply.sse(events)]) as server:
        model = blazen.Providers.openai(
            api_key="sk-test", base_url=server.base_url, api="responses", max_retries=0
        )
        resp = Streaming.complete(model, REQ, on_chunk=kept.append)
    assert resp is not None and resp.tool_calls[0].arguments_json == whole
    seen = [[c.arguments_json for c in chunk.tool_calls] for chunk in kept]
    assert seen[:3] == [[""], ['{"b":'], ['{"b":2}']]
    assert seen[3:] and all(s == [whole] for s in seen[3:])


# -- value classes ----------------------------------------------------------------------


@pytest.mark.parametrize("bad", [None, 5, b"{}", {"a": 1}])
def test_a_tool_call_with_arguments_that_are_not_text_is_refused_when_built(bad):
    """A programming mistake raises TypeError at once (SPEC: "Programming mistakes ...
    raise TypeError/ValueError immediately").

    Failed before the fix: ``ToolCall("id", "f", None)`` was built, and its
    ``arguments_json``, ``==``, ``hash`` and ``repr`` each raised AttributeError later
    (``'NoneType' object has no attribute 'text'``), far from the mistake.
    """
    with pytest.raises(TypeError, match="arguments_json must be a str"):
        blazen.ToolCall("call_1", "f", bad)


def test_a_server_tools_credentials_never_show_in_its_repr_or_its_requests():
    """SPEC promise 10: keys never leak into reprs. The Responses wire sends an ``mcp``
    server tool's config as given, and that config carries the remote server's credential
    (``authorization``, ``headers``; Anthropic's MCP servers say ``authorization_token``).

    Failed before the fix: ``repr(ServerTool)`` (by_value's repr, as attrs' before it) and
    so ``repr(CompletionRequest)`` printed every config value, the token included. Now the
    credential's name shows and its value is masked; the value sent is unchanged.
    """
    secrets = ["sk-SECRET-mcp-0123456789", "SECRET-header-0123456789", "SECRET-nested-01234567"]
    tool = Llm.server_tool(
        "mcp",
        server_label="docs",
        server_url="https://mcp.example/sse",
        authorization=secrets[0],
        headers={"X-Api-Key": secrets[1]},
        servers=[{"authorization_token": secrets[2]}],
        require_approval="never",
    )
    req = Llm.completion_request([Llm.user("hi")], tools=[tool])
    for shown in (repr(tool), str(tool), repr(req), f"{req}"):
        assert not any(secret in shown for secret in secrets), shown
        assert "authorization" in shown and "X-Api-Key" in shown and "never" in shown
    assert tool.config["authorization"] == secrets[0]
    assert tool == Llm.server_tool("mcp", **tool.config)


# -- pins: the tool-call shortcut end to end, chunked framing http.client reads differently


def test_interleaved_calls_and_stray_deltas_give_true_snapshots_end_to_end():
    """Anthropic: ten tool_use blocks open at once (past the eight a snapshot copies, so
    frozen calls thaw), fragments interleaved across them, plus deltas for a block never
    started and for one already stopped (dropped). Every chunk's snapshot is the calls so
    far, whether read in the callback or after the call returned; the answer has them all.
    """
    n = 10
    events = [
        named_sse(
            {
                "type": "message_start",
                "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 1}},
            }
        )
    ]
    frags: dict[int, list[str]] = {}
    expected: list[list[tuple[str, str]]] = []

    def snap() -> None:
        expected.append([(f"toolu_{i}", "".join(frags[i])) for i in sorted(frags)])

    def delta(i: int, text: str) -> bytes:
        return named_sse(
            {
                "type": "content_block_delta",
                "index": i,
                "delta": {"type": "input_json_delta", "partial_json": text},
            }
        )

    for i in range(n):
        block = {"type": "tool_use", "id": f"toolu_{i}", "name": f"f{i}", "input": {}}
        events.append(
            named_sse({"type": "content_block_start", "index": i, "content_block": block})
        )
        frags[i] = []
        snap()
    pieces = ['{"k":', '"\\ud83d', '\\ude00"', "}"]
    for piece in pieces:
        for i in (0, 9, 3, 7, 1, 5):
            events.append(delta(i, piece))
            frags[i].append(piece)
            snap()
        events.append(delta(99, "JUNK"))  # a block never started
    events.append(named_sse({"type": "content_block_stop", "index": 0}))
    events.append(delta(0, "AFTER-STOP"))  # a block already stopped
    for i in range(1, n):
        events.append(named_sse({"type": "content_block_stop", "index": i}))
        if not frags[i]:
            frags[i].append("{}")  # a call streamed no fragment: its input is {}
            snap()
    events.append(
        named_sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 5},
            }
        )
    )
    events.append(named_sse({"type": "message_stop"}))

    live: list[list[tuple[str, str]]] = []
    kept: list[blazen.StreamChunk] = []

    def on_chunk(chunk: blazen.StreamChunk) -> None:
        kept.append(chunk)
        live.append([(c.id, c.arguments_json) for c in chunk.tool_calls])

    with StreamServer([Reply.sse(events)]) as server:
        model = blazen.Providers.anthropic(api_key="sk-test", base_url=server.url, max_retries=0)
        resp = Streaming.complete(model, REQ, on_chunk=on_chunk)
    assert resp is not None and resp.finish_reason == "tool_calls"
    assert kept[-1].is_final and live[:-1] == expected
    assert [[(c.id, c.arguments_json) for c in k.tool_calls] for k in kept] == live
    assert [(c.id, c.arguments_json) for c in resp.tool_calls] == expected[-1]
    assert json.loads(resp.tool_calls[9].arguments_json) == {"k": "\U0001f600"}


HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def _reference(body: bytes) -> tuple[bytes, bool]:
    resp = _response([HEAD + body])
    out = []
    try:
        while True:
            data = resp.read1(65536)
            if not data:
                return b"".join(out), False
            out.append(data)
    except (http.client.HTTPException, ValueError):
        return b"".join(out), True


def _cutter(body: bytes, step: int) -> tuple[bytes, bool]:
    pieces = [HEAD, *(body[i : i + step] for i in range(0, len(body), step))]
    chunked = ChunkedBody(_response(pieces))
    out = []
    try:
        while True:
            data = chunked.read()
            if not data:
                return b"".join(out), False
            out.append(data)
    except http.client.HTTPException:
        return b"".join(out), True


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"5\nhello\n0\n\n", id="LF-only-lines"),
        pytest.param(b"05\r\nhello\r\n000A\r\n0123456789\r\n00\r\n\r\n", id="leading-zeros"),
        pytest.param(b" 5 \r\nhello\r\n\t5\t\r\nworld\r\n0 \r\n\r\n", id="whitespace"),
        pytest.param(b"0x5\r\nhello\r\n+5\r\nworld\r\n0\r\n\r\n", id="int-prefixes"),
        pytest.param(b"1A;foo=bar\r\n" + b"x" * 26 + b"\r\n0;last\r\nT: 1\r\n\r\n", id="ext+upper"),
        pytest.param(b"5\r\nhelloXX5\r\nworld\r\n0\r\n\r\n", id="no-CRLF-after-data"),
        pytest.param(b"5\r\nhello\r\nzz\r\nworld\r\n0\r\n\r\n", id="garbage-size"),
        pytest.param(b"5\r\nhello\r\n\r\nworld\r\n0\r\n\r\n", id="empty-size-line"),
        pytest.param(b"5\r\nhello\r\n5\r\nwor", id="closed-mid-chunk"),
        pytest.param(b"5\r\nhello\r\n5\r\nworld\r\n", id="closed-before-last-chunk"),
        pytest.param(b"5\r\nhello\r\nFFFFFFFFFFFFFFFF\r\nabc", id="huge-size-then-close"),
    ],
)
@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
def test_malformed_framing_cut_at_any_read_gives_http_clients_bytes_and_verdict(body, step):
    """Framing the usual Hypothesis body never holds (LF alone, garbage or empty size lines,
    a missing CRLF, a close mid-body), read one byte at a time and in other steps: the data
    is what http.client gives, and the body fails exactly where http.client's does."""
    assert _cutter(body, step) == _reference(body)


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(b"zz\r\n", id="garbage-size"),
        pytest.param(b"-3\r\nabc\r\n", id="negative-size"),
        pytest.param(b"\r\n", id="empty-size-line"),
        pytest.param(b"5\r\nhel", id="cut-mid-chunk"),
    ],
)
def test_a_broken_size_line_in_the_same_read_as_whole_chunks_keeps_their_text(bad):
    """The whole chunks cut from one read (the fast loop) before a broken framing line in
    that same read are delivered, then one ConnectionError whose partial holds their text."""
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    events = openai_sse(["Hel", "lo", " you"])
    good = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events[:3])
    with StreamServer([Reply(raw=True, body=[head + good + bad, Drop()])]) as server:
        model = blazen.Providers.openai_compat("test", server.base_url, max_retries=0)
        rec = Recorder()
        Streaming.complete(model, REQ, rec.handler)
    assert rec.kinds == ["chunk", "chunk", "error"]
    assert isinstance(rec.error, blazen.ConnectionError) and rec.error.partial == "Hello"
