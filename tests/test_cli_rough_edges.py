"""What a newcomer met on the command line: cut-off answers, unknown usage, keys, batch input."""

from __future__ import annotations

import io
import json

import pytest

from blazen import Providers, cli, local
from blazen.batch import BatchReport
from blazen.cli.session import ChatSession, Conversation, Stats
from blazen.providers import PROVIDERS
from blazen.testing import Reply, StreamServer, openai_sse


def test_an_answer_cut_off_at_max_tokens_is_said_on_stderr_in_text_mode(server, capsys):
    """finish_reason "length" has no mark in the text: stderr says it was cut off."""
    server.add(Reply.sse(openai_sse(["Once upon"], finish_reason="length")))
    assert cli.main(["chat", "--base-url", server.base_url, "Tell a story"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "Once upon\n"
    assert "cut off" in captured.err and "--max-tokens" in captured.err


def test_a_whole_answer_says_nothing_about_the_token_limit(server, capsys):
    """A "stop" ending adds no note."""
    server.add(Reply.sse(openai_sse(["Done."])))
    assert cli.main(["chat", "--base-url", server.base_url, "Hi"]) == 0
    assert "cut off" not in capsys.readouterr().err


def test_stats_say_unknown_when_the_server_reported_no_usage():
    """No usage from the server (llama.cpp's) is "unknown", never zero tokens."""
    assert "tokens unknown" in Stats().line(None)


def test_the_batch_report_says_unknown_tokens_when_no_answer_reported_any():
    """Every ok answer without usage: "tokens unknown", not "0 in, 0 out"."""
    text = str(BatchReport(ok=3, no_usage=3))
    assert "tokens unknown" in text and "0 in" not in text
    assert "(1 answers reported none)" in str(BatchReport(ok=3, no_usage=1, input_tokens=4))


def test_a_missing_key_names_the_variable_and_the_option(monkeypatch, capsys):
    """The CLI user is told the variable and --api-key, not Python's api_key=."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert cli.main(["chat", "--provider", "anthropic", "Hi"]) == 1
    err = capsys.readouterr().err
    assert "ANTHROPIC_API_KEY" in err and "--api-key" in err and "api_key=" not in err


def test_api_key_on_the_command_line_reaches_the_provider(server, capsys):
    """--api-key is sent as the bearer token."""
    server.add(Reply.sse(openai_sse(["ok"])))
    argv = ["chat", "--provider", "openai_compat", "--base-url", server.base_url]
    assert cli.main([*argv, "--api-key", "sk-from-argv", "Hi"]) == 0
    assert server.requests[-1].header("Authorization") == "Bearer sk-from-argv"


@pytest.mark.parametrize("command", ["chat", "batch"])
def test_provider_help_lists_every_name(command, capsys):
    """--provider's help names local and every provider of the registry."""
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "local (this machine)" in out
    for name in PROVIDERS:
        assert name in out, name


def test_batch_help_shows_no_rest_markup(capsys):
    """The description comes from a reST docstring; --help shows plain text."""
    with pytest.raises(SystemExit):
        cli.main(["batch", "--help"])
    assert "``" not in capsys.readouterr().out


@pytest.mark.parametrize("command", ["chat", "batch", "embed"])
@pytest.mark.parametrize("columns", [40, 57, 60, 63, 72, 80, 100])
def test_help_never_breaks_a_hyphenated_word_at_any_width(command, columns, monkeypatch, capsys):
    """At any terminal width the install hint and every --option stay whole, so they paste."""
    monkeypatch.setenv("COLUMNS", str(columns))
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    out = capsys.readouterr().out
    ends = [line.rstrip() for line in out.splitlines() if line.rstrip().endswith("-")]
    assert ends == [], ends
    if command == "chat":
        assert "pip install 'blazen-stream[local]'" in out


def test_top_level_help_sends_to_each_commands_own_exit_statuses(capsys):
    """blazen --help does not print chat's exit statuses as every command's: batch's 1 differs."""
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "141" not in out and "COMMAND --help" in out


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["chat", ""], "usage: blazen chat "),
        (["chat", "--provider", "nope", "Hi"], "usage: blazen chat "),
        (["batch", "in.jsonl", "--out", "o.jsonl", "--provider", "nope"], "usage: blazen batch "),
    ],
)
def test_a_usage_error_shows_the_commands_own_usage_line(argv, usage, tmp_path, monkeypatch, capsys):
    """An empty prompt or an unknown provider prints that command's usage, then the error."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.jsonl").write_text('{"id": "a", "prompt": "x"}\n')
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(usage), err


class NeverStarted:
    """A LocalServer that fails the test if anything starts it."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("the local model was started")


def test_batch_checks_its_input_before_starting_the_model(monkeypatch, tmp_path, capsys):
    """A bad line is a usage error (exit 2) before the local model starts."""
    monkeypatch.setattr(local, "LocalServer", NeverStarted)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "prompt": "x"}\nnot json\n')
    argv = ["batch", str(prompts), "--out", str(tmp_path / "r.jsonl"), "--provider", "local"]
    assert cli.main(argv) == 2
    assert "line 2" in capsys.readouterr().err


def test_batch_with_a_missing_input_file_fails_before_starting_the_model(monkeypatch, tmp_path):
    """No such input: exit 1 with the reason, and no model started."""
    monkeypatch.setattr(local, "LocalServer", NeverStarted)
    argv = ["batch", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "r.jsonl"),
            "--provider", "local"]
    assert cli.main(argv) == 1


def test_batch_with_every_id_done_starts_nothing(monkeypatch, tmp_path, capsys):
    """Every input id already in --out: nothing to run, exit 0, no model started."""
    monkeypatch.setattr(local, "LocalServer", NeverStarted)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "prompt": "x"}\n')
    out = tmp_path / "r.jsonl"
    out.write_text(json.dumps({"v": 1, "id": "a", "kind": "done", "text": "y",
                               "finish_reason": "stop", "usage": None, "tool_calls": []}) + "\n")
    assert cli.main(["batch", str(prompts), "--out", str(out), "--provider", "local"]) == 0
    assert "nothing to run" in capsys.readouterr().err


def session(server: StreamServer, notes: list[str], lines: list[str], **kw: object) -> ChatSession:
    model = Providers.openai_compat("test", server.base_url)
    feed = iter(lines)

    def read(prompt: str) -> str:
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    return ChatSession(model, Conversation(), out=io.StringIO(), note=notes.append, limits={},
                       read=read, **kw)  # type: ignore[arg-type]


def test_system_on_a_model_that_ignores_it_says_so():
    """/system on the bundled Gemma (no system role) says the server ignores it."""
    notes: list[str] = []
    with StreamServer() as server:
        chat = session(server, notes, ["/system Be brief."], system_ignored=True)
        assert chat.run() == 0
    assert any("ignores it" in n for n in notes)
    assert chat.conv.system == "Be brief."


def test_a_failed_turn_says_it_is_left_out_of_the_conversation():
    """A turn that ended in an error (as one cut by Ctrl-C) is not kept, and the user is told."""
    notes: list[str] = []
    with StreamServer([Reply.json({"error": {"message": "no"}}, status=400)]) as server:
        chat = session(server, notes, ["Hi"])
        assert chat.run() == 0
    assert any("not kept" in n and "/save" in n for n in notes)
    assert chat.conv.messages == []
