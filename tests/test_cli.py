"""The ``blazen`` command against a scripted server: events, exit statuses, provider choice."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import attrs
import pytest

from blazen import Providers, cli
from blazen.providers import PROVIDERS
from blazen.testing import Pause, Reply, Stall, StreamServer, openai_sse, sse


def events(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def chat(*argv: str) -> int:
    return cli.main(["chat", *argv])


def test_json_prints_chunks_then_exactly_one_done(server, capsys):
    """--json: one chunk event per chunk, then one done event with usage; exit status 0."""
    usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    server.add(Reply.sse(openai_sse(["Hel", "lo", "!"], usage=usage)))
    assert chat("--json", "--base-url", server.base_url, "hi") == 0
    evs = events(capsys.readouterr().out)
    assert [e["event"] for e in evs] == ["chunk"] * 4 + ["done"]
    assert "".join(e["content"] or "" for e in evs[:-1]) == "Hello!"
    assert evs[-2]["is_final"] is True
    assert evs[-1] == {"event": "done", "finish_reason": "stop", "usage": usage}


def test_plain_output_is_the_text_and_a_newline(server, capsys):
    """Without --json, stdout holds just the streamed text, ended by a newline."""
    server.add(Reply.sse(openai_sse(["Hi", " there"])))
    assert chat("--base-url", server.base_url, "hi") == 0
    captured = capsys.readouterr()
    assert captured.out == "Hi there\n"
    assert captured.err == ""


def test_request_carries_prompt_system_and_limits(server, capsys):
    """The prompt, --system, --max-tokens, --temperature and --model reach the request."""
    server.add(Reply.sse(openai_sse(["ok"])))
    code = chat(
        "--base-url", server.base_url, "--model", "m1", "--system", "Be terse.",
        "--max-tokens", "7", "--temperature", "0", "Tell me.",
    )  # fmt: skip
    assert code == 0
    body = server.requests[0].json()
    assert body["model"] == "m1"
    assert body["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "Tell me."},
    ]
    assert (body["max_tokens"], body["temperature"], body["stream"]) == (7, 0, True)


def test_prompt_dash_reads_stdin(server, capsys, monkeypatch):
    """``blazen chat -`` (or no prompt) sends what is piped in."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("from a pipe"))
    server.add(Reply.sse(openai_sse(["ok"])))
    assert chat("--base-url", server.base_url) == 0
    assert server.requests[0].json()["messages"][-1]["content"] == "from a pipe"


def test_provider_error_exits_1_with_one_error_event_and_message(server, capsys):
    """A 400 ends in exactly one error event, the message on stderr, and exit status 1."""
    server.add(Reply.json({"error": {"message": "model not found", "type": "bad"}}, status=400))
    assert chat("--json", "--base-url", server.base_url, "hi") == 1
    captured = capsys.readouterr()
    (ev,) = events(captured.out)
    assert ev["event"] == "error" and ev["status"] == 400
    assert "model not found" in ev["message"]
    assert "model not found" in captured.err


def test_stream_cut_before_its_end_signal_exits_1(server, capsys):
    """No [DONE]: the text so far is printed, then an error, never a done."""
    server.add(Reply.sse(openai_sse(["partial"], done=False), transfer="close"))
    assert chat("--json", "--base-url", server.base_url, "hi") == 1
    evs = events(capsys.readouterr().out)
    assert [e["event"] for e in evs] == ["chunk", "error"]
    assert evs[-1]["kind"] == "connection"


def test_unknown_provider_exits_2_and_lists_the_providers(capsys):
    """A --provider the registry lacks is a usage error naming every choice, presets too."""
    assert chat("--provider", "nope", "hi") == 2
    err = capsys.readouterr().err
    assert "unknown provider 'nope'" in err
    listed = err.split("choose one of:", 1)[1].replace(",", " ").split()
    assert sorted(listed) == sorted(["local", *PROVIDERS]) and len(PROVIDERS) == 18


def test_provider_is_looked_up_in_the_registry_by_name(server, capsys, monkeypatch):
    """A provider added to the registry (a row and its factory) works as --provider at once."""

    def newprov(model=None, base_url=None):
        return Providers.openai_compat("newprov", server.base_url, model=model)

    row = attrs.evolve(PROVIDERS["vllm"], name="newprov")
    monkeypatch.setitem(PROVIDERS, "newprov", row)
    monkeypatch.setattr(Providers, "newprov", staticmethod(newprov), raising=False)
    server.add(Reply.sse(openai_sse(["ok"])))
    assert chat("--provider", "newprov", "--model", "x-1", "hi") == 0
    assert server.requests[0].json()["model"] == "x-1"


def test_missing_key_for_named_provider_exits_1_naming_the_variable(capsys):
    """--provider openai with no key: exit 1 and the variable to set."""
    assert chat("--json", "--provider", "openai", "hi") == 1
    captured = capsys.readouterr()
    (ev,) = events(captured.out)
    assert ev["kind"] == "auth" and "OPENAI_API_KEY" in ev["message"]


@pytest.mark.parametrize(
    ("var", "name"),
    [(var, info.name) for info in PROVIDERS.values() if info.auto for var in info.key_env],
)
def test_every_key_variable_of_the_registry_picks_its_provider(var, name, capsys, monkeypatch):
    """CO_API_KEY picks cohere, PPLX_API_KEY perplexity: the CLI reads the registry's table."""
    for other in {v for info in PROVIDERS.values() for v in info.key_env}:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(var, "sk-test-not-real")
    # The model is chosen without sending anything: no request may leave this machine.
    args = cli._parser().parse_args(["chat", "hi"])
    model, local = cli._build_model(args, cli._Output(False, io.StringIO(), sys.stderr))
    assert local is None and model.provider == name
    assert f"{var} is set: using {name}" in capsys.readouterr().err


def test_key_in_environment_picks_that_provider(server, capsys, monkeypatch):
    """With no --provider, a key in the environment chooses its provider, said on stderr."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-0123456789")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.add(Reply.sse(openai_sse(["ok"])))
    assert chat("hi") == 0
    assert "OPENAI_API_KEY is set: using openai" in capsys.readouterr().err
    assert server.requests[0].header("Authorization") == "Bearer sk-env-key-0123456789"


def test_no_key_and_no_local_extra_names_the_install_command(capsys, monkeypatch):
    """No provider, no key, no extra: exit 1, saying it tried the local model and how to add it."""
    import blazen.local

    monkeypatch.setattr(blazen.local, "_SERVER_MODULES", ("blazen_no_such_module",))
    assert chat("--json", "hi") == 1
    captured = capsys.readouterr()
    (ev,) = events(captured.out)
    assert ev["event"] == "error"
    assert "pip install 'blazen[local]'" in ev["message"]
    assert "using the local model" in captured.err
    assert "pip install 'blazen[local]'" in captured.err


def test_local_only_options_are_refused_for_remote_providers(capsys):
    """--gguf with a remote provider is a usage error, not silently ignored."""
    assert chat("--provider", "openai", "--gguf", "x.gguf", "hi") == 2
    assert "--gguf" in capsys.readouterr().err


def test_bad_value_is_a_usage_error(server, capsys):
    """A value blazen refuses before sending (max_tokens 0) exits 2 with its message."""
    assert chat("--base-url", server.base_url, "--max-tokens", "0", "hi") == 2
    assert "max_tokens" in capsys.readouterr().err
    assert server.requests == []


def _spawn_cli(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "blazen", "chat", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_ctrl_c_cancels_the_stream_closes_the_connection_and_exits_130():
    """SIGINT mid-stream: a cancelled error event, the socket closed, exit status 130."""
    first = sse({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}, done=False)
    with StreamServer([Reply.sse([*first, Stall()])]) as server:
        proc = _spawn_cli("--json", "--base-url", server.base_url, "hi")
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert json.loads(line)["content"] == "Hel"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130
        (ev,) = events(out)
        assert ev["event"] == "error" and ev["kind"] == "cancelled"
        assert "interrupted" in err and "Traceback" not in err
        assert server.wait_closed(5)
        assert server.connections[0].closed_by == "client"


def test_reader_going_away_ends_quietly():
    """``blazen chat ... | head -1``: no traceback when stdout's reader closes."""
    parts = [b for i in range(50) for b in (*sse({"choices": [{"index": 0, "delta": {
        "content": f"w{i} "}}]}, done=False), Pause(0.02))]  # fmt: skip
    with StreamServer([Reply.sse([*parts, *openai_sse([])])]) as server:
        proc = _spawn_cli("--json", "--base-url", server.base_url, "hi")
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        err = proc.stderr.read()
        proc.stderr.close()
        assert proc.wait(5) == 1
        assert "Traceback" not in err and "BrokenPipe" not in err


def test_python_dash_m_blazen_version():
    """``python -m blazen --version`` prints the version."""
    out = subprocess.run(
        [sys.executable, "-m", "blazen", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("blazen ")
