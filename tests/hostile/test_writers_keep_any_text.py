"""Every writer keeps any text the core accepts: what goes in comes back out, one terminal.

A server that splits an escaped emoji pair (``\\ud83d`` / ``\\ude00``) across two events
gives a lone surrogate in ``content_delta``: the core copes, so every writer must too
(the writer policy in ``blazen._codec``). Before, ``batch.run`` crashed with a raw
``UnicodeEncodeError``, ``JsonlSink`` wrote an empty transcript, ``RedisStreamSink`` wrote
no terminal, ``/save`` crashed, and the interactive chat aborted on a Latin-1 terminal.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest

import blazen
from blazen import Llm, Streaming, batch
from blazen.cli.session import Conversation
from blazen.sinks import JsonlSink, RedisStreamSink, follow, read_jsonl, tee
from blazen.testing import Recorder, Reply, StreamServer, sse

from ..conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])
#: The two halves of U+1F600, each alone in its own event, then plain text.
PARTS = ["a\ud83d", "\ude00b", " \u00e9\U0001f600\x00\x1b", "\udc80 lone"]


def joined(text: str) -> str:
    """The documented replacement: a high surrogate right before a low one reads back as the
    one character the pair encodes (what JSON's escapes mean); a lone one stays alone."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def split_pair_reply() -> Reply:
    payloads = [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in PARTS]
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return Reply.sse(sse(*payloads, finish))


def model_at(server: StreamServer) -> blazen.ChatModel:
    return blazen.Providers.openai_compat("test", server.base_url, api_key=KEY_FOR_TESTS,
                                          max_retries=0)  # fmt: skip


def test_batch_run_writes_and_reads_back_a_lone_surrogate_and_runs_every_item(tmp_path):
    """batch.run with out=: every item runs and each record's text reads back unchanged."""
    out = tmp_path / "r.jsonl"
    with StreamServer(default=split_pair_reply()) as server:
        report = batch.run(model_at(server), [REQ] * 3, concurrency=2, out=out, progress=False)
    assert (report.ok, report.failed) == (3, 0)
    records = list(batch.read(out))
    assert sorted(r["id"] for r in records) == ["0", "1", "2"]
    assert {r["text"] for r in records} == {joined("".join(PARTS))}
    assert "\udc80" in records[0]["text"]


def test_a_jsonl_transcript_reads_back_every_chunk_and_its_done(tmp_path):
    """JsonlSink: the chunks the callbacks got, equal, then the one done."""
    path = tmp_path / "t.jsonl"
    rec = Recorder()
    with StreamServer([split_pair_reply()]) as server:
        Streaming.complete(model_at(server), REQ, tee(rec, JsonlSink(path)))
    events = list(read_jsonl(path))
    assert [a[0] for k, a in events if k == "chunk"] == rec.chunks
    assert [k for k, _ in events][-1] == "done"
    assert "".join(a[0].content_delta or "" for k, a in events if k == "chunk") == "".join(PARTS)


def test_read_jsonl_skips_a_last_line_torn_inside_a_multibyte_character(tmp_path):
    """A kill mid-write can cut a line inside a character: a torn line, skipped."""
    path = tmp_path / "t.jsonl"
    sink = JsonlSink(path)
    sink.on_chunk(blazen.StreamChunk(content_delta="ok"))
    sink.on_done("stop", None)
    whole = path.read_bytes()
    torn = '{"v":1,"kind":"chunk","content":"\u00e9\U0001f600'.encode()
    path.write_bytes(whole + torn[:-2])
    assert [k for k, _ in read_jsonl(path)] == ["chunk", "done"]


@pytest.fixture(scope="module")
def redis_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from ..sinks.conftest import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    client = server.client()
    try:
        yield client
    finally:
        client.close()
        server.kill()


def test_a_redis_stream_carries_a_lone_surrogate_and_ends_with_its_done(redis_client):
    """RedisStreamSink + follow: the same text on the reader's side and one done terminal."""
    key = f"test:{uuid.uuid4().hex}"
    with StreamServer([split_pair_reply()]) as server:
        resp = Streaming.complete(model_at(server), REQ, RedisStreamSink(redis_client, key))
    assert resp is not None
    events = list(follow(redis_client, key, timeout=30))
    assert [k for _, k, _ in events].count("done") == 1 and events[-1][1] == "done"
    assert "".join(a[0].content_delta or "" for _, k, a in events if k == "chunk") == "".join(PARTS)


def test_a_saved_conversation_with_a_lone_surrogate_loads_back_equal(tmp_path):
    """/save then --continue: the assistant's text exactly as it streamed."""
    conv = Conversation("sys")
    conv.messages += [Llm.user("hi"), Llm.assistant("".join(PARTS))]
    path = tmp_path / "chat.jsonl"
    conv.save(str(path))
    back = Conversation.load(str(path))
    assert [(m.role, m.content) for m in back.messages] == [
        (m.role, joined(m.content or "")) for m in conv.messages
    ]


pexpect = pytest.importorskip("pexpect")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_the_interactive_chat_shows_question_marks_on_a_narrow_terminal(encoding):
    """An emoji on a Latin-1 or ASCII terminal: '?' in its place, and the session goes on."""
    reply = Reply.sse(sse(
        {"choices": [{"index": 0, "delta": {"content": "smile \U0001f600 caf\u00e9 \ud83d!"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ))  # fmt: skip
    with StreamServer([reply, reply]) as server:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(sys.path), TERM="dumb",
                   PYTHONIOENCODING=encoding)  # fmt: skip
        child = pexpect.spawn(sys.executable, ["-m", "blazen", "chat", "--base-url",
                              server.base_url], env=env, encoding=encoding, timeout=30)  # fmt: skip
        try:
            child.expect_exact(">>> ")
            child.sendline("hi")
            shown = "caf\u00e9" if encoding == "latin-1" else "caf?"
            child.expect_exact(f"smile ? {shown} ?!")
            child.expect_exact(">>> ")
            child.sendline("again")
            child.expect_exact(f"smile ? {shown} ?!")
            child.expect_exact(">>> ")
            child.sendeof()
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0
        assert "Traceback" not in (child.before or "")
        sent = [r.json()["messages"] for r in server.requests]
    # The second turn carries the first answer as it streamed, not as the terminal showed it.
    assert sent[1][1] == {"role": "assistant", "content": "smile \U0001f600 caf\u00e9 \ud83d!"}
