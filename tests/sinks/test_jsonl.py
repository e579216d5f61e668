"""JsonlSink writes a durable transcript that read_jsonl turns back into the same values."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import blazen
from blazen import Llm, StreamChunk, Streaming, TokenUsage, ToolCall
from blazen.sinks import JsonlSink, read_jsonl, tee
from blazen.sinks.codec import decode, encode
from blazen.testing import Pause, Recorder, Reply, StreamServer, openai_sse, openai_tool_sse

KEY = "sk-test-SECRET-0123456789"
REQ = Llm.completion_request([Llm.user("hi")])
ROOT = Path(__file__).resolve().parents[2]


def test_every_event_kind_round_trips_through_the_codec_exactly():
    """Chunks (text, reasoning, refusal, tool-call snapshot, is_final), usage and errors."""
    chunk = StreamChunk(
        content_delta="é\n\"x\"", reasoning_delta="think", refusal_delta=None,
        tool_calls=(ToolCall("c1", "get", '{"a": '),), is_final=True,
    )
    usage = TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3, cached_tokens=4, reasoning_tokens=5)
    err = blazen.RateLimitError("slow down", status=429, retry_after=2.5, provider="openai")
    err.partial, err.partial_reasoning = "Hel", "hmm"
    for kind, args in [("chunk", (chunk,)), ("done", ("length", usage)), ("done", ("stop", None))]:
        assert decode(json.loads(json.dumps(encode(kind, args)))) == (kind, args)
    kind, (back,) = decode(json.loads(json.dumps(encode("error", (err,)))))
    assert type(back) is blazen.RateLimitError and kind == "error"
    assert (back.kind, back.message, back.status, back.retry_after, back.partial, back.partial_reasoning, back.provider) == (
        "rate_limit", "slow down", 429, 2.5, "Hel", "hmm", "openai"
    )


def test_an_instances_own_kind_and_an_unknown_class_survive():
    err = blazen.ConnectionError("gone")
    err.kind = "producer_lost"
    _, (back,) = decode(encode("error", (err,)))
    assert isinstance(back, blazen.ConnectionError) and back.kind == "producer_lost"
    obj = encode("error", (err,))
    obj["error"]["type"] = "FutureError"
    _, (back,) = decode(obj)
    assert type(back) is blazen.BlazenError and back.kind == "producer_lost"
    with pytest.raises(blazen.ValidationError):
        decode({"kind": "nope"})
    with pytest.raises(blazen.ValidationError):
        decode({"kind": "done"})


def test_a_streamed_transcript_reads_back_as_the_same_events(tmp_path):
    """What the callbacks saw, read_jsonl yields: equal chunks, usage and terminal."""
    path = tmp_path / "t.jsonl"
    with StreamServer([Reply.sse(openai_tool_sse([("c1", "get_weather", {"city": "Paris"})], text="Let me look.", usage={"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}))]) as server:
        model = blazen.Providers.openai(api_key=KEY, base_url=server.base_url)
        rec = Recorder()
        Streaming.complete(model, REQ, tee(rec, JsonlSink(path)))
    events = list(read_jsonl(path))
    assert [k for k, _ in events] == rec.kinds
    assert [a[0] for k, a in events if k == "chunk"] == rec.chunks
    assert events[-1] == ("done", rec.done)
    assert events[-2][1][0].is_final and events[-2][1][0].tool_calls[0].arguments() == {"city": "Paris"}


def test_an_error_transcript_keeps_the_class_and_never_the_key(tmp_path):
    """A 401 whose body echoes the key: the transcript holds AuthError, not the key."""
    path = tmp_path / "t.jsonl"
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}).encode()
    with StreamServer([Reply(status=401, body=[body], transfer="length")]) as server:
        model = blazen.Providers.openai(api_key=KEY, base_url=server.base_url)
        assert Streaming.complete(model, REQ, JsonlSink(path)) is None
    assert KEY not in path.read_text() and "SECRET" not in path.read_text()
    ((kind, (err,)),) = list(read_jsonl(path))
    assert kind == "error" and type(err) is blazen.AuthError and err.status == 401


def test_a_cut_last_line_is_skipped_and_a_bad_middle_line_is_named(tmp_path):
    path = tmp_path / "t.jsonl"
    good = json.dumps(encode("chunk", (StreamChunk(content_delta="a"),)))
    path.write_text(good + "\n" + good[:10])
    assert len(list(read_jsonl(path))) == 1
    path.write_text(good + "\n{oops\n" + good + "\n")
    with pytest.raises(blazen.ValidationError, match="line 2"):
        list(read_jsonl(path))


PRODUCER = """
import sys
import blazen
from blazen import Llm, Streaming
from blazen.sinks import JsonlSink

model = blazen.Providers.openai(api_key="k", base_url=sys.argv[1])

def tell(chunk):
    if chunk.content_delta == "c":
        print("three", flush=True)

sink = JsonlSink(sys.argv[2])
Streaming.complete(model, Llm.completion_request([Llm.user("hi")]), on_chunk=lambda c: (sink.on_chunk(c), tell(c)))
"""


def test_a_producer_killed_mid_stream_leaves_every_line_it_wrote_readable(tmp_path):
    """SIGKILL after the third chunk: the three lines are there and read back whole."""
    path = tmp_path / "t.jsonl"
    parts = openai_sse(["a", "b", "c", "d"])
    with StreamServer([Reply.sse([*parts[:4], Pause(60), *parts[4:]])]) as server:
        proc = subprocess.Popen(
            [sys.executable, "-c", PRODUCER, server.base_url, str(path)],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "three\n"
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        finally:
            proc.kill()
            proc.wait(30)
            if proc.stdout is not None:
                proc.stdout.close()
    events = list(read_jsonl(path))
    assert "".join(a[0].content_delta or "" for _, a in events) == "abc"
    assert all(k == "chunk" for k, _ in events)
