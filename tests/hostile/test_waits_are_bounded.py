"""Every wait in sinks/, batch/ and cli/ ends by its deadline, whatever a dependency does.

The Redis double is a real ``redis-server`` frozen with SIGSTOP: it still accepts
connections (the kernel does), so a call waits for an answer that never comes. Before,
``follow(timeout=3)`` waited for ever on a client without ``socket_timeout`` and 53-59 s
with ``socket_timeout=5`` (then ``redis_lost``), a sink's write or beat held the stream for
ever, and ``batch.run`` never ended after ``Retry-After: inf``.
"""

from __future__ import annotations

import importlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

import blazen
from blazen import Llm, Streaming, batch
from blazen.batch.work import ItemChunk, Pipe
from blazen.errors import parse_retry_after
from blazen.sinks import QueueSink, RedisStreamSink, follow
from blazen.testing import BatchServer, Reply, Stall, StreamServer, openai_sse

from ..conftest import KEY_FOR_TESTS
from ..sinks.conftest import RedisServer

REQ = Llm.completion_request([Llm.user("hi")])
#: "Returns within": generous for 8 engineers on 2 cores; the bug is for ever, or a minute.
BOUND = 12.0


class Frozen:
    """A redis-server that can be frozen (SIGSTOP) and thawed (SIGCONT)."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server

    def client(self, **kw: object) -> redis.Redis:
        kw.setdefault("socket_timeout", None)
        return redis.Redis(host="127.0.0.1", port=self.server.port, **kw)  # type: ignore[arg-type]

    def freeze(self) -> None:
        assert self.server.proc is not None
        os.kill(self.server.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        if self.server.proc is not None:
            os.kill(self.server.proc.pid, signal.SIGCONT)


@pytest.fixture
def frozen(tmp_path) -> Iterator[Frozen]:
    double = Frozen(RedisServer(tmp_path).start())
    try:
        yield double
    finally:
        double.thaw()  # always: a stopped process cannot even be killed cleanly
        double.server.kill()


def new_key() -> str:
    return f"test:{uuid.uuid4().hex}"


def timed(fn):
    start = time.monotonic()
    try:
        fn()
    except BaseException as exc:
        return exc, time.monotonic() - start
    return None, time.monotonic() - start


# -- follow() --------------------------------------------------------------------------


@pytest.mark.parametrize("socket_timeout", [None, 5])
def test_follow_timeout_bounds_the_wait_on_a_frozen_redis(frozen, socket_timeout):
    """follow(timeout=2) on a Redis that stopped answering: TimeoutError at about 2 s."""
    client = frozen.client(socket_timeout=socket_timeout)
    key = new_key()
    RedisStreamSink(client, key)  # the stream exists; its producer is still at work
    frozen.freeze()
    err, took = timed(lambda: list(follow(client, key, timeout=2)))
    assert isinstance(err, blazen.TimeoutError), repr(err)
    assert took < BOUND, f"follow(timeout=2) took {took:.1f} s"


def test_follow_stale_after_bounds_the_wait_on_a_frozen_redis(frozen):
    """No timeout: a Redis mute for stale_after ends the reader with redis_lost."""
    client = frozen.client()
    key = new_key()
    RedisStreamSink(client, key)
    frozen.freeze()
    err, took = timed(lambda: list(follow(client, key, stale_after=2)))
    assert isinstance(err, blazen.ConnectionError) and err.kind == "redis_lost", repr(err)
    assert took < BOUND


def test_follow_resuming_from_an_id_is_bounded_on_a_frozen_redis(frozen):
    """The XRANGE that checks last_id is bounded by timeout too."""
    client = frozen.client()
    key = new_key()
    RedisStreamSink(client, key)
    frozen.freeze()
    err, took = timed(lambda: list(follow(client, key, last_id="1-0", timeout=2)))
    assert isinstance(err, blazen.TimeoutError), repr(err)
    assert took < BOUND


# -- RedisStreamSink ---------------------------------------------------------------------


def test_a_sinks_write_to_a_frozen_redis_fails_within_write_timeout(frozen):
    """on_chunk against a frozen Redis raises ConnectionError after write_timeout."""
    client = frozen.client()
    sink = RedisStreamSink(client, new_key(), write_timeout=1)
    frozen.freeze()
    err, took = timed(lambda: sink.on_chunk(blazen.StreamChunk(content_delta="x")))
    assert isinstance(err, blazen.ConnectionError), repr(err)
    assert "write_timeout" in str(err)
    assert took < BOUND


def test_opening_a_sink_on_a_frozen_redis_fails_within_write_timeout(frozen):
    """The constructor's open entry is bounded by write_timeout as well."""
    client = frozen.client()
    frozen.freeze()
    err, took = timed(lambda: RedisStreamSink(client, new_key(), write_timeout=1))
    assert isinstance(err, blazen.ConnectionError), repr(err)
    assert took < BOUND


def test_a_beat_stuck_on_a_frozen_redis_holds_a_callback_at_most_write_timeout(frozen):
    """The beat thread's write is bounded, so the callback waiting behind it is too."""
    client = frozen.client()
    sink = RedisStreamSink(client, new_key(), beat=0.2, ttl=10, write_timeout=1)
    frozen.freeze()
    time.sleep(0.6)  # a beat is now inside an XADD that gets no answer
    err, took = timed(lambda: sink.on_chunk(blazen.StreamChunk(content_delta="x")))
    assert isinstance(err, blazen.ConnectionError), repr(err)
    assert took < BOUND


def _beat_threads(key: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"blazen-beat-{key}"]


def _within(seconds: float, ok) -> bool:
    deadline = time.monotonic() + seconds
    while not ok():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_beats_into_a_frozen_redis_stop_within_write_timeout(frozen, caplog):
    """A beat's XADD that gets no answer is given up after write_timeout: the beats stop."""
    client = frozen.client()
    key = new_key()
    sink = RedisStreamSink(client, key, beat=0.2, ttl=10, write_timeout=1)
    assert _beat_threads(key)
    frozen.freeze()
    with caplog.at_level("WARNING", logger="blazen"):
        assert _within(BOUND, lambda: not _beat_threads(key)), "the beat thread still waits"
    assert sink.broken is not None  # the next callback fails at once, not after a wait
    assert "beats of Redis stream" in caplog.text


@pytest.mark.parametrize("terminal", ["done", "error"])
def test_the_beat_threads_sleep_ends_at_the_terminal(frozen, terminal):
    """The beat thread sleeps beat / 2 at a time, but the terminal wakes and ends it."""
    key = new_key()
    sink = RedisStreamSink(frozen.client(), key, beat=60, ttl=3600)
    assert _beat_threads(key)
    if terminal == "done":
        sink.on_done("stop", None)
    else:
        sink.on_error(blazen.ConnectionError("the server went away"))
    assert _within(2.0, lambda: not _beat_threads(key)), "the beat thread sleeps on"


def test_a_stream_into_a_frozen_redis_ends_with_one_callback_error(frozen):
    """The whole call: Redis freezes mid-stream, the producer's call raises CallbackError."""
    client = frozen.client()
    sink = RedisStreamSink(client, new_key(), write_timeout=1)

    class FreezeAtB:
        def on_chunk(self, chunk):
            if chunk.content_delta == "b":
                frozen.freeze()
            sink.on_chunk(chunk)

        def on_done(self, *args):
            sink.on_done(*args)

    with StreamServer([Reply.sse(openai_sse(["a", "b", "c"]))]) as server:
        model = blazen.Providers.openai_compat("t", server.base_url, api_key=KEY_FOR_TESTS)
        err, took = timed(lambda: Streaming.complete(model, REQ, FreezeAtB()))
    assert isinstance(err, blazen.CallbackError), repr(err)
    assert took < BOUND


# -- QueueSink -------------------------------------------------------------------------


def test_a_full_queue_holds_a_stream_at_most_the_sinks_timeout():
    """QueueSink(q, timeout=0.5) on a full queue nobody reads: the call ends, loudly."""
    q: queue.Queue[object] = queue.Queue(maxsize=1)
    with StreamServer([Reply.sse(openai_sse(["a", "b", "c"]))]) as server:
        model = blazen.Providers.openai_compat("t", server.base_url, api_key=KEY_FOR_TESTS)
        err, took = timed(lambda: Streaming.complete(model, REQ, QueueSink(q, timeout=0.5)))
    assert isinstance(err, blazen.BlazenError), repr(err)
    assert "stayed full" in str(err) or "stayed full" in str(err.__cause__)
    assert took < BOUND


def test_a_full_queue_is_back_pressure_until_its_consumer_takes():
    """Without timeout= the stream waits for the consumer, and completes once it reads."""
    q: queue.Queue[object] = queue.Queue(maxsize=1)
    got: list[object] = []

    def consume() -> None:
        time.sleep(0.5)
        while not got or got[-1][0] == "chunk":  # type: ignore[index]
            got.append(q.get(timeout=10))

    reader = threading.Thread(target=consume)
    reader.start()
    with StreamServer([Reply.sse(openai_sse(["a", "b", "c"]))]) as server:
        model = blazen.Providers.openai_compat("t", server.base_url, api_key=KEY_FOR_TESTS)
        resp = Streaming.complete(model, REQ, QueueSink(q))
    reader.join(BOUND)
    assert resp is not None and resp.content == "abc"
    assert got[-1][0] == "done"  # type: ignore[index]


# -- batch.run -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "value"),
    [("1e400", None), ("inf", None), ("nan", None), ("-5", None), ("2", 2.0), ("0", 0.0)],
)
def test_retry_after_refuses_infinities_nan_and_negatives(header, value):
    """parse_retry_after: only a finite wait of at least 0 is a wait."""
    assert parse_retry_after({"Retry-After": header}) == value
    ms = parse_retry_after({"retry-after-ms": header})
    assert ms == (None if value is None else value / 1000)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("header", ["inf", "1e400", "86400"])
def test_a_batch_item_told_to_wait_too_long_fails_instead_of_pausing_the_run(tmp_path, header):
    """Retry-After past the model's retry_after_cap: that item fails, the others run, fast."""
    limited = Reply.json({"error": {"message": "slow down"}}, status=429,
                         headers={"Retry-After": header})  # fmt: skip
    ok = Reply.sse(openai_sse(["fine"]))
    with StreamServer([limited], default=ok) as server:
        model = blazen.Providers.openai_compat("t", server.base_url, api_key=KEY_FOR_TESTS,
                                               max_retries=0)  # fmt: skip
        out = tmp_path / "r.jsonl"
        reqs = [("a", REQ), ("b", REQ), ("c", REQ)]
        err, took = timed(lambda: batch.run(model, reqs, concurrency=1, out=out,
                                            max_attempts=2, progress=False))  # fmt: skip
    assert err is None, repr(err)
    assert took < BOUND, f"the run took {took:.1f} s"
    records = {r["id"]: r for r in batch.read(out)}
    assert sorted(records) == ["a", "b", "c"]
    if header == "86400":
        assert records["a"]["error"]["kind"] == "rate_limit"
        assert records["a"]["error"]["retry_after"] == 86400.0
    else:  # refused as no wait at all: backoff, then the second try succeeds
        assert "error" not in records["a"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("limit", ["timeout", "idle_timeout"])
def test_a_stalled_batch_item_ends_by_its_time_limit_and_the_run_goes_on(tmp_path, limit):
    """An item whose server stalls mid-answer ends by timeout= (or idle_timeout) as a record."""
    stalled = Reply.sse([*openai_sse(["Hel"], done=False)[:2], Stall()])
    ok = Reply.sse(openai_sse(["fine"]))
    model_kw = {"idle_timeout": 1} if limit == "idle_timeout" else {}
    run_kw = {"timeout": 1} if limit == "timeout" else {}
    with StreamServer([stalled], default=ok) as server:
        model = blazen.Providers.openai_compat("t", server.base_url, api_key=KEY_FOR_TESTS,
                                               max_retries=0, **model_kw)  # fmt: skip
        out = tmp_path / "r.jsonl"
        err, took = timed(lambda: batch.run(model, [("a", REQ), ("b", REQ)], concurrency=1,
                                            out=out, progress=False, **run_kw))  # fmt: skip
    assert err is None, repr(err)
    assert took < BOUND, f"the run took {took:.1f} s"
    records = {r["id"]: r for r in batch.read(out)}
    assert records["a"]["error"]["kind"] == "timeout"
    assert "error" not in records["b"]


def test_a_stalled_embedding_ends_batch_embed_by_the_models_idle_timeout(tmp_path):
    """batch.embed's wait is model.embed's: a server that never answers ends it by idle_timeout."""
    with StreamServer([Reply(body=[Stall()], raw=True)]) as server:
        model = blazen.Providers.openai(api_key=KEY_FOR_TESTS, base_url=server.base_url,
                                        max_retries=0, idle_timeout=1)  # fmt: skip
        err, took = timed(lambda: batch.embed(model, ["a", "b"], out=tmp_path / "v.jsonl"))
    assert isinstance(err, blazen.TimeoutError), repr(err)
    assert took < BOUND


# -- batch.run(via="provider") ---------------------------------------------------------


def _provider_model(server: BatchServer) -> blazen.ChatModel:
    return blazen.Providers.openai(api_key=KEY_FOR_TESTS, base_url=server.url + "/v1",
                                   max_retries=0)  # fmt: skip


def test_the_sleep_between_polls_grows_no_longer_than_max_poll_interval(tmp_path):
    """25 quiet polls: each sleep grows by half but stops at max_poll_interval (0.1 s)."""
    with BatchServer(polls=25) as server:
        err, took = timed(lambda: batch.run(
            _provider_model(server), [("a", REQ)], out=tmp_path / "r.jsonl", via="provider",
            poll_interval=0.01, max_poll_interval=0.1, progress=False,
        ))  # fmt: skip
    assert err is None, repr(err)
    assert took < BOUND, f"25 polls took {took:.1f} s"  # uncapped: 0.01 * 1.5**25 s


def test_polls_that_keep_failing_stop_the_run_after_max_poll_failures(tmp_path, monkeypatch):
    """A status check answered 500 for ever: the run stops with that error, not polls on."""
    monkeypatch.setattr(importlib.import_module("blazen.batch.provider.run"),
                        "MAX_POLL_FAILURES", 3)  # fmt: skip
    with BatchServer(poll_failures=10**9) as server:
        err, took = timed(lambda: batch.run(
            _provider_model(server), [("a", REQ)], out=tmp_path / "r.jsonl", via="provider",
            poll_interval=0.01, max_poll_interval=0.05, progress=False,
        ))  # fmt: skip
        left = server.poll_failures
    assert isinstance(err, blazen.ProviderError) and err.status == 500, repr(err)
    assert 10**9 - left == 3, "one poll per round, three rounds"
    assert took < BOUND


def test_a_pool_thread_waiting_for_room_gives_up_on_cancel():
    """Pipe.chunk waits for the calling thread to take chunks, but never past a cancel."""
    pipe = Pipe(1)
    token = blazen.CancelToken()
    pipe.chunk(ItemChunk("a", blazen.StreamChunk(content_delta="1")), token)  # fills it
    thread = threading.Thread(
        target=pipe.chunk, args=(ItemChunk("a", blazen.StreamChunk(content_delta="2")), token)
    )
    thread.start()
    time.sleep(0.2)
    assert thread.is_alive()  # waiting for room, as it should
    token.cancel()
    thread.join(BOUND)
    assert not thread.is_alive()


# -- the blazen command ----------------------------------------------------------------


def test_blazen_chat_timeout_bounds_a_stalled_stream():
    """--timeout 1 against a server that stalls mid-stream: exit 1 with a TimeoutError."""
    body = [*openai_sse(["Hel"], done=False)[:2], Stall()]
    with StreamServer([Reply.sse(body)]) as server:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "blazen", "chat", "--json", "--timeout", "1",
             "--base-url", server.base_url, "hi"],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        took = time.monotonic() - start
    assert proc.returncode == 1, proc.stderr
    *_, last = [json.loads(line) for line in proc.stdout.splitlines()]
    assert last["kind"] == "error" and last["error"]["kind"] == "timeout"
    assert took < BOUND + 10  # a fresh interpreter's start included


def _reading_stdin(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return "pipe_read" in f.read()
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/wchan")
@pytest.mark.parametrize("command", ["chat", "embed"])
def test_ctrl_c_while_the_command_waits_for_stdin_exits_130(tmp_path, command):
    """`blazen chat -` / `blazen embed -` on a pipe nobody writes: Ctrl-C ends it, exit 130."""
    argv = {
        "chat": ["chat", "--json", "--base-url", "http://127.0.0.1:9/v1", "-"],
        "embed": ["embed", "-", "--out", str(tmp_path / "v.jsonl"),
                  "--base-url", "http://127.0.0.1:9/v1"],
    }[command]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.Popen([sys.executable, "-m", "blazen", *argv], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 30  # a fresh interpreter's start on a busy machine
        while not _reading_stdin(proc.pid):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the command never read stdin"
            time.sleep(0.02)
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=BOUND)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert b"Traceback" not in err, err
    assert took < BOUND
    if command == "chat":
        last = json.loads(out.splitlines()[-1])
        assert last["kind"] == "error" and last["error"]["kind"] == "cancelled"
