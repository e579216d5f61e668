"""Sink objects go wherever a handler goes; tee fans out; QueueSink hands off to a thread."""

from __future__ import annotations

import asyncio
import queue

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.sinks import QueueSink, tee
from blazen.testing import Recorder, Reply, StreamServer, openai_sse, openai_tool_sse

from ..conftest import Form

REQ = Llm.completion_request([Llm.user("hi")])


class Rec:
    """A sink that writes what it gets into a shared list, tagged with its name."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def on_chunk(self, chunk):
        self.log.append((self.name, "chunk", chunk.content_delta))

    def on_done(self, reason, usage):
        self.log.append((self.name, "done", reason))

    def on_error(self, err):
        self.log.append((self.name, "error", type(err).__name__))


class ChunksOnly:
    def __init__(self):
        self.text = ""

    def on_chunk(self, chunk):
        self.text += chunk.content_delta or ""


@pytest.fixture
def served():
    with StreamServer() as server:
        yield server, blazen.Providers.openai(api_key="sk-test-SECRET-0123456789", base_url=server.base_url)


@pytest.mark.parametrize("form", ["blocking", "async", "background"])
def test_a_sink_object_gets_every_event_in_every_form(served, form):
    """Streaming.complete, complete_async and start take a sink where a handler goes."""
    server, model = served
    server.add(Reply.sse(openai_sse(["Hel", "lo"])))
    rec = Recorder()
    resp = Form(form)(model, REQ, rec)
    assert resp is not None and resp.content == "Hello"
    assert rec.text == "Hello" and rec.terminals == 1 and rec.done[0] == "stop"


def test_async_sink_methods_are_awaited_on_complete_async(served):
    """A sink with coroutine methods is awaited, in order, on complete_async."""
    server, model = served
    server.add(Reply.sse(openai_sse(["a", "b", "c"])))
    seen = []

    class AsyncSink:
        async def on_chunk(self, chunk):
            await asyncio.sleep(0)
            seen.append(chunk.content_delta)

        async def on_done(self, reason, usage):
            seen.append(reason)

    asyncio.run(Streaming.complete_async(model, REQ, AsyncSink()))
    assert [s for s in seen if s] == ["a", "b", "c", "stop"]


def test_a_coroutine_sink_method_is_refused_by_the_blocking_call(served):
    """complete() cannot await a sink's async method: TypeError names it, nothing is sent."""
    server, model = served

    class AsyncSink:
        async def on_chunk(self, chunk):
            pass

    with pytest.raises(TypeError, match="the sink's on_chunk is a coroutine function"):
        Streaming.complete(model, REQ, AsyncSink())
    assert server.requests == []


def test_keyword_callbacks_win_over_the_sinks_methods_per_kind(served):
    """on_done= replaces the sink's on_done; the sink still gets the chunks."""
    server, model = served
    server.add(Reply.sse(openai_sse(["x", "y"])))
    log, mine = [], []
    Streaming.complete(model, REQ, Rec("s", log), on_done=lambda r, u: mine.append(r))
    assert [e for e in log if e[1] == "chunk" and e[2]] == [("s", "chunk", "x"), ("s", "chunk", "y")]
    assert not any(e[1] == "done" for e in log) and mine == ["stop"]


def test_a_sink_without_on_error_lets_the_failure_raise(served):
    """A kind the sink does not take is not handled: the error raises as with no callback."""
    server, model = served
    server.add(Reply(status=500, body=[b'{"error": {"message": "boom"}}'], transfer="length"))
    sink = ChunksOnly()
    with pytest.raises(blazen.ProviderError):
        Streaming.complete(blazen.Providers.openai(api_key="k", base_url=server.base_url, max_retries=0), REQ, sink)


def test_an_object_that_is_neither_callable_nor_a_sink_is_refused():
    """TypeError says what a handler may be."""
    model = blazen.Providers.openai(api_key="k", base_url="http://127.0.0.1:9")
    with pytest.raises(TypeError, match="callable, or a sink"):
        Streaming.complete(model, REQ, object())
    with pytest.raises(TypeError, match="on_chunk must be a method"):
        Streaming.complete(model, REQ, type("S", (), {"on_chunk": 3})())


def test_tee_hands_each_event_to_every_sink_in_order(served):
    """Each event goes to the sinks in the order given, before the next event."""
    server, model = served
    server.add(Reply.sse(openai_sse(["a", "b"])))
    log = []
    Streaming.complete(model, REQ, tee(Rec("1", log), Rec("2", log)))
    texts = [(n, k, t) for n, k, t in log if t or k != "chunk"]
    assert texts == [
        ("1", "chunk", "a"), ("2", "chunk", "a"),
        ("1", "chunk", "b"), ("2", "chunk", "b"),
        ("1", "done", "stop"), ("2", "done", "stop"),
    ]


def test_a_raising_sink_in_a_tee_aborts_the_stream_with_one_callback_error(served):
    """The first sink raises on the second chunk: the stream aborts, every on_error runs once."""
    server, model = served
    server.add(Reply.sse(openai_sse(["a", "b", "c"])))
    log = []

    class Boom(Rec):
        def on_chunk(self, chunk):
            if chunk.content_delta == "b":
                raise RuntimeError("disk full")
            super().on_chunk(chunk)

    assert Streaming.complete(model, REQ, tee(Boom("1", log), Rec("2", log))) is None
    assert ("2", "chunk", "b") not in log
    assert log[-2:] == [("1", "error", "CallbackError"), ("2", "error", "CallbackError")]


def test_a_tee_of_sinks_without_on_error_still_raises(served):
    """tee() has no on_error when none of its sinks has one."""
    server, model = served
    server.add(Reply(status=400, body=[b'{"error": {"message": "bad"}}'], transfer="length"))
    t = tee(ChunksOnly(), ChunksOnly())
    assert t.on_error is None
    with pytest.raises(blazen.InvalidRequestError):
        Streaming.complete(model, REQ, t)


def test_tee_refuses_what_is_not_a_sink():
    with pytest.raises(TypeError, match="tee"):
        tee(print)


def test_queue_sink_hands_the_block_handlers_arguments_to_another_thread(served):
    """The consumer thread gets ("chunk", (chunk,)) ... ("done", (reason, usage))."""
    server, model = served
    server.add(Reply.sse(openai_sse(["Hel", "lo"], usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3})))
    q: queue.Queue = queue.Queue()
    handle = Streaming.start(model, REQ, QueueSink(q))
    events = []
    while not events or events[-1][0] == "chunk":
        events.append(q.get(timeout=30))
    handle.result(timeout=30)
    assert "".join(a[0].content_delta or "" for k, a in events if k == "chunk") == "Hello"
    assert events[-1][0] == "done" and events[-1][1][0] == "stop"
    assert events[-1][1][1].completion_tokens == 2


def test_queue_sink_refuses_an_asyncio_queue():
    """asyncio.Queue.put is a coroutine QueueSink cannot await: refused, with the fix."""
    with pytest.raises(TypeError, match=r"asyncio\.Queue"):
        QueueSink(asyncio.Queue())
    with pytest.raises(TypeError, match="put"):
        QueueSink([])


def test_the_agent_run_takes_a_sink(served):
    """agent.run(sink=) streams every chunk into it and ends with on_done(reason, total usage)."""
    server, model = served
    server.add(
        Reply.sse(openai_tool_sse([("c1", "add", {"a": 1, "b": 2})], usage={"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7})),
        Reply.sse(openai_sse(["3"], usage={"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6})),
    )

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    rec = Recorder()
    result = blazen.Agent(model, tools=[add]).run("1+2?", sink=rec)
    assert result is not None and result.text == "3"
    assert rec.terminals == 1 and rec.done == ("stop", result.usage)
    assert result.usage.total_tokens == 13 and "3" in rec.text


def test_the_agent_run_async_takes_an_async_sink(served):
    server, model = served
    server.add(Reply.sse(openai_sse(["ok"])))
    got = []

    class S:
        async def on_chunk(self, chunk):
            got.append(chunk.content_delta)

        async def on_done(self, reason, usage):
            got.append(("done", reason))

    asyncio.run(blazen.Agent(model).run_async("hi", sink=S()))
    assert "ok" in got and got[-1] == ("done", "stop")
