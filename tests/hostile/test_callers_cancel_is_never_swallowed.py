"""A cancel aimed at the caller's own task always reaches it, through a pull stream too.

Leaving ``async with Streaming.stream_async(...)`` ends the stream; only that ending (the
stream's own cancellation) may be absorbed there. A ``task.cancel()`` or an expiring
``asyncio.timeout`` aimed at the caller must still raise in the caller, wherever it lands:
in the loop, or while the block is being left.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Pause, Reply, StreamServer, openai_sse

from ..conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])


def _model(server: StreamServer) -> blazen.ChatModel:
    return blazen.Providers.openai_compat(
        "test", server.base_url, api_key=KEY_FOR_TESTS, max_retries=0
    )


def _slow() -> Reply:
    parts = openai_sse(["a", "b", "c"])
    return Reply.sse([*parts[:2], Pause(60), *parts[2:]])


def _settled(server: StreamServer, timeout: float = 10.0) -> bool:
    """The stream's connection closed and its worker thread gone."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        closed = server.connections and all(c.closed_at is not None for c in server.connections)
        workers = [t for t in threading.enumerate() if t.name == "blazen-stream"]
        if closed and not workers:
            return True
        time.sleep(0.01)
    return False


def test_a_cancel_of_the_callers_task_while_leaving_the_block_propagates(server):
    """The task cancelled as it leaves the block (here: just before): CancelledError, not silence."""
    server.add(_slow())
    after_the_block: list[str] = []

    async def caller() -> None:
        async with Streaming.stream_async(_model(server), REQ) as chunks:
            async for _ in chunks:
                asyncio.current_task().cancel()  # lands at the block's exit
                break
        after_the_block.append("ran on as if never cancelled")

    async def main() -> None:
        task = asyncio.ensure_future(caller())
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()

    asyncio.run(main())
    assert after_the_block == []
    assert _settled(server)


def test_a_cancel_of_the_callers_task_while_it_waits_for_a_chunk_propagates(server):
    """The task cancelled while ``async for`` waits on a silent server: CancelledError, stream ended."""
    server.add(_slow())

    async def caller() -> None:
        async with Streaming.stream_async(_model(server), REQ) as chunks:
            async for _ in chunks:
                pass

    async def main() -> None:
        task = asyncio.ensure_future(caller())
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert _settled(server)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is Python 3.11+")
def test_an_asyncio_timeout_expiring_while_leaving_the_block_raises_timeout_error(server):
    """``asyncio.timeout`` expiring as the block is left: its TimeoutError, not a quiet exit."""
    server.add(_slow())
    after_the_block: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(30) as scope:  # novermin (3.11+: skipped before)
            async with Streaming.stream_async(_model(server), REQ) as chunks:
                async for _ in chunks:
                    scope.reschedule(loop.time())  # expires at the next wait: the exit
                    break
            after_the_block.append("ran on past an expired deadline")

    with pytest.raises(TimeoutError):
        asyncio.run(main())
    assert after_the_block == []
    assert _settled(server)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is Python 3.11+")
def test_an_asyncio_timeout_expiring_in_the_loop_raises_timeout_error(server):
    """``asyncio.timeout`` expiring while ``async for`` waits: TimeoutError, the stream ended."""
    server.add(_slow())

    async def main() -> None:
        async with asyncio.timeout(0.3):  # novermin (3.11+: skipped before)
            async with Streaming.stream_async(_model(server), REQ) as chunks:
                async for _ in chunks:
                    pass

    with pytest.raises(TimeoutError):
        asyncio.run(main())
    assert _settled(server)


def test_the_streams_own_cancellation_is_absorbed_when_the_block_is_left(server):
    """``break`` then leaving the block ends the stream quietly: that cancel is the stream's own."""
    server.add(_slow())

    async def main() -> str:
        async with Streaming.stream_async(_model(server), REQ) as chunks:
            async for _ in chunks:
                break
        return "went on"

    assert asyncio.run(main()) == "went on"
    assert _settled(server)


def test_a_cancel_token_ending_the_stream_is_the_streams_error_not_the_tasks(server):
    """A CancelToken ends the stream: blazen.CancelledError from the loop, the task not cancelled."""
    server.add(_slow())
    token = blazen.CancelToken()

    async def main() -> str:
        with pytest.raises(blazen.CancelledError):
            async with Streaming.stream_async(_model(server), REQ, cancel=token) as chunks:
                async for _ in chunks:
                    token.cancel()
        await asyncio.sleep(0)  # the task is not cancelled: it goes on awaiting
        return "went on"

    assert asyncio.run(main()) == "went on"
    assert _settled(server)
