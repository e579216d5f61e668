"""SPEC promises 1-4 and the foundation issue's contract, over a real socket."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import blazen
from blazen import Streaming
from blazen.testing import Pause, Recorder, Reply, Stall, openai_sse

from .conftest import sse_reply, thread_count

KEY = "sk-test-SECRET-0123456789"


def slow_stream(n: int = 200, pause: float = 0.01) -> Reply:
    """A stream still sending when the test acts: one event per write with pauses."""
    events = openai_sse([f"t{i} " for i in range(n)])
    body: list = []
    for e in events:
        body += [e, Pause(pause)]
    return Reply.sse(body)


def test_block_form_receives_chunks_then_exactly_one_done(server, model, req, complete):
    """Zero or more chunks, then exactly one done, and nothing after it."""
    server.add(sse_reply("text.sse"))
    rec = Recorder()
    complete(model, req, rec.handler)
    assert rec.kinds[-1] == "done" and rec.terminals == 1
    assert set(rec.kinds[:-1]) == {"chunk"}


def test_keyword_form_is_equivalent_to_block_form(server, model, req, complete):
    """on_chunk/on_done/on_error see the same events as the block handler."""
    server.add(sse_reply("text.sse"), sse_reply("text.sse"))
    block, kw = Recorder(), Recorder()
    complete(model, req, block.handler)
    complete(model, req, on_chunk=kw.on_chunk, on_done=kw.on_done, on_error=kw.on_error)
    assert [(k, a) for k, a, _ in block.events] == [(k, a) for k, a, _ in kw.events]


def test_keyword_handler_wins_over_block_handler_for_its_kind(server, model, req, complete):
    """Given both, the keyword callback gets its kind; the block handler gets the rest."""
    server.add(sse_reply("text.sse"))
    block = Recorder()
    dones: list = []
    complete(model, req, block.handler, on_done=lambda r, u: dones.append(r))
    assert dones == ["stop"]
    assert "done" not in block.kinds and "chunk" in block.kinds


def test_callbacks_run_on_the_calling_thread_in_order(server, model, req, complete):
    """Every callback runs on the caller's thread (the handle's thread for start())."""
    server.add(sse_reply("text.sse"))
    rec = Recorder()
    t = threading.Thread(target=complete, args=(model, req, rec.handler), name="caller-x")
    t.start()
    t.join(10)
    assert rec.threads == {complete.callback_thread("caller-x")}
    assert rec.kinds[-1] == "done"


def test_success_returns_the_assembled_response(server, model, req, complete):
    """complete returns the CompletionResponse: text, finish reasons, usage, model."""
    server.add(sse_reply("text.sse"))
    resp = complete(model, req)
    assert isinstance(resp, blazen.CompletionResponse)
    assert resp.content == "Why did the scarecrow win an award?"
    assert (resp.finish_reason, resp.raw_finish_reason) == ("stop", "stop")
    assert resp.usage.total_tokens == 33


def test_without_an_error_handler_complete_raises(server, model, req, complete):
    """No error handler at all: the error is raised, typed."""
    server.add(
        Reply.json(
            {
                "error": {
                    "message": "bad key",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
            status=401,
        )
    )
    with pytest.raises(blazen.AuthError) as info:
        complete(model, req, on_chunk=lambda c: None)
    assert info.value.status == 401 and "bad key" in info.value.message


def test_with_an_error_handler_complete_returns_none(server, model, req, complete):
    """With on_error given, a failure is delivered once and complete returns None."""
    server.add(Reply.json({"error": {"message": "nope"}}, status=400))
    rec = Recorder()
    assert complete(model, req, on_error=rec.on_error) is None
    assert rec.kinds == ["error"]
    assert isinstance(rec.error, blazen.InvalidRequestError)


def test_a_raising_chunk_callback_aborts_and_the_server_sees_the_close(
    server, model, req, caplog, complete
):
    """on_chunk raising: socket torn down, logged, CallbackError with the cause, nothing after."""
    server.add(slow_stream())
    rec = Recorder()
    boom = RuntimeError("boom")
    seen = []

    def on_chunk(chunk):
        seen.append(chunk)
        if len(seen) == 3:
            raise boom

    with caplog.at_level(logging.ERROR, logger="blazen"):
        t0 = time.monotonic()
        complete(model, req, on_chunk=on_chunk, on_done=rec.on_done, on_error=rec.on_error)
        returned = time.monotonic() - t0
    assert len(seen) == 3
    assert rec.kinds == ["error"]
    err = rec.error
    assert isinstance(err, blazen.CallbackError) and isinstance(err, blazen.InternalError)
    assert err.__cause__ is boom
    assert any("on_chunk raised RuntimeError" in r.getMessage() for r in caplog.records)
    assert server.wait_closed(2.0)
    conn = server.connections[0]
    assert conn.closed_by == "client"
    # The server saw the close long before its 2-second stream would have ended.
    assert returned < 1.5


def test_a_raising_chunk_callback_without_on_error_raises_callback_error(
    server, model, req, complete
):
    """No error handler: the CallbackError is raised with the original as __cause__."""
    server.add(sse_reply("text.sse"))

    def on_chunk(chunk):
        raise ValueError("mine")

    with pytest.raises(blazen.CallbackError) as info:
        complete(model, req, on_chunk=on_chunk)
    assert isinstance(info.value.__cause__, ValueError)


def test_an_exception_in_on_done_propagates(server, model, req, complete):
    """on_done raising propagates out of complete (it is the caller's own code)."""
    server.add(sse_reply("text.sse"))

    def on_done(reason, usage):
        raise KeyError("mine")

    with pytest.raises(KeyError):
        complete(model, req, on_done=on_done)


def test_an_exception_in_on_error_propagates(server, model, req, complete):
    """on_error raising propagates out of complete."""
    server.add(Reply.json({"error": {"message": "x"}}, status=400))

    def on_error(err):
        raise LookupError("mine")

    with pytest.raises(LookupError):
        complete(model, req, on_error=on_error)


def test_is_final_is_set_only_on_the_last_chunk_of_a_successful_stream(
    server, model, req, complete
):
    """is_final marks the last chunk before done, and never appears on a failed stream."""
    server.add(sse_reply("parallel_tool_calls.sse"), sse_reply("truncated.sse", transfer="close"))
    ok, bad = Recorder(), Recorder()
    complete(model, req, ok.handler)
    complete(model, req, bad.handler)
    assert [c.is_final for c in ok.chunks].count(True) == 1 and ok.chunks[-1].is_final
    assert ok.chunks[-1].tool_calls == ok.chunks[-2].tool_calls
    assert not any(c.is_final for c in bad.chunks) and bad.kinds[-1] == "error"


@pytest.mark.parametrize("transfer", ["chunked", "close"])
def test_a_token_reaches_on_chunk_as_soon_as_its_bytes_arrive(
    server, model, req, transfer, complete
):
    """One event then a stall: the event is delivered at once, chunked or close-delimited."""
    first = openai_sse(["first"])[:2]
    server.add(Reply.sse([*first, Stall()], transfer=transfer))
    token = blazen.CancelToken()
    got = []

    def on_chunk(chunk):
        got.append((chunk.content_delta, time.monotonic()))
        token.cancel()

    t0 = time.monotonic()
    rec = Recorder()
    complete(model, req, on_chunk=on_chunk, on_error=rec.on_error, cancel=token)
    assert [g[0] for g in got] == ["first"]
    assert got[0][1] - t0 < 2.0
    assert isinstance(rec.error, blazen.CancelledError)


def test_one_request_is_reused_across_threads(server, model, req, complete):
    """Requests are immutable: one value serves many concurrent calls."""
    server._default = sse_reply("text.sse")
    with ThreadPoolExecutor(8) as pool:
        texts = list(pool.map(lambda _: complete(model, req).content, range(16)))
    assert set(texts) == {"Why did the scarecrow win an award?"}


@pytest.mark.parametrize(
    ("args", "kwargs", "exc"),
    [
        (("not a model", None), {}, TypeError),
        ((None, "not a request"), {}, TypeError),
        ((None, None, "not callable"), {}, TypeError),
        ((None, None), {"on_chunk": 3}, TypeError),
        ((None, None), {"cancel": object()}, TypeError),
        ((None, None), {"timeout": -1}, ValueError),
    ],
)
def test_programming_mistakes_raise_before_anything_starts(server, model, req, args, kwargs, exc):
    """A wrong argument raises TypeError/ValueError at once; no request is sent."""
    a = list(args)
    a[0] = model if a[0] is None else a[0]
    a[1] = req if a[1] is None else a[1]
    before = thread_count()
    with pytest.raises(exc):
        Streaming.complete(*a, **kwargs)
    assert server.requests == [] and thread_count() == before


def test_init_and_shutdown_are_idempotent_and_shutdown_closes_pooled_connections(
    server, model, req, complete
):
    """shutdown() closes the pooled keep-alive connection; the model reconnects afterwards."""
    blazen.init()
    blazen.init()
    server.add(sse_reply("text.sse"), sse_reply("text.sse"))
    complete(model, req)
    time.sleep(0.05)
    assert server.open_connections() == 1  # kept alive in the pool
    blazen.shutdown()
    blazen.shutdown()
    assert server.wait_closed(2.0)
    assert complete(model, req).content


def test_a_finished_stream_returns_its_connection_to_the_pool(server, model, req, complete):
    """Two streams in a row reuse one keep-alive connection."""
    server.add(sse_reply("text.sse"), sse_reply("text.sse"))
    complete(model, req)
    complete(model, req)
    assert len(server.connections) == 1 and server.connections[0].requests == 2


def test_missing_key_is_an_auth_error_naming_the_variable():
    """No key anywhere: AuthError that names OPENAI_API_KEY."""
    with pytest.raises(blazen.AuthError, match="OPENAI_API_KEY"):
        blazen.Providers.openai()


def test_empty_key_falls_back_to_the_environment(server, req, monkeypatch, complete):
    """api_key='' reads OPENAI_API_KEY."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    m = blazen.Providers.openai(base_url=server.base_url)
    server.add(sse_reply("text.sse"))
    complete(m, req)
    assert server.requests[0].header("Authorization") == "Bearer sk-from-env"


def test_the_key_never_appears_in_errors_reprs_or_logs(server, req, caplog, complete):
    """A server that echoes the key back: message, body, repr and every log line stay clean."""
    m = blazen.Providers.openai(api_key=KEY, base_url=server.base_url, max_retries=1)
    server.add(
        Reply.json({"error": {"message": f"Incorrect API key provided: {KEY}"}}, status=500),
        Reply.json(
            {
                "error": {
                    "message": f"Incorrect API key provided: {KEY}",
                    "type": "invalid_request_error",
                }
            },
            status=401,
        ),
    )
    rec = Recorder()
    with caplog.at_level(logging.DEBUG):
        complete(m, req, rec.handler)
    err = rec.error
    assert isinstance(err, blazen.AuthError)
    for text in (
        err.message,
        str(err),
        repr(err),
        err.body,
        repr(m),
        repr(m.options),
        *(r.getMessage() for r in caplog.records),
        caplog.text,
    ):
        assert KEY not in (text or "")
    assert "***" in err.message


def test_errors_keep_their_fields_when_pickled():
    """Errors cross process boundaries (multiprocessing, Celery) with their fields."""
    import pickle

    err = blazen.RateLimitError("slow down", provider="openai", status=429, retry_after=2.0)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is blazen.RateLimitError
    assert (back.message, back.status, back.retry_after) == ("slow down", 429, 2.0)


def test_a_raise_on_the_final_chunk_leaves_the_model_usable(server, model, req, complete):
    """on_chunk raising on the final chunk is a CallbackError; the next stream still works."""
    server.add(sse_reply("text.sse"), sse_reply("text.sse"))

    def on_chunk(chunk):
        if chunk.is_final:
            raise RuntimeError("late")

    rec = Recorder()
    complete(model, req, on_chunk=on_chunk, on_error=rec.on_error)
    assert isinstance(rec.error, blazen.CallbackError) and rec.kinds == ["error"]
    assert complete(model, req).content == "Why did the scarecrow win an award?"
