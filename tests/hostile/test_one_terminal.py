"""Exactly one terminal, whatever a callback raises and whenever the caller gives up.

Callers misbehave here on purpose: chunk callbacks raise every kind of BaseException (and
exceptions whose ``str()`` raises), cancel from inside a callback, press Ctrl-C after the
last chunk, or cancel the asyncio task at random moments. Each run must end in exactly one
of done or error, with nothing after it, and KeyboardInterrupt/SystemExit still propagate.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import blazen
from blazen import CancelToken, Llm, Streaming
from blazen.testing import Pause, Recorder, Reply, Stall, StreamServer, openai_sse

from ..conftest import KEY_FOR_TESTS

ROOT = Path(__file__).resolve().parents[2]
REQ = Llm.completion_request([Llm.user("hi")])


def _model(server: StreamServer) -> blazen.ChatModel:
    return blazen.Providers.openai_compat(
        "test", server.base_url, api_key=KEY_FOR_TESTS, max_retries=0
    )


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ failed")


class _Custom(BaseException):
    pass


RAISED = [
    ValueError("plain"),
    _Unprintable(),
    GeneratorExit(),
    asyncio.CancelledError(),
    _Custom(),
    SystemExit(3),
    KeyboardInterrupt(),
]
PROPAGATE = (KeyboardInterrupt, SystemExit)


def _run(form: str, model, on_chunk, rec: Recorder):
    kw = {"on_chunk": on_chunk, "on_done": rec.on_done, "on_error": rec.on_error}
    if form == "blocking":
        return Streaming.complete(model, REQ, **kw)
    return asyncio.run(Streaming.complete_async(model, REQ, **kw))


@pytest.mark.parametrize("form", ["blocking", "async"])
@pytest.mark.parametrize("exc", RAISED, ids=lambda e: type(e).__name__)
def test_a_chunk_callback_raising_anything_ends_in_one_callback_error(form, exc, server):
    """CallbackError with the original as __cause__ (Ctrl-C: CancelledError); then
    KeyboardInterrupt and SystemExit go on up."""
    # Still streaming when the callback raises: the server must see the connection close.
    server.add(Reply.sse([*openai_sse(["a", "b"])[:2], Stall()]))
    rec = Recorder()

    def on_chunk(chunk):
        rec.on_chunk(chunk)
        raise exc

    if form == "async" and isinstance(exc, asyncio.CancelledError) and sys.version_info < (3, 11):
        pytest.skip("before 3.11 a task cannot tell its own cancellation from a raise")
    if isinstance(exc, PROPAGATE):
        with pytest.raises(type(exc)):
            _run(form, _model(server), on_chunk, rec)
    else:
        assert _run(form, _model(server), on_chunk, rec) is None
    assert rec.kinds == ["chunk", "error"]
    if isinstance(exc, KeyboardInterrupt):
        # Ctrl-C is the user's, wherever it lands: the stream is cancelled, as in a read.
        assert isinstance(rec.error, blazen.CancelledError) and "Ctrl-C" in rec.error.message
    else:
        assert isinstance(rec.error, blazen.CallbackError) and rec.error.__cause__ is exc
        assert type(exc).__name__ in rec.error.message
    assert server.wait_closed(2.0)


@pytest.mark.parametrize("form", ["blocking", "async"])
def test_no_chunk_reaches_the_callback_after_cancel_returns(form, server):
    """Even chunks parsed from the same socket read, and even with done already queued."""
    server.add(Reply.sse([b"".join(openai_sse(["a", "b", "c", "d"]))]))  # one write
    token = CancelToken()
    rec = Recorder()

    def on_chunk(chunk):
        rec.on_chunk(chunk)
        token.cancel("seen enough")

    kw = {"on_chunk": on_chunk, "on_done": rec.on_done, "on_error": rec.on_error}
    if form == "blocking":
        Streaming.complete(_model(server), REQ, cancel=token, **kw)
    else:
        asyncio.run(Streaming.complete_async(_model(server), REQ, cancel=token, **kw))
    assert rec.kinds == ["chunk", "error"]
    assert isinstance(rec.error, blazen.CancelledError) and "seen enough" in rec.error.message


CTRL_C_AFTER_DONE = textwrap.dedent(
    """
    import sys
    from blazen import Llm, Providers, Streaming
    from blazen.testing import Reply, Stall, StreamServer, openai_sse

    # The body stays open after [DONE]: the worker is still draining when Ctrl-C comes.
    with StreamServer([Reply.sse(openai_sse(["hi"]) + [Stall()])]) as server:
        model = Providers.openai_compat("test", server.base_url, max_retries=0)
        req = Llm.completion_request([Llm.user("hi")])
        def on_chunk(chunk):
            if chunk.is_final:
                print("final", flush=True)
        try:
            Streaming.complete(
                model, req, on_chunk=on_chunk,
                on_done=lambda *a: print("on_done", flush=True),
                on_error=lambda e: print("on_error", type(e).__name__, flush=True),
            )
        except KeyboardInterrupt:
            print("KeyboardInterrupt", flush=True)
            raise
    """
)


def test_ctrl_c_after_the_last_chunk_still_delivers_exactly_one_terminal():
    """The stream had succeeded: on_done runs, then KeyboardInterrupt propagates."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_AFTER_DONE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout.readline().strip() == "final"
        time.sleep(0.1)  # inside the drain, which lasts up to a second
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert out.splitlines() == ["on_done", "KeyboardInterrupt"], err


def test_cancelling_the_task_at_any_moment_gives_exactly_one_terminal(server):
    """Random moments: before the request, mid-stream, after done while the worker ends."""
    rnd = random.Random(14)
    body = [part for event in openai_sse(list("abcde")) for part in (event, Pause(0.004))]
    outcomes = []

    async def main() -> None:
        model = _model(server)
        for _ in range(60):
            server.add(Reply.sse(body))
            rec = Recorder()
            task = asyncio.ensure_future(Streaming.complete_async(model, REQ, rec.handler))
            await asyncio.sleep(rnd.uniform(0, 0.04))
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            outcomes.append(rec.kinds)
            assert rec.terminals == 1, rec.kinds
            assert rec.kinds[-1] in ("done", "error")

    asyncio.run(main())
    # The moments spread over the stream's whole life, not just one end of it.
    assert any(k[-1] == "done" for k in outcomes) and any(k[-1] == "error" for k in outcomes)


def test_a_stall_after_done_cannot_hold_the_terminal(server):
    """on_done waits for the worker only as long as the drain budget."""
    server.add(Reply.sse([*openai_sse(["hi"]), Stall()]))
    rec = Recorder()
    start = time.monotonic()
    Streaming.complete(_model(server), REQ, rec.handler)
    assert rec.kinds[-1] == "done" and time.monotonic() - start < 2.0


def test_a_handle_says_whether_its_cancel_came_in_time(server):
    """cancel() is True exactly when the stream then ends cancelled, at any moment."""
    rnd = random.Random(7)
    body = [part for event in openai_sse(list("abc")) for part in (event, Pause(0.003))]
    model = _model(server)
    for _ in range(60):
        server.add(Reply.sse(body))
        handle = Streaming.start(model, REQ, on_chunk=lambda c: None)
        time.sleep(rnd.uniform(0, 0.03))
        said = handle.cancel()
        try:
            handle.result(timeout=10)
            ended_cancelled = False
        except blazen.CancelledError:
            ended_cancelled = True
        handle.join(10)
        assert said is ended_cancelled


def test_a_tool_raising_system_exit_still_gives_the_agent_run_one_terminal(server):
    """on_error(ToolError) with the SystemExit as its cause, then SystemExit goes on up."""
    from blazen.testing import openai_tool_sse

    @blazen.tool
    def explode(x: int) -> int:
        """Ends the process."""
        raise SystemExit(3)

    server.add(Reply.sse(openai_tool_sse([("c1", "explode", {"x": 1})])))
    server.add(Reply.sse(openai_sse(["never reached"])))
    terminals: list[object] = []
    agent = blazen.Agent(_model(server), tools=[explode])
    with pytest.raises(SystemExit):
        agent.run("go", on_done=terminals.append, on_error=terminals.append)
    assert len(terminals) == 1 and isinstance(terminals[0], blazen.ToolError)
    assert isinstance(terminals[0].__cause__, SystemExit)


def test_concurrent_cancels_of_a_handle_all_get_the_same_answer(server):
    import threading

    model = _model(server)
    for _ in range(30):
        server.add(Reply.sse([*openai_sse(["a"])[:2], Stall()]))
        handle = Streaming.start(model, REQ, on_chunk=lambda c: None)
        time.sleep(0.005)
        barrier = threading.Barrier(3)
        answers: list[tuple[bool, bool]] = []

        def cancel(handle=handle, barrier=barrier, answers=answers) -> None:
            barrier.wait()
            said = handle.cancel()
            # False is only right for a call that found the handle finished: the server
            # stalls, so nothing but a cancel can finish it.
            answers.append((said, said or handle.done()))

        threads = [threading.Thread(target=cancel) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        with pytest.raises(blazen.CancelledError):
            handle.result(timeout=10)
        assert any(said for said, _ in answers) and all(ok for _, ok in answers), answers


def test_ctrl_c_inside_the_start_of_a_handle_cancels_the_stream_it_began(server, monkeypatch):
    """Ctrl-C while ``Streaming.start`` waits for its thread to start: no handle comes back,
    so nothing else could cancel the stream. It ends at once with one on_error(CancelledError)
    and its connection closed, not after the server's stall (as an interrupted blocking
    call does); KeyboardInterrupt goes on up."""
    import threading

    server.add(Reply.sse([*openai_sse(["a"])[:2], Stall()]))
    real_start = threading.Thread.start

    def start_then_interrupted(self: threading.Thread) -> None:
        real_start(self)  # the thread runs; the signal lands as start() returns
        if self.name == "blazen-handle":
            raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start_then_interrupted)
    rec = Recorder()
    begun = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        Streaming.start(_model(server), REQ, rec.handler)
    monkeypatch.undo()
    limit = time.monotonic() + 10
    while not rec.terminals and time.monotonic() < limit:
        time.sleep(0.005)
    assert rec.kinds.count("error") == 1 and "done" not in rec.kinds, rec.kinds
    assert isinstance(rec.error, blazen.CancelledError) and "Ctrl-C" in str(rec.error)
    assert time.monotonic() - begun < 3
    assert server.wait_closed(timeout=5)


def test_ctrl_c_before_the_thread_of_a_handle_ran_leaves_no_stream(server, monkeypatch):
    """Ctrl-C inside ``Streaming.start`` before its thread ran the stream (here: before the
    thread started at all, as when a signal handler's exception breaks ``Thread.start``):
    no stream, no terminal, no request, and the caller's token keeps no subscription."""
    import threading

    real_start = threading.Thread.start

    def interrupted_then_started(self: threading.Thread) -> None:
        if self.name != "blazen-handle":
            real_start(self)
            return
        # The thread starts only after the interrupt left launch: the stream was given up.
        threading.Timer(0.05, real_start, (self,)).start()
        raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", interrupted_then_started)
    rec = Recorder()
    token = CancelToken()
    with pytest.raises(KeyboardInterrupt):
        Streaming.start(_model(server), REQ, rec.handler, cancel=token)
    monkeypatch.undo()
    time.sleep(0.3)
    assert rec.kinds == [] and server.requests == []
    assert not [t for t in threading.enumerate() if t.name in ("blazen-handle", "blazen-stream")]
    assert token._callbacks == []
