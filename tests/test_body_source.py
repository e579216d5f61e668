"""A chunked body is read from the socket itself once http.client's buffer is drained.

:class:`blazen._http.source.BodySource` hands out what http.client buffered first, then
reads the socket directly; on Linux a plain socket's read timeout becomes the kernel's
(``SO_RCVTIMEO``) instead of a poll before every read. These tests hold it to what the
reads through http.client gave: the same bytes in order, the same timeout per read, an
abort that still wakes a blocked read, and a socket handed back to the pool exactly as it
came (the next request on it is sent and read under Python's timeout again).
"""

from __future__ import annotations

import io
import socket
import struct
import sys
import threading
import time
from typing import BinaryIO, Optional

import pytest

import blazen
from blazen._http import Abort, HttpRequest, Transport
from blazen._http.hooks import response_socket
from blazen._http.source import BodySource
from blazen.testing import Pause, Recorder, Reply, Stall, StreamServer, openai_sse

from .conftest import KEY_FOR_TESTS

LINUX = sys.platform.startswith("linux")


def _pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    return a, b


def _past_the_head(
    ours: socket.socket, theirs: socket.socket, sent: bytes, timeout: Optional[float] = None
) -> tuple[BinaryIO, BodySource]:
    """``ours`` as http.client leaves it: ``sent``'s first line read through a
    ``BufferedReader`` (what followed it may be buffered), and a source over both."""
    if timeout is not None:
        ours.settimeout(timeout)
    theirs.sendall(sent)
    fp = ours.makefile("rb")
    fp.readline()
    return fp, BodySource(fp, ours)


def _kernel_timeout(sock: socket.socket) -> float:
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.calcsize("ll"))
    seconds, micros = struct.unpack("ll", raw)
    return seconds + micros / 1e6


def test_buffered_bytes_come_first_then_the_socket_in_order():
    """What the BufferedReader already holds is handed out before any socket read."""
    ours, theirs = _pair()
    try:
        theirs.sendall(b"head\r\nfirst")
        fp = ours.makefile("rb")
        assert fp.readline() == b"head\r\n"  # http.client read the head: "first" is buffered
        source = BodySource(fp, ours)
        assert source.read1(65536) == b"first"
        theirs.sendall(b"second")
        assert source.read1(65536) == b"second"
        theirs.sendall(b"third")
        theirs.close()
        got = b""
        while True:
            data = source.read1(65536)
            if not data:
                break
            got += data
        assert got == b"third"
    finally:
        fp.close()
        ours.close()


def test_a_buffer_fuller_than_one_read_is_drained_before_the_socket():
    """A short read is what says the buffer is empty: a full one keeps reading through it."""
    ours, theirs = _pair()
    try:
        fp, source = _past_the_head(ours, theirs, b"h\n" + b"x" * 5000)
        time.sleep(0.05)
        parts = [source.read1(1000) for _ in range(5)]
        assert b"".join(parts) == b"x" * 5000
        theirs.sendall(b"tail")
        assert source.read1(1000) == b"tail"
    finally:
        fp.close()
        theirs.close()
        ours.close()


@pytest.mark.skipif(not LINUX, reason="the kernel's receive timeout is used on Linux only")
def test_the_read_timeout_becomes_the_kernels_and_still_ends_a_silent_read():
    """No poll before each read, and a read with nothing coming still times out, as
    ``socket.timeout``, after the same seconds; restore() gives Python's timeout back."""
    ours, theirs = _pair()
    try:
        fp, source = _past_the_head(ours, theirs, b"h\n", timeout=0.3)
        theirs.sendall(b"a")
        time.sleep(0.05)
        assert source.read1(10) == b"a"
        assert ours.gettimeout() is None  # blocking: the kernel times the read
        assert _kernel_timeout(ours) == pytest.approx(0.3, abs=0.01)
        t0 = time.monotonic()
        with pytest.raises(socket.timeout):
            source.read1(10)
        assert 0.25 < time.monotonic() - t0 < 2
        source.restore()
        source.restore()  # idempotent
        assert ours.gettimeout() == 0.3
        assert _kernel_timeout(ours) == 0
    finally:
        fp.close()
        theirs.close()
        ours.close()


def test_a_socket_that_is_not_the_standard_one_keeps_pythons_timeout():
    """A socket subclass (as gevent's is) may wait elsewhere than in the kernel: its
    timeout is left alone, and its reads still come straight from it."""

    class Other(socket.socket):
        pass

    a, b = _pair()
    ours = Other(fileno=a.detach())
    try:
        fp, source = _past_the_head(ours, b, b"h\n", timeout=0.2)
        b.sendall(b"z")
        time.sleep(0.05)
        assert source.read1(10) == b"z"
        assert ours.gettimeout() == 0.2
        with pytest.raises(socket.timeout):
            source.read1(10)
    finally:
        fp.close()
        b.close()
        ours.close()


def test_a_shutdown_from_another_thread_wakes_a_blocked_direct_read():
    """An abort shuts the socket down: a read blocked in the kernel returns at once."""
    ours, theirs = _pair()
    try:
        fp, source = _past_the_head(ours, theirs, b"h\nfirst", timeout=30)
        assert source.read1(65536) == b"first"
        threading.Timer(0.2, lambda: ours.shutdown(socket.SHUT_RDWR)).start()
        t0 = time.monotonic()
        assert source.read1(65536) == b""
        assert time.monotonic() - t0 < 5
    finally:
        fp.close()
        theirs.close()
        ours.close()


def test_without_a_socket_every_read_goes_through_the_reader():
    """No socket (a close-delimited answer took it over): the reader as before."""
    fp = io.BufferedReader(io.BytesIO(b"abc"))
    source = BodySource(fp, None)
    assert source.read1(2) == b"ab"
    assert source.read1(2) == b"c"
    assert source.read1(2) == b""
    source.restore()


# -- through a whole stream ------------------------------------------------------------


def _model(server: StreamServer, **options: object) -> blazen.ChatModel:
    return blazen.Providers.openai(api_key=KEY_FOR_TESTS, base_url=server.base_url, **options)


def test_a_stall_after_events_read_from_the_socket_is_the_idle_timeout(req):
    """Events in separate writes (so the socket is read directly), then silence: the idle
    timeout ends it as it always did, with the text so far."""
    events = openai_sse(["one", " two"])
    with StreamServer(
        [Reply.sse([events[0], events[1], Pause(0.05), events[2], Pause(0.05), Stall()])]
    ) as s:
        rec = Recorder()
        t0 = time.monotonic()
        blazen.Streaming.complete(
            _model(s, idle_timeout=0.4),
            req,
            on_chunk=rec.on_chunk,
            on_done=rec.on_done,
            on_error=rec.on_error,
        )
        took = time.monotonic() - t0
    assert isinstance(rec.error, blazen.TimeoutError) and rec.error.limit == "idle"
    assert rec.text == rec.error.partial == "one two"
    assert took < 3


def test_a_body_read_to_its_end_leaves_the_socket_as_it_came():
    """Read to the end with no budget in between (nothing else sets a timeout), the socket
    has Python's timeout back and no kernel timeout: pooled in blocking mode, the next
    request's send could wait for ever, and http.client would take a timed-out read of
    its headers for a closed connection."""
    events = openai_sse(["a", "b"])
    body = [e for x in events for e in (x, Pause(0.02))]
    with StreamServer([Reply.sse(body)]) as server:
        transport = Transport(max_connections=1, verify=True, url=server.url)
        resp = transport.open(
            HttpRequest.post_json(server.url + "/chat/completions", {}, {"x": 1}, sse=True),
            Abort(),
            provider="p",
            stream=True,
            connect_timeout=5,
            read_timeout=7,
        )
        sock = response_socket(resp._resp.raw)
        got = b""
        while True:
            data = resp.read()
            if not data:
                break
            got += data
            if LINUX and len(got) > len(events[0]):
                assert sock.gettimeout() is None  # the kernel times these reads
        assert got == b"".join(events)
        assert sock.gettimeout() == 7
        if LINUX:
            assert _kernel_timeout(sock) == 0
        resp.release()
