"""The transport's shortcuts over a real socket: chunked bodies, requests, proxy settings.

The transport cuts the chunks of a ``Transfer-Encoding: chunked`` body out of the socket
buffer itself (http.client does it one chunk per call, which costs more than the event), and
reads the proxy variables once per model; it prepares a model's URL and headers once and
sends each request's head and body in one write. These tests write hand-made chunked framing, split
at awkward places, and check that proxies are still honoured.
"""

from __future__ import annotations

import http.client
import io
import socket
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blazen
from blazen import Streaming
from blazen._http.chunked import ChunkedBody
from blazen.testing import Drop, Pause, Recorder, Reply, openai_sse, split_bytes

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
WORDS = ["Hel", "lo", ", wor", "ld", "!"]


def framed(events: list[bytes], *, ext: bytes = b"", trailer: bytes = b"") -> bytes:
    """The events as a chunked body: one chunk each, then the last chunk and trailers."""
    body = b"".join(b"%x%s\r\n%s\r\n" % (len(e), ext, e) for e in events)
    return body + b"0\r\n" + trailer + b"\r\n"


def model_for(server: blazen.testing.StreamServer) -> blazen.ChatModel:
    return blazen.Providers.openai_compat("test", server.base_url, max_retries=0)


def paced(data: bytes, cuts: list[int]) -> list[object]:
    # A pause between writes makes each one arrive in its own socket read.
    out: list[object] = []
    for piece in split_bytes(data, cuts):
        out += [piece, Pause(0.003)]
    return out


def test_chunks_split_anywhere_across_reads_give_the_same_text(server, req):
    """Size lines, data and CRLFs cut between reads at many offsets still decode exactly."""
    body = framed(openai_sse(WORDS))
    for start in range(0, 40, 3):
        server.add(Reply(raw=True, body=[HEAD, *paced(body, list(range(start, len(body), 41)))]))
        resp = Streaming.complete(model_for(server), req)
        assert resp is not None and resp.content == "Hello, world!"


def test_many_chunks_in_one_read_are_all_delivered(server, req):
    """A whole body in one write (one read) yields every event, in order."""
    server.add(Reply(raw=True, body=[HEAD + framed(openai_sse(WORDS))]))
    rec = Recorder()
    Streaming.complete(model_for(server), req, rec.handler)
    assert rec.text == "Hello, world!" and rec.kinds[-1] == "done"


def test_chunk_extensions_and_trailers_are_accepted(server, req):
    """`;name=value` after a size and trailer fields after the last chunk are skipped."""
    body = framed(openai_sse(WORDS), ext=b";foo=bar", trailer=b"X-Trailer: 1\r\nX-Other: 2\r\n")
    server.add(Reply(raw=True, body=[HEAD, *paced(body, [len(body) - 20, len(body) - 3])]))
    resp = Streaming.complete(model_for(server), req)
    assert resp is not None and resp.content == "Hello, world!"


def test_an_event_split_over_many_chunks_is_reassembled(server, req):
    """One event spread over several tiny chunks is one event."""
    events = openai_sse(WORDS)
    pieces = [p for e in events for p in split_bytes(e, range(7, len(e), 7))]
    server.add(Reply(raw=True, body=[HEAD, *paced(framed(pieces), [100, 200, 300])]))
    resp = Streaming.complete(model_for(server), req)
    assert resp is not None and resp.content == "Hello, world!"


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(b"1f\r\ndata: ", id="inside-a-chunk"),
        pytest.param(b"1f", id="inside-a-size-line"),
        pytest.param(b"zz\r\n", id="size-not-hex"),
    ],
)
def test_a_body_cut_or_garbled_is_one_connection_error(server, req, cut):
    """After a real event, a truncated or garbled chunk is a ConnectionError, nothing else."""
    events = openai_sse(WORDS)
    good = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events[:2])
    server.add(Reply(raw=True, body=[HEAD + good, Pause(0.01), cut, Drop()]))
    rec = Recorder()
    Streaming.complete(model_for(server), req, rec.handler)
    assert rec.kinds == ["chunk", "error"] and isinstance(rec.error, blazen.ConnectionError)
    assert rec.error.partial == "Hel"


def test_two_chunked_streams_share_one_connection(server, req):
    """After the last chunk the connection goes back to the pool and serves the next stream."""
    server.add(Reply.sse(openai_sse(WORDS)), Reply.sse(openai_sse(WORDS)))
    model = model_for(server)
    for _ in range(2):
        resp = Streaming.complete(model, req)
        assert resp is not None and resp.content == "Hello, world!"
    assert len(server.connections) == 1 and server.connections[0].requests == 2


def test_proxy_variables_are_honoured_and_read_once_per_model(server, req, monkeypatch):
    """HTTP_PROXY routes the request through the proxy; a model reads it once, a new model again."""
    monkeypatch.setenv("HTTP_PROXY", server.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    server.add(Reply.sse(openai_sse(WORDS)), Reply.sse(openai_sse(WORDS)))
    model = blazen.Providers.openai_compat("test", "http://provider.invalid/v1", max_retries=0)
    resp = Streaming.complete(model, req)
    assert resp is not None and resp.content == "Hello, world!"
    assert server.requests[0].path == "http://provider.invalid/v1/chat/completions"
    monkeypatch.delenv("HTTP_PROXY")
    resp = Streaming.complete(model, req)  # the same model keeps the proxy it read
    assert resp is not None and len(server.requests) == 2


def test_each_request_carries_its_own_body_and_length_from_one_prepared_template(server):
    """Requests reuse the model's prepared URL and headers; body and Content-Length are theirs."""
    model = blazen.Providers.openai_compat("test", server.base_url, api_key="k1", max_retries=0)
    prompts = ["short", "a much longer prompt " * 20, "x"]
    server.add(*[Reply.sse(openai_sse(WORDS)) for _ in prompts])
    for prompt in prompts:
        resp = Streaming.complete(model, blazen.Llm.completion_request([blazen.Llm.user(prompt)]))
        assert resp is not None and resp.content == "Hello, world!"
    assert [r.json()["messages"][0]["content"] for r in server.requests] == prompts
    for r in server.requests:
        assert int(r.headers["Content-Length"]) == len(r.body)
        assert r.headers["Authorization"] == "Bearer k1" and r.path == "/v1/chat/completions"
    # Another model, other headers: its own template, nothing carried over.
    other = blazen.Providers.openai_compat(
        "other", server.base_url, api_key="k2", max_retries=0, headers={"X-Team": "b"}
    )
    server.add(Reply.sse(openai_sse(WORDS)))
    Streaming.complete(other, blazen.Llm.completion_request([blazen.Llm.user("y")]))
    last = server.requests[-1]
    assert last.headers["Authorization"] == "Bearer k2" and last.headers["X-Team"] == "b"
    assert "X-Team" not in server.requests[0].headers


def test_the_request_head_and_body_leave_in_one_write(server, req, monkeypatch):
    """One write per request: the server wakes once, and a split head never waits on Nagle."""
    writes: list[int] = []
    real = socket.socket.sendall

    def counting(self: socket.socket, data: bytes, *args: object) -> None:
        if threading.current_thread().name == "blazen-stream":
            writes.append(len(data))
        real(self, data, *args)

    monkeypatch.setattr(socket.socket, "sendall", counting)
    server.add(Reply.sse(openai_sse(WORDS)), Reply.sse(openai_sse(WORDS)))
    model = model_for(server)
    for _ in range(2):  # a new connection, then a pooled one
        resp = Streaming.complete(model, req)
        assert resp is not None and resp.content == "Hello, world!"
    assert len(writes) == 2
    for n, recorded in zip(writes, server.requests):
        assert n > len(recorded.body) > 0


# -- the chunk cutter against http.client, on any framing cut at any read ---------------


class _Reads(io.RawIOBase):
    """A socket's file whose reads return exactly the given pieces, one per read."""

    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = [p for p in pieces if p]

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        if not self._pieces:
            return 0
        piece = self._pieces[0]
        n = min(len(buf), len(piece))
        buf[:n] = piece[:n]
        if n < len(piece):
            self._pieces[0] = piece[n:]
        else:
            self._pieces.pop(0)
        return n


class _Sock:
    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_Reads(self._pieces))


def _response(pieces: list[bytes]) -> http.client.HTTPResponse:
    resp = http.client.HTTPResponse(_Sock(pieces))  # type: ignore[arg-type]
    resp.begin()
    return resp


@st.composite
def _chunked_bodies(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    datas = draw(st.lists(st.binary(min_size=1, max_size=40), max_size=30))
    parts = []
    for data in datas:
        ext = draw(st.sampled_from([b"", b";x=1", b" "]))
        digits = b"%x" % len(data)
        if draw(st.booleans()):
            digits = digits.upper()
        parts.append(digits + ext + b"\r\n" + data + b"\r\n")
    parts.append(b"0\r\n" + draw(st.sampled_from([b"", b"X-T: 1\r\n"])) + b"\r\n")
    body = b"".join(parts)
    cuts = sorted(set(draw(st.lists(st.integers(0, len(body)), max_size=20))))
    return body, cuts


@settings(max_examples=400, deadline=None)
@given(_chunked_bodies())
def test_the_chunk_cutter_gives_http_clients_bytes_for_any_reads(case):
    """Chunks cut between reads anywhere (size lines, data, CRLFs, the last chunk): the
    data is byte for byte what http.client reads, and the body ends where it ends; after a
    chunk a read cut, the next whole chunks are cut again (the fast steps resume)."""
    body, cuts = case
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    expected = _response([head + body]).read()
    pieces = [head, *split_bytes(body, cuts)]
    chunked = ChunkedBody(_response(pieces))
    got = []
    while True:
        data = chunked.read()
        if not data:
            break
        got.append(data)
    assert b"".join(got) == expected
    assert chunked.done
