"""The ``blazen`` command against a scripted server: events, exit statuses, provider choice."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys

import attrs
import pytest

from blazen import Providers, cli
from blazen.providers import PROVIDERS
from blazen.testing import Drop, Pause, Reply, Stall, StreamServer, openai_sse, sse


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
    assert [e["kind"] for e in evs] == ["chunk"] * 4 + ["done"]
    assert "".join(e.get("content") or "" for e in evs[:-1]) == "Hello!"
    assert evs[-2]["is_final"] is True
    assert (evs[-1]["v"], evs[-1]["kind"], evs[-1]["finish_reason"]) == (1, "done", "stop")
    assert {k: evs[-1]["usage"][k] for k in usage} == usage
    assert all("refusal" not in e for e in evs[:-1])


def test_plain_output_is_the_text_and_a_newline(server, capsys):
    """Without --json, stdout holds just the streamed text, ended by a newline."""
    server.add(Reply.sse(openai_sse(["Hi", " there"])))
    assert chat("--base-url", server.base_url, "hi") == 0
    captured = capsys.readouterr()
    assert captured.out == "Hi there\n"
    assert captured.err == ""


def _refusal_reply() -> Reply:
    return Reply.sse(
        sse(
            {"choices": [{"index": 0, "delta": {"content": "Sure"}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {"refusal": "I can't"}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {"refusal": " help."}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        )
    )


def test_json_chunk_and_done_events_carry_the_refusal(server, capsys):
    """--json: refusal deltas are in the chunk events; done has finish_reason content_filter."""
    server.add(_refusal_reply())
    assert chat("--json", "--base-url", server.base_url, "hi") == 0
    evs = events(capsys.readouterr().out)
    assert [e.get("refusal") for e in evs if e["kind"] == "chunk"][:3] == [None, "I can't", " help."]
    assert evs[-1]["kind"] == "done"
    assert evs[-1]["finish_reason"] == "content_filter"


def test_plain_output_shows_a_refusal_and_says_the_model_declined(server, capsys):
    """Text mode prints the refusal on its own line and names it on stderr."""
    server.add(_refusal_reply())
    assert chat("--base-url", server.base_url, "hi") == 0
    captured = capsys.readouterr()
    assert captured.out == "Sure\nI can't help.\n"
    assert "declined" in captured.err and "content_filter" in captured.err


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
    assert ev["kind"] == "error" and ev["error"]["status"] == 400
    assert "model not found" in ev["error"]["message"]
    assert "model not found" in captured.err


def test_stream_cut_before_its_end_signal_exits_1(server, capsys):
    """No [DONE]: the text so far is printed, then an error, never a done."""
    server.add(Reply.sse(openai_sse(["partial"], done=False), transfer="close"))
    assert chat("--json", "--base-url", server.base_url, "hi") == 1
    evs = events(capsys.readouterr().out)
    assert [e["kind"] for e in evs] == ["chunk", "error"]
    assert evs[-1]["error"]["kind"] == "connection"


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
    assert ev["error"]["kind"] == "auth" and "OPENAI_API_KEY" in ev["error"]["message"]


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
    assert ev["kind"] == "error"
    assert "pip install 'blazen-stream[local]'" in ev["error"]["message"]
    assert "using the local model" in captured.err
    assert "pip install 'blazen-stream[local]'" in captured.err


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
        assert ev["kind"] == "error" and ev["error"]["kind"] == "cancelled"
        assert "interrupted" in err and "Traceback" not in err
        assert server.wait_closed(5)
        assert server.connections[0].closed_by == "client"


def _slow_answer(chunks: int, pause: float) -> Reply:
    """A long answer, one word per ``pause`` seconds; the server closes after the last byte.

    With ``transfer="close"`` the record says who ended it: ``"server"`` if it sent it all,
    ``"client"`` if the CLI hung up first.
    """
    parts = [b for i in range(chunks) for b in (*sse({"choices": [{"index": 0, "delta": {
        "content": f"w{i} "}}]}, done=False), Pause(pause))]  # fmt: skip
    return Reply.sse([*parts, *openai_sse([])], transfer="close")


@pytest.mark.skipif(shutil.which("head") is None, reason="needs head(1)")
@pytest.mark.parametrize("mode", ["text", "json"])
def test_head_closing_the_pipe_cancels_the_stream_and_exits_141_quietly(mode):
    """``blazen chat ... | head -c 20``: the stream is cancelled, exit 141, nothing on stderr."""
    with StreamServer([_slow_answer(400, 0.05)]) as server:
        read_end, write_end = os.pipe()
        flags = ["--json"] if mode == "json" else []
        try:
            cli_proc = subprocess.Popen(
                [sys.executable, "-m", "blazen", "chat", *flags, "--base-url", server.base_url,
                 "hi"], stdout=write_end, stderr=subprocess.PIPE,
            )  # fmt: skip
            head = subprocess.Popen(["head", "-c", "20"], stdin=read_end, stdout=subprocess.PIPE)
        finally:
            os.close(read_end)
            os.close(write_end)
        head_out, _ = head.communicate(timeout=30)
        _, err = cli_proc.communicate(timeout=30)
        assert len(head_out) == 20
        assert cli_proc.returncode == cli.EXIT_BROKEN_PIPE == 141
        assert err == b""
        # The answer takes 20 s; the server saw the CLI hang up long before its last byte.
        assert server.wait_closed(10)
        (conn,) = server.connections
        assert conn.closed_by == "client"
        assert conn.closed_at is not None and conn.closed_at - conn.opened_at < 15


@pytest.mark.parametrize("mode", ["text", "json"])
@pytest.mark.parametrize("when", ["done", "error"])
def test_reader_gone_before_the_last_write_exits_141_without_traceback(mode, when):
    """The reader leaves after the text, before done or error is written: exit 141, no trace."""
    first = sse({"choices": [{"index": 0, "delta": {"content": "Hello"}}]}, done=False)
    end = [*openai_sse([])] if when == "done" else [Drop()]
    with StreamServer([Reply.sse([*first, Pause(2), *end])]) as server:
        flags = ["--json"] if mode == "json" else []
        proc = subprocess.Popen(
            [sys.executable, "-m", "blazen", "chat", *flags, "--base-url", server.base_url, "hi"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        assert b"Hello" in (proc.stdout.readline() if mode == "json" else proc.stdout.read(5))
        proc.stdout.close()
        err = proc.stderr.read().decode()
        proc.stderr.close()
        assert "Traceback" not in err and "Exception ignored" not in err, err
        assert proc.wait(30) == cli.EXIT_BROKEN_PIPE


TRICKY = ["Hi ", "\U0001f600 ", "\u4e16\u754c", " \u00fc!"]


@pytest.mark.parametrize("mode", ["text", "json"])
@pytest.mark.parametrize(
    ("encoding", "shown"),
    [
        ("ascii", "Hi ? ?? ?!"),
        ("latin-1", "Hi ? ?? \u00fc!"),
        ("utf-8", "Hi \U0001f600 \u4e16\u754c \u00fc!"),
    ],
)
def test_text_the_output_encoding_cannot_show_is_replaced_or_escaped(mode, encoding, shown):
    """Emoji and CJK on an ASCII or Latin-1 stdout: '?' in text mode, JSON escapes with --json."""
    with StreamServer([Reply.sse(openai_sse(TRICKY))]) as server:
        flags = ["--json"] if mode == "json" else []
        proc = subprocess.run(
            [sys.executable, "-m", "blazen", "chat", *flags, "--base-url", server.base_url, "hi"],
            capture_output=True, timeout=60, env={**os.environ, "PYTHONIOENCODING": encoding},
        )  # fmt: skip
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    out = proc.stdout.decode(encoding)
    if mode == "text":
        assert out == shown + "\n"
    else:
        evs = events(out)
        assert "".join(e.get("content") or "" for e in evs[:-1]) == "".join(TRICKY)
        assert evs[-1]["kind"] == "done"


@pytest.mark.parametrize("mode", ["text", "json"])
def test_a_lone_surrogate_from_the_server_does_not_abort_a_utf8_stdout(mode):
    """An unpaired \\ud83d escape in the stream: '?' in text mode, an escape in --json, exit 0."""
    body = sse({"choices": [{"index": 0, "delta": {"content": "a\ud83db"}}]}, done=False)
    with StreamServer([Reply.sse([*body, *openai_sse([])])]) as server:
        flags = ["--json"] if mode == "json" else []
        proc = subprocess.run(
            [sys.executable, "-m", "blazen", "chat", *flags, "--base-url", server.base_url, "hi"],
            capture_output=True, timeout=60, env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    if mode == "text":
        assert proc.stdout == b"a?b\n"
    else:
        evs = events(proc.stdout.decode("utf-8"))
        assert "".join(e.get("content") or "" for e in evs[:-1]) == "a\ud83db"


@pytest.mark.parametrize("prompt", ["", "   ", " \n\t "])
def test_an_empty_prompt_argument_is_a_usage_error_and_sends_nothing(prompt, server, capsys):
    """``blazen chat ""`` (or only whitespace): exit 2, a message on stderr, no request."""
    assert chat("--base-url", server.base_url, prompt) == 2
    assert "prompt is empty" in capsys.readouterr().err
    assert server.requests == [] and server.connections == []


@pytest.mark.parametrize("piped", ["", "\n", "  \n \n"])
def test_an_empty_prompt_on_stdin_is_a_usage_error_and_sends_nothing(
    piped, server, capsys, monkeypatch
):
    """``blazen chat -`` with nothing (or only whitespace) piped in: exit 2, no request."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(piped))
    assert chat("--base-url", server.base_url, "-") == 2
    assert "prompt is empty" in capsys.readouterr().err
    assert server.requests == [] and server.connections == []


def test_blazen_chat_dash_from_dev_null_exits_2_and_sends_nothing(server):
    """``blazen chat - < /dev/null`` in a real process: exit 2, a clear message, no request."""
    proc = subprocess.run(
        [sys.executable, "-m", "blazen", "chat", "--base-url", server.base_url, "-"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "prompt is empty" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert server.requests == [] and server.connections == []


def test_python_dash_m_blazen_version():
    """``python -m blazen --version`` prints the version."""
    out = subprocess.run(
        [sys.executable, "-m", "blazen", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("blazen ")
