"""A Gemini body is read to its end: never cut after a finish reason, never held past its bound.

Gemini has no end sentinel and a finishReason is not always the last payload, so blazen
reads on after one for at most a second (docs/streaming.md). These servers try both ways
to break that: payloads that carry a finish reason but no content, repeated forever, must
not hold the call; content that follows a finish reason puts the answer back mid-stream,
so a slow next payload must not cut it, and a body that ends there is a cut answer.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import blazen
from blazen import Llm, Streaming
from blazen.testing import Pause, Recorder, Reply, Stall, StreamServer, split_bytes

from ..conftest import model_for

TEXT_STOP = (
    b'data: {"candidates":[{"content":{"parts":[{"text":"Done."}],"role":"model"},'
    b'"finishReason":"STOP"}]}\r\n\r\n'
)
# A payload with a finish reason and usage, but no content: a repeat of the ending.
STOP_ONLY = (
    b'data: {"candidates":[{"content":{"parts":[],"role":"model"},"finishReason":"STOP"}],'
    b'"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"totalTokenCount":5}}'
    b"\r\n\r\n"
)
MORE = b'data: {"candidates":[{"content":{"parts":[{"text":" More."}],"role":"model"}}]}\r\n\r\n'
MORE_STOP = (
    b'data: {"candidates":[{"content":{"parts":[{"text":" End."}],"role":"model"},'
    b'"finishReason":"STOP"}]}\r\n\r\n'
)


@pytest.fixture
def model(server: StreamServer) -> blazen.ChatModel:
    return model_for("gemini", server, max_retries=0, idle_timeout=30)


def run(server: StreamServer, model: blazen.ChatModel, reply: Reply, **kw: Any) -> Any:
    server.add(reply)
    rec = Recorder()
    began = time.monotonic()
    resp = Streaming.complete(model, Llm.completion_request([Llm.user("q")]), rec.handler, **kw)
    return rec, resp, time.monotonic() - began


def test_repeated_finish_reasons_without_content_cannot_hold_the_call(server, model):
    """STOP, then a content-free STOP payload every 0.5 s forever: done within the grace."""
    repeats = [Pause(0.5), STOP_ONLY] * 40  # 20 s if each one renewed the wait
    rec, resp, took = run(server, model, Reply.sse([TEXT_STOP, *repeats, Stall()]))
    assert rec.terminals == 1 and rec.kinds[-1] == "done"
    assert resp.content == "Done."
    assert took < 8  # about a second; generous under load
    assert server.wait_closed(timeout=5)


def test_content_after_a_finish_reason_is_read_to_the_next_one_however_slow(server, model):
    """STOP, more text, a pause longer than the grace, then the rest: the whole answer."""
    rec, resp, _ = run(server, model, Reply.sse([TEXT_STOP, MORE, Pause(2.0), MORE_STOP]))
    assert rec.terminals == 1 and rec.kinds[-1] == "done"
    assert resp.content == "Done. More. End."
    assert rec.text == resp.content


def test_a_body_that_ends_after_content_followed_a_finish_reason_is_cut(server, model):
    """STOP, more text, then the body ends cleanly: the answer went on and never finished."""
    rec, _resp, _ = run(server, model, Reply.sse([TEXT_STOP, MORE]))
    assert rec.terminals == 1 and rec.kinds[-1] == "error"
    assert isinstance(rec.error, blazen.ConnectionError)
    assert rec.error.partial == "Done. More."


def test_a_close_delimited_body_cut_after_content_is_the_same_error(server, model):
    """Without chunked framing the end of the body is the connection closing: the same error."""
    rec, _resp, _ = run(server, model, Reply.sse([TEXT_STOP, MORE], transfer="close"))
    assert rec.terminals == 1 and rec.kinds[-1] == "error"
    assert isinstance(rec.error, blazen.ConnectionError)


def test_a_server_stalled_mid_answer_after_a_finish_reason_is_an_idle_timeout(server):
    """STOP, more text, then silence: mid-answer, so the idle limit ends it, never a done."""
    model = model_for("gemini", server, max_retries=0, idle_timeout=1.5)
    rec, _resp, took = run(server, model, Reply.sse([TEXT_STOP, MORE, Stall()]))
    assert rec.terminals == 1 and rec.kinds[-1] == "error"
    assert isinstance(rec.error, blazen.TimeoutError) and rec.error.limit == "idle"
    assert took < 10


def test_more_candidates_after_a_long_pause_do_not_hold_the_call(server, model):
    """STOP, then more content only after 3 s: the call has returned done at STOP by then."""
    rec, resp, took = run(server, model, Reply.sse([TEXT_STOP, Pause(3.0), MORE_STOP]))
    assert rec.terminals == 1 and rec.kinds[-1] == "done" and resp.content == "Done."
    assert took < 2.9
    assert server.wait_closed(timeout=5)


def test_a_total_timeout_during_the_grace_still_wins(server, model):
    """timeout= shorter than the rest of the grace: the stream ends done or timed out, once."""
    rec, _resp, took = run(server, model, Reply.sse([TEXT_STOP, Stall()]), timeout=0.3)
    assert rec.terminals == 1
    assert took < 5


@pytest.mark.parametrize(
    "trickle",
    [
        [b"\r\n", Pause(0.2)] * 50,  # blank lines: no event at all
        [b'data: {"candidates":[{"content":', Pause(0.2)] + [b" ", Pause(0.2)] * 50,  # never ends
        [b'data: {"usageMetadata":{"totalTokenCount":5}}\r\n\r\n', Pause(0.2)] * 50,
    ],
    ids=["blank-lines", "an-event-that-never-ends", "usage-only-payloads"],
)
def test_bytes_trickled_after_the_finish_reason_cannot_hold_the_call(server, model, trickle):
    """After STOP a server trickles bytes with no content for 10 s: done within the grace."""
    rec, resp, took = run(server, model, Reply.sse([TEXT_STOP, *trickle, Stall()]))
    assert rec.terminals == 1 and rec.kinds[-1] == "done" and resp.content == "Done."
    assert took < 8
    assert server.wait_closed(timeout=5)


def _payload(kind: str, n: int) -> bytes:
    text = f'{{"text":"t{n}."}}' if "T" in kind else ""
    finish = ',"finishReason":"STOP"' if "S" in kind else ""
    if kind == "U":
        return b'data: {"usageMetadata":{"totalTokenCount":%d}}\r\n\r\n' % n
    body = f'{{"candidates":[{{"content":{{"parts":[{text}],"role":"model"}}{finish}}}]}}'
    return f"data: {body}\r\n\r\n".encode()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kinds=st.lists(st.sampled_from(["T", "S", "TS", "U"]), min_size=1, max_size=7),
    cuts=st.lists(st.integers(min_value=1, max_value=2000), max_size=6),
)
def test_any_order_of_payloads_ends_done_with_every_text_or_as_a_cut_answer(server, kinds, cuts):
    """Text, finish-only, text+finish and usage payloads in any order, cut anywhere.

    Done with every text exactly when a finish reason came with or after the last text;
    otherwise the answer was cut: one ConnectionError holding every text.
    """
    model = model_for("gemini", server, max_retries=0, idle_timeout=30)
    body = b"".join(_payload(k, i) for i, k in enumerate(kinds))
    rec, resp, _ = run(server, model, Reply.sse(split_bytes(body, cuts)))
    texts = "".join(f"t{i}." for i, k in enumerate(kinds) if "T" in k)
    last_text = max((i for i, k in enumerate(kinds) if "T" in k), default=-1)
    finished = any("S" in k for k in kinds[max(last_text, 0) :])
    assert rec.terminals == 1
    assert rec.text == texts
    if finished:
        assert rec.kinds[-1] == "done" and resp.content == texts
    else:
        assert isinstance(rec.error, blazen.ConnectionError)
        assert rec.error.partial == texts
