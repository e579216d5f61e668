"""Bodies read by the shared reader (blazen._http.reader) keep every promise a worker keeps.

Once enough bodies are read at once, workers park theirs with one reader thread. Here
``PARK_FROM`` is lowered to 0 so that a single stream parks too, and each test compares
with the same stream read by its own worker where the outcome must be the same.
"""

from __future__ import annotations

import contextlib
import random
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

import pytest

import blazen
from blazen import CancelToken, Llm, Streaming
from blazen._http import reader
from blazen.testing import Drop, Pause, Reply, Stall, StreamServer, openai_sse

from .conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])
WORDS = [f"w{i} " for i in range(30)]


@pytest.fixture
def park_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "PARK_FROM", 0)


def _model(server: StreamServer, **options: Any) -> blazen.ChatModel:
    return blazen.Providers.openai_compat(
        "test", server.base_url, api_key=KEY_FOR_TESTS, max_retries=0, **options
    )


def _paced(events: list[bytes], pause: float = 0.003) -> list[Any]:
    body: list[Any] = []
    for event in events:
        body += [event, Pause(pause)]
    return body


def _readers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "blazen-reader"]


class _Seen:
    def __init__(self) -> None:
        self.text: list[str] = []
        self.done: list[str] = []
        self.errors: list[blazen.BlazenError] = []
        self.readers = 0
        self.threads: set[str] = set()

    def on_chunk(self, chunk: blazen.StreamChunk) -> None:
        self.threads.add(threading.current_thread().name)
        self.readers = max(self.readers, len(_readers()))
        if chunk.content_delta:
            self.text.append(chunk.content_delta)

    def on_done(self, reason: str, usage: Any) -> None:
        self.done.append(reason)

    def on_error(self, err: blazen.BlazenError) -> None:
        self.errors.append(err)


def test_a_parked_body_delivers_every_chunk_in_order_then_one_done_and_is_pooled(
    park_all: None,
) -> None:
    reply = Reply.sse(_paced(openai_sse(WORDS)))
    with StreamServer([reply, reply]) as server:
        model = _model(server)
        for _ in range(2):
            seen = _Seen()
            resp = Streaming.complete(
                model, REQ, on_chunk=seen.on_chunk, on_done=seen.on_done, on_error=seen.on_error
            )
            assert resp is not None and resp.content == "".join(WORDS)
            assert "".join(seen.text) == "".join(WORDS)
            assert seen.done == ["stop"] and seen.errors == []
            assert seen.readers == 1  # the reader read it
            assert seen.threads == {threading.current_thread().name}  # callbacks: caller's
        # Handed back blocking at its end, the connection served the second stream too.
        assert [c.requests for c in server.connections] == [2]


def test_a_cancel_while_parked_ends_the_stream_at_once_and_closes_the_connection(
    park_all: None,
) -> None:
    reply = Reply.sse([*openai_sse(WORDS[:3], done=False)[:3], Stall()])
    with StreamServer([reply]) as server:
        token = CancelToken()
        seen = _Seen()

        def on_chunk(chunk: blazen.StreamChunk) -> None:
            seen.on_chunk(chunk)
            if len(seen.text) == 2:
                threading.Timer(0.1, token.cancel).start()

        start = time.monotonic()
        Streaming.complete(
            _model(server), REQ, on_chunk=on_chunk, on_error=seen.on_error, cancel=token
        )
        assert time.monotonic() - start < 2.0
        assert [type(e) for e in seen.errors] == [blazen.CancelledError]
        assert seen.readers == 1
        assert server.wait_closed(2.0)


def test_a_raising_callback_while_parked_aborts_the_stream(park_all: None) -> None:
    reply = Reply.sse([*openai_sse(WORDS[:3], done=False)[:3], Stall()])
    with StreamServer([reply]) as server:
        seen = _Seen()

        def on_chunk(chunk: blazen.StreamChunk) -> None:
            seen.on_chunk(chunk)
            if len(seen.text) == 2:
                raise ValueError("no more")

        Streaming.complete(_model(server), REQ, on_chunk=on_chunk, on_error=seen.on_error)
        assert [type(e) for e in seen.errors] == [blazen.CallbackError]
        assert isinstance(seen.errors[0].__cause__, ValueError)
        assert server.wait_closed(2.0)


def _outcome(
    monkeypatch: pytest.MonkeyPatch, park_from: int, reply: Reply
) -> tuple[str, Optional[str], str, list[str]]:
    monkeypatch.setattr(reader, "PARK_FROM", park_from)
    with StreamServer([reply]) as server:
        seen = _Seen()
        Streaming.complete(
            _model(server),
            REQ,
            on_chunk=seen.on_chunk,
            on_done=seen.on_done,
            on_error=seen.on_error,
        )
    assert len(seen.errors) + len(seen.done) == 1
    err = seen.errors[0] if seen.errors else None
    kind = type(err).__name__ if err is not None else "done"
    return kind, getattr(err, "error_type", None), "".join(seen.text), seen.done


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param([Drop()], id="closed-mid-answer"),
        pytest.param([b'data: {"choices": [{"index": 0, "delta": {"content": 5}}]}\n\n'], id="bad"),
        pytest.param([b"data: \xff\xfe\n\n"], id="invalid-utf8"),
        pytest.param([b'data: {"error": {"message": "overloaded"}}\n\n'], id="error-event"),
    ],
)
def test_a_body_that_fails_while_parked_ends_as_it_ends_on_its_worker(
    monkeypatch: pytest.MonkeyPatch, tail: list[Any]
) -> None:
    events = openai_sse(WORDS[:5], done=False)[:6]
    reply = Reply.sse([*_paced(events), *tail])
    parked = _outcome(monkeypatch, 0, reply)
    alone = _outcome(monkeypatch, 10**9, reply)
    assert parked == alone
    assert parked[2] == "".join(WORDS[:5])


def test_a_broken_chunk_while_parked_is_the_error_its_worker_reports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = b"".join(openai_sse(WORDS[:3], done=False)[:4])
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    body = b"%x\r\n%s\r\n" % (len(events), events)
    reply = Reply(raw=True, body=[head, Pause(0.05), body, Pause(0.05), b"zz\r\nnot a chunk\r\n"])
    assert _outcome(monkeypatch, 0, reply) == _outcome(monkeypatch, 10**9, reply)


def test_many_streams_at_once_park_and_the_reader_leaves_when_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reader, "READER_IDLE", 0.2)
    monkeypatch.setattr(reader, "PARK_FROM", 8)
    reply = Reply.sse(_paced(openai_sse(WORDS), 0.01))
    n = 24
    with StreamServer([], default=reply) as server:
        model = _model(server, max_connections=n)
        seen = [_Seen() for _ in range(n)]

        def one(s: _Seen) -> Any:
            return Streaming.complete(
                model, REQ, on_chunk=s.on_chunk, on_done=s.on_done, on_error=s.on_error
            )

        with ThreadPoolExecutor(n) as pool:
            got = list(pool.map(one, seen))
        assert all(r is not None and r.content == "".join(WORDS) for r in got)
        assert all(s.done == ["stop"] and not s.errors for s in seen)
        assert max(s.readers for s in seen) == 1
        deadline = time.monotonic() + 5
        while _readers() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _readers()
        assert reader._bodies == 0


def test_a_reader_that_fails_hands_every_body_back_to_its_worker(
    park_all: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = [0]
    real = reader._serve_one

    def failing(selector: Any, job: Any) -> None:
        calls[0] += 1
        if calls[0] == 3:
            raise RuntimeError("the reader broke")
        real(selector, job)

    monkeypatch.setattr(reader, "_serve_one", failing)
    reply = Reply.sse(_paced(openai_sse(WORDS)))
    with StreamServer([reply]) as server:
        seen = _Seen()
        resp = Streaming.complete(
            _model(server),
            REQ,
            on_chunk=seen.on_chunk,
            on_done=seen.on_done,
            on_error=seen.on_error,
        )
    assert resp is not None and resp.content == "".join(WORDS)
    assert seen.done == ["stop"]
    assert "shared reader failed (RuntimeError: the reader broke)" in caplog.text


@pytest.mark.parametrize(
    ("pause", "size"),
    [(0.003, 50), (0.0, 50), (0.01, 4000)],
    ids=["one-event-per-record", "records-back-to-back", "events-larger-than-a-record"],
)
def test_a_parked_tls_body_reads_every_record_and_its_connection_serves_the_next_stream(
    park_all: None, tls_cert: tuple[Path, Path], pause: float, size: int
) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*map(str, tls_cert))
    # Events as large as several TLS records leave decrypted bytes in the TLS object after
    # a read, where epoll cannot see them: parked then, the stream would wait for its idle
    # timeout (7 s) at the end.
    words = [f"w{i} " * size for i in range(40)]
    reply = Reply.sse(_paced(openai_sse(words), pause))
    with StreamServer([reply, reply], ssl_context=ctx) as server:
        model = blazen.Providers.openai_compat(
            "test",
            server.base_url,
            api_key=KEY_FOR_TESTS,
            max_retries=0,
            verify=str(tls_cert[0]),
            idle_timeout=7.0,
        )
        for _ in range(2):
            seen = _Seen()
            start = time.monotonic()
            resp = Streaming.complete(
                model, REQ, on_chunk=seen.on_chunk, on_done=seen.on_done, on_error=seen.on_error
            )
            assert time.monotonic() - start < 5.0
            assert resp is not None and resp.content == "".join(words)
            assert "".join(seen.text) == "".join(words) and seen.done == ["stop"]
            assert seen.readers == 1
        assert [c.requests for c in server.connections] == [2]


@pytest.mark.parametrize("park_from", [0, 10**9], ids=["parked", "on-their-workers"])
def test_a_storm_of_streams_each_ends_once_however_it_is_ended(
    monkeypatch: pytest.MonkeyPatch, park_from: int
) -> None:
    """Cancels from other threads, raising callbacks, servers that drop or stall, at random
    moments, every body parked (and, for comparison, none): each stream gets one terminal,
    every connection cut mid-body is closed, and the reader is left with nothing."""
    monkeypatch.setattr(reader, "PARK_FROM", park_from)
    rng = random.Random(29)
    fates = ["done", "cancel", "raise", "drop", "stall-cancel"] * 8
    rng.shuffle(fates)
    replies = []
    for fate in fates:
        events = _paced(openai_sse(WORDS), rng.choice([0.0, 0.002, 0.01]))
        if fate == "drop":
            events = [*events[: rng.randrange(2, 40)], Drop()]
        elif fate == "stall-cancel":
            events = [*events[: rng.randrange(2, 40)], Stall()]
        replies.append(Reply.sse(events))
    # A server each, so that each stream meets the reply of its own fate.
    servers = [StreamServer([reply]) for reply in replies]
    with contextlib.ExitStack() as stack:
        for server in servers:
            stack.enter_context(server)
        outcomes: list[list[str]] = [[] for _ in fates]

        def one(i: int) -> None:
            fate = fates[i]
            got = outcomes[i]
            token = CancelToken()
            count = [0]
            when = rng.randrange(1, 25)

            def on_chunk(chunk: blazen.StreamChunk) -> None:
                count[0] += 1
                if count[0] == when:
                    if fate == "raise":
                        raise RuntimeError("stop")
                    if fate == "cancel":
                        threading.Thread(target=token.cancel).start()
                if count[0] == 1 and fate == "stall-cancel":
                    threading.Timer(0.3, token.cancel).start()

            Streaming.complete(
                _model(servers[i]),
                REQ,
                on_chunk=on_chunk,
                on_done=lambda reason, usage: got.append("done"),
                on_error=lambda err: got.append(type(err).__name__),
                cancel=token,
                timeout=20,
            )

        with ThreadPoolExecutor(len(fates)) as pool:
            list(pool.map(one, range(len(fates))))
        for fate, got in zip(fates, outcomes):
            assert len(got) == 1, (fate, got)
            expected = {
                "done": {"done"},
                "cancel": {"CancelledError", "done"},  # a cancel after the last chunk: done
                "raise": {"CallbackError"},
                "drop": {"ConnectionError"},
                "stall-cancel": {"CancelledError"},
            }[fate]
            assert got[0] in expected, (fate, got)
        assert reader._bodies == 0
        # A stream cut before its body ended leaves no connection open. (One cancelled, or
        # whose callback raised, after its whole body was read may keep the connection
        # pooled: it is clean, and no read of it is left going.)
        for server, got, fate in zip(servers, outcomes, fates):
            if fate in ("stall-cancel", "drop"):
                assert server.wait_closed(5.0), (fate, got, server.open_connections())


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@pytest.mark.parametrize("park_from", [0, 10**9], ids=["parked", "on-its-worker"])
def test_a_broken_chunk_after_a_good_one_in_one_read_ends_at_once(
    monkeypatch: pytest.MonkeyPatch, park_from: int
) -> None:
    """Found by an attack: the reader kept a body broken after the data it gave, and the
    stream waited for its idle timeout instead of ending with the broken chunk's error."""
    monkeypatch.setattr(reader, "PARK_FROM", park_from)
    events = b"".join(openai_sse(["a", "b", "c"], done=False)[:4])
    body = [HEAD, Pause(0.05), _chunk(events[:40]), Pause(0.05)]
    body += [_chunk(events[40:]) + b"zz\r\nnot a chunk\r\n", Stall()]
    with StreamServer([Reply(raw=True, body=body)]) as server:
        seen = _Seen()
        start = time.monotonic()
        Streaming.complete(
            _model(server, idle_timeout=4.0), REQ, on_chunk=seen.on_chunk, on_error=seen.on_error
        )
        assert time.monotonic() - start < 2.0
        assert [type(e) for e in seen.errors] == [blazen.ConnectionError]
        assert "".join(seen.text) == "abc"


GEMINI_FIRST = (
    b'data: {"candidates":[{"content":{"parts":[{"text":"Hi."}],"role":"model"}}]}\r\n\r\n'
)
GEMINI_STOP = (
    b'data: {"candidates":[{"content":{"parts":[{"text":" Done."}],"role":"model"},'
    b'"finishReason":"STOP"}]}\r\n\r\n'
)
GEMINI_MORE = (
    b'data: {"candidates":[{"content":{"parts":[{"text":" More."}],"role":"model"}}]}\r\n\r\n'
)


def test_reads_timed_by_a_tail_grace_are_never_the_readers(
    park_all: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by an attack: a read bringing Gemini's finishReason and more content timed the
    reads (the tail grace) and untimed them again on the reader's thread, which left the
    parked socket blocking: over TLS, one record arriving in part then held the reader, and
    every other parked stream, in recv. Every read the reader makes is non-blocking."""
    timeouts: list[Optional[float]] = []
    real = reader._recv

    def recv(sock: Any) -> bytes:
        timeouts.append(sock.gettimeout())
        return real(sock)

    monkeypatch.setattr(reader, "_recv", recv)
    body = [GEMINI_FIRST, Pause(0.05), GEMINI_STOP + GEMINI_MORE, Pause(0.3), GEMINI_MORE]
    body += [Pause(0.3), GEMINI_STOP]
    with StreamServer([Reply.sse(body)]) as server:
        model = blazen.Providers.gemini(
            api_key="gem-SECRET-0123456789",
            base_url=server.url + "/v1beta",
            max_retries=0,
            idle_timeout=7.0,
        )
        resp = Streaming.complete(model, REQ)
    assert resp is not None and resp.content == "Hi. Done. More. More. Done."
    assert timeouts and set(timeouts) == {0.0}, timeouts


@pytest.mark.parametrize("park_from", [0, 10**9], ids=["parked", "on-its-worker"])
def test_a_pull_stream_nobody_pulls_still_lets_its_connection_go_at_the_idle_timeout(
    monkeypatch: pytest.MonkeyPatch, park_from: int
) -> None:
    """Found by an attack: parked, a stalled body whose caller was not pulling kept its
    connection and its worker for good; a read on the worker times out at idle_timeout."""
    monkeypatch.setattr(reader, "PARK_FROM", park_from)
    with StreamServer([Reply.sse([*openai_sse(WORDS)[:4], Stall()])]) as server:
        model = _model(server, idle_timeout=1.0)
        with Streaming.stream(model, REQ) as chunks:
            it = iter(chunks)
            next(it)
            next(it)
            assert server.wait_closed(3.0)  # nobody pulls: the read's own timeout ends it
            with pytest.raises(blazen.TimeoutError):
                for _ in it:
                    pass
