"""batch.run in a real child process: killed with SIGKILL halfway, interrupted with SIGINT."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import blazen
from blazen import Llm, batch
from blazen.testing import Pause, Reply, Stall, StreamServer, openai_sse

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

CHILD = textwrap.dedent(
    """
    import sys
    from blazen import Llm, Providers, batch

    base_url, out, n, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    model = Providers.openai(api_key="sk-test-SECRET-0123456789", base_url=base_url)
    reqs = ((f"q{i}", Llm.completion_request([Llm.user(f"item {i}")])) for i in range(n))
    print(batch.run(model, reqs, concurrency=concurrency, out=out), flush=True)
    """
)

ROOT = Path(__file__).resolve().parent.parent


def start_child(tmp_path: Path, server: StreamServer, out: Path, n: int, concurrency: int):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, str(script), server.base_url, str(out), str(n), str(concurrency)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_a_run_killed_halfway_resumes_and_finishes_every_id_exactly_once(tmp_path: Path):
    paced = Reply.sse([*openai_sse(["Hel"])[:2], Pause(0.01), *openai_sse(["Hel"])[2:]])
    out = tmp_path / "r.jsonl"
    n, concurrency = 300, 8
    with StreamServer(default=paced) as server:
        child = start_child(tmp_path, server, out, n, concurrency)
        try:
            wait_for(lambda: lines(out) >= n // 2 or child.poll() is not None)
            child.send_signal(signal.SIGKILL)
        finally:
            child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL
        before = lines(out)
        assert before < n, "the child finished before it was killed"
        model = blazen.Providers.openai(
            api_key="sk-test-SECRET-0123456789", base_url=server.base_url
        )
        reqs = ((f"q{i}", Llm.completion_request([Llm.user(f"item {i}")])) for i in range(n))
        report = batch.run(model, reqs, concurrency=concurrency, out=out)
        sent = collections.Counter(r.json()["messages"][-1]["content"] for r in server.requests)
    ids = [r["id"] for r in batch.read(out)]
    assert sorted(ids) == sorted(f"q{i}" for i in range(n))  # each id exactly once
    assert report.skipped + report.ok == n and report.ok <= n - before + 1
    assert sum(c > 1 for c in sent.values()) <= concurrency
    assert set(sent) == {f"item {i}" for i in range(n)}


def test_ctrl_c_cancels_the_streams_in_flight_reports_and_says_how_to_resume(tmp_path: Path):
    out = tmp_path / "r.jsonl"
    hang = Reply.sse([*openai_sse(["Hel"])[:2], Stall()])
    with StreamServer([Reply.sse(openai_sse(["Hi"]))] * 5, default=hang) as server:
        child = start_child(tmp_path, server, out, 100, 4)
        try:
            # 5 quick answers, then 4 streams that hang mid-answer: Ctrl-C now.
            wait_for(lambda: len(server.requests) >= 9 or child.poll() is not None)
            child.send_signal(signal.SIGINT)
            _, err = child.communicate(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
        assert server.wait_closed(timeout=10), "a cancelled stream left its socket open"
    assert "KeyboardInterrupt" in err
    assert "batch interrupted: 5 ok, 0 failed, 0 skipped, 4 cancelled" in err
    assert f"run again with the same out={str(out)!r} to resume" in err
    assert "SECRET" not in err
    ids = [r["id"] for r in batch.read(out)]
    assert len(ids) == len(set(ids)) == 5
