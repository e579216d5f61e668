"""Ctrl-C and signal handlers around a stream: it ends, and nothing is left behind.

The pull loop carries the stream on the calling thread, so an interrupt can land in the
loop's wait, in the loop body, or anywhere while the block is being left (Ctrl-C pressed
twice); a blocking call's handling of a first Ctrl-C can be interrupted again anywhere
too. Whichever: the interrupt propagates, and once the block is left (the call returned)
the worker has exited and the socket is closed, even on a server that has gone silent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Reply, Stall, StreamServer, openai_sse

from ..conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])
ROOT = Path(__file__).resolve().parents[2]

needs_signals = pytest.mark.skipif(
    not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread(),
    reason="POSIX signals on the main thread",
)


def _model(server: StreamServer) -> blazen.ChatModel:
    return blazen.Providers.openai_compat(
        "test", server.base_url, api_key=KEY_FOR_TESTS, max_retries=0
    )


def _stalling() -> Reply:
    return Reply.sse([*openai_sse(["partial"])[:2], Stall()])


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "blazen-stream"]


class Deadline(Exception):
    """What a SIGALRM handler raises."""


@needs_signals
def test_a_sigalrm_deadline_in_the_loops_wait_propagates_and_ends_the_stream(server):
    """The handler's exception comes out of the loop; the worker is gone, the socket closed."""
    server.add(_stalling())
    saved = signal.getsignal(signal.SIGALRM)

    def deadline(signum: int, frame: Any) -> None:
        raise Deadline

    signal.signal(signal.SIGALRM, deadline)
    seen = []
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(Deadline), Streaming.stream(_model(server), REQ) as chunks:
            for chunk in chunks:
                seen.append(chunk)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, saved)
    assert seen and not _workers()
    assert server.wait_closed(2.0)


def _interrupt_at(n: int, fired: list[tuple[str, str]]) -> Any:
    """A profile function raising KeyboardInterrupt at the ``n``-th place in blazen's code
    where a signal handler could run (a function's start, a C call's return)."""
    package = os.path.dirname(blazen.__file__)
    seen = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_return") and frame.f_code.co_filename.startswith(package):
            seen[0] += 1
            if seen[0] == n:
                fired.append((event, frame.f_code.co_name))
                raise KeyboardInterrupt("pressed again")

    return profile


# A generator collected after the interrupt may report it as unraisable; it never reached
# the caller, and the stream's state is what the test checks.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_second_ctrl_c_anywhere_while_the_block_is_left_still_ends_the_stream():
    """Ctrl-C in the loop body, then again at every place the leaving can be interrupted:
    KeyboardInterrupt goes on up, and the worker is gone once the block is left (only an
    interrupt at the very entry of ``__exit__``, before any blazen line ran, leaves the
    stream to the object's collection, which hangs up)."""
    with StreamServer(default=_stalling()) as server:
        model = _model(server)
        for n in range(1, 400):
            fired: list[tuple[str, str]] = []
            chunks = Streaming.stream(model, REQ)
            started = time.monotonic()
            try:
                with pytest.raises(KeyboardInterrupt), chunks:
                    for _ in chunks:
                        sys.setprofile(_interrupt_at(n, fired))
                        raise KeyboardInterrupt("pressed")
            finally:
                sys.setprofile(None)
            # A generous bound: a worker left reading a stalled server held this for the
            # whole idle timeout (the abort's flag was set, its shutdown interrupted).
            assert time.monotonic() - started < 30, f"place {n} ({fired}) held the block"
            if fired == [("call", "__exit__")]:
                del chunks  # the last resort: the collected stream hangs up
            end = time.monotonic() + 5
            while _workers() and time.monotonic() < end:
                time.sleep(0.005)
            assert not _workers(), f"interrupted again at place {n} ({fired}): a worker is left"
            if not fired:
                assert n > 5, f"only {n} places: the leaving was never interrupted"
                break  # the leaving was over before the n-th place: every place was tried
        else:
            pytest.fail("the leaving of one block never ended")
        assert server.wait_closed(5.0)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_second_ctrl_c_anywhere_in_a_blocking_calls_handling_never_leaves_a_worker_reading():
    """The same against ``Streaming.complete`` on a stalled server: the first Ctrl-C in
    ``on_chunk``, a second at every place of its handling; the call returns promptly with
    one terminal and no worker left (an abort interrupted after its flag was set, before
    its shutdown, left the worker blocked in its read until the idle timeout)."""
    with StreamServer(default=_stalling()) as server:
        model = _model(server)
        for n in range(1, 2000):
            fired: list[tuple[str, str]] = []
            errors: list[object] = []

            def on_chunk(chunk: blazen.StreamChunk, n: int = n, fired: list = fired) -> None:
                sys.setprofile(_interrupt_at(n, fired))
                raise KeyboardInterrupt("pressed")

            started = time.monotonic()
            try:
                with pytest.raises(KeyboardInterrupt):
                    Streaming.complete(model, REQ, on_chunk=on_chunk, on_error=errors.append)
            finally:
                sys.setprofile(None)
            assert time.monotonic() - started < 30, f"place {n} ({fired}) held the call"
            assert len(errors) == 1 and not _workers(), f"place {n} ({fired}): {errors}"
            if not fired:
                assert n > 20, f"only {n} places: the interrupt was never handled"
                break
        else:
            pytest.fail("the handling of one interrupt never ended")


SCRIPT = textwrap.dedent(
    """
    from blazen import Llm, Providers, Streaming
    from blazen.testing import Reply, Stall, StreamServer, openai_sse

    with StreamServer([Reply.sse([*openai_sse(["partial"])[:2], Stall()])]) as server:
        model = Providers.openai_compat("test", server.base_url, api_key="sk-test")
        req = Llm.completion_request([Llm.user("hi")])
        try:
            with Streaming.stream(model, req) as chunks:
                for event in chunks.events():
                    print("event", event.kind, flush=True)
        except KeyboardInterrupt:
            print("KeyboardInterrupt closed=%s" % server.wait_closed(1.0), flush=True)
            raise
    """
)


def test_sigint_while_a_pull_loop_waits_raises_keyboard_interrupt_with_the_socket_closed():
    """A real SIGINT to a process blocked in ``chunks.events()``: out promptly, socket closed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "event chunk"
        time.sleep(0.3)  # blocked in the loop's wait
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert out.splitlines()[-1] == "KeyboardInterrupt closed=True", err
    assert "KeyboardInterrupt" in err and proc.returncode != 0
    assert took < 5.0
