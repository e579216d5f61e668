"""Continuing a paused turn never breaks the one-terminal promise.

Between the paused message and its continuation there is a second request: a server that
dies there, a cancel, Ctrl-C, a total timeout or a raising callback during it must each
end the one logical stream with exactly one terminal, and the connection closed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Drop, Recorder, Reply, Stall

from ..conftest import fixture_bytes, model_for

ROOT = Path(__file__).resolve().parents[2]
PAUSED_TEXT = "I'll search for recent breakthroughs."


def paused() -> Reply:
    return Reply.sse(fixture_bytes("anthropic", "pause_turn_web_search.sse"))


def request() -> blazen.CompletionRequest:
    return Llm.completion_request([Llm.user("q")], tools=[Llm.server_tool("web_search")])


@pytest.fixture
def model(server):
    return model_for("anthropic", server, max_retries=2)


@pytest.mark.parametrize(
    "second",
    [
        Reply.sse([Drop()]),
        Reply.sse([b"event: message_start\ndata: {}\n\n", Drop()]),
        Reply.json(
            {"type": "error", "error": {"type": "api_error", "message": "boom"}}, status=500
        ),
        Reply.json(
            {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}, status=529
        ),
    ],
    ids=["drop", "drop-mid-body", "500", "529"],
)
def test_a_server_that_dies_between_continuations_gives_one_error(server, model, second):
    """The continuation fails: one error (never retried: chunks were delivered), partial kept."""
    server.add(paused(), second)
    rec = Recorder()
    Streaming.complete(model, request(), rec.handler)
    assert rec.terminals == 1 and rec.kinds[-1] == "error"
    assert isinstance(rec.error, blazen.BlazenError)
    assert rec.error.partial == PAUSED_TEXT
    assert len(server.requests) == 2  # no retry after delivery


def test_cancel_while_the_continuation_waits_gives_one_cancelled_error(server, model):
    """The second request stalls; a cancel from another thread ends it at once, once."""
    server.add(paused(), Reply.sse([Stall()]))
    token = blazen.CancelToken()
    rec = Recorder()
    timer = threading.Timer(0.5, token.cancel)
    timer.start()
    began = time.monotonic()
    try:
        Streaming.complete(model, request(), rec.handler, cancel=token)
    finally:
        timer.cancel()
    assert rec.terminals == 1 and isinstance(rec.error, blazen.CancelledError)
    assert time.monotonic() - began < 10
    assert server.wait_closed(timeout=5)


def test_a_total_timeout_covers_every_continuation(server, model):
    """timeout= is for the whole logical stream: a stalled continuation ends in TimeoutError."""
    server.add(paused(), Reply.sse([Stall()]))
    rec = Recorder()
    Streaming.complete(model, request(), rec.handler, timeout=1.0)
    assert rec.terminals == 1 and isinstance(rec.error, blazen.TimeoutError)
    assert rec.error.partial == PAUSED_TEXT


def test_a_callback_raising_in_the_continuation_is_one_callback_error(server, model):
    """A chunk callback that raises on the continuation's text aborts the stream, once."""
    server.add(paused(), Reply.sse(fixture_bytes("anthropic", "pause_turn_continued.sse")))
    rec = Recorder()

    def on_chunk(chunk: blazen.StreamChunk) -> None:
        rec.on_chunk(chunk)
        if chunk.content_delta and "IBM" in chunk.content_delta:
            raise RuntimeError("UI went away")

    Streaming.complete(
        model, request(), on_chunk=on_chunk, on_done=rec.on_done, on_error=rec.on_error
    )
    assert rec.terminals == 1 and isinstance(rec.error, blazen.CallbackError)
    assert isinstance(rec.error.__cause__, RuntimeError)


def test_the_asyncio_form_continues_with_one_done(server, model):
    """complete_async gives the same one logical stream."""
    server.add(paused(), Reply.sse(fixture_bytes("anthropic", "pause_turn_continued.sse")))
    rec = Recorder()
    resp = asyncio.run(Streaming.complete_async(model, request(), rec.handler))
    assert rec.kinds.count("done") == 1 and rec.terminals == 1
    assert resp.content.startswith(PAUSED_TEXT) and resp.finish_reason == "stop"


SCRIPT = textwrap.dedent(
    """
    from pathlib import Path
    from blazen import Llm, Providers, Streaming
    from blazen.testing import Reply, Stall, StreamServer

    paused = Reply.sse(Path(%r).read_bytes())
    with StreamServer([paused, Reply.sse([Stall()])]) as server:
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
            closed = server.wait_closed(1.0)
            print("KeyboardInterrupt closed=%%s" %% closed, flush=True)
            raise
    """
)


def test_ctrl_c_during_a_continuation_gives_one_cancelled_error_then_keyboard_interrupt():
    """SIGINT while the continuation's request waits: CancelledError once, then the interrupt."""
    fixture = ROOT / "tests" / "fixtures" / "anthropic" / "pause_turn_web_search.sse"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT % str(fixture)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # the continuation is now waiting on the stalled server
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert out.splitlines() == ["on_error CancelledError", "KeyboardInterrupt closed=True"], err
    assert proc.returncode != 0
