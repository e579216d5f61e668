"""The transport is sealed: whatever goes wrong on the wire, only blazen errors leave ``_http``.

Each public step of a request (``Transport.open``, ``Response.check``, ``read``,
``read_body``, ``release``, ``close``) is driven here directly, without the stream engine,
against servers that refuse, cut, garble or redirect; every failure must be a
:class:`blazen.BlazenError` that says what happened, never a requests, urllib3, http.client
or socket exception.
"""

from __future__ import annotations

import socket

import pytest

import blazen
from blazen._http import Abort, HttpRequest, Response, Transport
from blazen.testing import Drop, Reply, StreamServer, openai_sse

REQ_BODY = {"model": "m", "messages": []}


def _open(url: str, *, stream: bool = True, read_timeout: float = 5.0) -> Response:
    transport = Transport(max_connections=2, verify=True, url=url)
    return transport.open(
        HttpRequest.post_json(url + "/chat/completions", {}, REQ_BODY, sse=stream),
        Abort(),
        provider="p",
        stream=stream,
        connect_timeout=2.0,
        read_timeout=read_timeout,
    )


def _read_all(resp: Response) -> bytes:
    out = b""
    while data := resp.read():
        out += data
    return out


def _reader(status, headers, body):
    return blazen.ProviderError(f"read {status}: {body[:20]}", provider="p", status=status)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_connection_is_a_blazen_connection_error_from_open():
    """Nothing listens: open() raises blazen.ConnectionError, caused by the stack's error."""
    with pytest.raises(blazen.ConnectionError, match="could not connect to p") as info:
        _open(f"http://127.0.0.1:{_free_port()}")
    assert not isinstance(info.value.__cause__, blazen.BlazenError)


def test_a_body_cut_mid_chunk_is_a_blazen_connection_error_from_read():
    """The server drops the connection inside the chunked body: read() says it broke."""
    with StreamServer([Reply.sse([b"data: one\n\n", b"data: tw", Drop()])]) as server:
        resp = _open(server.url)
        resp.check(_reader, stream_types=("text/event-stream",))
        with pytest.raises(blazen.ConnectionError, match="broke"):
            _read_all(resp)
        resp.close()


def test_an_idle_read_is_a_blazen_timeout_from_read():
    """No byte for longer than the read timeout: blazen.TimeoutError(limit="idle")."""
    from blazen.testing import Stall

    with StreamServer([Reply.sse([b"data: one\n\n", Stall()])]) as server:
        resp = _open(server.url, read_timeout=0.3)
        assert resp.read() == b"data: one\n\n"
        with pytest.raises(blazen.TimeoutError) as info:
            resp.read()
        assert info.value.limit == "idle"
        resp.close()


def test_a_whole_body_cut_short_is_a_blazen_error_from_read_body():
    """Content-Length promises more than comes: read_body raises a blazen error."""
    reply = Reply(
        headers={"Content-Type": "application/json", "Content-Length": "100"},
        body=[b'{"a": 1', Drop()],
        transfer="close",
    )
    with StreamServer([reply]) as server:
        resp = _open(server.url, stream=False)
        resp.check(_reader, stream_types=None)
        with pytest.raises(blazen.BlazenError):
            resp.read_body(1 << 20, within=5)
        resp.close()


@pytest.mark.parametrize(
    ("reply", "cls", "text"),
    [
        (Reply(status=407, transfer="length"), blazen.ConnectionError, "asks for credentials"),
        (
            Reply(status=302, headers={"Location": "http://elsewhere/"}, transfer="length"),
            blazen.ProviderError,
            "does not follow redirects",
        ),
        (Reply.json({"error": {"message": "no"}}, status=500), blazen.ProviderError, "read 500"),
        (Reply.json({"error": {"message": "no"}}), blazen.ProviderError, "read 200"),
        (
            Reply(headers={"Content-Type": "text/html"}, body=[b"<html>"], transfer="length"),
            blazen.ProviderError,
            "an HTML page",
        ),
    ],
    ids=["407", "302", "500", "200-json-error", "200-html"],
)
def test_check_turns_what_a_caller_cannot_read_into_one_blazen_error(reply, cls, text):
    """407, redirects, error statuses and a 200 that is no event stream: check() raises."""
    with StreamServer([reply]) as server:
        resp = _open(server.url)
        with pytest.raises(cls, match=text):
            resp.check(_reader, stream_types=("text/event-stream",))
        resp.close()


def test_release_and_close_never_raise_on_a_broken_connection():
    """A drain that fails closes instead; close() after a break is quiet."""
    with StreamServer([Reply.sse([*openai_sse(["x"]), b"data: late", Drop()])]) as server:
        resp = _open(server.url)
        resp.check(_reader, stream_types=("text/event-stream",))
        assert resp.read()
        resp.release()
        resp.close()
        resp.close()


def test_a_bad_url_is_a_blazen_validation_error_from_open():
    """A URL requests cannot even prepare is refused as blazen's own error."""
    transport = Transport(max_connections=1, verify=True, url="http://example.invalid")
    with pytest.raises(blazen.BlazenError):
        transport.open(
            HttpRequest.post_json("http://[::1:80/x", {}, REQ_BODY),
            Abort(),
            provider="p",
            stream=True,
            connect_timeout=1,
            read_timeout=1,
        )
