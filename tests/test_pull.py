"""Pull style: chunks from a for loop (and async for); leaving early cancels the stream."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Pause, Reply, StreamServer, openai_sse

REQ = Llm.completion_request([Llm.user("hi")])
USAGE = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}


@pytest.fixture
def served():
    with StreamServer() as server:
        yield server, blazen.Providers.openai(api_key="sk-test-SECRET-0123456789", base_url=server.base_url, max_retries=0)


def slow_reply():
    parts = openai_sse(["a", "b", "c"])
    return Reply.sse([*parts[:2], Pause(60), *parts[2:]])


def wait_closed(server, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if server.connections and all(c.closed_at is not None for c in server.connections):
            return True
        time.sleep(0.01)
    return False


def test_a_for_loop_gets_every_chunk_then_the_response(served):
    server, model = served
    server.add(Reply.sse(openai_sse(["Hel", "lo"], usage=USAGE)))
    with Streaming.stream(model, REQ) as chunks:
        text = "".join(c.content_delta or "" for c in chunks)
    assert text == "Hello" and chunks.response is not None
    assert chunks.response.content == "Hello" and chunks.response.usage.total_tokens == 3


def test_a_failed_stream_raises_its_error_from_the_loop(served):
    server, model = served
    server.add(Reply(status=401, body=[b'{"error": {"message": "no"}}'], transfer="length"))
    with pytest.raises(blazen.AuthError), Streaming.stream(model, REQ) as chunks:
        for _ in chunks:
            pass
    assert chunks.response is None


def test_break_cancels_the_stream_and_closes_its_socket(served):
    server, model = served
    server.add(slow_reply())
    with Streaming.stream(model, REQ) as chunks:
        for _ in chunks:
            break
    assert wait_closed(server)


def test_garbage_collection_cancels_a_stream_left_mid_way(served):
    server, model = served
    server.add(slow_reply())
    chunks = Streaming.stream(model, REQ).__enter__()
    next(iter(chunks))
    del chunks
    gc.collect()
    assert wait_closed(server)


def test_stream_checks_its_arguments_before_anything_is_sent(served):
    server, model = served
    with pytest.raises(ValueError, match="timeout"):
        Streaming.stream(model, REQ, timeout=-1)
    with pytest.raises(TypeError):
        Streaming.stream_async("model", REQ)
    assert server.requests == []


def test_async_for_gets_every_chunk_then_the_response(served):
    server, model = served
    server.add(Reply.sse(openai_sse(["x", "y"], usage=USAGE)))

    async def main():
        async with Streaming.stream_async(model, REQ) as chunks:
            text = "".join([c.content_delta or "" async for c in chunks])
        return text, chunks.response

    text, resp = asyncio.run(main())
    assert text == "xy" and resp.content == "xy"


def test_async_errors_raise_and_break_cancels(served):
    server, model = served
    server.add(Reply(status=429, headers={"Retry-After": "7"}, body=[b'{"error": {"message": "slow"}}'], transfer="length"), slow_reply())

    async def main():
        with pytest.raises(blazen.RateLimitError) as info:
            async with Streaming.stream_async(model, REQ) as chunks:
                async for _ in chunks:
                    pass
        assert info.value.retry_after == 7
        async with Streaming.stream_async(model, REQ) as chunks:
            async for _ in chunks:
                break

    asyncio.run(main())
    assert wait_closed(server)


def _blazen_threads(before: set[int]) -> list[str]:
    """The names of blazen's own threads started since ``before`` (the test server's aside)."""
    import threading

    return sorted(
        t.name
        for t in threading.enumerate()
        if t.ident not in before and t.name.startswith("blazen-") and not t.name.startswith("blazen-test")
    )


def paced_reply():
    """A stream whose worker is still reading while the loop body runs."""
    return Reply.sse([part for event in openai_sse(list("abc")) for part in (event, Pause(0.05))])


def test_a_pull_stream_runs_on_one_worker_thread_and_nothing_else(served):
    """The loop carries out the delivery itself: one worker thread per pull stream, not two."""
    import threading

    server, model = served
    server.add(paced_reply())
    before = {t.ident for t in threading.enumerate()}
    seen = []
    with Streaming.stream(model, REQ) as chunks:
        for _ in chunks:
            seen.append(_blazen_threads(before))
    assert seen and all(names == ["blazen-stream"] for names in seen), seen


def test_an_async_pull_stream_runs_on_one_worker_thread_and_no_task(served):
    """``async for`` carries out the delivery in the caller's task: no second task, one worker."""
    import threading

    server, model = served
    server.add(paced_reply())
    seen = []

    async def main():
        before = {t.ident for t in threading.enumerate()}
        tasks = len(asyncio.all_tasks())
        async with Streaming.stream_async(model, REQ) as chunks:
            async for _ in chunks:
                names = [
                    n for n in _blazen_threads(before) if n not in ("blazen-starter", "blazen-reader")
                ]
                seen.append((names, len(asyncio.all_tasks()) - tasks))

    asyncio.run(main())
    assert seen and all(s == (["blazen-stream"], 0) for s in seen), seen
