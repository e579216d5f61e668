"""The examples run as a user would run them, against blazen.testing's server."""

from __future__ import annotations

import importlib.util
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
        "batch_resume.py",
        "start_cancel.py",
        "async_relay.py",
        "typed_output.py",
    ],
)
def test_examples_run_offline_with_the_recorded_demo_stream(name):
    """With no server configured each example replays its recorded stream and says so."""
    proc = run_example(name)
    assert proc.returncode == 0, proc.stderr
    assert "[demo]" in proc.stderr
    assert proc.stdout.strip()


def test_the_thread_pool_demo_answers_each_prompt_with_its_own_reply():
    """The recorded replies differ by prompt: a rhyme per word, not one answer for all."""
    proc = run_example("batch_threadpool.py")
    assert proc.returncode == 0, proc.stderr
    for word, answer in [("cat", "Hat."), ("tree", "Bee."), ("moon", "Spoon.")]:
        assert f"rhymes with {word}. -> {answer}" in proc.stdout


# -- switch_provider.py, loaded in-process (one subprocess per provider would be slow) --

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "switch_provider.py"
_spec = importlib.util.spec_from_file_location("switch_provider", EXAMPLE)
assert _spec is not None and _spec.loader is not None
switch_provider = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(switch_provider)


@pytest.mark.parametrize("provider", switch_provider.PROVIDERS)
def test_switch_provider_streams_the_same_request_through_every_provider(provider, capsys):
    """--offline replays that provider's recorded wire format and says so."""
    assert switch_provider.main(["--provider", provider, "--offline"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "replaying the recorded stream" in captured.err  # notes on stderr, as elsewhere
    assert "replaying" not in out
    assert "Why did the scarecrow win an award?" in out
    assert f"[{provider}: done, finish_reason='stop'" in out


def test_switch_provider_without_a_key_falls_back_and_names_the_variable(capsys):
    """With no key configured, the example tells the user which variable it looked for."""
    assert switch_provider.main(["--provider", "anthropic"]) == 0
    err = capsys.readouterr().err
    assert "ANTHROPIC_API_KEY" in err and "replaying" in err
