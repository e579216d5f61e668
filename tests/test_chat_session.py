"""`blazen chat` with no prompt on a terminal: an interactive session in a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import sys

import pytest

from blazen import Llm
from blazen._types import TokenUsage
from blazen.cli.session import Conversation, Stats
from blazen.testing import Reply, Stall, StreamServer, openai_sse

pexpect = pytest.importorskip("pexpect")
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")

PROMPT = ">>> "
USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def spawn(server: StreamServer, *argv: str):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(sys.path), TERM="dumb")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "blazen", "chat", "--base-url", server.base_url, *argv],
        env=env,
        encoding="utf-8",
        timeout=30,
    )
    child.expect_exact(PROMPT)
    return child


def messages(server: StreamServer, i: int) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in server.requests[i].json()["messages"]]


def test_two_turns_the_second_request_carries_the_first_exchange(tmp_path):
    """Turn two sends turn one's question and answer; /save writes them; Ctrl-D exits 0."""
    with StreamServer() as server:
        server.add(
            Reply.sse(openai_sse(["Hi ", "there"], usage=USAGE)),
            Reply.sse(openai_sse(["Fine."], usage=USAGE)),
        )
        child = spawn(server, "--system", "be brief", "--stats")
        child.sendline("hello")
        child.expect_exact("Hi there")
        child.expect("3 out; first token [0-9.]+ s")
        child.expect_exact(PROMPT)
        child.sendline("how are you?")
        child.expect_exact("Fine.")
        child.expect_exact(PROMPT)
        saved = tmp_path / "chat.jsonl"
        child.sendline(f"/save {saved}")
        child.expect_exact("saved 4 messages")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
        assert messages(server, 1) == [
            ("system", "be brief"),
            ("user", "hello"),
            ("assistant", "Hi there"),
            ("user", "how are you?"),
        ]
    lines = [json.loads(line) for line in saved.read_text().splitlines()]
    assert lines[0] == {"role": "system", "content": "be brief"}
    assert lines[-1] == {"role": "assistant", "content": "Fine."}


def test_ctrl_c_cancels_the_answer_closes_its_connection_and_keeps_the_session():
    """Ctrl-C mid-answer: the connection closed by the client, then another turn works."""
    with StreamServer() as server:
        server.add(
            Reply.sse([openai_sse(["Hel"], done=False)[1], Stall()]),
            Reply.sse(openai_sse(["Second answer"])),
        )
        child = spawn(server)
        child.sendline("first")
        child.expect_exact("Hel")
        child.sendintr()
        child.expect_exact("interrupted")
        child.expect_exact(PROMPT)
        assert server.wait_closed(10)
        assert server.connections[0].closed_by == "client"
        child.sendline("second")
        child.expect_exact("Second answer")
        child.expect_exact(PROMPT)
        # The cancelled exchange is not part of the conversation.
        assert messages(server, 1) == [("user", "second")]
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0


def test_commands_reset_system_model_and_continue(tmp_path):
    """--continue loads a saved file; /system, /model and /reset shape the next request."""
    saved = tmp_path / "old.jsonl"
    saved.write_text(
        '{"role": "system", "content": "old system"}\n'
        '{"role": "user", "content": "q1"}\n'
        '{"role": "assistant", "content": "a1"}\n'
    )
    with StreamServer() as server:
        server.add(
            Reply.sse(openai_sse(["a2"])),
            Reply.sse(openai_sse(["a3"])),
        )
        child = spawn(server, "--continue", str(saved))
        child.sendline("/system new system")
        child.expect_exact(PROMPT)
        child.sendline("/model other-model")
        child.expect_exact(PROMPT)
        child.sendline("q2")
        child.expect_exact("a2")
        child.expect_exact(PROMPT)
        child.sendline("/reset")
        child.expect_exact(PROMPT)
        child.sendline("q3")
        child.expect_exact("a3")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
    first = server.requests[0].json()
    assert first["model"] == "other-model"
    assert messages(server, 0) == [
        ("system", "new system"),
        ("user", "q1"),
        ("assistant", "a1"),
        ("user", "q2"),
    ]
    assert messages(server, 1) == [("system", "new system"), ("user", "q3")]


def test_reasoning_is_dimmed_and_apart_from_the_answer():
    """Reasoning deltas inside SGR dim, then a blank line, then the answer."""
    reasoning = {"choices": [{"index": 0, "delta": {"reasoning_content": "think"}}]}
    answer = {"choices": [{"index": 0, "delta": {"content": "answer"}}]}
    from blazen.testing import sse

    with StreamServer() as server:
        server.add(Reply.sse([*sse(reasoning, done=False), *sse(answer)]))
        child = spawn(server)
        child.sendline("why?")
        child.expect_exact("\x1b[2mthink\x1b[0m")
        child.expect_exact("answer")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)


def test_continue_refuses_a_file_that_is_not_messages(tmp_path, capsys):
    """A bad line: exit 2 naming the file and line; nothing sent."""
    from blazen import cli

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "ok"}\nnot json\n')
    assert cli.main(["chat", "--base-url", "http://127.0.0.1:9", "--continue", str(bad), "hi"]) == 2
    assert f"{bad}:2" in capsys.readouterr().err


def test_continue_with_a_prompt_sends_one_turn_with_the_history(tmp_path, capsys):
    """Not interactive: --continue FILE "prompt" answers once, with the saved messages first."""
    from blazen import cli

    saved = tmp_path / "c.jsonl"
    conv = Conversation("sys")
    conv.messages += [Llm.user("q1"), Llm.assistant("a1")]
    conv.save(str(saved))
    with StreamServer() as server:
        server.add(Reply.sse(openai_sse(["a2"])))
        assert cli.main(["chat", "--base-url", server.base_url, "--continue", str(saved), "q2"]) == 0
        assert messages(server, 0) == [
            ("system", "sys"),
            ("user", "q1"),
            ("assistant", "a1"),
            ("user", "q2"),
        ]
    assert capsys.readouterr().out == "a2\n"


def test_stats_line_reports_tokens_first_token_and_rate():
    """The --stats line: tokens in and out, time to first token, tokens per second."""
    from blazen._types import StreamChunk

    stats = Stats()
    stats.chunk(StreamChunk(content_delta="x"))
    line = stats.line(TokenUsage(prompt_tokens=4, completion_tokens=2, total_tokens=6))
    assert line.startswith("4 tokens in, 2 out; first token ")
    assert line.endswith(" s in all")
