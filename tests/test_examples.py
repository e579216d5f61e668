"""The examples run as a user would run them, against blazen.testing's server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from blazen.testing import Reply, StreamServer, openai_sse

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "BLAZEN_BASE_URL"
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, "PYTHONPATH": str(ROOT), **env},
    )


def test_joke_example_streams_from_a_server_given_by_base_url():
    """BLAZEN_BASE_URL points the joke example at our server: text, then the done line."""
    with StreamServer(
        [
            Reply.sse(
                openai_sse(
                    ["Knock ", "knock."],
                    usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
                )
            )
        ]
    ) as server:
        proc = run_example("joke.py", BLAZEN_BASE_URL=server.base_url)
        sent = server.requests[0].json()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Knock knock.\nFinished: stop (2 tokens)\n"
    assert sent["max_tokens"] == 256 and sent["stream"] is True


@pytest.mark.parametrize(
    "name",
    [
        "joke.py",
        "explicit_handlers.py",
        "tool_calls.py",
        "batch_threadpool.py",
        "start_cancel.py",
        "async_relay.py",
    ],
)
def test_examples_run_offline_with_the_recorded_demo_stream(name):
    """With no server configured each example replays its recorded stream and says so."""
    proc = run_example(name)
    assert proc.returncode == 0, proc.stderr
    assert "[demo]" in proc.stderr
    assert proc.stdout.strip()
