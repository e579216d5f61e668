"""Async step handlers: awaited on run_async's loop, on a loop of their own thread under run.

The seeds' steps are ``async``/``suspend`` (Swift's ``StepHandler.invoke``, Kotlin's
``suspend fun invoke``): the streaming_greet step here awaits ``Streaming.complete_async``,
and the workflow's ``timeout_ms``, a cancel and the run's end reach it as they reach a plain
step's stream.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import blazen
from blazen import CancelToken, Event, StepOutput, Streaming, WorkflowError
from blazen.testing import Pause, Reply, StreamServer, openai_sse

START, STOP = "blazen::StartEvent", "blazen::StopEvent"


def endless(server: StreamServer, pause: float = 0.02, parts: int = 1000) -> None:
    """Queue a reply that keeps sending a delta every ``pause`` seconds for a long time."""
    events = openai_sse(["tick"] * parts)
    server.add(Reply.sse([part for event in events for part in (event, Pause(pause))]))


def greet_workflow(model, req, seen: dict) -> blazen.Workflow:
    """The seed's streaming_greet with an async step; ``seen`` records where it ran."""
    wf = blazen.workflow("streaming_greet")

    @wf.step("greet", accepts=["StartEvent"], emits=["StopEvent"])
    async def greet(_event):
        seen["thread"] = threading.get_ident()
        seen["loop"] = asyncio.get_running_loop()
        buffer: list[str] = []
        try:
            await Streaming.complete_async(
                model, req, on_chunk=lambda c: buffer.append(c.content_delta or "")
            )
        except BaseException as exc:
            seen["raised"] = exc
            raise
        return StepOutput.single(
            Event.create(event_type=STOP, data={"result": {"content": "".join(buffer)}})
        )

    return wf


def test_streaming_greet_with_an_async_step_under_run(server, model, req):
    """run(): the async step runs on a loop of its own thread, not the caller's."""
    server.add(Reply.sse(openai_sse(["Hello", ", ", "world"])))
    seen: dict = {}
    result = greet_workflow(model, req, seen).run()
    assert result.result == {"content": "Hello, world"}
    assert seen["thread"] != threading.get_ident()
    deadline = time.monotonic() + 5  # its loop ends with the call, just after the outcome
    while not seen["loop"].is_closed() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen["loop"].is_closed()


def test_streaming_greet_with_an_async_step_under_run_async(server, model, req):
    """run_async(): the async step runs on the caller's event loop, on its thread."""
    server.add(Reply.sse(openai_sse(["Hello", ", ", "world"])))
    seen: dict = {}

    async def main():
        result = await greet_workflow(model, req, seen).run_async()
        return result, asyncio.get_running_loop()

    result, loop = asyncio.run(main())
    assert result.result == {"content": "Hello, world"}
    assert seen["loop"] is loop and seen["thread"] == threading.get_ident()


@pytest.mark.parametrize("mode", ["run", "run_async"])
def test_timeout_ms_cancels_the_inner_complete_async(server, model, req, mode):
    """The budget runs out mid-stream: TimeoutError, the step's stream is cancelled and
    its connection closed by the client."""
    endless(server)
    seen: dict = {}
    wf = greet_workflow(model, req, seen).timeout_ms(400)
    started = time.monotonic()
    with pytest.raises(blazen.TimeoutError, match="timeout_ms=400"):
        if mode == "run":
            wf.run()
        else:
            asyncio.run(wf.run_async())
    assert time.monotonic() - started < 0.4 + 2.0
    assert server.wait_closed(timeout=5)
    assert server.connections[0].closed_by == "client"
    deadline = time.monotonic() + 5
    while "raised" not in seen and time.monotonic() < deadline:
        time.sleep(0.01)
    # Cancelled through the workflow's token or its task: either way a cancel, never a hang.
    assert isinstance(seen["raised"], (blazen.CancelledError, asyncio.CancelledError))


@pytest.mark.parametrize("mode", ["run", "run_async"])
def test_cancel_stops_an_async_step_that_awaits_something_else(mode):
    """A step awaiting a sleep is cancelled when the run is: its task sees CancelledError."""
    wf = blazen.workflow("sleeper")
    cancelled = threading.Event()
    started = threading.Event()

    @wf.step("nap", accepts=[START], emits=[STOP])
    async def nap(_event):
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return Event.create(STOP, {"result": "woke"})

    token = CancelToken()
    threading.Thread(target=lambda: started.wait(10) and token.cancel("enough")).start()
    with pytest.raises(blazen.CancelledError, match="enough"):
        if mode == "run":
            wf.run(cancel=token)
        else:
            asyncio.run(wf.run_async(cancel=token))
    assert cancelled.wait(5)


@pytest.mark.parametrize("mode", ["run", "run_async"])
def test_an_async_step_that_raises_is_a_workflow_error(mode):
    """What an async step raises ends the run as a plain step's does, with the cause."""
    wf = blazen.workflow("broken")

    @wf.step("boom", accepts=[START], emits=[STOP])
    async def boom(_event):
        await asyncio.sleep(0)
        raise ZeroDivisionError("no")

    with pytest.raises(WorkflowError, match="ZeroDivisionError") as info:
        if mode == "run":
            wf.run()
        else:
            asyncio.run(wf.run_async())
    assert isinstance(info.value.__cause__, ZeroDivisionError)


@pytest.mark.parametrize("mode", ["run", "run_async"])
def test_async_and_plain_steps_mix_with_ctx_and_publish(mode):
    """An async StepHandler object with ctx fans out to a plain step; publish is observed."""
    wf = blazen.workflow("mixed")

    class Fan:
        async def invoke(self, event, ctx):
            ctx.set("n", 3)
            ctx.publish(Event.create("Note", {"from": "fan"}))
            await asyncio.sleep(0)
            return [Event.create("Part", {"i": i}) for i in range(3)]

    wf.step("fan", accepts=[START], emits=["Part"], handler=Fan())

    @wf.step("join", accepts=["Part"], emits=[STOP])
    def join(event, ctx):
        group = ctx.collect(event, ctx.get("n"))
        if group is None:
            return None
        return Event.create(STOP, {"result": sorted(e.data["i"] for e in group)})

    seen: list[str] = []
    if mode == "run":
        result = wf.run(on_event=lambda e: seen.append(e.event_type))
    else:
        result = asyncio.run(wf.run_async(on_event=lambda e: seen.append(e.event_type)))
    assert result.result == [0, 1, 2]
    assert seen[:2] == [START, "Note"] and seen.count("Part") == 3 and seen[-1] == STOP


def test_many_async_steps_share_run_asyncs_loop_concurrently():
    """Independent async calls run at once on one loop: each waits for all to arrive."""
    wf = blazen.workflow("gather", max_workers=4)
    arrived: list[int] = []

    @wf.step("spread", accepts=[START], emits=["Job"])
    def spread(_event):
        return [Event.create("Job", {"i": i}) for i in range(4)]

    @wf.step("job", accepts=["Job"], emits=["Done"])
    async def job(event):
        arrived.append(event.data["i"])
        for _ in range(500):
            if len(arrived) == 4:
                return Event.create("Done", {"i": event.data["i"]})
            await asyncio.sleep(0.01)
        return Event.create("Done", {"i": -1})

    @wf.step("gather", accepts=["Done"], emits=[STOP])
    def gather(event, ctx):
        group = ctx.collect(event, 4)
        return (
            None
            if group is None
            else Event.create(STOP, {"result": sorted(e.data["i"] for e in group)})
        )

    assert asyncio.run(wf.run_async()).result == [0, 1, 2, 3]


def test_no_thread_is_left_after_async_step_runs(server, model, req):
    """After run and run_async return, the step threads and loops are gone."""
    before = {t.ident for t in threading.enumerate()}
    for _ in range(2):
        server.add(Reply.sse(openai_sse(["hi"])))
    greet_workflow(model, req, {}).run()
    asyncio.run(greet_workflow(model, req, {}).run_async())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        extra = [
            t
            for t in threading.enumerate()
            if t.ident not in before
            # The test server's connection threads, blazen's idle starter: not ours.
            and not t.name.startswith(("blazen-test", "blazen-starter", "blazen-reader"))
        ]
        if not extra:
            break
        time.sleep(0.02)
    assert extra == []
