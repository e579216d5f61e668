"""asyncio callers that give up at any moment: every call ends, with exactly one terminal.

Tasks are cancelled at random event-loop iterations (the very first included, before the
coroutine has run at all) and at random wall-clock moments, hundreds at once under
``asyncio.wait_for``, and while the application's default executor is busy: blazen owns the
threads it needs, so none of this may wait for someone else's pool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import random
import threading
import time

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Pause, Recorder, Reply, Stall, StreamServer, openai_sse

from ..conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])
SLOW = [part for event in openai_sse(list("abcde")) for part in (event, Pause(0.003))]


def _model(server: StreamServer, **kw: object) -> blazen.ChatModel:
    return blazen.Providers.openai_compat(
        "test", server.base_url, api_key=KEY_FOR_TESTS, max_retries=0, **kw
    )


def _stream_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "blazen-stream"]


async def _cancel_after(task: asyncio.Future[object], iterations: int) -> None:
    for _ in range(iterations):
        await asyncio.sleep(0)
    task.cancel()


def test_a_task_cancelled_before_it_ever_ran_still_gets_one_terminal(server):
    """Cancelled before its first step: on_error(CancelledError), and nothing is sent."""

    async def main() -> Recorder:
        rec = Recorder()
        task = asyncio.ensure_future(Streaming.complete_async(_model(server), REQ, rec.handler))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        return rec

    rec = asyncio.run(main())
    assert rec.kinds == ["error"] and isinstance(rec.error, blazen.CancelledError)
    assert server.requests == []


def test_tasks_cancelled_at_random_loop_iterations_each_end_with_one_terminal(server):
    """Hundreds of calls, each cancelled after 0..15 loop iterations: none hangs or doubles."""
    rnd = random.Random(21)

    async def main() -> list[list[str]]:
        model = _model(server)
        outcomes = []
        for _ in range(240):
            server.add(Reply.sse(SLOW))
            rec = Recorder()
            task = asyncio.ensure_future(Streaming.complete_async(model, REQ, rec.handler))
            await _cancel_after(task, rnd.randrange(16))
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), 5)
            assert rec.terminals == 1, rec.kinds
            outcomes.append(rec.kinds)
        return outcomes

    outcomes = asyncio.run(main())
    assert any(k[-1] == "error" for k in outcomes)
    assert not _stream_threads()


def test_tasks_cancelled_at_random_wall_clock_moments_with_others_running(server):
    """Forty streams at a time, each cancelled at a random moment of its life."""
    rnd = random.Random(5)

    async def one(model: blazen.ChatModel) -> Recorder:
        rec = Recorder()
        task = asyncio.ensure_future(Streaming.complete_async(model, REQ, rec.handler))
        await asyncio.sleep(rnd.uniform(0, 0.03))
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), 5)
        return rec

    async def main() -> list[Recorder]:
        model = _model(server, max_connections=64)
        recs: list[Recorder] = []
        for _ in range(4):
            for _ in range(40):
                server.add(Reply.sse(SLOW))
            recs += await asyncio.gather(*(one(model) for _ in range(40)))
        return recs

    for rec in asyncio.run(main()):
        assert rec.terminals == 1, rec.kinds
    assert not _stream_threads()


def test_two_hundred_streams_under_wait_for_all_end_promptly(server):
    """asyncio.wait_for(…, 0.01) on 200 streams started at once: each ends, once, quickly."""

    async def one(model: blazen.ChatModel) -> Recorder:
        rec = Recorder()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(Streaming.complete_async(model, REQ, rec.handler), 0.01)
        return rec

    async def main() -> list[Recorder]:
        model = _model(server, max_connections=256)
        for _ in range(200):
            server.add(Reply.sse([*openai_sse(["a"])[:1], Stall()]))
        return await asyncio.wait_for(asyncio.gather(*(one(model) for _ in range(200))), 30)

    start = time.monotonic()
    recs = asyncio.run(main())
    assert time.monotonic() - start < 20
    for rec in recs:
        assert rec.terminals == 1 and isinstance(rec.error, blazen.CancelledError), rec.kinds
    assert not _stream_threads()


def test_a_busy_default_executor_neither_delays_nor_holds_a_stream(server):
    """The application's only executor thread is busy for 3 s: a stream does not wait for it."""

    async def main() -> tuple[float, Recorder, Recorder]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(1))
        blocker = loop.run_in_executor(None, time.sleep, 3.0)
        model = _model(server)
        server.add(Reply.sse(openai_sse(["hello"])))
        rec = Recorder()
        start = time.monotonic()
        await Streaming.complete_async(model, REQ, rec.handler, timeout=1.0)
        took = time.monotonic() - start
        # And a cancelled one ends without the executor too.
        server.add(Reply.sse([*openai_sse(["a"])[:1], Stall()]))
        cancelled = Recorder()
        task = asyncio.ensure_future(Streaming.complete_async(model, REQ, cancelled.handler))
        await asyncio.sleep(0.05)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), 1.5)
        await blocker
        return took, rec, cancelled

    took, rec, cancelled = asyncio.run(main())
    assert rec.kinds[-1] == "done" and rec.text == "hello"
    assert took < 1.5, f"the stream waited {took:.2f} s for the application's executor"
    assert cancelled.terminals == 1 and isinstance(cancelled.error, blazen.CancelledError)


def test_an_agent_run_cancelled_at_random_iterations_ends_with_one_terminal(server):
    """Agent.run_async is built on complete_async and keeps the same promise."""
    rnd = random.Random(8)

    async def main() -> None:
        agent = blazen.Agent(_model(server))
        for _ in range(60):
            server.add(Reply.sse(SLOW))
            terminals: list[object] = []
            task = asyncio.ensure_future(
                agent.run_async("go", on_done=terminals.append, on_error=terminals.append)
            )
            await _cancel_after(task, rnd.randrange(12))
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), 5)
            assert len(terminals) == 1, terminals

    asyncio.run(main())
    assert not _stream_threads()
