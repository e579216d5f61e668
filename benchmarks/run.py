"""Run every scenario against every installed client and write the results.

``python -m benchmarks`` (from the repository root, after
``pip install -e '.[bench]' -c benchmarks/constraints.txt``)
starts the benchmark server and one runner process per client, interleaves the repeats of
every client so that noise from the machine spreads evenly over all of them, and writes
``results.json``, ``results.md`` and ``chart.png`` into ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .clients import CLIENTS, IMPORT_REFERENCES, IMPORTS, MODULES
from .streams import Spec

__all__ = ["Sizes", "main", "run"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCENARIOS = "abcdefgh"
#: Clients too slow for the full sizes: they stream a tenth of the chunks (results are per
#: chunk, so still comparable), run the concurrency scenario once and skip the memory one;
#: the soak's time budget cuts them short.
SLOW = {"litellm"}


class Sizes:
    """How big each scenario is; ``quick`` shrinks everything for the smoke test."""

    def __init__(self, quick: bool, repeat: int | None) -> None:
        self.quick = quick
        self.a = 200 if quick else 20_000
        self.b = 100 if quick else 2_000
        self.c = 50 if quick else 2_000
        self.d_chunks = 5 if quick else 100
        self.d_delay_us = 1000 if quick else 20_000
        self.d_counts = (4, 8) if quick else (32, 256)
        self.f_after = 5 if quick else 50
        self.g = 2_000 if quick else 200_000
        #: The soak: warm-up streams, then up to ``h_rounds`` samples ``h_every`` streams
        #: apart, stopping early (after two) once ``h_seconds`` of streaming have gone by.
        self.h_warmup = 100 if quick else 10_000
        self.h_every = 100 if quick else 10_000
        self.h_rounds = 3 if quick else 10
        self.h_seconds = 60 if quick else 600
        self.repeat = repeat or (1 if quick else 5)
        #: Each sample of (a)-(c) is the fastest of this many consecutive streams.
        self.best_of = 1 if quick else 3
        self.repeat_slow = 1 if quick else 3


class _Runner:
    """One client's runner process."""

    def __init__(self, key: str, base: str) -> None:
        self.key = key
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.runner", key, base],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=_env(),
        )
        hello = self._read()
        self.formats: tuple[str, ...] = tuple(hello.get("formats", ()))
        self.error = hello.get("error")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            return {"error": f"runner for {self.key} exited ({self.proc.wait()})"}
        return json.loads(line)  # type: ignore[no-any-return]

    def ask(self, op: str, spec: Spec, **kw: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, "spec": asdict(spec), **kw}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return env


def _installed(key: str) -> bool:
    return importlib.util.find_spec(MODULES[key]) is not None


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def off_pins() -> list[str]:
    """Installed versions that differ from ``benchmarks/constraints.txt``, one line each.

    The figures of two runs compare the same code only when both ran the pinned releases;
    a run with others says so rather than silently comparing something else.
    """
    off = []
    for line in (Path(__file__).parent / "constraints.txt").read_text().splitlines():
        name, sep, pinned = line.partition("==")
        if line.startswith("#") or not sep:
            continue
        try:
            installed = importlib.metadata.version(name.strip())
        except importlib.metadata.PackageNotFoundError:
            installed = "not installed"
        if installed != pinned.strip():
            off.append(f"{name.strip()} {installed} (pinned {pinned.strip()})")
    return off


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = {}
    for dist in (
        "blazen-stream",
        "requests",
        "sseclient-py",
        "httpx",
        "httpx-sse",
        "openai",
        "anthropic",
        "litellm",
        "urllib3",
    ):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[dist] = importlib.metadata.version(dist)
    off = off_pins()
    if off:
        print(f"benchmarks: not the pinned versions: {', '.join(off)}; install with "
              "-c benchmarks/constraints.txt to compare with other runs", file=sys.stderr)
    return {
        "off_pins": off,
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
        "versions": versions,
    }


def _import_time(key: str) -> float:
    code = (
        "import time; t = time.perf_counter(); "
        + {**IMPORTS, **IMPORT_REFERENCES}[key]
        + "; print(time.perf_counter() - t)"
    )
    env = _env()
    if key == "blazen-baseline":
        env["PYTHONPATH"] = os.pathsep.join((env["BLAZEN_BASELINE"], env["PYTHONPATH"]))
    # Installed packages import from cached bytecode; an editable checkout run with
    # PYTHONDONTWRITEBYTECODE would compile from source every time and measure the compiler.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # `python -c` puts the working directory first on sys.path: run from an empty one, or
    # the checkout we were started from shadows the baseline's PYTHONPATH entry.
    with tempfile.TemporaryDirectory() as empty:
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            cwd=empty,
        )
    return float(out.stdout.strip().splitlines()[-1])


def _memory(key: str, base: str, n: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.runner", key, base, "--memory", str(n)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _soak(key: str, base: str, sizes: Sizes) -> dict[str, Any]:
    # Progress goes to our stderr: a full soak of a slow client takes many minutes.
    soak = f"{sizes.h_warmup},{sizes.h_every},{sizes.h_rounds},{sizes.h_seconds}"
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.runner", key, base, "--soak", soak],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    lines = out.stdout.strip().splitlines()
    if out.returncode or not lines:
        return {"error": f"soak runner exited with {out.returncode}"}
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def run(
    clients: list[str], scenarios: str, sizes: Sizes, formats: tuple[str, ...]
) -> dict[str, Any]:
    """Measure; return every sample (the report is computed from them)."""
    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=_env(),
    )
    assert server.stdout is not None
    base = f"http://127.0.0.1:{int(server.stdout.readline())}"
    results: dict[str, Any] = {
        "machine": _machine(),
        "load_before": _loadavg(),
        "sizes": {k: v for k, v in vars(sizes).items()},
        "samples": {},
        "errors": [],
    }
    samples: dict[str, dict[str, list[Any]]] = results["samples"]

    def add(scenario: str, key: str, value: Any) -> None:
        samples.setdefault(scenario, {}).setdefault(key, []).append(value)

    runners: dict[str, _Runner] = {}
    try:
        needs_runner = set(scenarios) & set("abcdf")
        for key in clients if needs_runner else []:
            _log(f"starting {key}")
            runner = _Runner(key, base)
            if runner.error:
                results["errors"].append(f"{key}: {runner.error}")
                runner.close()
                continue
            runners[key] = runner

        def specs_for(fmt: str, key: str) -> dict[str, Spec]:
            div = 10 if key in SLOW else 1
            out: dict[str, Spec] = {}
            if "a" in scenarios:
                out["a"] = Spec(fmt=fmt, n=sizes.a // div, mode="all")
            if "b" in scenarios:
                out["b"] = Spec(fmt=fmt, n=sizes.b, mode="each")
            if "c" in scenarios:
                out["c"] = Spec(fmt=fmt, n=sizes.c // div, tools=True)
                out["c2"] = Spec(fmt=fmt, n=2 * sizes.c // div, tools=True)
            return out

        def ask(runner: _Runner, op: str, spec: Spec, **kw: Any) -> dict[str, Any] | None:
            got = runner.ask(op, spec, **kw)
            if "error" in got or got.get("ok") is False:
                results["errors"].append(f"{runner.key} {op} {spec.path()}: {got}")
                return None
            return got

        # (a)-(c): every stream size once as a warm-up (and correctness check), then the
        # repeats, interleaved client by client.
        for fmt in formats:
            for key, runner in runners.items():
                if fmt in runner.formats:
                    for spec in specs_for(fmt, key).values():
                        ask(runner, "stream", spec, check=True)
        for rep in range(sizes.repeat):
            _log(f"throughput repeat {rep + 1}/{sizes.repeat}")
            for fmt in formats:
                for key, runner in runners.items():
                    if fmt not in runner.formats:
                        continue
                    if key in SLOW and rep >= sizes.repeat_slow:
                        continue
                    for name, spec in specs_for(fmt, key).items():
                        got = ask(runner, "stream", spec, check=True, best_of=sizes.best_of)
                        if got:
                            per = got["wall"] / spec.n * 1e6
                            add(
                                f"{name}:{fmt}",
                                key,
                                {"us": per, "cpu_us": got["cpu"] / spec.n * 1e6},
                            )

        if "d" in scenarios:
            spec = Spec(n=sizes.d_chunks, mode="each", delay_us=sizes.d_delay_us)
            for rep in range(min(sizes.repeat, 3)):
                _log(f"concurrency repeat {rep + 1}")
                for key, runner in runners.items():
                    if "openai" not in runner.formats or (key in SLOW and rep):
                        continue
                    alone = ask(runner, "stream", spec, check=True)
                    if alone:
                        add("d:alone", key, alone["wall"])
                    for n in sizes.d_counts:
                        got = ask(runner, "concurrent", spec, n=n)
                        if got:
                            add(f"d:{n}", key, got)

        if "f" in scenarios:
            for rep in range(sizes.repeat):
                _log(f"teardown repeat {rep + 1}")
                for key, runner in runners.items():
                    if "openai" not in runner.formats:
                        continue
                    for how in ("raise", "cancel"):
                        tag = uuid.uuid4().hex[:12]
                        spec = Spec(n=sizes.f_after * 2, mode="each", stall=sizes.f_after, tag=tag)
                        got = runner.ask("teardown", spec, how=how)
                        if "error" in got:
                            results["errors"].append(f"{key} teardown {how}: {got['error']}")
                        elif got.get("ms") is not None or how == "raise" or CLIENTS[key].can_cancel:
                            add(f"f:{how}", key, got.get("ms"))
    finally:
        for runner in runners.values():
            runner.close()

    try:
        if "e" in scenarios:
            imports = [*clients, *IMPORT_REFERENCES]
            for key in imports:
                _import_time(key)  # warm the bytecode caches
            # Imports are quick and noisy: three times the repeats of the other scenarios.
            for rep in range(3 * sizes.repeat if not sizes.quick else 1):
                _log(f"import repeat {rep + 1}")
                for key in imports:
                    add("e", key, _import_time(key))

        if "g" in scenarios:
            for rep in range(min(sizes.repeat, 3)):
                _log(f"memory repeat {rep + 1}")
                for key in clients:
                    if key in SLOW and not sizes.quick:
                        continue
                    # Two sizes: what grows between them is the cost per chunk, apart from
                    # what any stream costs once (buffers, a thread's stack, allocator slack).
                    got = _memory(key, base, sizes.g)
                    half = _memory(key, base, sizes.g // 2)
                    if any("error" in x or x.get("ok") is False for x in (got, half)):
                        results["errors"].append(f"{key} memory: {got} {half}")
                    else:
                        got["half_peak_kib"] = half["peak_kib"]
                        got["half_text_kib"] = half["text_kib"]
                        add("g", key, got)

        if "h" in scenarios:
            # One long measurement per client, one client at a time: a soak of every
            # client at once would measure how they share two cores.
            for key in clients:
                _log(f"soak {key}")
                got = _soak(key, base, sizes)
                if "error" in got or got.get("ok") is False:
                    failed = got.get("failed") or got.get("error")
                    results["errors"].append(f"{key} soak: {failed}")
                if "samples" in got:
                    add("h", key, got)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    results["load_after"] = _loadavg()
    return results


def main(argv: list[str] | None = None) -> int:
    from .report import write_report

    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat (smoke test)")
    parser.add_argument("--repeat", type=int, help="repeats per scenario (default 5)")
    parser.add_argument(
        "--clients",
        default=",".join(c for c in CLIENTS if c != "blazen-baseline"),
        help=f"comma-separated subset of: {', '.join(CLIENTS)}",
    )
    parser.add_argument("--scenarios", default=SCENARIOS, help="subset of 'abcdefgh'")
    parser.add_argument(
        "--formats", default="openai,anthropic,responses", help="wire formats for a-c"
    )
    parser.add_argument("--out", default=str(HERE / "results"), help="output directory")
    parser.add_argument("--label", default="", help="a name for this run in the report")
    parser.add_argument(
        "--baseline",
        metavar="PATH",
        help="also measure the blazen package found in PATH (another checkout) as a baseline",
    )
    args = parser.parse_args(argv)

    wanted = [c for c in args.clients.split(",") if c and c != "blazen-baseline"]
    if args.baseline:
        os.environ["BLAZEN_BASELINE"] = str(Path(args.baseline).resolve())
        wanted.insert(wanted.index("blazen") + 1 if "blazen" in wanted else 0, "blazen-baseline")
    unknown = [c for c in wanted if c not in CLIENTS]
    if unknown:
        parser.error(f"unknown client(s): {', '.join(unknown)}")
    clients = [c for c in wanted if _installed(c)]
    for c in sorted(set(wanted) - set(clients)):
        _log(f"skipping {c}: not installed")
    if "raw" not in clients:
        clients.insert(0, "raw")  # every ratio needs the floor
    sizes = Sizes(args.quick, args.repeat)
    started = time.time()
    results = run(clients, args.scenarios, sizes, tuple(args.formats.split(",")))
    results["label"] = args.label
    results["seconds"] = round(time.time() - started, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    table = write_report(results, out)
    print(table)
    for err in results["errors"]:
        _log(f"error: {err}")
    return 0


def median(values: list[float]) -> float:
    """The median (re-exported for the report)."""
    return statistics.median(values)
