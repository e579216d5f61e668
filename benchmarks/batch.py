"""Batch jobs through a rate-limit storm: ``batch.run`` against the loops users write by hand.

    python -m benchmarks.batch [--items 2000] [--concurrency 16] [--quick]

A scripted server (``blazen.testing.StreamServer``, in its own process) answers each request
with a short stream paced like a model (5 chunks, 20 ms apart), except for a burst of 2% of
the requests answered 429 with ``Retry-After: 1`` in a row, as a provider's rate-limit window
does. Every client gets a fresh server with the same script and runs the same items, 16 at a
time:

- ``batch.run``: ``blazen.batch.run(model, requests, concurrency=16)``;
- the README loop: a ``ThreadPoolExecutor`` of 16 calling ``Streaming.complete`` per item
  (the model's own retries, 2 by default, honour ``Retry-After``);
- the same loop with the ``openai`` SDK (``chat.completions.create(stream=True)``, its own
  2 retries, which honour ``Retry-After`` too).

Reported: wall time and items lost (ended in an error), and each loop's wall time over
``batch.run``'s, in one run. Not a pass/fail figure: a way to see what the storm costs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

SERVER = textwrap.dedent(
    """
    import sys
    from blazen.testing import Pause, Reply, StreamServer, openai_sse

    start, burst = int(sys.argv[1]), int(sys.argv[2])
    events = openai_sse(["Hat", ".", " ", "Cat", "."])
    paced = []
    for event in events:
        paced += [event, Pause(0.02)]
    ok = Reply.sse(paced)
    limited = Reply.json(
        {"error": {"type": "rate_limit_exceeded", "message": "Rate limit reached"}},
        status=429,
        headers={"Retry-After": "1"},
    )
    with StreamServer([ok] * start + [limited] * burst, default=ok) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the benchmark closes our stdin
    """
)


def _server(items: int) -> tuple[subprocess.Popen[str], str]:
    burst = max(1, items // 50)  # 2% of the requests, in a row
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(items // 4), str(burst)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _prompts(items: int) -> list[str]:
    return [f"One word that rhymes with item {i}." for i in range(items)]


def run_batch(base_url: str, items: int, concurrency: int) -> int:
    from blazen import Llm, Providers, batch

    model = Providers.openai(api_key="sk-bench", base_url=base_url, max_connections=concurrency)
    reqs = (Llm.completion_request([Llm.user(p)]) for p in _prompts(items))
    return batch.run(model, reqs, concurrency=concurrency).failed


def _pool(items: int, concurrency: int, one: Callable[[str], Any]) -> int:
    lost = 0
    with ThreadPoolExecutor(concurrency) as pool:
        for future in [pool.submit(one, p) for p in _prompts(items)]:
            lost += future.exception() is not None
    return lost


def run_readme_loop(base_url: str, items: int, concurrency: int) -> int:
    from blazen import Llm, Providers, Streaming

    model = Providers.openai(api_key="sk-bench", base_url=base_url, max_connections=concurrency)

    def answer(prompt: str) -> Any:
        req = Llm.completion_request([Llm.user(prompt)])
        return Streaming.complete(model, req, on_chunk=lambda c: None, timeout=60)

    return _pool(items, concurrency, answer)


def run_openai_loop(base_url: str, items: int, concurrency: int) -> int:
    import openai

    client = openai.OpenAI(api_key="sk-bench", base_url=base_url)

    def answer(prompt: str) -> str:
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}], stream=True
        )
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    return _pool(items, concurrency, answer)


CLIENTS: dict[str, Callable[[str, int, int], int]] = {
    "batch.run": run_batch,
    "README loop (blazen)": run_readme_loop,
    "README loop (openai SDK)": run_openai_loop,
}


def measure(items: int, concurrency: int) -> dict[str, dict[str, float]]:
    """Wall time and items lost per client, each against a fresh scripted server."""
    results: dict[str, dict[str, float]] = {}
    for name, client in CLIENTS.items():
        proc, base_url = _server(items)
        try:
            start = time.perf_counter()
            lost = client(base_url, items, concurrency)
            results[name] = {"seconds": time.perf_counter() - start, "lost": lost}
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=30)
    base = results["batch.run"]["seconds"]
    for row in results.values():
        row["time_ratio"] = row["seconds"] / base
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.batch", description=__doc__)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="200 items: the smoke test")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    items = 200 if args.quick else args.items
    results = measure(items, args.concurrency)
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"{items} items, {args.concurrency} at a time, 2% answered 429 in one burst")
    print(f"{'client':<26} {'wall s':>8} {'/ batch.run':>12} {'items lost':>11}")
    for name, row in results.items():
        print(
            f"{name:<26} {row['seconds']:>8.2f} {row['time_ratio']:>11.2f}x {int(row['lost']):>11}"
        )
    print(f"(load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
