"""A continued paused turn (Anthropic ``pause_turn``) is one stream, whatever its second request meets.

The continuation is a second HTTP request inside one logical stream, after chunks were
delivered: whatever it meets (an in-stream error, a 429, a server that never answers, a
server that pauses forever, a cancel, a total timeout) the stream ends with exactly one
terminal, is never retried, and the error carries the usage reported so far.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Recorder, Reply, Stall, StreamServer

from ..conftest import fixture_bytes, model_for

PAUSED_TEXT = "I'll search for recent breakthroughs."
# The paused message's usage (tests/fixtures/anthropic/pause_turn_web_search.sse).
FIRST_INPUT, FIRST_OUTPUT = 2679, 120

SECOND_START = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"id":"msg_2","type":"message",'
    b'"role":"assistant","model":"claude-opus-4-8","content":[],"stop_reason":null,'
    b'"usage":{"input_tokens":4000,"output_tokens":1}}}\n\n'
)
TEXT_BLOCK = (
    b"event: content_block_start\n"
    b'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'
    b"\n\n"
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
    b'"text":" More."}}\n\n'
)
OVERLOADED = (
    b"event: error\n"
    b'data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
)


def paused() -> Reply:
    return Reply.sse(fixture_bytes("anthropic", "pause_turn_web_search.sse"))


def request(**kw: Any) -> blazen.CompletionRequest:
    return Llm.completion_request([Llm.user("q")], tools=[Llm.server_tool("web_search")], **kw)


@pytest.fixture
def model(server: StreamServer) -> blazen.ChatModel:
    return model_for("anthropic", server, max_retries=3)


def run(model: blazen.ChatModel, **kw: Any) -> tuple[Recorder, Any, float]:
    rec = Recorder()
    began = time.monotonic()
    resp = Streaming.complete(model, request(), rec.handler, **kw)
    return rec, resp, time.monotonic() - began


@pytest.mark.parametrize(
    "second",
    [
        Reply.sse([SECOND_START, OVERLOADED]),
        Reply.sse([SECOND_START, TEXT_BLOCK, OVERLOADED]),
        Reply.sse([OVERLOADED]),
    ],
    ids=["after-message-start", "after-text", "first-event"],
)
def test_an_error_event_in_the_continuation_is_one_typed_error_never_retried(server, model, second):
    """An ``error`` event in the second request: one OverloadedError, no retry, usage so far."""
    server.add(paused(), second)
    rec, _resp, _ = run(model)
    assert rec.terminals == 1 and rec.kinds[-1] == "error"
    assert isinstance(rec.error, blazen.OverloadedError)
    assert len(server.requests) == 2  # chunks were delivered: nothing is retried
    assert rec.error.partial.startswith(PAUSED_TEXT)
    usage = rec.error.usage
    assert usage is not None and usage.partial and not usage.estimated
    assert usage.prompt_tokens >= FIRST_INPUT and usage.completion_tokens >= FIRST_OUTPUT


@pytest.mark.parametrize("status", [429, 500, 529])
def test_a_continuation_refused_by_status_keeps_the_first_messages_usage(server, model, status):
    """429/500/529 on the second request: one error, no retry, the paused message's usage."""
    server.add(
        paused(),
        Reply.json(
            {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
            status=status,
            headers={"retry-after": "0"},
        ),
    )
    rec, _resp, _ = run(model)
    assert rec.terminals == 1 and rec.kinds[-1] == "error"
    assert len(server.requests) == 2
    if status == 429:
        assert isinstance(rec.error, blazen.RateLimitError)
    usage = rec.error.usage
    assert usage is not None and not usage.estimated
    assert (usage.prompt_tokens, usage.completion_tokens) == (FIRST_INPUT, FIRST_OUTPUT)


def test_a_turn_that_pauses_forever_is_stopped_by_the_cap():
    """Every answer pauses: the model's cap of continuations ends it ``"paused"``, once."""
    body = fixture_bytes("anthropic", "pause_turn_web_search.sse")
    server_forever = StreamServer(respond=lambda _r: Reply.sse(body)).start()
    try:
        model = model_for("anthropic", server_forever, max_retries=0, max_continuations=3)
        rec, resp, _ = run(model)
    finally:
        server_forever.stop()
    assert rec.terminals == 1 and rec.done[0] == "paused"
    assert resp.finish_reason == "paused" and resp.content == PAUSED_TEXT * 4
    assert len(server_forever.requests) == 4
    # Each request sends the content so far once, as the last assistant turn.
    sizes = [len(r.json()["messages"][-1]["content"]) for r in server_forever.requests[1:]]
    assert sizes == [3, 6, 9]


def test_a_request_cap_of_zero_makes_one_request_reported_paused(server, model):
    """max_continuations=0 on the request: one request, done ``"paused"``."""
    server.add(paused())
    rec = Recorder()
    resp = Streaming.complete(model, request(max_continuations=0), rec.handler)
    assert rec.terminals == 1 and rec.done[0] == "paused" and resp.finish_reason == "paused"
    assert len(server.requests) == 1


NO_HEADERS = Reply(raw=True, body=[Stall()])  # the request is read; no status line ever comes


def test_cancel_while_the_continuation_waits_for_headers_is_one_cancelled_error(server, model):
    """The second request's answer never begins: a cancel ends it at once, once, closed."""
    server.add(paused(), NO_HEADERS)
    token = blazen.CancelToken()
    timer = threading.Timer(0.5, token.cancel)
    timer.start()
    try:
        rec, _resp, took = run(model, cancel=token)
    finally:
        timer.cancel()
    assert rec.terminals == 1 and isinstance(rec.error, blazen.CancelledError)
    assert rec.error.usage is not None and rec.error.usage.prompt_tokens == FIRST_INPUT
    assert took < 10
    assert server.wait_closed(timeout=5)


def test_a_total_timeout_while_the_continuation_waits_for_headers_wins(server, model):
    """timeout= covers the continuation's wait for its answer to begin."""
    server.add(paused(), NO_HEADERS)
    rec, _resp, took = run(model, timeout=1.0)
    assert rec.terminals == 1 and isinstance(rec.error, blazen.TimeoutError)
    assert rec.error.partial == PAUSED_TEXT
    assert took < 10
    assert server.wait_closed(timeout=5)


PAUSED_BODY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-opus-4-8",
    "content": [
        {"type": "text", "text": "Searching."},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
    ],
    "stop_reason": "pause_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}


def test_a_whole_continuation_that_fails_carries_the_paused_answers_usage(server, model):
    """model.complete(): the second request fails; err.usage is the usage reported so far."""
    server.add(
        Reply.json(PAUSED_BODY),
        Reply.json({"type": "error", "error": {"type": "api_error", "message": "x"}}, status=400),
    )
    with pytest.raises(blazen.BlazenError) as info:
        model.complete(request())
    usage = info.value.usage
    assert usage is not None and usage.partial and not usage.estimated
    assert (usage.prompt_tokens, usage.completion_tokens) == (10, 5)


@pytest.mark.parametrize("cap", [0, 2])
def test_an_agent_on_a_turn_that_pauses_forever_stops_at_max_iterations(cap):
    """Every answer pauses: the run continues each paused turn, but stops at max_iterations."""
    body = fixture_bytes("anthropic", "pause_turn_web_search.sse")
    with StreamServer(respond=lambda _r: Reply.sse(body)) as forever:
        model = model_for("anthropic", forever, max_retries=0, max_continuations=cap)
        agent = blazen.Agent(model, tools=[Llm.server_tool("web_search")], max_iterations=3)
        with pytest.raises(blazen.MaxIterationsError) as info:
            agent.run("q")
        assert len(forever.requests) == 3 * (cap + 1)
    assert info.value.result.iterations == 3
    # The last request sent the paused content of every turn before it, each once.
    assert info.value.result.text == PAUSED_TEXT * (cap + 1)


SCRIPT = """
import sys
from pathlib import Path
from blazen import Llm, Providers, Streaming
from blazen.testing import Reply, Stall, StreamServer

paused = Reply.sse(Path(sys.argv[1]).read_bytes())
with StreamServer([paused, Reply(raw=True, body=[Stall()])]) as server:
    model = Providers.anthropic(api_key="k", base_url=server.url, max_retries=0)
    req = Llm.completion_request([Llm.user("q")], tools=[Llm.server_tool("web_search")])

    def on_chunk(chunk):
        if chunk.server_tool is not None and chunk.server_tool.status == "done":
            print("ready", flush=True)

    try:
        Streaming.complete(
            model, req, on_chunk=on_chunk,
            on_error=lambda e: print("on_error", type(e).__name__, flush=True),
        )
    except KeyboardInterrupt:
        print("KeyboardInterrupt closed=%s" % server.wait_closed(2.0), flush=True)
        raise
"""


def test_ctrl_c_while_the_continuation_waits_for_headers_is_one_cancel_then_the_interrupt():
    """A real SIGINT while the second request has no answer yet: CancelledError, then Ctrl-C."""
    root = Path(__file__).resolve().parents[2]
    fixture = root / "tests" / "fixtures" / "anthropic" / "pause_turn_web_search.sse"
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(fixture)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # the continuation has been sent; its answer never begins
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert out.splitlines() == ["on_error CancelledError", "KeyboardInterrupt closed=True"], err
    assert proc.returncode != 0


class _OneAnswerThenFull:
    """A server that answers one request, closes, and then lets no handshake complete.

    The paused answer goes with ``Connection: close``, so the continuation must connect
    again; by then the listener's backlog is full and the kernel drops its handshake: the
    continuation hangs in ``connect`` (as a dead host does) until something ends it.
    """

    def __init__(self, body: bytes) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(0)
        self.port = self.listener.getsockname()[1]
        self.fillers: list[socket.socket] = []
        self.body = body
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(65536)
            head, _, rest = buf.partition(b"\r\n\r\n")
            length = int(
                next(
                    (
                        v
                        for k, _, v in (line.partition(b":") for line in head.split(b"\r\n"))
                        if k.strip().lower() == b"content-length"
                    ),
                    b"0",
                )
            )
            while len(rest) < length:
                rest += conn.recv(65536)
            for _ in range(8):  # fill the backlog before the continuation can connect
                s = socket.socket()
                s.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    s.connect(("127.0.0.1", self.port))
                self.fillers.append(s)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Connection: close\r\n\r\n" + self.body
            )

    def close(self) -> None:
        self.thread.join(timeout=5)
        for s in self.fillers:
            s.close()
        self.listener.close()


@pytest.fixture
def unreachable_continuation() -> Iterator[blazen.ChatModel]:
    srv = _OneAnswerThenFull(fixture_bytes("anthropic", "pause_turn_web_search.sse"))
    try:
        yield blazen.Providers.anthropic(
            api_key="k",
            base_url=f"http://127.0.0.1:{srv.port}",
            max_retries=0,
            connect_timeout=60,
        )
    finally:
        srv.close()


def test_cancel_while_the_continuation_connects_is_one_cancelled_error(unreachable_continuation):
    """The continuation's handshake never completes: a cancel ends it at once, once."""
    token = blazen.CancelToken()
    timer = threading.Timer(1.0, token.cancel)
    timer.start()
    try:
        rec, _resp, took = run(unreachable_continuation, cancel=token)
    finally:
        timer.cancel()
    assert rec.terminals == 1 and isinstance(rec.error, blazen.CancelledError)
    assert rec.error.partial == PAUSED_TEXT
    assert took < 10


def test_a_total_timeout_while_the_continuation_connects_wins(unreachable_continuation):
    """timeout= covers the continuation's connect, whatever connect_timeout says."""
    rec, _resp, took = run(unreachable_continuation, timeout=1.5)
    assert rec.terminals == 1 and isinstance(rec.error, blazen.TimeoutError)
    assert rec.error.limit == "total" and rec.error.partial == PAUSED_TEXT
    assert took < 10


def test_leaving_a_pull_loop_while_the_continuation_waits_closes_it_at_once(server, model):
    """Breaking out of Streaming.stream during the continuation's wait: prompt, closed."""
    server.add(paused(), NO_HEADERS)
    began = time.monotonic()
    texts = []
    with Streaming.stream(model, request()) as chunks:
        for chunk in chunks:
            texts.append(chunk.content_delta or "")
            if chunk.server_tool is not None and chunk.server_tool.status == "done":
                time.sleep(0.3)  # the continuation is sent and waits for its answer
                break
    assert "".join(texts) == PAUSED_TEXT
    assert time.monotonic() - began < 10
    assert server.wait_closed(timeout=5)


def test_cancelling_the_task_while_the_continuation_waits_is_one_cancelled_error(server, model):
    """complete_async: the task cancelled during the continuation's wait ends it once, closed."""
    server.add(paused(), NO_HEADERS)
    rec = Recorder()

    async def main() -> None:
        task = asyncio.ensure_future(Streaming.complete_async(model, request(), rec.handler))
        while not any(c.server_tool is not None for c in rec.chunks):
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(main(), 20))
    assert rec.terminals == 1 and isinstance(rec.error, blazen.CancelledError)
    assert server.wait_closed(timeout=5)


def test_cancel_while_the_paused_body_is_drained_sends_no_continuation(server, model):
    """The paused message ends but its body stays open; a cancel then ends it, nothing sent."""
    body = fixture_bytes("anthropic", "pause_turn_web_search.sse")
    server.add(Reply.sse([body, Stall()]))
    token = blazen.CancelToken()
    rec = Recorder()

    def on_chunk(chunk: blazen.StreamChunk) -> None:
        rec.on_chunk(chunk)
        if chunk.server_tool is not None and chunk.server_tool.status == "done":
            token.cancel()

    began = time.monotonic()
    Streaming.complete(
        model,
        request(),
        on_chunk=on_chunk,
        on_done=rec.on_done,
        on_error=rec.on_error,
        cancel=token,
    )
    assert time.monotonic() - began < 10
    assert rec.terminals == 1 and isinstance(rec.error, blazen.CancelledError)
    assert rec.error.usage is not None and rec.error.usage.prompt_tokens == FIRST_INPUT
    assert server.wait_closed(timeout=5)
    # The continuation may already have gone out (the drain gives up within its second),
    # but never more than one request after the cancel.
    assert len(server.requests) <= 2
