"""A process that loads one client and runs measurements on command.

The orchestrator keeps one runner per client alive and sends it one JSON command per line
on stdin; the runner answers one JSON line on stdout. Keeping each library in its own
process means no library's imports, threads or hooks slow another one down, and the
orchestrator can interleave the repeats of every client so that noise spreads evenly.
The memory scenario instead starts a fresh runner per measurement (``--memory``), so the
peak it reads belongs to that one stream; so does the soak (``--soak``, see
:mod:`benchmarks.soak`), so that nothing an earlier scenario left counts in its growth.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from .clients import Abort, Client, make_client
from .streams import Spec, expected

__all__ = ["main"]


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _check(spec: Spec, got: Any) -> bool:
    return (got[0], tuple(got[1])) == expected(spec)


def _closed_at(base: str, tag: str, wait: float = 2.0) -> float | None:
    """When the server saw the stream tagged ``tag`` close, polling up to ``wait`` s."""
    host, port = base.split("//")[1].split(":")
    deadline = time.monotonic() + wait
    while True:
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        try:
            conn.request("GET", f"/closed/{tag}")
            seen = json.loads(conn.getresponse().read())["t"]
        finally:
            conn.close()
        if seen is not None or time.monotonic() > deadline:
            return seen
        time.sleep(0.005)


def op_stream(client: Client, spec: Spec, check: bool = False, best_of: int = 1) -> dict[str, Any]:
    """The fastest of ``best_of`` streams, timed in wall and CPU (all threads of this process).

    A short stream is easily slowed by whatever else the machine does; the best of a few
    consecutive ones is what the client itself costs.
    """
    out: dict[str, Any] = {}
    for _ in range(best_of):
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        got = client.stream(spec)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        if not out or wall < out["wall"]:
            out = {"wall": wall, "cpu": cpu}
        if check:
            out["ok"] = out.get("ok", True) and _check(spec, got)
    return out


def op_concurrent(client: Client, spec: Spec, n: int) -> dict[str, Any]:
    """``n`` streams at once in a thread pool; what is left over afterwards."""
    threads0 = threading.active_count()
    fds0 = _fds()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n) as pool:
        results = list(pool.map(lambda _: client.stream(spec), range(n)))
    wall = time.perf_counter() - t0
    ok = all(_check(spec, r) for r in results)
    # Give lazily closing libraries a moment, as a real program would between jobs; and a
    # helper thread that exits on its own idle timer (blazen's shared reader) its timer.
    time.sleep(0.2)
    deadline = time.monotonic() + 6.0
    while threading.active_count() > threads0 and time.monotonic() < deadline:
        time.sleep(0.05)
    threads_left = threading.active_count() - threads0
    fds_pooled = _fds() - fds0
    client.close()
    time.sleep(0.1)
    return {
        "wall": wall,
        "ok": ok,
        "threads_left": threads_left,
        "fds_pooled": fds_pooled,
        "fds_left": _fds() - fds0,
    }


def op_teardown(client: Client, base: str, spec: Spec, how: str) -> dict[str, Any]:
    """Milliseconds from a callback raising (or a cancel) until the server saw the close."""
    fired = [0.0]
    if how == "raise":
        count = [0]

        def on_text() -> None:
            count[0] += 1
            if count[0] == spec.stall:
                fired[0] = time.monotonic()
                raise Abort

        with contextlib.suppress(Abort):
            client.stream(spec, on_text)
    else:
        if not client.can_cancel:
            return {"ms": None}

        def fire(cancel: Callable[[], None]) -> None:
            # Cancel from another thread once the reader is blocked waiting for bytes.
            def later() -> None:
                time.sleep(0.05)
                fired[0] = time.monotonic()
                cancel()

            threading.Thread(target=later, daemon=True).start()

        client.cancel_during(spec, spec.stall, fire)
    seen = _closed_at(base, spec.tag)
    if seen is None or not fired[0]:
        return {"ms": None}
    return {"ms": (seen - fired[0]) * 1000}


def _rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _peak_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def op_memory(key: str, base: str, n: int) -> dict[str, Any]:
    """Peak resident memory added by one stream of ``n`` chunks (fresh process)."""
    client = make_client(key, base)
    fmt = client.formats[0]
    client.stream(Spec(fmt=fmt, n=100))
    big = Spec(fmt=fmt, n=n)
    # Reset the kernel's peak-RSS mark so that import-time peaks do not hide the stream's.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _rss_kib()
    got = client.stream(big)
    peak = _peak_kib()
    text_kib = len(got[0].encode()) / 1024
    return {"peak_kib": peak - before, "text_kib": text_kib, "ok": _check(big, got)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("client")
    parser.add_argument("base")
    parser.add_argument("--memory", type=int, default=0, help="measure one stream's peak memory")
    parser.add_argument(
        "--soak",
        metavar="WARMUP,EVERY,ROUNDS,SECONDS",
        help="the soak: RSS growth over many short streams from four threads",
    )
    args = parser.parse_args(argv)
    if args.memory:
        print(json.dumps(op_memory(args.client, args.base, args.memory)), flush=True)
        return
    if args.soak:
        from .soak import soak

        warmup, every, rounds, seconds = args.soak.split(",")
        got = soak(args.client, args.base, int(warmup), int(every), int(rounds), float(seconds))
        print(json.dumps(got), flush=True)
        return
    client = make_client(args.client, args.base)
    print(json.dumps({"ready": True, "formats": client.formats}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        spec = Spec(**cmd["spec"])
        try:
            if cmd["op"] == "stream":
                out = op_stream(client, spec, cmd.get("check", False), cmd.get("best_of", 1))
            elif cmd["op"] == "concurrent":
                out = op_concurrent(client, spec, cmd["n"])
                # The measurement closed the client to count what it leaves behind.
                client = make_client(args.client, args.base)
            elif cmd["op"] == "teardown":
                out = op_teardown(client, args.base, spec, cmd["how"])
            else:
                out = {"error": f"unknown op {cmd['op']!r}"}
        except Exception as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
