"""Deadlines always win: after the end signal, and through a stalled TLS handshake.

Each server here misbehaves on purpose, on a real loopback socket: it trickles keep-alives
after ``[DONE]``, never closes a close-delimited body, or accepts TCP and never answers the
TLS handshake. A call must still return within its deadline plus about a second.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest

import blazen
from blazen import CancelToken, Llm, Streaming
from blazen.testing import Pause, Recorder, Reply, StreamServer, openai_sse

from ..conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])


def _model(base_url: str, **options: object) -> blazen.ChatModel:
    options.setdefault("max_retries", 0)
    return blazen.Providers.openai_compat("test", base_url, api_key=KEY_FOR_TESTS, **options)


def _trickling_after_done(transfer: str) -> Reply:
    # About nine seconds of keep-alive comments after [DONE]: the drain must not wait them out.
    return Reply.sse(openai_sse(["hi"]) + [b": keep-alive\n\n", Pause(0.3)] * 30, transfer=transfer)


@pytest.mark.parametrize("transfer", ["chunked", "close"])
def test_returns_within_a_second_of_done_while_the_server_keeps_trickling(transfer):
    """Draining for reuse has one budget in all, however often the server sends a byte."""
    with StreamServer([_trickling_after_done(transfer)]) as server:
        rec = Recorder()
        start = time.monotonic()
        resp = Streaming.complete(_model(server.base_url), REQ, rec.handler)
        took = time.monotonic() - start
        assert server.wait_closed(2.0)  # not pooled: the server saw the close
    assert rec.kinds[-1] == "done" and rec.terminals == 1 and resp is not None
    assert took < 2.0, took


def test_a_cancel_during_the_drain_returns_at_once_with_the_decided_done():
    """The answer was complete: cancel only cuts the drain short, it cannot unmake done."""
    with StreamServer([_trickling_after_done("chunked")]) as server:
        token = CancelToken()
        rec = Recorder()

        def on_done(reason, usage):
            rec.handler("done", reason, usage)

        threading.Timer(0.4, token.cancel).start()
        start = time.monotonic()
        Streaming.complete(
            _model(server.base_url, connect_timeout=5.0),
            REQ,
            on_chunk=rec.on_chunk,
            on_done=on_done,
            on_error=rec.on_error,
            cancel=token,
        )
        took = time.monotonic() - start
    assert rec.terminals == 1 and took < 1.5, (rec.kinds, took)


@pytest.fixture
def silent_tls() -> Iterator[str]:
    """An https:// base URL whose server accepts TCP and never says a word of TLS."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.05)  # closing a listener does not wake a blocked accept(): poll
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except socket.timeout:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(5)
        listener.close()
        for conn in held:
            conn.close()


def test_cancel_interrupts_a_stalled_tls_handshake(silent_tls):
    """A handshake blocks in recv like a read does, and a cancel wakes it the same way."""
    token = CancelToken()
    threading.Timer(0.3, token.cancel).start()
    rec = Recorder()
    start = time.monotonic()
    Streaming.complete(_model(silent_tls, connect_timeout=None), REQ, rec.handler, cancel=token)
    took = time.monotonic() - start
    assert isinstance(rec.error, blazen.CancelledError) and took < 1.0, took


def test_the_total_timeout_interrupts_a_stalled_tls_handshake(silent_tls):
    rec = Recorder()
    start = time.monotonic()
    Streaming.complete(_model(silent_tls), REQ, rec.handler, timeout=0.5)
    took = time.monotonic() - start
    assert isinstance(rec.error, blazen.TimeoutError) and rec.error.limit == "total"
    assert took < 1.5, took


@pytest.mark.parametrize("idle_timeout", [None, 5.0])
def test_a_handshake_that_outlasts_connect_timeout_is_a_connect_timeout(silent_tls, idle_timeout):
    """Not "the provider sent nothing": it never got the request. The error names the limit."""
    rec = Recorder()
    start = time.monotonic()
    model = _model(silent_tls, connect_timeout=0.3, idle_timeout=idle_timeout)
    Streaming.complete(model, REQ, rec.handler)
    took = time.monotonic() - start
    err = rec.error
    assert isinstance(err, blazen.TimeoutError), repr(err)
    assert err.limit == "connect" and err.seconds == 0.3 and "0.3 s" in err.message
    assert took < 1.5, took


def test_waiting_for_a_connection_is_not_the_provider_being_idle(server):
    """With every connection busy, a stream waits past idle_timeout and still succeeds."""
    # The first stream stays busy for 1.2 s but is never idle for 0.6 s.
    events = openai_sse(["a", "b", "c"])
    slow = [events[0], events[1], Pause(0.4), events[2], Pause(0.4), events[3], Pause(0.4)]
    server.add(Reply.sse([*slow, *events[4:]]))
    server.add(Reply.sse(openai_sse(["b"])))
    model = _model(server.base_url, max_connections=1, idle_timeout=0.6)
    results: list[object] = []
    first = threading.Thread(target=lambda: results.append(Streaming.complete(model, REQ)))
    first.start()
    time.sleep(0.2)  # the first stream holds the only connection for about a second
    rec = Recorder()
    second = Streaming.complete(model, REQ, rec.handler)
    first.join(10)
    assert rec.error is None and second is not None and second.content == "b"


def test_a_long_wait_for_a_connection_is_logged_as_such(server, caplog):
    events = openai_sse(["a"])
    server.add(Reply.sse([*events[:2], Pause(1.5), *events[2:]]), Reply.sse(openai_sse(["b"])))
    model = _model(server.base_url, max_connections=1)
    caplog.set_level(logging.INFO, logger="blazen")
    first = threading.Thread(target=lambda: Streaming.complete(model, REQ))
    first.start()
    time.sleep(0.2)
    assert Streaming.complete(model, REQ).content == "b"
    first.join(10)
    assert any("waited" in r.getMessage() and "1 connections" in r.getMessage() for r in caplog.records)


def test_a_cancel_or_the_total_timeout_ends_a_wait_for_a_connection(server):
    server.add(Reply.sse([*openai_sse(["a"])[:2], Pause(2.0), *openai_sse(["a"])[2:]]))
    model = _model(server.base_url, max_connections=1)
    first = threading.Thread(target=lambda: Streaming.complete(model, REQ))
    first.start()
    time.sleep(0.2)
    rec = Recorder()
    start = time.monotonic()
    Streaming.complete(model, REQ, rec.handler, timeout=0.5)
    assert isinstance(rec.error, blazen.TimeoutError) and rec.error.limit == "total"
    assert time.monotonic() - start < 1.5
    first.join(10)


@pytest.mark.parametrize("form", ["blocking", "async"])
def test_a_stream_started_from_a_callback_that_could_only_wait_for_ever_is_refused(form, server):
    """max_connections=1 and the outer stream holds it: a clear error, not a silent hang."""
    server.add(Reply.sse([*openai_sse(["a"])[:2], Pause(0.2), *openai_sse(["a"])[2:]]))
    model = _model(server.base_url, max_connections=1)
    refused: list[BaseException] = []

    def on_chunk(chunk):
        if chunk.content_delta and not refused:
            try:
                Streaming.complete(model, REQ)
            except blazen.ValidationError as exc:
                refused.append(exc)

    if form == "blocking":
        resp = Streaming.complete(model, REQ, on_chunk=on_chunk)
    else:

        async def main():
            async def inner(chunk):
                if chunk.content_delta and not refused:
                    try:
                        await Streaming.complete_async(model, REQ)
                    except blazen.ValidationError as exc:
                        refused.append(exc)

            return await Streaming.complete_async(model, REQ, on_chunk=inner)

        resp = asyncio.run(main())
    assert resp is not None and resp.content == "a"
    assert len(refused) == 1 and "max_connections" in str(refused[0])


def test_a_stream_started_from_on_done_is_not_refused(server):
    """By on_done the outer worker has released its connection: the inner one may run."""
    server.add(Reply.sse(openai_sse(["a"])), Reply.sse(openai_sse(["b"])))
    model = _model(server.base_url, max_connections=1)
    inner: list[object] = []
    Streaming.complete(
        model, REQ, on_done=lambda *_: inner.append(Streaming.complete(model, REQ, timeout=5))
    )
    assert inner[0] is not None and inner[0].content == "b"


def _chunked_head() -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


@pytest.mark.parametrize("trickle", ["trailer", "size-line"])
def test_chunked_framing_trickled_after_done_cannot_hold_the_call(trickle):
    """Trailer lines or a next chunk's size, a byte at a time: the drain's budget still wins."""
    events = b"".join(openai_sse(["hi"]))
    body: list[object] = [_chunked_head() + _chunk(events)]
    if trickle == "trailer":
        body.append(b"0\r\n")  # the last chunk: trailer fields follow, slowly
        body += [part for _ in range(30) for part in (b"X", Pause(0.3))]
    else:
        body += [part for _ in range(30) for part in (b"f", Pause(0.3))]
    with StreamServer([Reply(raw=True, body=body)]) as server:
        rec = Recorder()
        start = time.monotonic()
        Streaming.complete(_model(server.base_url), REQ, rec.handler, timeout=5)
        took = time.monotonic() - start
    assert rec.kinds[-1] == "done" and rec.text == "hi", rec.kinds
    assert took < 2.0, took


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_an_aborted_stream_in_a_forked_child_leaves_the_parents_connection_alone():
    """The child inherits the parent's socket: its abort must not shut the parent's down."""
    import os

    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    events = openai_sse([f"w{i}" for i in range(10)])
    slow = [part for event in events for part in (event, Pause(0.05))]
    with StreamServer([Reply.sse(slow)]) as server:
        model = _model(server.base_url)
        token = CancelToken()
        rec = Recorder()
        parent = threading.Thread(
            target=lambda: Streaming.complete(model, REQ, rec.handler, cancel=token)
        )
        parent.start()
        time.sleep(0.15)  # mid-stream
        pid = os.fork()
        if pid == 0:
            token.cancel("the child's copy")
            os._exit(0)
        os.waitpid(pid, 0)
        parent.join(10)
    assert rec.kinds[-1] == "done" and rec.text == "".join(f"w{i}" for i in range(10))


def test_a_task_spawned_from_a_callback_may_wait_for_the_connection(server):
    """It inherits the callback's context but runs on its own: it waits, it is not refused."""
    events = openai_sse(["a", "b"])
    server.add(Reply.sse([*events[:2], Pause(0.1), *events[2:]]), Reply.sse(openai_sse(["c"])))
    model = _model(server.base_url, max_connections=1)
    spawned: list[asyncio.Task] = []

    async def main():
        async def on_chunk(chunk):
            if chunk.content_delta == "a":
                spawned.append(asyncio.ensure_future(Streaming.complete_async(model, REQ)))

        outer = await Streaming.complete_async(model, REQ, on_chunk=on_chunk)
        inner = await spawned[0]
        return outer, inner

    outer, inner = asyncio.run(main())
    assert outer.content == "ab" and inner.content == "c"


@pytest.mark.parametrize("transfer", ["length", "chunked", "close"])
def test_a_non_streamed_body_trickled_for_ever_ends_at_the_idle_timeout(transfer):
    """model.complete(): a body sent a byte at a time cannot outlast idle_timeout.

    Each byte comes well within the idle timeout, so a per-read limit never fires; the
    body as a whole must arrive within ``idle_timeout`` of its headers.
    """
    payload = {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hello " * 20},
                "finish_reason": "stop",
            }
        ],
    }
    text = json.dumps(payload).encode()
    body = [part for i in range(len(text)) for part in (text[i : i + 1], Pause(0.05))]
    reply = Reply(headers={"Content-Type": "application/json"}, body=body, transfer=transfer)
    with StreamServer([reply]) as server:
        model = _model(server.base_url, idle_timeout=0.6)
        start = time.monotonic()
        with pytest.raises(blazen.TimeoutError) as info:
            model.complete(REQ)
        took = time.monotonic() - start
    assert took < 3, f"the trickled body held the call for {took:.1f} s"
    assert info.value.limit == "idle" and "0.6" in str(info.value)
