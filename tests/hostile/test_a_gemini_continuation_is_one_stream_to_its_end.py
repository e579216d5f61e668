"""A continued Gemini answer (``CONTINUATION``) is one stream, whatever its next request meets.

Gemini's finish reason is not an end sentinel: after ``CONTINUATION`` blazen reads on a
short grace, then sends the continuation. A server that hangs after it, a continuation
that never answers, a cancel, a total timeout or a body cut mid-continuation each end the
stream with exactly one terminal, never retried, with the text and usage so far.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Drop, Recorder, Reply, Stall, StreamServer

from ..conftest import fixture_bytes, model_for

FIRST_TEXT = "Chapter one. The harbour was still at dawn, and the boats lay in rows."
NO_HEADERS = Reply(raw=True, body=[Stall()])  # the request is read; no status line ever comes


def first(*after: Any) -> Reply:
    return Reply.sse([fixture_bytes("gemini", "continuation_token.sse"), *after])


def second() -> Reply:
    return Reply.sse(fixture_bytes("gemini", "continuation_continued.sse"))


@pytest.fixture
def model(server: StreamServer) -> blazen.ChatModel:
    return model_for("gemini", server, max_retries=3)


def run(model: blazen.ChatModel, **kw: Any) -> tuple[Recorder, Any, float]:
    rec = Recorder()
    began = time.monotonic()
    req = Llm.completion_request([Llm.user("Write a long story.")])
    resp = Streaming.complete(model, req, rec.handler, **kw)
    return rec, resp, time.monotonic() - began


def test_a_server_that_hangs_after_continuation_still_gets_the_continuation_sent(server, model):
    """CONTINUATION, then silence with the body open: about a second, then it goes on."""
    server.add(first(Stall()), second())
    rec, resp, took = run(model)
    assert rec.terminals == 1 and rec.done[0] == "stop"
    assert resp.content.startswith(FIRST_TEXT) and len(server.requests) == 2
    assert took < 5


def test_cancel_while_the_continuation_waits_for_headers_is_one_cancelled_error(server, model):
    """The continuation's answer never begins: a cancel ends it at once, once, closed."""
    server.add(first(), NO_HEADERS)
    token = blazen.CancelToken()
    timer = threading.Timer(0.5, token.cancel)
    timer.start()
    try:
        rec, _resp, took = run(model, cancel=token)
    finally:
        timer.cancel()
    assert rec.terminals == 1 and isinstance(rec.error, blazen.CancelledError)
    assert rec.error.partial == FIRST_TEXT
    assert rec.error.usage is not None and rec.error.usage.completion_tokens == 18
    assert took < 10 and len(server.requests) == 2
    assert server.wait_closed(timeout=5)


def test_a_total_timeout_while_the_continuation_waits_wins(server, model):
    """timeout= is for the whole logical stream, its continuation included."""
    server.add(first(), NO_HEADERS)
    rec, _resp, took = run(model, timeout=1.5)
    assert rec.terminals == 1 and isinstance(rec.error, blazen.TimeoutError)
    assert rec.error.partial == FIRST_TEXT
    assert took < 10
    assert server.wait_closed(timeout=5)


def test_a_continuation_cut_mid_answer_is_one_error_never_retried(server, model):
    """The continuation's body drops before its finish reason: one ConnectionError."""
    cut = fixture_bytes("gemini", "continuation_continued.sse").split(b"\r\n\r\n")[0]
    server.add(first(), Reply.sse([cut + b"\r\n\r\n", Drop()]), second())
    rec, _resp, _took = run(model)
    assert rec.terminals == 1 and isinstance(rec.error, blazen.ConnectionError)
    assert rec.error.partial == FIRST_TEXT + " Chapter two. By noon the fleet had gone."
    assert len(server.requests) == 2
