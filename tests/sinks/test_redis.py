"""RedisStreamSink and follow() on a real redis-server: order, resume, beats, loss, expiry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import redis

import blazen
from blazen import Llm, Streaming
from blazen.sinks import RedisStreamSink, follow, sse_lines, tee
from blazen.testing import Drop, Pause, Recorder, Reply, StreamServer, openai_sse

from .conftest import RedisServer

KEY = "sk-test-SECRET-0123456789"
REQ = Llm.completion_request([Llm.user("hi")])
ROOT = Path(__file__).resolve().parents[2]
USAGE = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}


def new_key() -> str:
    return f"test:{uuid.uuid4().hex}"


@pytest.fixture
def served():
    with StreamServer() as server:
        yield server, blazen.Providers.openai(api_key=KEY, base_url=server.base_url, max_retries=0)


class When:
    """A sink that runs ``action`` when the chunk with ``text`` arrives (before later sinks)."""

    def __init__(self, text, action):
        self.text, self.action = text, action

    def on_chunk(self, chunk):
        if chunk.content_delta == self.text:
            self.action()


def text_of(events) -> str:
    return "".join(a[0].content_delta or "" for _, k, a in events if k == "chunk")


def test_a_follower_gets_exactly_the_events_the_callbacks_got(served, r):
    """From the start: the same chunks, the same usage, one terminal, ids increasing."""
    server, model = served
    server.add(Reply.sse(openai_sse(["Hel", "lo", " world"], usage=USAGE)))
    key, rec = new_key(), Recorder()
    Streaming.complete(model, REQ, tee(rec, RedisStreamSink(r, key)))
    events = list(follow(r, key, timeout=30))
    assert [(k, a) for _, k, a in events] == list(zip(rec.kinds, [(c,) for c in rec.chunks] + [rec.done]))
    ids = [tuple(map(int, i.split("-"))) for i, _, _ in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert sum(k != "chunk" for _, k, _ in events) == 1


def test_resuming_by_id_yields_exactly_the_events_after_it(served, r):
    """Last-Event-ID: from each id, the rest; from the terminal's id, nothing."""
    server, model = served
    server.add(Reply.sse(openai_sse(["a", "b", "c", "d"])))
    key = new_key()
    Streaming.complete(model, REQ, RedisStreamSink(r, key))
    events = list(follow(r, key, timeout=30))
    for i, (event_id, _, _) in enumerate(events):
        assert list(follow(r, key, last_id=event_id, timeout=30)) == events[i + 1 :]
    assert list(follow(r, key, last_id=events[-1][0].encode(), timeout=30)) == []


def test_a_reader_that_comes_first_waits_for_the_producer(served, r):
    """follow() on a key not yet written waits; then it sees the whole stream live."""
    server, model = served
    server.add(Reply.sse([*openai_sse(["x", "y"])[:2], Pause(0.3), *openai_sse(["x", "y"])[2:]]))
    key, got = new_key(), []
    reader = threading.Thread(target=lambda: got.extend(follow(r, key, timeout=30, stale_after=5)))
    reader.start()
    time.sleep(0.2)  # not needed for correctness: the reader is merely likely to be first
    Streaming.complete(model, REQ, RedisStreamSink(r, key))
    reader.join(30)
    assert text_of(got) == "xy" and got[-1][1] == "done"


def test_a_slow_model_keeps_its_readers_waiting_thanks_to_beats(served, r):
    """Silent for 2.5x stale_after before the first token: beats keep the reader waiting."""
    server, model = served
    parts = openai_sse(["slow", " answer"])
    # stale_after is 20 beats: a loaded machine may delay a beat, not twenty of them.
    server.add(Reply.sse([Pause(2.5), *parts[:2], Pause(1.2), *parts[2:]]))
    key = new_key()
    handle = Streaming.start(model, REQ, RedisStreamSink(r, key, beat=0.05))
    got = list(follow(r, key, timeout=30, stale_after=1.0))
    handle.result(30)
    assert text_of(got) == "slow answer"


def test_the_key_expires_ttl_seconds_after_the_terminal(served, r):
    server, model = served
    server.add(Reply.sse(openai_sse(["a"])))
    key = new_key()
    sink = RedisStreamSink(r, key, ttl=120)
    assert 0 < r.ttl(key) <= 120  # a producer that dies leaves no key for ever
    Streaming.complete(model, REQ, sink)
    assert 0 < r.ttl(key) <= 120


def test_a_key_that_already_holds_a_stream_is_refused(r):
    key = new_key()
    RedisStreamSink(r, key).on_done("stop", None)
    with pytest.raises(blazen.ValidationError, match="already holds a stream"):
        RedisStreamSink(r, key)


def test_an_error_travels_with_its_class_and_partial_text_never_the_key(served, r):
    """A stream dropped mid-way: the follower gets ConnectionError with the partial text."""
    server, model = served
    server.add(Reply.sse([*openai_sse(["par", "tial"])[:3], Drop()]))
    key = new_key()
    assert Streaming.complete(model, REQ, RedisStreamSink(r, key)) is None
    *_, (_, kind, (err,)) = follow(r, key, timeout=30)
    assert kind == "error" and isinstance(err, blazen.ConnectionError) and err.partial == "partial"
    dump = b"".join(v for _, f in r.xrange(key) for v in f.values())
    assert KEY.encode() not in dump


def test_trimmed_events_are_an_error_for_the_reader_not_a_silent_gap(served, r):
    """maxlen dropped the start: a reader from 0, or from a trimmed id, gets events_lost."""
    server, model = served
    server.add(Reply.sse(openai_sse([str(i) for i in range(20)])))
    key = new_key()
    Streaming.complete(model, REQ, RedisStreamSink(r, key, maxlen=5000))
    first = next(iter(follow(r, key, timeout=30)))[0]
    r.xtrim(key, maxlen=5, approximate=False)
    with pytest.raises(blazen.ConnectionError, match="no longer there") as info:
        list(follow(r, key, timeout=30))
    assert info.value.kind == "events_lost"
    with pytest.raises(blazen.ConnectionError, match="no longer in Redis stream") as info:
        list(follow(r, key, last_id=first, timeout=30))
    assert info.value.kind == "events_lost"


def test_resuming_a_stream_that_expired_says_so(r):
    with pytest.raises(blazen.ConnectionError, match="no longer exists") as info:
        list(follow(r, new_key(), last_id="1-0", timeout=5))
    assert info.value.kind == "stream_lost"


def test_follow_times_out_on_a_stream_that_never_starts(r):
    with pytest.raises(blazen.TimeoutError, match=r"waited 0\.3 s"):
        list(follow(r, new_key(), timeout=0.3, stale_after=0.1))


def test_a_deleted_key_fails_the_producer_with_callback_error_and_the_reader_clearly(served, r):
    """The key vanishes mid-stream (as on a Redis restart): XADD NOMKSTREAM notices."""
    server, model = served
    server.add(Reply.sse(openai_sse(["a", "b", "c"])))
    key = new_key()
    got = []
    sink = RedisStreamSink(r, key, beat=0.1)
    reader = threading.Thread(target=lambda: got.append(_outcome(r, key)))
    reader.start()
    with pytest.raises(blazen.CallbackError, match="can no longer be written"):
        Streaming.complete(model, REQ, tee(When("b", lambda: r.delete(key)), sink))
    reader.join(30)
    assert isinstance(got[0], blazen.ConnectionError) and got[0].kind in ("stream_lost", "events_lost")


def _outcome(r, key, stale_after=1.0):
    try:
        list(follow(r, key, timeout=30, stale_after=stale_after))
    except blazen.BlazenError as err:
        return err
    return None


def test_redis_killed_mid_stream_fails_the_producer_and_its_reader_without_a_hang(served, tmp_path):
    """The producer gets CallbackError at once; the reader redis_lost within stale_after."""
    server, model = served
    own = RedisServer(tmp_path).start()
    try:
        server.add(Reply.sse(openai_sse(["a", "b", "c"])))
        client, key = own.client(), new_key()
        got = []
        reader = threading.Thread(target=lambda: got.append(_outcome(own.client(), key)))
        reader.start()
        with pytest.raises(blazen.CallbackError, match="can no longer be written"):
            Streaming.complete(model, REQ, tee(When("b", own.kill), RedisStreamSink(client, key)))
        reader.join(30)
        assert not reader.is_alive()
        assert isinstance(got[0], blazen.ConnectionError) and got[0].kind == "redis_lost"
    finally:
        own.kill()


def test_a_redis_restart_mid_stream_fails_the_producer_and_its_reader(served, tmp_path):
    """Restarted empty on the same port: the producer's next write finds no stream."""
    server, model = served
    own = RedisServer(tmp_path).start()
    try:
        server.add(Reply.sse(openai_sse(["a", "b", "c"])))
        client, key = own.client(), new_key()
        got: list[object] = []
        seen = threading.Event()

        def read() -> None:
            try:
                for _event in follow(own.client(), key, timeout=30, stale_after=3.0):
                    seen.set()
            except blazen.BlazenError as err:
                got.append(err)
            else:
                got.append(None)

        reader = threading.Thread(target=read)
        reader.start()

        def restart():
            # Once the reader has the stream: restarted before it read anything, the stream
            # is one not begun yet to it, which it waits for (bounded by its timeout only).
            # A loaded machine (CI's 3.10 run) once started the reader that late.
            seen.wait(10)
            own.kill()
            own.start()

        with pytest.raises(blazen.CallbackError):
            Streaming.complete(model, REQ, tee(When("b", restart), RedisStreamSink(client, key)))
        reader.join(30)
        assert isinstance(got[0], blazen.ConnectionError)
        assert got[0].kind in ("stream_lost", "redis_lost", "events_lost")
    finally:
        own.kill()


PRODUCER = """
import sys
import redis
import blazen
from blazen import Llm, Streaming
from blazen.sinks import RedisStreamSink

model = blazen.Providers.openai(api_key="k", base_url=sys.argv[1])
sink = RedisStreamSink(redis.Redis.from_url(sys.argv[2], socket_timeout=5), sys.argv[3], beat=0.1)

def tell(chunk):
    sink.on_chunk(chunk)
    if chunk.content_delta == "b":
        print("two", flush=True)

Streaming.complete(model, Llm.completion_request([Llm.user("hi")]), on_chunk=tell)
"""


def test_a_producer_killed_with_sigkill_ends_its_readers_with_producer_lost(served, r, redis_server):
    """No terminal will ever come: the reader gives up stale_after after the last beat."""
    server, model = served
    parts = openai_sse(["a", "b", "c"])
    server.add(Reply.sse([*parts[:3], Pause(60), *parts[3:]]))
    key = new_key()
    proc = subprocess.Popen(
        [sys.executable, "-c", PRODUCER, server.base_url, redis_server.url, key],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "two\n"
        events = []
        gen = follow(r, key, timeout=60, stale_after=1.0)
        events.append(next(gen))
        events.append(next(gen))
        proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        with pytest.raises(blazen.ConnectionError, match="producer of Redis stream") as info:
            events.extend(gen)
        assert info.value.kind == "producer_lost" and time.monotonic() - killed < 30
        assert text_of(events) == "ab"
    finally:
        proc.kill()
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()


def test_sse_lines_sets_the_id_and_ends_with_an_error_event_on_failure():
    events = [("1-0", "chunk", (blazen.StreamChunk(content_delta="hi"),)), ("2-0", "done", ("stop", None))]
    lines = list(sse_lines(iter(events)))
    assert lines[0].startswith(b"id: 1-0\nevent: chunk\ndata: {") and lines[0].endswith(b"\n\n")
    assert b'"content":"hi"' in lines[0] and lines[1].startswith(b"id: 2-0\nevent: done\n")

    def failing():
        yield events[0]
        err = blazen.ConnectionError("gone")
        err.kind = "producer_lost"
        raise err

    *_, last = sse_lines(failing())
    assert last.startswith(b"event: error\ndata: ") and b"producer_lost" in last and b"id:" not in last


def test_bad_arguments_are_refused(r):
    with pytest.raises(TypeError, match=r"redis\.Redis"):
        RedisStreamSink(object(), "k")
    with pytest.raises(ValueError, match="maxlen"):
        RedisStreamSink(r, "k", maxlen=0)
    with pytest.raises(ValueError, match="stale_after"):
        follow(r, "k", stale_after=0)
    with pytest.raises(ValueError, match="timeout"):
        follow(r, "k", timeout=-1)
    with pytest.raises(blazen.ConnectionError, match="cannot open"):
        no_retry = redis.retry.Retry(redis.backoff.NoBackoff(), 0)
        RedisStreamSink(redis.Redis(port=1, socket_timeout=1, retry=no_retry), "k")


def test_the_sinks_benchmark_runs_and_reports_a_ratio():
    """benchmarks/sinks.py still runs (tiny sizes); speed is never pass/fail here."""
    from benchmarks.sinks import measure

    got = measure(n=50, repeat=1)
    assert got["ratio"] > 0 and got["blazen_us"] > 0


@pytest.mark.parametrize(("protocol", "decode"), [(2, False), (2, True), (3, False), (3, True)])
def test_follow_reads_resp2_and_resp3_clients_with_or_without_decoded_responses(served, redis_server, protocol, decode):
    """Entry ids and fields come back as bytes or str, in lists or dicts: all read the same."""
    server, model = served
    server.add(Reply.sse(openai_sse(["a", "b"])))
    client = redis_server.client(protocol=protocol, decode_responses=decode)
    try:
        key = new_key()
        Streaming.complete(model, REQ, RedisStreamSink(client, key))
        events = list(follow(client, key, timeout=30))
        assert text_of(events) == "ab" and events[-1][1] == "done"
        assert list(follow(client, key, last_id=events[0][0], timeout=30)) == events[1:]
    finally:
        client.close()


def test_resuming_against_an_unreachable_redis_is_a_clear_error(tmp_path):
    own = RedisServer(tmp_path).start()
    client = own.client(retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0))
    own.kill()
    with pytest.raises(blazen.ConnectionError, match="cannot read Redis stream") as info:
        list(follow(client, "k", last_id="1-0", timeout=5))
    assert info.value.kind == "redis_lost"
