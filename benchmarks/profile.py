"""Stream one scenario in a loop, in this process, for a profiler to watch.

    py-spy record -r 2000 -f raw -o /tmp/blazen.txt -- python -m benchmarks.profile blazen a
    python -m benchmarks.profile blazen a --pyinstrument    # the calling thread only

py-spy samples every thread (blazen parses on a worker thread and runs callbacks on the
caller's); ``--summary FILE`` folds py-spy's raw output into self time per function.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import time

from .clients import make_client
from .run import ROOT, _env
from .streams import Spec

__all__ = ["main", "summary"]

SPECS = {
    "a": Spec(n=20_000, mode="all"),
    "b": Spec(n=2_000, mode="each"),
    "c": Spec(n=2_000, tools=True),
}


def summary(path: str, top: int = 40) -> str:
    """Self and inclusive sample counts per function from a py-spy ``--format raw`` file."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            n = int(count)
            # "func (path/file.py:123)" -> "func (file.py)": group a function's lines.
            frames = [
                re.sub(r"\(([^()]*/)?([^/():]+):\d+\)$", r"(\2)", fr) for fr in stack.split(";")
            ]
            total += n
            own[frames[-1]] += n
            for fr in set(frames):
                incl[fr] += n
    lines = [f"{total} samples", "self%  incl%  function"]
    for fr, n in own.most_common(top):
        lines.append(f"{100 * n / total:5.1f}  {100 * incl[fr] / total:5.1f}  {fr}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("client", nargs="?", default="blazen")
    parser.add_argument("scenario", nargs="?", default="a", choices=sorted(SPECS))
    parser.add_argument("--fmt", default="openai")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--pyinstrument", action="store_true")
    parser.add_argument("--summary", metavar="FILE", help="summarise a py-spy raw file and exit")
    args = parser.parse_args(argv)
    if args.summary:
        print(summary(args.summary))
        return
    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=_env(),
    )
    assert server.stdout is not None and server.stdin is not None
    base = f"http://127.0.0.1:{int(server.stdout.readline())}"
    client = make_client(args.client, base)
    spec = SPECS[args.scenario]
    spec = Spec(fmt=args.fmt, n=spec.n, mode=spec.mode, tools=spec.tools)
    client.stream(spec)
    profiler = None
    if args.pyinstrument:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0002)
        profiler.start()
    streams = 0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        client.stream(spec)
        streams += 1
    per = (time.perf_counter() - t0) / streams / spec.n * 1e6
    cpu = (time.process_time() - cpu0) / streams / spec.n * 1e6
    if profiler is not None:
        profiler.stop()
        print(profiler.output_text(unicode=True, color=False))
    print(f"{streams} streams, {per:.1f} µs per chunk, {cpu:.1f} µs CPU", file=sys.stderr)
    client.close()
    server.stdin.close()
    server.wait()


if __name__ == "__main__":
    main()
