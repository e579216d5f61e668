"""Sinks, ``blazen chat --json`` and batch ``out=`` files write the same JSON for the same stream.

One server reply goes through each writer in turn: a transcript (``JsonlSink``) and the
command's ``--json`` lines must be the same objects, line for line, and a batch record must
hold the same error object, and the same finish reason and usage as the done event.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import blazen
from blazen import Llm, Streaming, batch
from blazen.sinks import JsonlSink
from blazen.testing import Drop, Reply, StreamServer, openai_sse

from .conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])
ANSWERED = openai_sse(["Hel", "lo"], usage={"prompt_tokens": 3, "completion_tokens": 2})
CUT = [*openai_sse(["Hel", "lo"], done=False)[:3], Drop()]


def _chat_json(base_url: str) -> list[dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.run(
        [sys.executable, "-m", "blazen", "chat", "--json",
         "--base-url", base_url, "hi"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.parametrize("body", [ANSWERED, CUT], ids=["answered", "cut"])
def test_a_transcript_chat_json_and_a_batch_record_hold_the_same_objects(tmp_path, body):
    """The same reply gives the same chunk, done and error objects from every writer."""
    with StreamServer(default=Reply.sse(body)) as server:
        model = blazen.Providers.openai_compat("openai-compat", server.base_url, api_key=KEY_FOR_TESTS,
                                               max_retries=0)  # fmt: skip
        transcript = tmp_path / "t.jsonl"
        Streaming.complete(model, REQ, JsonlSink(transcript))
        printed = _chat_json(server.base_url)
        batch.run(model, [("a", REQ)], out=tmp_path / "r.jsonl", progress=False)
    written = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert written == printed
    assert all(obj["v"] == 1 for obj in written)
    (record,) = batch.read(tmp_path / "r.jsonl")
    last = written[-1]
    assert record["kind"] == last["kind"]
    if last["kind"] == "error":
        assert record["error"] == last["error"]
        assert last["error"]["partial"] == "Hello"
    else:
        assert (record["finish_reason"], record["usage"]) == (last["finish_reason"], last["usage"])
        assert record["text"] == "".join(o.get("content", "") for o in written[:-1])
