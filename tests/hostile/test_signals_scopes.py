"""Signal handlers that raise, nested cancel scopes, and coroutine callbacks where none may go.

A SIGTERM handler that calls ``sys.exit()`` or a SIGALRM deadline raises on the main thread
while ``Streaming.complete`` waits: the stream still ends with exactly one terminal before
the exception goes on up. Every enclosing ``cancel_scope`` reaches a stream, not only the
innermost. A coroutine function given to a blocking call is refused before anything starts.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

import blazen
from blazen import CancelToken, Llm, Streaming, cancel_scope
from blazen.testing import Pause, Recorder, Reply, Stall, StreamServer, openai_sse

from ..conftest import KEY_FOR_TESTS
from .interrupts import reached_the_stream

REQ = Llm.completion_request([Llm.user("hi")])

needs_signals = pytest.mark.skipif(
    not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread(),
    reason="POSIX signals on the main thread",
)


def _model(server: StreamServer) -> blazen.ChatModel:
    return blazen.Providers.openai_compat(
        "test", server.base_url, api_key=KEY_FOR_TESTS, max_retries=0
    )


def _stalling(server: StreamServer) -> None:
    server.add(Reply.sse([*openai_sse(["partial"])[:2], Stall()]))


class Deadline(Exception):
    """What a SIGALRM handler raises."""


@pytest.fixture
def restore_signals():
    saved = {s: signal.getsignal(s) for s in (signal.SIGALRM, signal.SIGTERM)}
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    for s, h in saved.items():
        signal.signal(s, h)


@needs_signals
@pytest.mark.parametrize("moment", ["waiting for the first byte", "mid-stream"])
def test_a_sigalrm_deadline_ends_the_stream_with_one_terminal_then_propagates(
    server, restore_signals, moment
):
    """The handler's exception propagates only after on_error(CancelledError) has run."""

    def on_alarm(signum, frame):
        raise Deadline("too slow")

    signal.signal(signal.SIGALRM, on_alarm)
    if moment == "mid-stream":
        _stalling(server)
    else:
        server.add(Reply.sse([Pause(30)]))
    rec = Recorder()
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    start = time.monotonic()
    with pytest.raises(Deadline):
        Streaming.complete(_model(server), REQ, rec.handler)
    assert time.monotonic() - start < 3
    assert rec.terminals == 1 and isinstance(rec.error, blazen.CancelledError), rec.kinds
    assert "Deadline" in str(rec.error)
    assert not [t for t in threading.enumerate() if t.name == "blazen-stream"]
    assert server.wait_closed(timeout=5)


@needs_signals
def test_a_sigterm_handler_calling_sys_exit_ends_the_stream_with_one_terminal(
    server, restore_signals
):
    """SystemExit from a SIGTERM handler: on_error once, then SystemExit goes on up."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    _stalling(server)
    rec = Recorder()
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
    with pytest.raises(SystemExit) as info:
        Streaming.complete(_model(server), REQ, rec.handler)
    assert info.value.code == 143
    assert rec.terminals == 1 and isinstance(rec.error, blazen.CancelledError), rec.kinds
    assert rec.error.partial == "partial"


@needs_signals
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signal_after_the_last_chunk_still_gives_exactly_one_terminal(
    server, restore_signals, unraisables
):
    """A handler raising at a random moment of a short stream: one terminal, every time.

    The callbacks are C methods, so the signal cannot land inside them: a raise inside the
    application's own terminal callback is that callback raising, not a lost terminal.
    """
    import random

    rnd = random.Random(3)

    def on_alarm(signum, frame):
        raise Deadline("late")

    signal.signal(signal.SIGALRM, on_alarm)
    body = [part for event in openai_sse(list("abc")) for part in (event, Pause(0.002))]
    model = _model(server)
    for _ in range(40):
        server.add(Reply.sse(body))
        chunks: list[object] = []
        dones: dict[str, object] = {}
        errors: list[object] = []
        signal.setitimer(signal.ITIMER_REAL, rnd.uniform(0.001, 0.02))
        try:
            Streaming.complete(
                model,
                REQ,
                on_chunk=chunks.append,
                on_done=dones.__setitem__,
                on_error=errors.append,
            )
            time.sleep(0.03)  # let a late alarm fire here, outside the call
            struck = None
        except Deadline as exc:
            struck = exc
        signal.setitimer(signal.ITIMER_REAL, 0)
        # None owed if the alarm struck before the call began its stream (a loaded machine
        # can delay the call past the timer): it propagates like a refused argument. One
        # came if it struck after the call returned, in the sleep.
        owed = (1,) if struck is None or reached_the_stream(struck) else (0, 1)
        assert len(dones) + len(errors) in owed, (len(chunks), dones, errors)


def test_every_enclosing_cancel_scope_reaches_a_stream(server):
    """An inner scope does not hide the outer one: cancelling the outer token ends the stream."""
    _stalling(server)
    outer, inner = CancelToken(), CancelToken()
    rec = Recorder()
    threading.Timer(0.2, outer.cancel, ("the outer budget ran out",)).start()
    start = time.monotonic()
    with cancel_scope(outer), cancel_scope(inner):
        Streaming.complete(_model(server), REQ, rec.handler)
    assert time.monotonic() - start < 3
    assert rec.terminals == 1 and isinstance(rec.error, blazen.CancelledError)
    assert "the outer budget ran out" in str(rec.error)
    assert server.wait_closed(timeout=5)


def test_a_step_with_its_own_scope_still_obeys_the_workflows_timeout(server):
    """A step that opens its own cancel_scope: the workflow's timeout_ms still stops its stream."""
    server.add(Reply.sse([p for e in openai_sse(["tick"] * 1000) for p in (e, Pause(0.02))]))
    model = _model(server)
    wf = blazen.workflow("scoped").timeout_ms(300)
    step_ended = threading.Event()

    @wf.step("greet", accepts=["blazen::StartEvent"], emits=["blazen::StopEvent"])
    def greet(event):
        try:
            with cancel_scope(CancelToken()):  # the step's own budget, never cancelled
                text = Streaming.complete(model, REQ).content
                return blazen.Event.create(event_type="blazen::StopEvent", data={"r": text})
        finally:
            step_ended.set()

    with pytest.raises(blazen.TimeoutError):
        wf.run()
    # The step's stream is cancelled by the run's budget, so the step ends soon after.
    assert step_ended.wait(3), "the step's stream kept running after the run had raised"
    assert server.wait_closed(timeout=5)


async def _coroutine_chunk(chunk):
    pass


async def _coroutine_done(reason, usage):
    pass


@pytest.mark.parametrize(
    "kwargs",
    [
        {"on_chunk": _coroutine_chunk},
        {"on_done": _coroutine_done},
        {"on_error": _coroutine_chunk},
        {"handler": _coroutine_done},
    ],
    ids=["on_chunk", "on_done", "on_error", "handler"],
)
@pytest.mark.parametrize("call", ["complete", "start"])
def test_a_coroutine_callback_to_a_blocking_call_is_refused_before_anything_starts(
    server, kwargs, call
):
    """TypeError naming the callback and pointing to complete_async; nothing is sent."""
    kwargs = dict(kwargs)
    handler = kwargs.pop("handler", None)
    fn = getattr(Streaming, call)
    with pytest.raises(TypeError, match=r"coroutine function.*complete_async"):
        fn(_model(server), REQ, handler, **kwargs)
    assert server.requests == []
