"""A real Celery worker (prefork pool, Redis broker) streams into Redis; readers follow.

One worker for the module: started once (slow), fed by a loopback replay server whose
default reply is a paced stream, so that tasks overlap and readers join mid-stream.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests
import sseclient

import blazen
from blazen.sinks import follow
from blazen.testing import Pause, Reply, StreamServer, openai_sse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
WORDS = [f"w{i} " for i in range(30)]
SOURCE = "".join(WORDS)
STALE_AFTER = 2.0


def paced(parts, seconds=0.01):
    out = []
    for p in parts:
        out += [p, Pause(seconds)]
    return out


@pytest.fixture(scope="module")
def model_server():
    with StreamServer(default=Reply.sse(paced(openai_sse(WORDS)))) as server:
        yield server


@pytest.fixture(scope="module")
def worker(redis_server, model_server, tmp_path_factory):
    """``celery -A celery_relay worker --pool=prefork``, ready for tasks; stopped after."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(EXAMPLES)]),
        "REDIS_URL": redis_server.url,
        "BLAZEN_BASE_URL": model_server.base_url,
        "BLAZEN_BEAT": "0.2",
        "BLAZEN_STALE_AFTER": str(STALE_AFTER),
    }
    log = tmp_path_factory.mktemp("celery") / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "celery_relay", "worker",
                "--pool=prefork", "--concurrency=4", "--loglevel=WARNING",
                "--without-gossip", "--without-mingle", "--without-heartbeat",
                "-n", f"test-{uuid.uuid4().hex[:8]}@%h",
            ],
            env=env, cwd=str(EXAMPLES), stdout=out, stderr=subprocess.STDOUT,
        )
    relay = load_example(redis_server.url, model_server.base_url)
    try:
        key = uuid.uuid4().hex
        relay.relay.delay(key, "warm up").get(timeout=120)  # the worker is up and consuming
        yield relay
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        relay.app.close()
        relay.r.close()


def load_example(redis_url, base_url):
    """The example module in this process (the client side: enqueue, follow, serve)."""
    old = {k: os.environ.get(k) for k in ("REDIS_URL", "BLAZEN_BASE_URL", "BLAZEN_STALE_AFTER")}
    os.environ.update(REDIS_URL=redis_url, BLAZEN_BASE_URL=base_url, BLAZEN_STALE_AFTER=str(STALE_AFTER))
    sys.path.insert(0, str(EXAMPLES))
    try:
        spec = importlib.util.spec_from_file_location("celery_relay", EXAMPLES / "celery_relay.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(EXAMPLES))
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def text_of(events):
    return "".join(a[0].content_delta or "" for _, k, a in events if k == "chunk")


def read_split(r, key, after):
    """Read ``after`` events, drop the connection, resume by the last id seen."""
    first = []
    for event in follow(r, key, timeout=60, stale_after=STALE_AFTER):
        first.append(event)
        if len(first) == after:
            break
    rest = list(follow(r, key, last_id=first[-1][0], timeout=60, stale_after=STALE_AFTER))
    return first + rest


def test_twenty_tasks_at_once_each_followed_from_the_start_and_resumed_mid_stream(worker, redis_server):
    """Every text identical to the source, for both readers; exactly one terminal each."""
    keys = [uuid.uuid4().hex for _ in range(20)]
    r = redis_server.client()
    with concurrent.futures.ThreadPoolExecutor(40) as pool:
        whole = [pool.submit(lambda k=k: list(follow(r, f"chat:{k}", timeout=60, stale_after=STALE_AFTER))) for k in keys]
        split = [pool.submit(read_split, r, f"chat:{k}", 1 + i % 10) for i, k in enumerate(keys)]
        results = [worker.relay.delay(k, f"prompt {i}") for i, k in enumerate(keys)]
        for events in [f.result(120) for f in whole + split]:
            assert text_of(events) == SOURCE
            assert [k for _, k, _ in events].count("done") == 1 and events[-1][1] == "done"
            assert not any(k == "error" for _, k, _ in events)
    assert [res.get(timeout=60) for res in results] == ["done"] * 20
    r.close()


def test_a_worker_process_killed_mid_stream_ends_its_readers_with_producer_lost(worker, model_server, redis_server):
    """SIGKILL the pool process running the task: the reader ends within stale_after."""
    model_server.add(Reply.sse([*openai_sse(["never ", "finished"])[:3], Pause(120)]))
    key = uuid.uuid4().hex
    r = redis_server.client()
    result = worker.relay.delay(key, "slow")
    events = follow(r, f"chat:{key}", timeout=60, stale_after=STALE_AFTER)
    first = next(events)
    assert first[1] == "chunk"
    for _ in range(600):  # the STARTED state names the pool process (task_track_started)
        if result.state == "STARTED" and (result.info or {}).get("pid"):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the task never reported STARTED with a pid: {result.state}")
    os.kill(result.info["pid"], signal.SIGKILL)
    killed = time.monotonic()
    with pytest.raises(blazen.ConnectionError) as info:
        list(events)
    assert info.value.kind == "producer_lost"
    assert time.monotonic() - killed < STALE_AFTER + 10
    r.close()


def test_the_sse_endpoint_serves_a_browser_that_reconnects_with_last_event_id(worker):
    """requests + sseclient as a browser: read a few events, reconnect, get the rest."""
    from wsgiref.simple_server import make_server

    httpd = make_server("127.0.0.1", 0, worker.web, server_class=worker.ThreadingWSGIServer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_port}"
    try:
        key = requests.post(f"{base}/chat", params={"prompt": "hi"}, timeout=30).json()["key"]
        seen = []
        with requests.get(f"{base}/chat/{key}", stream=True, timeout=30) as resp:
            assert resp.headers["Content-Type"] == "text/event-stream"
            for event in sseclient.SSEClient(resp).events():
                seen.append(event)
                if len(seen) == 5:
                    break
        last = seen[-1].id
        with requests.get(f"{base}/chat/{key}", headers={"Last-Event-ID": last}, stream=True, timeout=30) as resp:
            seen += list(sseclient.SSEClient(resp).events())
        text = "".join(json.loads(e.data).get("content") or "" for e in seen if e.event == "chunk")
        assert text == SOURCE and seen[-1].event == "done"
        assert len({e.id for e in seen}) == len(seen)
    finally:
        httpd.shutdown()
        httpd.server_close()
