"""Waiting for the worker after an interrupt: bounded, and safe to interrupt again.

A signal handler that raises (Ctrl-C's KeyboardInterrupt, a SIGALRM deadline) can land
anywhere on the calling thread, inside ``Thread.start`` or inside the wait for the worker
too. ``StreamWorker.wait_exit`` only blocks in bounded C-level lock waits and reads its phase, so
neither leaves it waiting for ever. (Second interrupts at each place they can land in the
drivers' handling are in ``test_attack_round4.py``.)
"""

from __future__ import annotations

import time

import blazen
from blazen import Llm
from blazen._stream import worker

from ..conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])


def _model(base_url: str) -> blazen.ChatModel:
    return blazen.Providers.openai_compat("test", base_url, api_key=KEY_FOR_TESTS, max_retries=0)


def test_wait_exit_returns_for_a_worker_that_never_began():
    """Thread.start asked for but cut short before the thread ran: an aborted run is left to
    itself after a moment (it sends nothing if it ever begins), never waited for ever."""
    run = worker.StreamWorker(_model("http://127.0.0.1:9"), REQ, lambda item: None)
    run.phase = worker.Phase.STARTING  # as if an interrupt landed inside Thread.start
    run.abort.abort()  # what the interrupt's handling does
    started = time.monotonic()
    run.wait_exit()
    run.wait_exit()  # and again, as a second interrupt's retry would
    assert run.phase is worker.Phase.STARTING and time.monotonic() - started < 5


def test_wait_exit_survives_an_interrupt_that_left_its_lock_taken():
    """The exit hand-off lock acquired by the caller, then an interrupt: the next wait returns."""
    run = worker.StreamWorker(_model("http://127.0.0.1:9"), REQ, lambda item: None)
    run.abort.abort()
    run.start()
    run.wait_exit()
    # As if an interrupt landed between the caller's acquire and its release: still done.
    run._gone.acquire(blocking=False)
    started = time.monotonic()
    run.wait_exit()
    assert run.phase is worker.Phase.EXITED and time.monotonic() - started < 5
