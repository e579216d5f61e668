"""Reliability under faults (SPEC promises 5-10): a fault-injecting server on real sockets."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time

import pytest

import blazen
from blazen.testing import Drop, Pause, Recorder, Reply, Stall, StreamServer, openai_sse, sse_event

from .conftest import KEY_FOR_TESTS, sse_reply


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("blazen._http.retry.BASE_DELAY", 0.01)


def make_model(server: StreamServer, **options) -> blazen.ChatModel:
    return blazen.Providers.openai(api_key=KEY_FOR_TESTS, base_url=server.base_url, **options)


def stream(complete, model, req, **kw):
    rec = Recorder()
    t0 = time.monotonic()
    resp = complete(model, req, rec.handler, **kw)
    return rec, resp, time.monotonic() - t0


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# -- cancellation -----------------------------------------------------------------------


def test_cancel_from_another_thread_ends_a_blocked_read_within_100ms(server, req, complete):
    """A worker blocked in recv with no bytes arriving is woken; the server sees the close."""
    server.add(Reply.sse([*openai_sse(["hi"])[:2], Stall()]))
    model = make_model(server)
    token = blazen.CancelToken()
    cancelled_at = []

    def later():
        time.sleep(0.3)
        cancelled_at.append(time.monotonic())
        token.cancel("user pressed stop")

    threading.Thread(target=later).start()
    rec, resp, _ = stream(complete, model, req, cancel=token)
    ended = time.monotonic()
    assert resp is None and rec.kinds == ["chunk", "error"]
    err = rec.error
    assert isinstance(err, blazen.CancelledError) and "user pressed stop" in err.message
    assert err.partial == "hi"
    assert ended - cancelled_at[0] < 0.1
    assert server.wait_closed(1.0)
    assert server.connections[0].closed_at - cancelled_at[0] < 0.1
    assert server.connections[0].closed_by == "client"


def test_cancel_before_headers_arrive_closes_the_connection(server, req, complete):
    """A server that accepted but never answered is hung up on at cancel."""
    server.add(Reply(raw=True, body=[Stall()]))
    model = make_model(server)
    token = blazen.CancelToken()
    threading.Timer(0.2, token.cancel).start()
    rec, _, took = stream(complete, model, req, cancel=token)
    assert isinstance(rec.error, blazen.CancelledError) and took < 1.0
    assert server.wait_closed(1.0)


def test_an_already_cancelled_token_sends_nothing_useful_and_ends_in_cancelled(
    server, req, complete
):
    """A token cancelled before the call ends the stream at once with CancelledError."""
    server.add(sse_reply("text.sse"))
    token = blazen.CancelToken()
    token.cancel()
    rec, _, _ = stream(complete, make_model(server), req, cancel=token)
    assert rec.kinds == ["error"] and isinstance(rec.error, blazen.CancelledError)


def test_cancel_scope_reaches_streams_that_were_not_given_a_token(server, req, complete):
    """An ambient cancel_scope token cancels streams started inside it."""
    server.add(Reply.sse([Stall()]))
    token = blazen.CancelToken()
    threading.Timer(0.2, token.cancel).start()
    with blazen.cancel_scope(token):
        rec, _, took = stream(complete, make_model(server), req)
    assert isinstance(rec.error, blazen.CancelledError) and took < 1.0


def test_cancel_during_retry_backoff_wakes_at_once(server, req, complete):
    """A cancel while the worker waits out Retry-After ends the stream without waiting."""
    server.add(
        Reply.json({"error": {"message": "slow"}}, status=429, headers={"Retry-After": "30"})
    )
    token = blazen.CancelToken()
    threading.Timer(0.3, token.cancel).start()
    rec, _, took = stream(complete, make_model(server, retry_after_cap=60), req, cancel=token)
    assert isinstance(rec.error, blazen.CancelledError) and took < 1.0


# -- time limits ------------------------------------------------------------------------


def test_connect_refused_is_a_connection_error_after_retries(req, caplog, complete):
    """Nothing listening: retried max_retries times, then one ConnectionError."""
    model = blazen.Providers.openai(
        api_key=KEY_FOR_TESTS, base_url=f"http://127.0.0.1:{free_port()}/v1"
    )
    with caplog.at_level(logging.INFO, logger="blazen"):
        rec, _, _ = stream(complete, model, req)
    assert rec.kinds == ["error"] and isinstance(rec.error, blazen.ConnectionError)
    assert isinstance(rec.error, ConnectionError)  # the builtin too
    assert "could not connect" in rec.error.message
    # It says why in words: no connection object or class of blazen's own in the message.
    assert "Connection refused" in rec.error.message
    assert "_Conn" not in rec.error.message and "host=" not in rec.error.message
    retries = [r for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retries) == 2 and all(r.levelno == logging.INFO for r in retries)


@pytest.fixture
def unanswered_port():
    """A port whose listener's backlog is full: new handshakes get no answer."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(0)
    port = lst.getsockname()[1]
    fillers = []
    for _ in range(8):
        s = socket.socket()
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            s.connect(("127.0.0.1", port))
        fillers.append(s)
    yield port
    for s in fillers:
        s.close()
    lst.close()


def test_connect_timeout_names_the_limit(req, complete, unanswered_port):
    """A connect that cannot complete ends in TimeoutError naming the connect limit."""
    model = blazen.Providers.openai(
        api_key=KEY_FOR_TESTS,
        base_url=f"http://127.0.0.1:{unanswered_port}/v1",
        connect_timeout=0.3,
        max_retries=0,
        idle_timeout=5,
    )
    rec, _, took = stream(complete, model, req)
    err = rec.error
    assert isinstance(err, blazen.TimeoutError) and isinstance(err, TimeoutError)
    assert err.limit == "connect" and "connect timeout of 0.3 s" in err.message
    assert took < 3


def test_cancel_during_connect_returns_at_once(req, complete, unanswered_port):
    """A cancel while the TCP handshake hangs ends the stream without waiting out connect_timeout."""
    model = blazen.Providers.openai(
        api_key=KEY_FOR_TESTS,
        base_url=f"http://127.0.0.1:{unanswered_port}/v1",
        connect_timeout=8,
    )
    token = blazen.CancelToken()
    threading.Timer(0.2, token.cancel).start()
    rec, _, took = stream(complete, model, req, cancel=token)
    assert isinstance(rec.error, blazen.CancelledError)
    assert took < 1.0
    assert not [t for t in threading.enumerate() if t.name == "blazen-stream"]


def test_accept_and_never_answer_ends_in_idle_timeout(server, req, complete):
    """A server that accepts and says nothing: TimeoutError (idle) naming the seconds."""
    server.add(Reply(raw=True, body=[Stall()]))
    rec, _, took = stream(complete, make_model(server, idle_timeout=0.3, max_retries=0), req)
    err = rec.error
    assert isinstance(err, blazen.TimeoutError) and err.limit == "idle"
    assert "0.3 s" in err.message and took < 2


def test_headers_then_stall_ends_in_idle_timeout(server, req, complete):
    """Status and headers, then nothing: idle timeout."""
    server.add(Reply.sse([Stall()]))
    rec, _, _ = stream(complete, make_model(server, idle_timeout=0.3), req)
    assert isinstance(rec.error, blazen.TimeoutError) and rec.error.limit == "idle"
    assert server.wait_closed(1.0)


def test_stall_mid_stream_ends_in_idle_timeout_with_partial_text(server, req, complete):
    """Content, then silence: idle timeout; the text so far is on the error."""
    server.add(Reply.sse([*openai_sse(["part one"])[:2], Stall()]))
    rec, _, _ = stream(complete, make_model(server, idle_timeout=0.3), req)
    assert rec.kinds == ["chunk", "error"]
    assert rec.error.limit == "idle" and rec.error.partial == "part one"


def test_keep_alives_alone_do_not_count_as_progress(server, req, complete):
    """A server sending only comments forever still hits the idle timeout."""
    body = [b": keep-alive\n\n", Pause(0.05)] * 100
    server.add(Reply.sse(body))
    rec, _, took = stream(complete, make_model(server, idle_timeout=0.4), req)
    assert isinstance(rec.error, blazen.TimeoutError) and rec.error.limit == "idle"
    assert took < 2
    assert server.wait_closed(1.0)


def test_dribbling_server_hits_the_total_timeout(server, req, complete):
    """One byte at a time, forever: the total timeout= ends it and says so."""
    blob = b"".join(openai_sse(["x" * 200]))
    body = []
    for i in range(len(blob)):
        body += [blob[i : i + 1], Pause(0.02)]
    server.add(Reply.sse(body))
    rec, _, took = stream(complete, make_model(server, idle_timeout=5), req, timeout=0.5)
    err = rec.error
    assert isinstance(err, blazen.TimeoutError) and err.limit == "total"
    assert "total timeout of 0.5 s" in err.message
    assert 0.45 < took < 1.5
    assert server.wait_closed(1.0)


def test_model_level_total_timeout_applies_when_the_call_gives_none(server, req, complete):
    """timeout= on the model is the default for every call."""
    server.add(Reply.sse([b": ping\n\n", Pause(0.1)] * 40))
    rec, _, _ = stream(complete, make_model(server, timeout=0.3), req)
    assert rec.error.limit == "total"


# -- retries ----------------------------------------------------------------------------


def test_429_with_retry_after_is_retried_once_and_text_is_not_duplicated(server, req, complete):
    """429 Retry-After: 1, then success: one retry after about a second, text once."""
    server.add(
        Reply.json(
            {"error": {"message": "Rate limit reached", "type": "requests"}},
            status=429,
            headers={"Retry-After": "1"},
        ),
        sse_reply("text.sse"),
    )
    rec, resp, took = stream(complete, make_model(server), req)
    assert resp.content == "Why did the scarecrow win an award?" == rec.text
    assert len(server.requests) == 2 and 0.9 < took < 3


def test_429_demanding_an_hour_is_not_retried(server, req, complete):
    """Retry-After beyond the cap: RateLimitError with retry_after, no second request."""
    server.add(
        Reply.json({"error": {"message": "quota"}}, status=429, headers={"Retry-After": "3600"})
    )
    rec, _, took = stream(complete, make_model(server), req)
    err = rec.error
    assert isinstance(err, blazen.RateLimitError) and err.retry_after == 3600
    assert "did not retry" in err.message
    assert len(server.requests) == 1 and took < 1


def test_retry_after_ms_wins_over_retry_after(server, req, complete):
    """retry-after-ms is honoured (and preferred)."""
    server.add(
        Reply.json(
            {"error": {"message": "slow"}},
            status=429,
            headers={"Retry-After": "3600", "retry-after-ms": "50"},
        ),
        sse_reply("text.sse"),
    )
    rec, resp, took = stream(complete, make_model(server), req)
    # Answered at all: Retry-After (an hour, over the cap) would have been refused unretried.
    # Read as seconds, the 50 would have waited 50 s; the bound leaves a loaded machine room.
    assert resp is not None and took < 10


def test_503_twice_then_success(server, req, complete):
    """Two 503s then a stream: success on the third attempt."""
    server.add(
        Reply.json({"error": {"message": "unavailable"}}, status=503),
        Reply.json({"error": {"message": "unavailable"}}, status=503),
        sse_reply("text.sse"),
    )
    rec, resp, _ = stream(complete, make_model(server), req)
    assert resp.content and rec.terminals == 1 and len(server.requests) == 3


@pytest.mark.parametrize("status", [408, 500, 502, 504])
def test_retryable_statuses_are_retried(server, req, status, complete):
    """408 and 5xx are retried before any chunk."""
    server.add(Reply.json({"error": {"message": "x"}}, status=status), sse_reply("text.sse"))
    _, resp, _ = stream(complete, make_model(server), req)
    assert resp is not None and len(server.requests) == 2


def test_529_is_an_overloaded_error(server, req, complete):
    """529 exhausts its retries and surfaces as OverloadedError."""
    over = Reply.json(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        status=529,
    )
    server.add(over, over, over)
    rec, _, _ = stream(complete, make_model(server), req)
    assert isinstance(rec.error, blazen.OverloadedError) and rec.error.status == 529
    assert len(server.requests) == 3


def test_non_retryable_statuses_are_not_retried(server, req, complete):
    """A 401 is final at once."""
    server.add(Reply.json({"error": {"message": "no"}}, status=401))
    rec, _, _ = stream(complete, make_model(server), req)
    assert isinstance(rec.error, blazen.AuthError) and len(server.requests) == 1


def test_in_stream_error_before_content_is_retried(server, req, complete):
    """An error event before any content is retried like a 5xx."""
    server.add(sse_reply("error_before_content.sse", transfer="close"), sse_reply("text.sse"))
    rec, resp, _ = stream(complete, make_model(server), req)
    assert resp is not None and rec.text == resp.content and len(server.requests) == 2


def test_in_stream_error_after_content_is_not_retried(server, req, complete):
    """After a chunk reached a callback nothing is retried (it would duplicate text)."""
    server.add(sse_reply("midstream_error.sse", transfer="close"), sse_reply("text.sse"))
    rec, _, _ = stream(complete, make_model(server), req)
    assert rec.kinds[-1] == "error" and len(server.requests) == 1


def test_in_stream_overloaded_error_gets_the_same_class_as_http_529(server, req, complete):
    """An in-stream overloaded_error is an OverloadedError, exactly as a 529."""
    body = [
        sse_event({"choices": [{"index": 0, "delta": {"content": "a"}}]}),
        sse_event({"error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]
    server.add(Reply.sse(body))
    rec, _, _ = stream(complete, make_model(server), req)
    assert type(rec.error) is blazen.OverloadedError and rec.error.status is None


def test_connection_dropped_mid_event_is_one_connection_error(server, req, complete):
    """The server drops the connection halfway through an event: one ConnectionError."""
    events = openai_sse(["alpha", "beta"])
    server.add(Reply.sse([events[0], events[1], events[2][:20], Drop()]))
    rec, _, _ = stream(complete, make_model(server), req)
    assert rec.kinds == ["chunk", "error"] and isinstance(rec.error, blazen.ConnectionError)
    assert rec.error.partial == "alpha"


# -- hostile input ----------------------------------------------------------------------


def test_an_oversize_event_is_a_provider_error_not_unbounded_memory(server, req, complete):
    """A single 9 MiB event ends the stream with ProviderError at the 8 MiB default cap."""
    huge = b"data: " + b"x" * (9 * 1024 * 1024)
    server.add(Reply.sse([huge[i : i + 65536] for i in range(0, len(huge), 65536)]))
    rec, _, _ = stream(complete, make_model(server), req)
    err = rec.error
    assert type(err) is blazen.ProviderError and err.error_type == "event_too_large"
    assert "8388608 bytes" in err.message


def test_invalid_utf8_is_a_provider_error(server, req, complete):
    """Bytes that are not UTF-8 end the stream with a clear ProviderError."""
    server.add(Reply.sse([b'data: {"choices":[{"index":0,"delta":{"content":"\xff\xfe"}}]}\n\n']))
    rec, _, _ = stream(complete, make_model(server), req)
    assert type(rec.error) is blazen.ProviderError and rec.error.error_type == "invalid_utf8"


@pytest.mark.parametrize(
    ("payload", "what"),
    [
        (b"data: not json at all\n\n", "not JSON"),
        (b"data: [1, 2, 3]\n\n", "not a JSON object"),
        (b'data: {"choices": "nope"}\n\n', "unexpected shape"),
        (b'data: {"choices": [{"delta": {"content": 5}}]}\n\n', "not a string"),
        (b'data: {"choices": [{"delta": {"tool_calls": [7]}}]}\n\n', "unexpected shape"),
    ],
)
def test_malformed_payloads_are_provider_errors_never_raw_exceptions(
    server, req, payload, what, complete
):
    """Non-JSON data, JSON of the wrong shape: one typed ProviderError, never KeyError."""
    server.add(Reply.sse([payload]))
    rec, _, _ = stream(complete, make_model(server, max_retries=0), req)
    assert rec.kinds == ["error"]
    assert type(rec.error) is blazen.ProviderError and what in rec.error.message


def test_an_html_page_with_status_200_is_a_provider_error(server, req, complete):
    """A proxy's HTML page with 200 is reported as such, with a hint about base_url."""
    server.add(
        Reply(
            headers={"Content-Type": "text/html"}, body=[b"<html>Sign in</html>"], transfer="length"
        )
    )
    rec, _, _ = stream(complete, make_model(server), req)
    err = rec.error
    assert (
        type(err) is blazen.ProviderError
        and "HTML page" in err.message
        and "base_url" in err.message
    )
    assert err.body == "<html>Sign in</html>"


def test_a_wrong_content_type_is_a_provider_error(server, req, complete):
    """text/plain where an event stream was promised: ProviderError."""
    server.add(Reply(headers={"Content-Type": "text/plain"}, body=[b"data: [DONE]\n\n"]))
    rec, _, _ = stream(complete, make_model(server), req)
    assert type(rec.error) is blazen.ProviderError and "text/plain" in rec.error.message


def test_a_json_error_with_status_200_is_classified(server, req, complete):
    """Some servers send a JSON error body with 200: classified like the HTTP error."""
    server.add(
        Reply.json({"error": {"message": "model not found", "type": "invalid_request_error"}})
    )
    rec, _, _ = stream(complete, make_model(server), req)
    assert isinstance(rec.error, blazen.InvalidRequestError)


# -- security ---------------------------------------------------------------------------


def test_redirects_are_not_followed_and_the_key_goes_nowhere_else(req, complete):
    """A redirect to another host is an error; the other host never sees a request."""
    with StreamServer() as a, StreamServer() as b:
        a.add(
            Reply(
                status=307,
                headers={"Location": b.base_url + "/chat/completions"},
                transfer="length",
            )
        )
        rec, _, _ = stream(complete, make_model(a), req)
        assert type(rec.error) is blazen.ProviderError and "redirect" in rec.error.message
        assert b.requests == []


def test_tls_verification_is_on_by_default(server):
    """verify defaults to True; turning it off is explicit."""
    assert make_model(server).options.verify is True
    assert make_model(server, verify=False).options.verify is False


def test_total_timeout_holds_even_when_the_caller_is_slower_than_the_stream(server, req, complete):
    """Events always queued (a slow on_chunk): the total timeout still ends the stream."""
    server.add(Reply.sse(openai_sse([f"w{i} " for i in range(200)])))

    def slow(chunk):
        time.sleep(0.01)

    rec = Recorder()
    t0 = time.monotonic()
    complete(make_model(server), req, on_chunk=slow, on_error=rec.on_error, timeout=0.3)
    took = time.monotonic() - t0
    assert isinstance(rec.error, blazen.TimeoutError) and rec.error.limit == "total"
    assert took < 1.0


def test_total_timeout_holds_inside_one_batch_of_events(server, req, complete):
    """A whole stream in one socket read (one batch of chunks) still ends at the total timeout."""
    # About 40 KB: one read of the worker takes it whole, as one batch of 300 chunks.
    body = b"".join(openai_sse([f"w{i} " for i in range(300)]))
    # The body arrives whole while the worker waits for it.
    server.add(Reply.sse([b": open\n\n", Pause(0.2), body]))

    def slow(chunk):
        time.sleep(0.005)

    rec = Recorder()
    t0 = time.monotonic()
    complete(make_model(server), req, on_chunk=slow, on_error=rec.on_error, timeout=0.4)
    took = time.monotonic() - t0
    assert isinstance(rec.error, blazen.TimeoutError) and rec.error.limit == "total"
    assert took < 1.2, took  # the whole batch would take 1.5 s or more
