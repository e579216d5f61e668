"""Property: any text through every writer reads back equal, or replaced as documented.

The documented policy (``blazen._codec``): JSON writers (``JsonlSink``, ``RedisStreamSink``
+ ``follow``, batch ``out=`` + ``batch.read``, ``blazen chat --json``) give back the same
string, a high surrogate right before a low one joined into the character the pair
encodes (JSON's own rule); terminals (``blazen chat``, one-shot and interactive) show
``?`` for each character their encoding cannot show. Every writer ends with one terminal.
Texts: lone surrogates, every plane, control characters, and huge strings.
"""

from __future__ import annotations

import io
import json
import os
import sys
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import blazen
from blazen import batch
from blazen.batch.results import BatchResult, ResultsFile
from blazen.cli.output import Output
from blazen.sinks import JsonlSink, RedisStreamSink, follow, read_jsonl
from blazen.testing import Reply, StreamServer, sse

#: Any code point: surrogates (category Cs) included, which Hypothesis leaves out by default.
ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
TEXT = st.one_of(
    st.text(ANY_CHAR, max_size=40),
    st.sampled_from(["\ud83d", "\ude00", "\ud83d\ude00", "\x00", "\x1b[2m", "\r\n", "\U0010ffff"]),
    st.builds(lambda c, n: c * n, ANY_CHAR, st.integers(10_000, 300_000)),  # huge
)
PARTS = st.lists(TEXT, min_size=1, max_size=6)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def joined(text: str) -> str:
    """The documented replacement of JSON writers: surrogate pairs read back joined."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def shown(text: str, encoding: str) -> str:
    """The documented replacement of terminals: ``?`` for each character not encodable."""
    out = []
    for c in text:
        try:
            c.encode(encoding)
        except UnicodeEncodeError:
            c = "?"
        out.append(c)
    return "".join(out)


def chunks(parts: list[str]) -> list[blazen.StreamChunk]:
    return [blazen.StreamChunk(content_delta=p) for p in parts]


@FAST
@given(parts=PARTS)
def test_a_jsonl_transcript_gives_back_any_text(tmp_path_factory, parts):
    """JsonlSink then read_jsonl: each chunk's text back, then the one done."""
    path = tmp_path_factory.mktemp("t") / "t.jsonl"
    sink = JsonlSink(path)
    for chunk in chunks(parts):
        sink.on_chunk(chunk)
    sink.on_done("stop", None)
    events = list(read_jsonl(path))
    assert [a[0].content_delta for k, a in events if k == "chunk"] == [joined(p) for p in parts]
    assert [k for k, _ in events].count("done") == 1 and events[-1][0] == "done"


@FAST
@given(parts=PARTS, failed=st.booleans())
def test_a_batch_file_gives_back_any_text(tmp_path_factory, parts, failed):
    """ResultsFile (batch.run's out= writer) then batch.read: the text or the error's."""
    path = tmp_path_factory.mktemp("b") / "r.jsonl"
    text = "".join(parts)
    results = ResultsFile(path, retry_failed=False)
    if failed:
        err = blazen.ConnectionError(text)
        err.partial = text
        results.write(BatchResult(id=text, error=err))
    else:
        resp = blazen.CompletionResponse(content=text, finish_reason="stop")
        results.write(BatchResult(id=text, response=resp))
    results.close()
    (record,) = batch.read(path)
    assert record["id"] == joined(text)
    if failed:
        assert record["error"]["message"] == record["error"]["partial"] == joined(text)
    else:
        assert record["text"] == joined(text) and record["kind"] == "done"


@FAST
@given(parts=PARTS, encoding=st.sampled_from(["utf-8", "latin-1", "ascii"]))
def test_chat_json_gives_back_any_text_on_any_terminal(parts, encoding):
    """--json on a UTF-8, Latin-1 or ASCII stdout: every event parses, the text comes back."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding=encoding, errors="strict", write_through=True)
    output = Output(True, out, io.StringIO())
    for chunk in chunks(parts):
        output.chunk(chunk)
    output.done("stop", None)
    lines = raw.getvalue().decode(encoding).splitlines()
    events = [json.loads(line) for line in lines]
    assert [e.get("content") for e in events[:-1]] == [joined(p) for p in parts]
    assert [e["kind"] for e in events].count("done") == 1


@FAST
@given(parts=PARTS, encoding=st.sampled_from(["utf-8", "latin-1", "ascii"]))
def test_chat_text_shows_any_text_with_question_marks_for_the_rest(parts, encoding):
    """One-shot text mode: exactly the text, '?' for each character stdout cannot show."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding=encoding, errors="strict", write_through=True)
    output = Output(False, out, io.StringIO())
    for chunk in chunks(parts):
        output.chunk(chunk)
    output.done("stop", None)
    text = "".join(parts)
    expected = "".join(shown(p, encoding) for p in parts)
    assert raw.getvalue().decode(encoding) == expected + ("" if text.endswith("\n") or not text else "\n")


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


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip
@given(parts=PARTS, fail=st.booleans())
def test_a_redis_stream_gives_back_any_text_and_one_terminal(redis_client, parts, fail):
    """RedisStreamSink then follow: each chunk's text, then exactly one done or error."""
    key = f"test:{uuid.uuid4().hex}"
    sink = RedisStreamSink(redis_client, key, ttl=60)
    for chunk in chunks(parts):
        sink.on_chunk(chunk)
    if fail:
        err = blazen.ProviderError("".join(parts), provider="p\ud83d")
        err.partial = "".join(parts)
        sink.on_error(err)
    else:
        sink.on_done("stop", None)
    events = list(follow(redis_client, key, timeout=30))
    assert [a[0].content_delta for _, k, a in events if k == "chunk"] == [joined(p) for p in parts]
    terminals = [(k, a) for _, k, a in events if k != "chunk"]
    assert len(terminals) == 1
    if fail:
        (kind, (back,)) = terminals[0]
        assert kind == "error" and back.partial == joined("".join(parts))
        assert str(back) == joined("".join(parts))


# -- the interactive chat, in a real pseudo-terminal ----------------------------------

pexpect = pytest.importorskip("pexpect")
BEGIN, END = "[[BEGIN]]", "[[END]]"
#: Text a person's terminal gets: no "[" (the markers), no CR (the terminal's own line ends).
PTY_CHAR = st.characters(
    min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=(), exclude_characters="[\r"
)
PTY_TEXT = st.text(PTY_CHAR, max_size=30)


class Session:
    """One ``blazen chat`` session in a pty; each example is one turn."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self.server = StreamServer().start()
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(sys.path), TERM="dumb",
                   PYTHONIOENCODING=encoding)  # fmt: skip
        # Read back as Latin-1: every byte is one character, whatever the child wrote.
        self.child = pexpect.spawn(sys.executable, ["-m", "blazen", "chat", "--base-url",
                                   self.server.base_url], env=env, encoding="latin-1",
                                   timeout=30)  # fmt: skip
        self.child.expect_exact(">>> ")

    def turn(self, text: str) -> str:
        payloads = [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in (BEGIN, text, END)]
        finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self.server.add(Reply.sse(sse(*payloads, finish)))
        self.child.sendline("hi")
        self.child.expect_exact(END)
        before = self.child.before
        self.child.expect_exact(">>> ")
        self.child.sendline("/reset")
        self.child.expect_exact(">>> ")
        return before[before.index(BEGIN) + len(BEGIN):]

    def close(self) -> int:
        self.child.sendeof()
        self.child.expect(pexpect.EOF)
        self.child.close()
        self.server.stop()
        return int(self.child.exitstatus or 0)


@pytest.fixture(scope="module", params=["latin-1", "ascii", "utf-8"])
def session(request) -> Iterator[Session]:
    s = Session(request.param)
    try:
        yield s
    finally:
        if s.child.isalive():
            assert s.close() == 0
        s.server.stop()


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip
@given(text=PTY_TEXT)
def test_the_interactive_chat_shows_any_text_and_goes_on(session, text):
    """Each turn shows the text with '?' for what the terminal cannot show, then a prompt."""
    got = session.turn(text)
    # The terminal's output processing turns each "\n" into "\r\n" (ONLCR).
    expected = shown(joined(text), session.encoding).encode(session.encoding).decode("latin-1")
    assert got == expected.replace("\n", "\r\n")
