"""``blazen batch``: a JSONL file of prompts run into a JSONL file of results, resumable."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from blazen import batch, cli
from blazen.testing import Reply, StreamServer, openai_sse

OK = Reply.sse(openai_sse(["Hi"]))


def write_prompts(path: Path, *records: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def ok_server(server: StreamServer) -> StreamServer:
    server._default = OK
    return server


def test_prompts_and_messages_lines_run_into_the_out_file(ok_server, tmp_path, capsys):
    prompts = write_prompts(
        tmp_path / "p.jsonl",
        {"id": "a", "prompt": "Say hi"},
        {"id": 7, "messages": [{"role": "user", "content": "Hello"}]},
        {"prompt": "no id: the position"},
    )
    out = tmp_path / "r.jsonl"
    argv = ["batch", str(prompts), "--out", str(out), "--base-url", ok_server.base_url]
    assert cli.main([*argv, "--system", "Be brief.", "--concurrency", "2"]) == 0
    assert sorted(r["id"] for r in batch.read(out)) == ["2", "7", "a"]
    sent = sorted(r.json()["messages"][-1]["content"] for r in ok_server.requests)
    assert sent == ["Hello", "Say hi", "no id: the position"]
    assert all(r.json()["messages"][0]["content"] == "Be brief." for r in ok_server.requests)
    assert "3 ok, 0 failed, 0 skipped" in capsys.readouterr().err
    # The same command again resumes: everything is there already, so nothing starts.
    sent_before = len(ok_server.requests)
    assert cli.main(argv) == 0
    assert "nothing to run" in capsys.readouterr().err
    assert len(ok_server.requests) == sent_before


def test_failed_items_give_exit_status_1(ok_server, tmp_path):
    ok_server.add(Reply.json({"error": {"message": "no"}}, status=400))
    prompts = write_prompts(tmp_path / "p.jsonl", {"id": "a", "prompt": "x"})
    out = tmp_path / "r.jsonl"
    assert (
        cli.main(["batch", str(prompts), "--out", str(out), "--base-url", ok_server.base_url]) == 1
    )
    assert next(batch.read(out))["error"]["kind"] == "invalid_request"


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("not json", "line 2 of .* is not a JSON object"),
        ('{"id": "b"}', 'line 2 of .*: give "prompt"'),
        ('{"id": "b", "messages": [{"role": "robot", "content": "x"}]}', "role must be one of"),
        ('{"id": [1], "prompt": "x"}', "id must be a string or an integer"),
    ],
)
def test_a_bad_input_line_is_named_with_exit_status_2(ok_server, tmp_path, capsys, line, says):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "prompt": "x"}\n' + line + "\n")
    argv = ["batch", str(prompts), "--out", str(tmp_path / "r"), "--base-url", ok_server.base_url]
    assert cli.main(argv) == 2
    assert re.search(says, capsys.readouterr().err)
