"""Embedding many short texts: ``model.embed`` against the ``openai`` SDK's ``embeddings.create``.

    python -m benchmarks.embed [--texts 10000] [--dimensions 1536] [--quick]

A local server (``blazen.testing.StreamServer``, in its own process) answers OpenAI's
``POST /embeddings`` as the API does: one vector of ``--dimensions`` float32 values per
input, base64-encoded when the request asks for it (both clients do by default) and as a
JSON number list otherwise. Each client runs in a fresh Python process against a fresh
server and embeds the same texts:

- ``blazen``: ``model.embed(texts)``, which cuts them into batches of 2,048 (OpenAI's
  limit) and sends 4 at a time; the vectors are packed ``array("f")``;
- ``openai SDK``: ``client.embeddings.create(model=..., input=batch)`` over the same
  2,048-text batches, one after another, as its README shows; it decodes each vector into a
  list of Python floats.

Reported per client: wall time, peak resident memory over the process's own after its
imports (``ru_maxrss``), and the memory the vectors still hold once the call has returned
(resident growth with the result alive). Not a pass/fail figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from typing import Any

SERVER = textwrap.dedent(
    """
    import array, base64, json, random, sys
    from blazen.testing import Reply, StreamServer

    dims = int(sys.argv[1])
    random.seed(7)
    vector = array.array("f", [random.uniform(-0.1, 0.1) for _ in range(dims)])
    packed = base64.b64encode(vector.tobytes()).decode()
    floats = list(vector)

    def respond(request):
        body = request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        value = packed if body.get("encoding_format") == "base64" else floats
        data = [{"object": "embedding", "index": i, "embedding": value} for i in range(len(texts))]
        usage = {"prompt_tokens": 3 * len(texts), "total_tokens": 3 * len(texts)}
        return Reply.json({"object": "list", "data": data, "model": body["model"], "usage": usage})

    with StreamServer(respond=respond) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the benchmark closes our stdin
    """
)

CLIENT = textwrap.dedent(
    """
    import gc, json, resource, sys, time
    which, base_url, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    MODEL = "text-embedding-3-small"

    def rss_mib():
        # Linux reports ru_maxrss in KiB; the current size is read from /proc.
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() / 2**20

    texts = [f"short text number {i}" for i in range(count)]
    if which == "blazen":
        from blazen import Providers
        model = Providers.openai(api_key="sk-bench", base_url=base_url)
        run = lambda: model.embed(texts).vectors
    else:
        import openai
        client = openai.OpenAI(api_key="sk-bench", base_url=base_url)
        def run():
            out = []
            for i in range(0, len(texts), 2048):
                resp = client.embeddings.create(model=MODEL, input=texts[i : i + 2048])
                out.extend(d.embedding for d in resp.data)
            return out
    gc.collect()
    base = rss_mib()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    vectors = run()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gc.collect()
    kept = rss_mib() - base
    assert len(vectors) == count and len(vectors[0]) > 0
    print(json.dumps({
        "seconds": seconds,
        "peak_mib": max(peak - max(peak_before, base), 0.0),
        "kept_mib": max(kept, 0.0),
    }))
    """
)

CLIENTS = ("blazen", "openai SDK")


def _server(dimensions: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(dimensions)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def measure(texts: int, dimensions: int) -> dict[str, dict[str, Any]]:
    """Each client in its own process against a fresh server: time and memory."""
    results: dict[str, dict[str, Any]] = {}
    for name in CLIENTS:
        proc, base_url = _server(dimensions)
        try:
            which = "blazen" if name == "blazen" else "openai"
            out = subprocess.run(
                [sys.executable, "-c", CLIENT, which, base_url, str(texts)],
                capture_output=True,
                text=True,
                timeout=600,
                check=True,
            )
            results[name] = json.loads(out.stdout.strip().splitlines()[-1])
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=30)
    base = results["blazen"]["seconds"]
    for row in results.values():
        row["time_ratio"] = row["seconds"] / base
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.embed", description=__doc__)
    parser.add_argument("--texts", type=int, default=10_000)
    parser.add_argument("--dimensions", type=int, default=1536)
    parser.add_argument("--quick", action="store_true", help="1,000 texts of 256 dimensions")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    texts, dims = (1000, 256) if args.quick else (args.texts, args.dimensions)
    started = time.perf_counter()
    results = measure(texts, dims)
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"{texts} short texts, {dims} dimensions, batches of 2,048 (base64 on the wire)")
    print(f"{'client':<12} {'wall s':>8} {'/ blazen':>9} {'peak MiB':>9} {'kept MiB':>9}")
    for name, row in results.items():
        print(
            f"{name:<12} {row['seconds']:>8.2f} {row['time_ratio']:>8.2f}x "
            f"{row['peak_mib']:>9.1f} {row['kept_mib']:>9.1f}"
        )
    load = os.getloadavg()[0]
    print(f"(load average {load:.1f}; {time.perf_counter() - started:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
