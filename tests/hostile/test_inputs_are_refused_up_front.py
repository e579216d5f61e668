"""Inputs that cannot work are refused up front, with words that say what is wrong.

Before: two batch items could share an id (``[("1", a), b]``), ``RedisStreamSink(ttl=2)``
killed a live stream whose model was silent 3.5 s, a garbled ``last_id`` was reported as
Redis being lost, ``read_jsonl`` let ``AttributeError``/``UnicodeDecodeError``/
``RecursionError`` out or accepted values of the wrong type, ``blazen chat --continue``
printed a traceback on a deeply nested line, and a ``CompletionRequest`` built directly
kept the caller's mutable list and accepted ``messages=["text"]``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import attrs
import pytest

import blazen
from blazen import CompletionRequest, Llm, Streaming, batch
from blazen.sinks import RedisStreamSink, follow, read_jsonl
from blazen.testing import Pause, Reply, StreamServer, openai_sse

from ..conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])


def model_at(server: StreamServer) -> blazen.ChatModel:
    return blazen.Providers.openai_compat("t", server.base_url, api_key=KEY_FOR_TESTS,
                                          max_retries=0)  # fmt: skip


# -- batch ids -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "items",
    [[("1", REQ), REQ], [REQ, ("0", REQ)], [("a", REQ), ("a", REQ)]],
    ids=["given-then-position", "position-then-given", "given-twice"],
)
def test_batch_ids_are_unique_in_a_run(tmp_path, items):
    """A second item with an id already used is a ValueError; no id is written twice."""
    out = tmp_path / "r.jsonl"
    reply = Reply.sse(openai_sse(["x"]))
    with StreamServer(default=reply) as server, pytest.raises(ValueError, match="be unique"):
        batch.run(model_at(server), items, concurrency=1, out=out, progress=False)
    ids = [r["id"] for r in batch.read(out)]
    assert len(ids) == len(set(ids))


def test_blazen_batch_refuses_a_line_whose_position_is_another_lines_id(tmp_path):
    """``{"id": "1"}`` then a line without id (position 1): exit 2, no id written twice."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "1", "prompt": "a"}\n{"prompt": "b"}\n')
    out = tmp_path / "r.jsonl"
    with StreamServer(default=Reply.sse(openai_sse(["x"]))) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "blazen", "batch", str(prompts), "--out", str(out),
             "--base-url", server.base_url, "--no-progress"],
            capture_output=True, text=True, timeout=60,
            env={k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")},
        )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "ids must be unique" in proc.stderr and "Traceback" not in proc.stderr
    ids = [r["id"] for r in batch.read(out)] if out.exists() else []
    assert len(ids) == len(set(ids))


# -- RedisStreamSink and follow() ------------------------------------------------------


@pytest.fixture(scope="module")
def r(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from ..sinks.conftest import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    client = server.client()
    try:
        yield client
    finally:
        client.close()
        server.kill()


@pytest.mark.parametrize(("ttl", "beat"), [(2, 5.0), (3, 1.0), (1, 0.5)])
def test_a_ttl_shorter_than_four_beats_is_refused(r, ttl, beat):
    """ttl/beat pairs that would expire a silent stream's key between beats: ValueError."""
    with pytest.raises(ValueError, match="4 beats"):
        RedisStreamSink(r, f"test:{uuid.uuid4().hex}", ttl=ttl, beat=beat)


def test_a_short_ttl_with_fast_beats_keeps_a_silent_stream_alive(r):
    """ttl=4, beat=1 and the model silent 3.5 s: the reader still gets its done."""
    key = f"test:{uuid.uuid4().hex}"
    events = [*openai_sse(["a", "b"])]
    body = [events[0], events[1], Pause(3.5), *events[2:]]
    with StreamServer([Reply.sse(body)]) as server:
        Streaming.complete(model_at(server), REQ, RedisStreamSink(r, key, ttl=4, beat=1))
    got = list(follow(r, key, timeout=30))
    assert got[-1][1] == "done"


@pytest.mark.parametrize("last_id", ["abc", "1-x", "-1", "1-2-3", "", "$", "9" * 40])
def test_a_malformed_last_id_is_a_validation_error_not_a_lost_redis(r, last_id):
    """A garbled Last-Event-ID: ValidationError naming last_id, before Redis is asked."""
    with pytest.raises(blazen.ValidationError, match="last_id"):
        follow(r, "test:any", last_id=last_id, timeout=5)


# -- read_jsonl and conversation files -------------------------------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    "bad",
    [
        b"[]",
        b'"chunk"',
        b'{"kind": "chunk", "content": 5}',
        b'{"kind": "chunk", "tool_calls": {"a": 1}}',
        b'{"kind": "chunk", "tool_calls": [[1, 2, 3]]}',
        b'{"kind": "chunk", "is_final": "yes"}',
        b'{"kind": "done"}',
        b'{"kind": "done", "finish_reason": "stop", "usage": {"prompt_tokens": "5"}}',
        b'{"kind": "done", "finish_reason": "stop", "usage": [1]}',
        b'{"kind": "error", "error": "boom"}',
        b'{"kind": "error", "error": {"type": "RateLimitError", "retry_after": "soon"}}',
        b'{"kind": "error", "error": {"message": 5}}',
        b'{"kind": "chunk", "content": "caf\xe9"}',
        DEEP,
    ],
)
def test_read_jsonl_raises_only_validation_errors_naming_the_line(tmp_path, bad):
    """Any line that is not an event, before the last one: ValidationError with its number."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"v": 1, "kind": "chunk", "content": "ok"}\n' + bad + b"\n" + b"\n")
    with pytest.raises(blazen.ValidationError, match="line 2"):
        list(read_jsonl(path))


def test_read_jsonl_reads_a_transcript_written_before_the_version_field(tmp_path):
    """Version 0 lines (``final``, tool calls as lists, ``class``) read as before."""
    path = tmp_path / "old.jsonl"
    path.write_bytes(
        b'{"kind":"chunk","content":"a","tool_calls":[["c1","f","{}"]],"final":true}\n'
        b'{"kind":"error","error":{"class":"RateLimitError","kind":"rate_limit",'
        b'"message":"slow","status":429,"retry_after":2.0,"partial":"a"}}\n'
    )
    (k1, (chunk,)), (k2, (err,)) = read_jsonl(path)
    assert chunk.is_final and chunk.tool_calls[0].name == "f" and chunk.content_delta == "a"
    assert isinstance(err, blazen.RateLimitError) and err.retry_after == 2.0
    assert err.partial == "a"


def test_batch_read_reads_a_file_written_before_the_version_field(tmp_path):
    """Old out= records come back in the current form, and a rerun resumes from them."""
    path = tmp_path / "old.jsonl"
    path.write_bytes(
        b'{"id": "a", "text": "hi", "finish_reason": "stop", "usage": null, "tool_calls": []}\n'
        b'{"id": "b", "error": {"type": "AuthError", "kind": "auth", "message": "no", '
        b'"status": 401}}\n'
    )
    a, b = batch.read(path)
    assert (a["v"], a["kind"], a["text"]) == (1, "done", "hi")
    assert (b["v"], b["kind"], b["error"]["type"], b["error"]["status"]) == (1, "error", "AuthError", 401)
    with StreamServer(default=Reply.sse(openai_sse(["x"]))) as server:
        report = batch.run(model_at(server), [("a", REQ), ("b", REQ), ("c", REQ)],
                           out=path, progress=False)  # fmt: skip
    assert (report.skipped, report.ok) == (2, 1)


def test_blazen_chat_continue_with_a_deeply_nested_line_is_a_usage_error(tmp_path):
    """--continue on a line nested 100,000 deep: exit 2 and the line, never a traceback."""
    saved = tmp_path / "chat.jsonl"
    saved.write_bytes(b'{"role": "user", "content": "hi"}\n' + DEEP + b"\n")
    proc = subprocess.run(
        [sys.executable, "-m", "blazen", "chat", "--continue", str(saved),
         "--base-url", "http://127.0.0.1:9/v1", "again"],
        capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert ":2 is not a message line" in proc.stderr and "Traceback" not in proc.stderr


# -- CompletionRequest built directly --------------------------------------------------


def test_a_request_built_directly_keeps_its_own_immutable_messages():
    """Appending to the caller's list later changes nothing the request sends."""
    msgs = [Llm.user("hi")]
    stops = ["END"]
    req = CompletionRequest(messages=msgs, stop=stops)
    msgs.append(Llm.user("injected"))
    stops.append("MORE")
    assert req.messages == (Llm.user("hi"),) and req.stop == ("END",)
    assert isinstance(req.messages, tuple)
    with StreamServer([Reply.sse(openai_sse(["x"]))]) as server:
        Streaming.complete(model_at(server), req)
        sent = server.requests[0].json()["messages"]
    assert sent == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"messages": ["text"]}, TypeError),
        ({"messages": "hi"}, TypeError),
        ({"messages": ()}, ValueError),
        ({"temperature": 3}, ValueError),
        ({"temperature": "hot"}, TypeError),
        ({"top_p": float("nan")}, ValueError),
        ({"max_tokens": 0}, ValueError),
        ({"max_tokens": True}, TypeError),
        ({"stop": [""]}, ValueError),
        ({"tools": ["f"]}, TypeError),
        ({"tool_choice": "nosuch"}, ValueError),
        ({"response_format": "json"}, TypeError),
        ({"response_format": {"x": float("inf")}}, ValueError),
        ({"model": 5}, TypeError),
        ({"reasoning_effort": "extreme"}, ValueError),
        ({"reasoning_budget": -1}, ValueError),
        ({"max_continuations": -1}, ValueError),
    ],
)
def test_a_request_built_directly_is_checked_as_llm_completion_request_checks(fields, error):
    """The constructor refuses what Llm.completion_request refuses, before anything is sent."""
    fields = {"messages": (Llm.user("hi"),), **fields}
    with pytest.raises(error):
        CompletionRequest(**fields)
    with pytest.raises(error):
        REQ.__replace__(**fields)  # evolve goes through the same checks


def test_every_request_field_has_a_check():
    """A field added to CompletionRequest without a row in FIELD_CHECKS fails here."""
    from blazen._types.request_checks import FIELD_CHECKS

    assert set(FIELD_CHECKS) == set(attrs.fields_dict(CompletionRequest))
