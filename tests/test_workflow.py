"""Workflows: routing, validation, failures, and the hard time budget, over real sockets."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import blazen
from blazen import CancelToken, Event, StepOutput, Streaming, WorkflowError
from blazen._cancel import ambient_token
from blazen.testing import Pause, Reply, StreamServer, openai_sse

START, STOP = "blazen::StartEvent", "blazen::StopEvent"
EXAMPLES = Path(__file__).parent.parent / "examples"

# The bound: a run raises within 100 ms of its deadline (measured: a few ms).
DEADLINE_SLACK = 0.100


def stop(result: object) -> Event:
    return Event.create(event_type=STOP, data={"result": result})


def endless(server: StreamServer, pause: float = 0.02, parts: int = 1000) -> None:
    """Queue a reply that keeps sending a delta every ``pause`` seconds for a long time."""
    events = openai_sse(["tick"] * parts)
    server.add(Reply.sse([part for event in events for part in (event, Pause(pause))]))


def greet_workflow(model: blazen.ChatModel, req: blazen.CompletionRequest) -> blazen.Workflow:
    """The seed's streaming_greet, buffered."""
    wf = blazen.workflow("streaming_greet")

    @wf.step("greet", accepts=[START], emits=[STOP])
    def greet(_event):
        buffer = []
        Streaming.complete(model, req, on_chunk=lambda c: buffer.append(c.content_delta or ""))
        return StepOutput.single(
            Event.create(event_type=STOP, data={"result": {"content": "".join(buffer)}})
        )

    return wf


# -- the seed's streaming greet -------------------------------------------------------------


def test_streaming_greet_buffers_the_stream_into_the_stop_event(server, model, req):
    """A step that streams and buffers returns the whole text as the run's result."""
    server.add(Reply.sse(openai_sse(["Hello", ", ", "world"])))
    result = greet_workflow(model, req).run()
    assert result.result == {"content": "Hello, world"}
    assert result.data == {"result": {"content": "Hello, world"}}
    assert result.event.event_type == STOP
    assert result.events == 2  # StartEvent and StopEvent
    assert result.elapsed_ms > 0 and len(result.run_id) == 32


def test_streaming_greet_publishes_each_delta_while_the_stream_runs(server, model, req):
    """ctx.publish shows each delta to on_event at once, before the stream has finished."""
    events = openai_sse(["Hel", "lo", "!"])
    # role chunk, "Hel", then half a second of silence before the rest.
    server.add(Reply.sse([b"".join(events[:2]), Pause(0.5), b"".join(events[2:])]))
    wf = blazen.workflow("streaming_greet_live")

    @wf.step("greet", accepts=[START], emits=[STOP])
    def greet(_event, ctx):
        def forward(chunk):
            if chunk.content_delta:
                ctx.publish(Event.create(event_type="greet::Delta", data=chunk.content_delta))

        return stop({"content": Streaming.complete(model, req, on_chunk=forward).content})

    seen = []
    caller = threading.current_thread()

    def on_event(event):
        assert threading.current_thread() is caller
        seen.append((event.event_type, event.data, time.monotonic()))

    result = wf.run(on_event=on_event)
    assert [(t, d) for t, d, _ in seen] == [
        (START, None),
        ("greet::Delta", "Hel"),
        ("greet::Delta", "lo"),
        ("greet::Delta", "!"),
        (STOP, {"result": {"content": "Hello!"}}),
    ]
    # "Hel" was observed while the server was still silent, well before the end.
    assert seen[-1][2] - seen[1][2] > 0.1
    assert result.result == {"content": "Hello!"} and result.events == 5


def run_example(**env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "BLAZEN_BASE_URL"
    }
    return subprocess.run(
        [sys.executable, str(EXAMPLES / "streaming_greet.py")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, "PYTHONPATH": str(EXAMPLES.parent), **env},
        check=False,
    )


def test_example_runs_offline_with_the_recorded_stream_and_says_so():
    """examples/streaming_greet.py replays its recorded stream when no model is configured."""
    proc = run_example()
    assert proc.returncode == 0, proc.stderr
    assert "[demo]" in proc.stderr
    assert "buffered:  Hello there, lovely human!\n" in proc.stdout
    assert "per-delta: Hello there, lovely human!\n(8 events in" in proc.stdout


def test_example_streams_from_a_server_given_by_base_url(server):
    """BLAZEN_BASE_URL points both workflows of the example at our server."""
    server.add(Reply.sse(openai_sse(["Hi", "!"])), Reply.sse(openai_sse(["Yo"])))
    proc = run_example(BLAZEN_BASE_URL=server.base_url)
    assert proc.returncode == 0, proc.stderr
    assert "[demo]" not in proc.stderr
    assert "buffered:  Hi!\nper-delta: Yo\n(3 events in" in proc.stdout
    assert len(server.requests) == 2


# -- routing ---------------------------------------------------------------------------------


def test_fan_out_to_three_steps_runs_them_at_once_and_fan_in_collects_them():
    """One event accepted by three steps runs all three concurrently; collect joins them."""
    wf = blazen.workflow("fan")
    barrier = threading.Barrier(3, timeout=10)
    threads = set()

    @wf.step("split", accepts=[START], emits=["Go"])
    def split(event):
        return Event.create(event_type="Go", data=event.data)

    def worker(name):
        def handle(event, ctx):
            barrier.wait()  # passes only if all three are running at the same time
            threads.add(threading.current_thread().name)
            return Event.create(event_type="Part", data=f"{name}:{event.data}")

        return handle

    for name in ("a", "b", "c"):
        wf.step(name, accepts=["Go"], emits=["Part"], handler=worker(name))
    joins = []

    @wf.step("join", accepts=["Part"], emits=[STOP])
    def join(event, ctx):
        got = ctx.collect(event, 3)
        joins.append(got is not None)
        if got is None:
            return StepOutput.none()
        return stop(sorted(e.data for e in got))

    seen = []
    result = wf.run("x", on_event=lambda e: seen.append(e.event_type))
    assert result.result == ["a:x", "b:x", "c:x"]
    assert threads == {"blazen-step-a", "blazen-step-b", "blazen-step-c"}
    assert sorted(joins) == [False, False, True]
    assert seen == [START, "Go", "Part", "Part", "Part", STOP]


def test_custom_event_types_carry_json_data_from_step_to_step():
    """Custom events route by type; each step gets its own decoded copy of the data."""
    wf = blazen.workflow("chain")

    @wf.step("parse", accepts=[START], emits=["app::Parsed"])
    def parse(event):
        data = event.data
        data["name"] = data["name"].title()
        return Event.create(event_type="app::Parsed", data=data)

    @wf.step("greet", accepts=["app::Parsed"], emits=["app::Greeted"])
    def greet(event):
        assert event.data_json == '{"name":"Ada"}'
        return [Event.create(event_type="app::Greeted", data=f"Hello, {event.data['name']}")]

    @wf.step("finish", accepts=["app::Greeted"], emits=[STOP])
    def finish(event):
        return StepOutput.multiple([Event.create(event_type=STOP, data=event.data)])

    result = wf.run({"name": "ada"})
    assert result.result == "Hello, Ada"  # a StopEvent without "result" gives its whole data
    assert result.events == 4


def test_events_are_immutable_json_values():
    """Event data is stored as JSON; reading it twice gives two independent copies."""
    event = Event.create(event_type="app::X", data={"a": [1, 2]})
    event.data["a"].append(3)
    assert event.data == {"a": [1, 2]} and event.data_json == '{"a":[1,2]}'
    assert event == Event("app::X", '{"a":[1,2]}')
    assert Event.create(event_type="app::Y").data is None
    with pytest.raises(blazen.ValidationError, match="not JSON-serialisable"):
        Event.create(event_type="app::X", data={"when": object()})
    with pytest.raises(blazen.ValidationError, match="not valid JSON"):
        Event("app::X", "{nope")
    with pytest.raises(TypeError):
        Event.create(event_type="", data=1)


def test_step_output_none_lets_the_run_continue_with_other_events():
    """A step returning StepOutput.none() emits nothing; other branches still finish."""
    wf = blazen.workflow("none")
    wf.step(
        "fork",
        accepts=[START],
        emits=["Quiet", "Loud"],
        handler=lambda e: [Event.create("Quiet"), Event.create("Loud")],
    )
    wf.step("quiet", accepts=["Quiet"], emits=[STOP], handler=lambda e: StepOutput.none())
    wf.step("loud", accepts=["Loud"], emits=[STOP], handler=lambda e, ctx: stop("done"))
    assert wf.run().result == "done"


def test_context_shares_state_and_run_id_between_steps():
    """ctx.set in one step is ctx.get in the next; every step sees the run's id."""
    wf = blazen.workflow("ctx")
    ids = []

    @wf.step("one", accepts=[START], emits=["Next"])
    def one(event, ctx):
        ctx.set("who", event.data)
        ids.append(ctx.run_id)
        assert (ctx.workflow, ctx.step) == ("ctx", "one")
        return Event.create("Next")

    @wf.step("two", accepts=["Next"], emits=[STOP])
    def two(event, ctx):
        ids.append(ctx.run_id)
        return stop(f"hi {ctx.get('who')} {ctx.get('missing', '?')}")

    result = wf.run("bob")
    assert result.result == "hi bob ?"
    assert ids == [result.run_id, result.run_id]
    assert wf.run("amy").run_id != result.run_id


def test_max_concurrency_caps_parallel_calls_of_one_step():
    """max_concurrency=1 runs one step's calls one at a time, whatever the pool size."""
    wf = blazen.workflow("cap")
    lock = threading.Lock()
    now = [0]
    peak = [0]
    wf.step(
        "fan",
        accepts=[START],
        emits=["Job"],
        handler=lambda e: [Event.create("Job", i) for i in range(4)],
    )

    @wf.step("job", accepts=["Job"], emits=["Done"], max_concurrency=1)
    def job(event):
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.02)
        with lock:
            now[0] -= 1
        return Event.create("Done", event.data)

    @wf.step("join", accepts=["Done"], emits=[STOP], max_concurrency=1)
    def join(event, ctx):
        got = ctx.collect(event, 4)
        return None if got is None else stop([e.data for e in got])

    assert wf.run().result == [0, 1, 2, 3]  # one at a time, so in order
    assert peak[0] == 1


def test_max_workers_bounds_the_step_calls_of_a_run():
    """max_workers caps how many step calls of one run are running at any moment."""
    wf = blazen.workflow("pool", max_workers=2)
    lock = threading.Lock()
    now, peak = [0], [0]
    names = ["a", "b", "c", "d"]
    wf.step("fan", accepts=[START], emits=["Go"], handler=lambda e: Event.create("Go"))

    def work(event):
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.03)
        with lock:
            now[0] -= 1
        return Event.create("Done")

    for name in names:
        wf.step(name, accepts=["Go"], emits=["Done"], handler=work)
    wf.step(
        "join",
        accepts=["Done"],
        emits=[STOP],
        handler=lambda e, ctx: None if ctx.collect(e, 4) is None else stop("ok"),
    )
    assert wf.run().result == "ok"
    assert peak[0] == 2
    assert (
        repr(wf) == "Workflow('pool', steps=['fan', 'a', 'b', 'c', 'd', 'join'], timeout_ms=None)"
    )


def dispatcher_operations(n: int) -> tuple[int, list[object]]:
    """The calls the dispatcher makes inside blazen/workflow while a capped step drains n events."""
    wf = blazen.workflow("backlog", max_workers=8)
    wf.step(
        "fan",
        accepts=[START],
        emits=["Job"],
        handler=lambda e: [Event.create("Job", i) for i in range(n)],
    )
    wf.step(
        "job",
        accepts=["Job"],
        emits=["Done"],
        max_concurrency=1,
        handler=lambda e: Event.create("Done", e.data),
    )

    @wf.step("join", accepts=["Done"], emits=[STOP], max_concurrency=1)
    def join(event, ctx):
        got = ctx.collect(event, n)
        return None if got is None else stop([e.data for e in got])

    package = os.path.dirname(sys.modules[blazen.Workflow.__module__].__file__) + os.sep
    count = [0]

    def profile(frame, _event, _arg):
        # Python calls and builtin calls (deque, dict, heap...) made from the engine's code,
        # on this thread only: the dispatcher runs on the caller's thread.
        if frame.f_code.co_filename.startswith(package):
            count[0] += 1

    sys.setprofile(profile)
    try:
        result = wf.run().result
    finally:
        sys.setprofile(None)
    return count[0], result


def test_a_capped_step_works_through_a_long_backlog_in_linear_time():
    """Four times the events waiting on a max_concurrency step cost the dispatcher ~4x the work."""
    small, small_result = dispatcher_operations(300)
    large, large_result = dispatcher_operations(1200)
    assert small_result == list(range(300)) and large_result == list(range(1200))
    # Linear: ~4x. Rescanning the backlog on each completion made it ~16x.
    assert large / small < 6, (small, large)


def test_the_backlog_starts_calls_oldest_first_within_every_cap():
    """Queued calls start in the order their events came, within each step's cap and the pool."""
    wf = blazen.workflow("caps", max_workers=3)
    lock = threading.Lock()
    running = {"a": 0, "b": 0}
    peak = {"a": 0, "b": 0, "all": 0}
    started = {"a": [], "b": []}
    n = 40
    wf.step(
        "fan",
        accepts=[START],
        emits=["A", "B"],
        handler=lambda e: [Event.create("AB"[i % 2], i) for i in range(n)],
    )

    def work(name):
        def handle(event):
            with lock:
                started[name].append(event.data)
                running[name] += 1
                peak[name] = max(peak[name], running[name])
                peak["all"] = max(peak["all"], running["a"] + running["b"])
            time.sleep(0.002)
            with lock:
                running[name] -= 1
            return Event.create("Done")

        return handle

    wf.step("a", accepts=["A"], emits=["Done"], max_concurrency=1, handler=work("a"))
    wf.step("b", accepts=["B"], emits=["Done"], max_concurrency=2, handler=work("b"))
    wf.step(
        "join",
        accepts=["Done"],
        emits=[STOP],
        handler=lambda e, ctx: None if ctx.collect(e, n) is None else stop("ok"),
    )
    assert wf.run().result == "ok"
    assert started["a"] == list(range(0, n, 2))  # one at a time, so exactly in order
    assert sorted(started["b"]) == list(range(1, n, 2))
    assert peak["a"] == 1 and peak["b"] <= 2 and peak["all"] <= 3


def test_stop_event_ends_the_run_and_abandons_steps_still_running():
    """The first StopEvent wins; a step still running is told it was abandoned."""
    wf = blazen.workflow("race")
    abandoned = threading.Event()
    wf.step(
        "fork",
        accepts=[START],
        emits=["Slow", "Fast"],
        handler=lambda e: [Event.create("Slow"), Event.create("Fast")],
    )

    late_publish = []
    finished = threading.Event()

    @wf.step("slow", accepts=["Slow"], emits=[STOP])
    def slow(event, ctx):
        ctx.cancel_token.subscribe(abandoned.set)
        abandoned.wait(10)
        try:
            ctx.publish(Event.create("Late"))
        except blazen.CancelledError as exc:
            late_publish.append(exc)
        finished.set()
        return stop("slow")

    wf.step("fast", accepts=["Fast"], emits=[STOP], handler=lambda e: stop("fast"))
    seen = []
    assert wf.run(on_event=lambda e: seen.append(e.event_type)).result == "fast"
    assert abandoned.wait(5) and finished.wait(5)
    assert len(late_publish) == 1 and "abandoned" in str(late_publish[0])
    assert "Late" not in seen


class Chatter:
    """A thread a step starts that publishes as fast as it can until ctx.publish refuses."""

    def __init__(self, ctx, kind: str) -> None:
        self.ctx = ctx
        self.kind = kind
        self.sent = 0  # publishes that returned normally
        self.last_sent_at = 0.0  # when the last of them was called (time.monotonic)
        self.error: BaseException | None = None
        self.cancelled_when_refused: bool | None = None
        self.thread = threading.Thread(target=self._run, name=f"chatter-{kind}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            called = time.monotonic()
            try:
                self.ctx.publish(Event.create(self.kind, self.sent))
            except Exception as exc:
                self.error = exc
                self.cancelled_when_refused = self.ctx.cancelled
                return
            self.last_sent_at = called
            self.sent += 1

    def wait_sent(self, count: int) -> None:
        deadline = time.monotonic() + 5
        while self.sent < count and self.error is None and time.monotonic() < deadline:
            time.sleep(0.001)


def test_publish_from_a_thread_after_its_step_returned_raises_cancelled_error():
    """A thread still publishing after its step returned is refused, and nothing it sent is lost."""
    wf = blazen.workflow("chatter")
    chatters = []

    @wf.step("spawn", accepts=[START], emits=["Next"])
    def spawn(event, ctx):
        chatters.append(Chatter(ctx, "Tick"))
        chatters[0].wait_sent(3)
        return Event.create("Next")

    @wf.step("wait", accepts=["Next"], emits=[STOP])
    def wait(event):
        chatters[0].thread.join(10)  # spawn has returned; the run lives on meanwhile
        return stop("done")

    seen = []
    assert wf.run(on_event=lambda e: seen.append(e.event_type)).result == "done"
    chatter = chatters[0]
    assert not chatter.thread.is_alive()
    assert isinstance(chatter.error, blazen.CancelledError), chatter.error
    assert "'spawn'" in str(chatter.error) and "returned" in str(chatter.error)
    assert chatter.cancelled_when_refused is True
    assert chatter.sent >= 3 and seen.count("Tick") == chatter.sent


@pytest.mark.parametrize("ending", ["stop", "error", "timeout"])
def test_publish_after_the_run_ended_raises_and_cancelled_is_true(ending):
    """Once a run has ended, however it ended, ctx.cancelled is true and every publish raises."""
    wf = blazen.workflow("afterlife")
    chatters = {}
    release = threading.Event()

    @wf.step("spawn", accepts=[START], emits=["Go", "Stall"])
    def spawn(event, ctx):
        chatters["spawn"] = Chatter(ctx, "FromSpawn")
        chatters["spawn"].wait_sent(3)
        return [Event.create("Stall"), Event.create("Go")]

    @wf.step("stall", accepts=["Stall"], emits=[STOP])
    def stall(event, ctx):
        chatters["stall"] = Chatter(ctx, "FromStall")
        release.wait(10)  # still running when the run ends: abandoned
        return None

    @wf.step("go", accepts=["Go"], emits=[STOP], timeout_ms=1000 if ending == "timeout" else None)
    def go(event):
        deadline = time.monotonic() + 5
        while "stall" not in chatters and time.monotonic() < deadline:
            time.sleep(0.001)
        chatters["stall"].wait_sent(3)
        if ending == "error":
            raise RuntimeError("boom")
        if ending == "timeout":
            release.wait(10)
        return stop("done")

    seen = []
    try:
        if ending == "stop":
            assert wf.run(on_event=lambda e: seen.append(e.event_type)).result == "done"
        else:
            expected = WorkflowError if ending == "error" else blazen.TimeoutError
            with pytest.raises(expected):
                wf.run(on_event=lambda e: seen.append(e.event_type))
        ended = time.monotonic()
        assert {name: c.ctx.cancelled for name, c in chatters.items()} == {
            "spawn": True,
            "stall": True,
        }
        for chatter in chatters.values():
            chatter.thread.join(10)
            assert not chatter.thread.is_alive()
            assert isinstance(chatter.error, blazen.CancelledError), chatter.error
            assert chatter.cancelled_when_refused is True
            assert chatter.sent >= 3 and chatter.last_sent_at < ended
        if ending == "stop":  # everything publish accepted was shown, before the StopEvent
            assert seen.count("FromSpawn") == chatters["spawn"].sent
            assert seen.count("FromStall") == chatters["stall"].sent
            assert seen[-1] == STOP
    finally:
        release.set()


def test_every_event_publish_accepted_is_shown_before_the_stop_event():
    """A step publishing while another ends the run: each publish that returned was observed."""
    wf = blazen.workflow("race-the-stop")
    sent = []
    refused = []

    @wf.step("chat", accepts=[START], emits=[])
    def chat(event, ctx):
        count = 0
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                ctx.publish(Event.create("Tick", count))
            except blazen.CancelledError:
                refused[-1].set()
                break
            count += 1
            sent[-1] = count

    @wf.step("finish", accepts=[START], emits=[STOP])
    def finish(event):
        deadline = time.monotonic() + 5
        while sent[-1] < 3 and time.monotonic() < deadline:
            time.sleep(0.0005)
        return stop("done")

    for _ in range(20):  # the race is lost at random: run it enough times to see it
        sent.append(0)
        refused.append(threading.Event())
        seen = []
        wf.run(on_event=lambda e, seen=seen: seen.append(e.event_type))
        assert refused[-1].wait(5)  # so its count is final
        assert seen.count("Tick") == sent[-1] >= 3
        assert seen[-1] == STOP


def live(kind: type, name_of, name: str) -> int:
    """How many objects of ``kind`` are alive whose ``name_of(obj)`` is ``name``."""
    gc.collect()
    return sum(1 for obj in gc.get_objects() if isinstance(obj, kind) and name_of(obj) == name)


def test_threads_that_outlive_their_runs_hold_no_run_state():
    """Step threads that outlive their runs are refused, queue nothing, and hold no dispatcher."""
    from blazen.workflow import context, handoff, run

    wf = blazen.workflow("leftovers")
    chatters = []

    @wf.step("spawn", accepts=[START], emits=[STOP])
    def spawn(event, ctx):
        chatter = Chatter(ctx, "Tick")
        chatters.append(chatter)
        chatter.wait_sent(2)
        return stop(len(chatters))

    for _ in range(20):
        wf.run()
    for chatter in chatters:
        chatter.thread.join(10)
        assert isinstance(chatter.error, blazen.CancelledError), chatter.error
    del chatter

    def workflow_of(obj):
        return obj.workflow

    # The chatters still hold their contexts, so each run's shared part lives on, and no more.
    assert live(context.Shared, workflow_of, "leftovers") == 20
    assert live(run.WorkflowRun, workflow_of, "leftovers") == 0
    assert live(handoff.Published, lambda p: p.call.step.name, "spawn") == 0
    chatters.clear()
    assert live(context.Shared, workflow_of, "leftovers") == 0
    assert live(handoff.StepCall, lambda c: c.step.name, "spawn") == 0


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


def test_steps_see_the_callers_contextvars_and_their_own_cancel_token():
    """Each step call runs in a copy of the caller's context, with its token as the ambient one."""
    wf = blazen.workflow("ctxvars")
    seen = []

    @wf.step("a", accepts=[START], emits=[STOP])
    def a(event, ctx):
        seen.append((REQUEST_ID.get(), ambient_token() is ctx.cancel_token))
        REQUEST_ID.set("changed-in-step")
        return stop(None)

    async def main():
        REQUEST_ID.set("async-req")
        return await wf.run_async()

    token = REQUEST_ID.set("sync-req")
    try:
        wf.run()
        asyncio.run(main())
        assert REQUEST_ID.get() == "sync-req"
    finally:
        REQUEST_ID.reset(token)
    assert seen == [("sync-req", True), ("async-req", True)]
    assert ambient_token() is None


def test_a_token_cancelled_before_the_run_starts_runs_no_step():
    """An already-cancelled token ends the run at once, before any step is called."""
    wf = blazen.workflow("precancelled")
    called = []
    wf.step("a", accepts=[START], emits=[STOP], handler=lambda e: called.append(1))
    token = CancelToken()
    token.cancel("too late")
    with pytest.raises(blazen.CancelledError, match="too late"):
        wf.run(cancel=token)
    assert called == []


# -- checks before running -------------------------------------------------------------------


def test_no_step_accepting_the_start_event_is_a_validation_error():
    """A workflow nothing can start fails before running, saying so."""
    wf = blazen.workflow("headless")
    wf.step("b", accepts=["X"], emits=[STOP], handler=lambda e: None)
    with pytest.raises(blazen.ValidationError, match="no step accepts blazen::StartEvent"):
        wf.run()


def test_an_accepted_type_nobody_emits_names_the_step_and_type():
    """A step waiting for a type no step emits is reported before anything runs."""
    wf = blazen.workflow("orphan")
    ran = []
    wf.step("a", accepts=[START], emits=[STOP], handler=lambda e: ran.append(1))
    wf.step("b", accepts=["Never"], emits=[STOP], handler=lambda e: ran.append(1))
    with pytest.raises(
        blazen.ValidationError, match=r"step 'b' accepts 'Never', but no step emits it"
    ):
        wf.run()
    assert ran == []


def test_an_emitted_type_nobody_accepts_names_the_step_and_type():
    """A declared output with no taker (usually a typo) is reported before running."""
    wf = blazen.workflow("typo")
    wf.step("a", accepts=[START], emits=["Gret", STOP], handler=lambda e: None)
    with pytest.raises(blazen.ValidationError, match=r"step 'a' emits 'Gret', but no step accepts"):
        wf.validate()


def test_a_workflow_that_cannot_reach_the_stop_event_is_a_validation_error():
    """Steps that only feed each other never stop: the reachable steps are named."""
    wf = blazen.workflow("loop")
    wf.step("a", accepts=[START, "B"], emits=["A"], handler=lambda e: None)
    wf.step("b", accepts=["A"], emits=["B"], handler=lambda e: None)
    with pytest.raises(
        blazen.ValidationError, match=r"no step can reach blazen::StopEvent.*'a', 'b'"
    ):
        wf.run()


def test_a_step_emitting_a_type_outside_its_emits_fails_the_run():
    """The declared emits are enforced at run time, naming the step and the type."""
    wf = blazen.workflow("liar")
    wf.step("a", accepts=[START], emits=[STOP], handler=lambda e: Event.create("Other"))
    with pytest.raises(
        blazen.ValidationError, match=r"step 'a' emitted 'Other'.*emits=\['blazen::StopEvent'\]"
    ):
        wf.run()


def test_building_mistakes_fail_at_once():
    """Duplicate names, a step accepting the StopEvent and bad arguments fail when added."""
    wf = blazen.workflow("build")
    wf.step("a", accepts=[START], emits=[STOP], handler=lambda e: None)
    with pytest.raises(blazen.ValidationError, match="already has a step named 'a'"):
        wf.step("a", accepts=[START], handler=lambda e: None)
    with pytest.raises(blazen.ValidationError, match="accepts blazen::StopEvent"):
        wf.step("z", accepts=[STOP], handler=lambda e: None)
    with pytest.raises(blazen.ValidationError, match="only the run emits it"):
        wf.step("z", accepts=["X"], emits=[START], handler=lambda e: None)
    with pytest.raises(ValueError, match="max_concurrency"):
        wf.step("z", accepts=["X"], max_concurrency=0, handler=lambda e: None)
    with pytest.raises(ValueError, match="timeout_ms"):
        wf.timeout_ms(0)
    with pytest.raises(TypeError, match="on_event must be callable"):
        wf.run(on_event="print")  # type: ignore[arg-type]
    with pytest.raises(blazen.ValidationError, match="not JSON-serialisable"):
        wf.run({1, 2})


# -- failures --------------------------------------------------------------------------------


def test_a_raising_step_fails_the_run_naming_the_step_with_the_cause():
    """The original exception is the WorkflowError's __cause__."""
    wf = blazen.workflow("boom")

    @wf.step("explode", accepts=[START], emits=[STOP])
    def explode(event):
        raise KeyError("missing")

    with pytest.raises(WorkflowError, match=r"step 'explode'.*raised KeyError.*StartEvent") as info:
        wf.run()
    assert isinstance(info.value.__cause__, KeyError)
    assert (info.value.step, info.value.event_type, info.value.kind) == (
        "explode",
        START,
        "workflow",
    )


def test_a_handler_returning_something_else_fails_the_run_with_a_type_error_cause():
    """Returning an int is a WorkflowError saying what a step may return."""
    wf = blazen.workflow("bad-return")
    wf.step("a", accepts=[START], emits=[STOP], handler=lambda e: 42)
    with pytest.raises(WorkflowError, match="return an Event, a list of Events") as info:
        wf.run()
    assert isinstance(info.value.__cause__, TypeError)


def test_a_failed_stream_inside_a_step_fails_the_run_with_the_stream_error(server, model, req):
    """A provider error in a step's stream is the WorkflowError's cause."""
    server.add(Reply.json({"error": {"message": "bad key", "type": "invalid_api_key"}}, status=401))
    with pytest.raises(WorkflowError, match="step 'greet'") as info:
        greet_workflow(model, req).run()
    assert isinstance(info.value.__cause__, blazen.AuthError)


def test_an_event_no_step_accepts_fails_saying_which_event_was_left():
    """A step with undeclared emits can emit a type nobody takes: the run says which."""
    wf = blazen.workflow("left")
    wf.step("a", accepts=[START], handler=lambda e: Event.create("Orphan"))
    with pytest.raises(WorkflowError, match=r"event 'Orphan' from step 'a' was left") as info:
        wf.run()
    assert info.value.event_type == "Orphan"


def test_a_stalled_workflow_fails_saying_which_event_was_left():
    """A run where every step is done and no StopEvent came fails at once, not hangs."""
    wf = blazen.workflow("stall")
    wf.step("a", accepts=[START], emits=["Part"], handler=lambda e: [Event.create("Part")] * 2)

    @wf.step("join", accepts=["Part"], emits=[STOP])
    def join(event, ctx):
        got = ctx.collect(event, 3)  # waits for a third Part that never comes
        return None if got is None else stop("never")

    started = time.monotonic()
    with pytest.raises(WorkflowError, match="went quiet without a blazen::StopEvent") as info:
        wf.run()
    message = str(info.value)
    assert "'Part': step 'join' handled it and emitted nothing" in message
    assert "ctx.collect is still holding 2 'Part'" in message
    assert time.monotonic() - started < 5


def test_on_event_raising_stops_the_run():
    """An observer that raises ends the run with a WorkflowError caused by it."""
    wf = blazen.workflow("observer")
    wf.step("a", accepts=[START], emits=[STOP], handler=lambda e: stop(1))

    def on_event(event):
        raise RuntimeError("ui gone")

    with pytest.raises(WorkflowError, match="on_event raised RuntimeError") as info:
        wf.run(on_event=on_event)
    assert isinstance(info.value.__cause__, RuntimeError)


# -- the hard time budget and cancellation ---------------------------------------------------


def test_timeout_cancels_a_stream_the_server_is_still_sending(server, model, req):
    """At timeout_ms the step's stream is cancelled (the server sees the close) and run raises."""
    endless(server)
    wf = blazen.workflow("slow").timeout_ms(300)
    step_saw = []
    ended = threading.Event()
    chunks = []

    @wf.step("greet", accepts=[START], emits=[STOP])
    def greet(event):
        try:
            Streaming.complete(model, req, on_chunk=chunks.append)  # no token passed
        except blazen.BlazenError as exc:
            step_saw.append(exc)
            raise
        finally:
            ended.set()
        return stop("unreachable")

    started = time.monotonic()
    with pytest.raises(
        blazen.TimeoutError, match=r"'slow' did not finish within its timeout_ms=300"
    ) as info:
        wf.run()
    late = time.monotonic() - (started + 0.300)
    assert 0 <= late < DEADLINE_SLACK, f"raised {late * 1000:.1f} ms after the deadline"
    assert (info.value.limit, info.value.seconds) == ("workflow", 0.3)
    assert len(chunks) > 2  # the server really was sending when the budget ran out
    assert server.wait_closed(timeout=5)
    conn = server.connections[0]
    assert conn.closed_by == "client"
    assert conn.closed_at is not None and conn.closed_at - started < 0.300 + 1.0
    assert ended.wait(5)
    assert [type(e) for e in step_saw] == [blazen.CancelledError]
    assert ambient_token() is None  # the caller's context is untouched


def test_a_step_timeout_cancels_that_steps_stream(server, model, req):
    """A per-step timeout_ms ends the run with a TimeoutError naming the step."""
    endless(server)
    wf = blazen.workflow("step-budget")
    wf.step(
        "greet",
        accepts=[START],
        emits=[STOP],
        timeout_ms=200,
        handler=lambda e: stop(Streaming.complete(model, req).content),
    )
    started = time.monotonic()
    with pytest.raises(
        blazen.TimeoutError, match=r"step 'greet'.*within its timeout_ms=200"
    ) as info:
        wf.run()
    assert time.monotonic() - (started + 0.200) < DEADLINE_SLACK
    assert info.value.limit == "step"
    assert server.wait_closed(timeout=5)
    assert server.connections[0].closed_by == "client"


def test_timeout_abandons_a_step_that_ignores_cancellation():
    """A step stuck outside blazen is abandoned: run still raises on time."""
    release = threading.Event()
    wf = blazen.workflow("stuck").timeout_ms(150)
    wf.step("sleep", accepts=[START], emits=[STOP], handler=lambda e: release.wait(10))
    started = time.monotonic()
    with pytest.raises(blazen.TimeoutError):
        wf.run()
    assert time.monotonic() - (started + 0.150) < DEADLINE_SLACK
    release.set()


def test_cancelling_the_run_cancels_the_stream_inside(server, model, req):
    """cancel=token from another thread ends the run with CancelledError and closes the stream."""
    endless(server)
    token = CancelToken()
    wf = greet_workflow(model, req)
    timer = threading.Timer(0.2, token.cancel, args=("user pressed stop",))
    timer.start()
    try:
        with pytest.raises(blazen.CancelledError, match="user pressed stop"):
            wf.run(cancel=token)
        cancelled_at = time.monotonic()
        assert server.wait_closed(timeout=5)
        assert server.connections[0].closed_by == "client"
        assert server.connections[0].closed_at - cancelled_at < 1.0
    finally:
        timer.cancel()


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGINT delivered to the process")
def test_ctrl_c_during_a_run_cancels_the_stream_and_re_raises(server, model, req):
    """Ctrl-C while run waits stops the streams inside its steps, then KeyboardInterrupt."""
    endless(server)
    wf = greet_workflow(model, req).timeout_ms(10_000)  # fail fast if the signal got lost
    # Finalizers left by earlier tests must not run while the signal lands: an exception
    # raised inside a finalizer is only reported, never propagated.
    gc.collect()
    main = threading.main_thread().ident
    timer = threading.Timer(0.2, signal.pthread_kill, args=(main, signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            wf.run()
    finally:
        timer.cancel()
    assert server.wait_closed(timeout=5)
    assert server.connections[0].closed_by == "client"


def test_an_outer_run_budget_reaches_streams_of_a_workflow_run_inside_a_step(server, model, req):
    """A workflow run inside a step obeys the outer run's token without being given it."""
    endless(server)
    inner = greet_workflow(model, req)  # no budget of its own
    outer = blazen.workflow("outer").timeout_ms(300)
    outer.step("nest", accepts=[START], emits=[STOP], handler=lambda e: stop(inner.run().result))
    with pytest.raises(blazen.TimeoutError, match="'outer'"):
        outer.run()
    assert server.wait_closed(timeout=5)


# -- asyncio ---------------------------------------------------------------------------------


def test_run_async_returns_the_result_and_observes_on_the_loop(server, model, req):
    """run_async keeps the loop free and calls on_event (even async) on the loop thread."""
    events = openai_sse(["Hel", "lo"])
    server.add(Reply.sse([b"".join(events[:2]), Pause(0.3), b"".join(events[2:])]))
    wf = greet_workflow(model, req)
    seen = []

    async def main():
        loop_thread = threading.current_thread()
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        async def on_event(event):
            assert threading.current_thread() is loop_thread
            seen.append(event.event_type)

        tick = asyncio.ensure_future(ticker())
        try:
            result = await wf.run_async(on_event=on_event)
        finally:
            tick.cancel()
        return result, ticks

    result, ticks = asyncio.run(main())
    assert result.result == {"content": "Hello"}
    assert seen == [START, STOP]
    assert ticks >= 3  # the loop ran while the step streamed


def test_run_async_raises_workflow_errors_like_run():
    """A raising step fails run_async with the same WorkflowError."""
    wf = blazen.workflow("boom-async")
    wf.step("a", accepts=[START], emits=[STOP], handler=lambda e: 1 / 0)
    with pytest.raises(WorkflowError, match="ZeroDivisionError") as info:
        asyncio.run(wf.run_async())
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_run_async_timeout_cancels_the_stream(server, model, req):
    """The time budget is as hard under asyncio: TimeoutError on time, stream closed."""
    endless(server)
    wf = greet_workflow(model, req).timeout_ms(250)

    async def main():
        started = time.monotonic()
        with pytest.raises(blazen.TimeoutError):
            await wf.run_async()
        return time.monotonic() - (started + 0.250)

    assert asyncio.run(main()) < DEADLINE_SLACK
    assert server.wait_closed(timeout=5)
    assert server.connections[0].closed_by == "client"


def test_cancelling_the_awaiting_task_cancels_the_run(server, model, req):
    """task.cancel() stops the stream inside the step and raises asyncio.CancelledError."""
    endless(server)
    wf = greet_workflow(model, req)

    async def main():
        task = asyncio.ensure_future(wf.run_async())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic()

    cancelled_at = asyncio.run(main())
    assert server.wait_closed(timeout=5)
    assert server.connections[0].closed_by == "client"
    assert server.connections[0].closed_at - cancelled_at < 1.0


def test_on_event_raising_in_run_async_fails_the_run():
    """An async observer that raises ends run_async with a WorkflowError."""
    wf = blazen.workflow("observer-async")
    wf.step("a", accepts=[START], emits=[STOP], handler=lambda e: stop(1))

    async def on_event(event):
        raise RuntimeError("socket gone")

    with pytest.raises(WorkflowError, match="on_event raised RuntimeError") as info:
        asyncio.run(wf.run_async(on_event=on_event))
    assert isinstance(info.value.__cause__, RuntimeError)


# -- seed fidelity: the Swift and Kotlin spellings -------------------------------------------


def test_steps_may_name_start_and_stop_events_as_the_swift_seed_does(server, model, req):
    """The names StartEvent/StopEvent mean the blazen:: events in accepts, emits and events."""
    server.add(Reply.sse(openai_sse(["Hello", "!"])))
    wf = blazen.workflow("swift_greet")
    seen: list[str] = []

    @wf.step("greet", accepts=["StartEvent"], emits=["Greeted"])
    def greet(event):
        resp = Streaming.complete(model, req)
        return Event.create(event_type="Greeted", data={"text": resp.content, "in": event.data})

    # The Swift seed's own line: Event(eventType: "StopEvent", dataJson: json).
    wf.step(
        "finish",
        accepts=["Greeted"],
        emits=["StopEvent"],
        handler=lambda e: Event("StopEvent", f'{{"result":{e.data_json}}}'),
    )
    result = wf.run("ada", on_event=lambda e: seen.append(e.event_type))
    assert result.result == {"text": "Hello!", "in": "ada"}
    assert result.event.event_type == STOP and seen == [START, "Greeted", STOP]
    assert Event.create("StartEvent") == Event.create(START)
    assert Event("StopEvent").event_type == STOP
    # The blazen:: spelling and the short one mix freely within one workflow.
    mixed = blazen.workflow("mixed")
    mixed.step("a", accepts=[START], emits=["StopEvent"], handler=lambda e: stop(1))
    assert mixed.run().result == 1
    with pytest.raises(blazen.ValidationError, match="accepts blazen::StopEvent"):
        wf.step("z", accepts=["StopEvent"], handler=lambda e: None)
    with pytest.raises(blazen.ValidationError, match="emits blazen::StartEvent"):
        wf.step("z", accepts=["X"], emits=["StartEvent"], handler=lambda e: None)


class SwiftGreetHandler:
    """The seeds' ``StepHandler``: an object whose ``invoke(event)`` returns the output."""

    def __init__(self, model: blazen.ChatModel, req: blazen.CompletionRequest) -> None:
        self.model, self.req = model, req

    def invoke(self, event):
        buffer: list[str] = []
        Streaming.complete(
            self.model, self.req, on_chunk=lambda c: buffer.append(c.content_delta or "")
        )
        return StepOutput.single(
            Event.create(event_type="Greeted", data={"result": "".join(buffer)})
        )


class CountingHandler:
    """A ``StepHandler`` whose ``invoke(event, ctx)`` also takes the run's context."""

    def __init__(self) -> None:
        self.calls = 0

    def invoke(self, event, ctx):
        self.calls += 1
        return Event.create("StopEvent", {"result": [event.data, ctx.step, ctx.workflow]})


def test_a_step_handler_may_be_an_object_with_invoke_as_in_the_seeds(server, model, req):
    """An object with ``invoke(event)`` or ``invoke(event, ctx)`` is a handler, as a function is."""
    server.add(Reply.sse(openai_sse(["Hi", " there"])))
    counting = CountingHandler()
    wf = blazen.workflow("objects")
    wf.step(
        "greet", accepts=["StartEvent"], emits=["Greeted"], handler=SwiftGreetHandler(model, req)
    )
    wf.step("finish", accepts=["Greeted"], emits=["StopEvent"], handler=counting)
    result = wf.run()
    assert result.result == [{"result": "Hi there"}, "finish", "objects"]
    assert counting.calls == 1


def test_a_step_handler_that_is_neither_callable_nor_has_invoke_fails_when_added():
    """A class instead of its instance, an async invoke, or a plain value is refused at once."""
    wf = blazen.workflow("bad-handlers")

    class NoEvent:
        def invoke(self):
            return None

    with pytest.raises(TypeError, match=r"pass an instance: CountingHandler\(\.\.\.\)"):
        wf.step("a", accepts=[START], handler=CountingHandler)
    with pytest.raises(TypeError, match="must take the event"):
        wf.step("a", accepts=[START], handler=NoEvent())
    with pytest.raises(TypeError, match=r"a function or an object with invoke\(event\[, ctx\]\)"):
        wf.step("a", accepts=[START], handler=42)  # type: ignore[call-overload]
    assert wf.steps == ()
