"""examples/agent_weather.py runs as a user would run it: offline, and against a server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from blazen.testing import Reply, StreamServer, openai_sse, openai_tool_sse

ROOT = Path(__file__).resolve().parents[1]


def run_weather(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "BLAZEN_BASE_URL"
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent_weather.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "PYTHONPATH": str(ROOT)},
    )


def test_weather_example_runs_offline_and_says_it_replays_a_script():
    """With no server the example replays its scripted conversation and says so."""
    proc = run_weather()
    assert proc.returncode == 0, proc.stderr
    assert "[demo]" in proc.stderr
    assert proc.stdout.splitlines() == [
        '[tool] get_weather({"city": "Oslo"})',
        '[tool] get_local_time({"city": "Oslo"})',
        "  [ok] get_weather -> 4 C, light snow",
        '  [ok] get_local_time -> {"city": "Oslo", "time_zone": "Europe/Oslo", "local_time": "09:41"}',
        "In Oslo it is 4 C with light snow, and the local time is 09:41.",
        "(2 model turns, 2 tool calls, 510 tokens)",
    ]


def test_weather_example_survives_a_small_model_that_calls_tools_badly():
    """Against --base-url: a wrong tool name and an unknown city go back as error results,
    and the model's next try completes the run."""
    replies = [
        Reply.sse(openai_tool_sse([("a", "weather", {"city": "Oslo"})])),
        Reply.sse(openai_tool_sse([("b", "get_weather", {"city": "Atlantis", "unit": "kelvin"})])),
        Reply.sse(openai_tool_sse([("c", "get_weather", {"city": "Lima", "unit": "fahrenheit"})])),
        Reply.sse(openai_sse(["72 F in Lima."])),
    ]
    with StreamServer(replies) as server:
        proc = run_weather("--base-url", server.base_url, "--model", "gemma3-270m", "Lima?")
        sent = [r.json() for r in server.requests]
    assert proc.returncode == 0, proc.stderr
    assert "[demo]" not in proc.stderr
    assert "  [error] weather -> Error: there is no tool named 'weather'" in proc.stdout
    assert "unit: must be one of 'celsius', 'fahrenheit'; got 'kelvin'" in proc.stdout
    assert "  [ok] get_weather -> 72 F, overcast" in proc.stdout
    assert proc.stdout.endswith("72 F in Lima.\n(4 model turns, 3 tool calls, 0 tokens)\n")
    assert [body["model"] for body in sent] == ["gemma3-270m"] * 4
