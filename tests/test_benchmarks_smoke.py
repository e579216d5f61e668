"""The benchmark harness still runs: tiny sizes, one repeat, and it writes its table.

Benchmarks are never pass/fail on speed; this only keeps ``benchmarks/`` from rotting. It is
skipped unless the ``bench`` extra (the compared libraries and matplotlib) is installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("matplotlib", reason="the bench extra is not installed")
pytest.importorskip("httpx_sse", reason="the bench extra is not installed")


def test_quick_benchmark_run_writes_a_table_and_a_chart(tmp_path: Path) -> None:
    """`python -m benchmarks --quick` produces results.md with every scenario, and a PNG."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--quick",
            "--clients",
            "raw,blazen,requests-sseclient,httpx-sse",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    table = (tmp_path / "results.md").read_text()
    headings = (
        "(a) throughput",
        "(d) Concurrent",
        "(e) Import",
        "(f) Abort",
        "(g) Peak",
        "(h) Soak",
    )
    for heading in headings:
        assert heading in table
    assert "| **blazen** |" in table
    assert (tmp_path / "chart.png").read_bytes().startswith(b"\x89PNG")
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["errors"] == []


def test_quick_batch_benchmark_compares_batch_run_with_the_hand_written_loops() -> None:
    """`python -m benchmarks.batch --quick` runs all three clients and loses no batch item."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.batch", "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)
    assert set(results) == {"batch.run", "README loop (blazen)", "README loop (openai SDK)"}
    assert results["batch.run"]["lost"] == 0 and results["batch.run"]["time_ratio"] == 1.0


def test_quick_embed_benchmark_runs_both_clients() -> None:
    """`python -m benchmarks.embed --quick` embeds the same texts with blazen and the SDK."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.embed", "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)
    assert set(results) == {"blazen", "openai SDK"}
    assert all(row["seconds"] > 0 for row in results.values())
