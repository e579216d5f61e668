"""Flat for a worker's lifetime: what a finished stream used is gone after a collection.

A process that streams for weeks must not keep anything per stream. This soak runs a few
thousand streams through one shared model, from several threads, asyncio and background
handles, with errors and cancels mixed in, then takes a census of live objects after a full
garbage collection: no HTTP response, reader, worker, chunk or callback object of a finished
stream may survive beyond what the connection pool holds.
"""

from __future__ import annotations

import asyncio
import gc
import http.client
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import blazen
from blazen import CancelToken, Llm, Streaming
from blazen.testing import Reply, StreamServer, openai_sse

from ..conftest import KEY_FOR_TESTS, thread_count

REQ = Llm.completion_request([Llm.user("hi")])
WATCHED = (
    "HTTPResponse",  # http.client's and urllib3's
    "Response",  # requests' and blazen's
    "_ChunkedBody",
    "StreamWorker",
    "Delivery",
    "StreamChunk",
    "Abort",
    "StreamHandle",
    "Thread",
)


def _census() -> Counter[str]:
    gc.collect()
    gc.collect()
    return Counter(type(o).__name__ for o in gc.get_objects() if type(o).__name__ in WATCHED)


def _streams(model: blazen.ChatModel, n: int) -> None:
    def blocking(i: int) -> None:
        token = CancelToken()
        if i % 7 == 0:
            token.cancel("soak")
        Streaming.complete(
            model, REQ, on_chunk=lambda c: None, on_error=lambda e: None, cancel=token
        )

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(blocking, range(n)))

    async def many() -> None:
        for _ in range(n // 4):
            await Streaming.complete_async(model, REQ, on_error=lambda e: None)

    asyncio.run(many())
    for _ in range(n // 4):
        handle = Streaming.start(model, REQ, on_error=lambda e: None)
        handle.join(10)


def test_a_few_thousand_streams_leave_nothing_behind():
    replies = Reply.sse(openai_sse(["a", "b", "c"]))
    with StreamServer([], default=replies) as server:
        model = blazen.Providers.openai_compat(
            "test", server.base_url, api_key=KEY_FOR_TESTS, max_retries=0, max_connections=4
        )
        _streams(model, 200)  # warm-up: pools, caches, lazily loaded modules
        before = _census()
        threads_before = thread_count()
        _streams(model, 1600)
        after = _census()
        grown = {k: after[k] - before[k] for k in WATCHED if after[k] - before[k] > 4}
        assert grown == {}, grown
        assert thread_count() <= threads_before
        model.close()
    # Nothing of the model's streams outlives the model's close.
    left = _census()
    assert left["_ChunkedBody"] == 0
    assert sum(1 for o in gc.get_objects() if isinstance(o, http.client.HTTPResponse)) <= 4


def test_agents_workflows_tool_calls_and_cookies_leave_nothing_behind():
    """Per-run state of agents and workflows, tool-call snapshots and cookies all go away.

    Every response sets a new cookie (a shared model must not collect them), every agent
    run calls a tool, and every workflow run streams from a step: after a few hundred of
    each, no run, context, snapshot, cookie or token of a finished run is still alive.
    """
    import tracemalloc

    from blazen.testing import openai_tool_sse

    watched = (
        "AgentRun",
        "WorkflowRun",
        "Context",
        "ToolCalls",
        "StreamState",
        "CancelToken",
        "Cookie",
        "ToolCall",
        "StreamChunk",
    )

    @blazen.tool
    def lookup(q: str) -> str:
        """Looks something up."""
        return q.upper()

    def census() -> Counter[str]:
        gc.collect()
        gc.collect()
        return Counter(type(o).__name__ for o in gc.get_objects() if type(o).__name__ in watched)

    with StreamServer() as server:
        model = blazen.Providers.openai_compat(
            "test", server.base_url, api_key=KEY_FOR_TESTS, max_retries=0, max_connections=4
        )
        agent = blazen.Agent(model, tools=[lookup])
        wf = blazen.workflow("soak")

        @wf.step("ask", accepts=["blazen::StartEvent"], emits=["blazen::StopEvent"])
        def ask(event):
            text = Streaming.complete(model, REQ).content
            return blazen.Event.create(event_type="blazen::StopEvent", data={"result": text})

        counter = [0]

        def rounds(n: int) -> None:
            for _ in range(n):
                counter[0] += 1
                cookie = {"Set-Cookie": f"s{counter[0]}=v; Path=/"}
                server.add(
                    Reply.sse(openai_tool_sse([("c1", "lookup", {"q": "x"})]), headers=cookie)
                )
                server.add(Reply.sse(openai_sse(["done"]), headers=cookie))
                assert agent.run("go").text == "done"
                server.add(Reply.sse(openai_sse(["wf"]), headers=cookie))
                wf.run()

        rounds(30)  # warm-up
        before = census()
        # The test server keeps every request it saw (tests read them): not counted.
        mine = [tracemalloc.Filter(False, "*/blazen/testing/*", all_frames=True)]
        # Six frames a trace: 30, 12, 6 and 1 measured the same growth (44-45 KB), and each
        # frame kept costs time on every allocation (42 s at 30 frames, 18 s at 6).
        tracemalloc.start(6)
        try:
            first = tracemalloc.take_snapshot().filter_traces(mine)
            rounds(200)
            gc.collect()
            last = tracemalloc.take_snapshot().filter_traces(mine)
        finally:
            tracemalloc.stop()
        grown_bytes = sum(stat.size_diff for stat in last.compare_to(first, "filename"))
        after = census()
        model.close()
    grown = {k: after[k] - before[k] for k in watched if after[k] - before[k] > 2}
    assert grown == {}, grown
    # 200 rounds are 600 streams: 200 bytes kept by each would already be 120 KB on top of
    # what remains anyway (about 35 KB: CPython's own bounded caches, method-cache names).
    assert grown_bytes < 150_000, f"{grown_bytes} bytes still allocated after 200 rounds"
