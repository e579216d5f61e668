"""The worker half of a stream: a thread that runs the request and hands events to the caller.

This module is the thread shell (start, exit, the caller's wait for the exit); the request
itself (send, read, fold, retry) is :class:`~.exchange.Exchange`, which knows no thread.
The worker never calls user code. It hands typed events (:mod:`.events`) to a ``put``
callable (a queue for blocking callers, the event loop for asyncio) and always ends with
:data:`~.events.EXIT`. Whatever the caller decides (cancel, timeout, a raising callback),
it tears the socket down through the run's :class:`~blazen._http.Abort` and the worker
exits.
"""

from __future__ import annotations

import _thread
import contextlib
import enum
import os
import queue
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

from .._http import Abort
from .._kit import StreamState
from .._types import CompletionRequest, TokenUsage
from ..errors import InternalError
from .events import EXIT, Failed, WorkerEvent
from .exchange import Exchange

if TYPE_CHECKING:
    from .model import BoundModel

__all__ = ["Phase", "Startable", "StreamWorker", "start_elsewhere", "start_soon"]


class Startable(Protocol):
    """What the starter thread starts: a stream's worker, an embedding's workers."""

    def start(self) -> None: ...


# What waits to be started by the starter thread (see start_soon).
_to_start: queue.SimpleQueue[Startable] = queue.SimpleQueue()
_starter_lock = threading.Lock()
_starter: list[bool] = []  # [True] while a starter thread runs
#: How long the starter waits for more work before it exits.
STARTER_IDLE = 5.0


def start_soon(run: StreamWorker) -> None:
    """Start ``run``'s worker from blazen's own starter thread, and return at once.

    ``Thread.start`` waits until the new thread runs, which under a busy GIL can take
    milliseconds; an event loop must not wait that long per stream, nor borrow the
    application's executor, which may be busy for seconds. One daemon thread starts the
    workers in order and exits after :data:`STARTER_IDLE` seconds without work.
    """
    start_elsewhere(run)
    run.queued = True


def start_elsewhere(job: Startable) -> None:
    """Have blazen's starter thread call ``job.start()``; return at once.

    Also for a caller on the main thread: no signal handler runs on the starter, and
    ``Thread.start``'s hand-off (a Python-level ``Condition``) is not safe against one (a
    second Ctrl-C there can leave its lock taken, or raise "release unlocked lock").
    ``job.start()`` must not raise.
    """
    _to_start.put(job)
    with _starter_lock:
        if not _starter:
            # Started with _thread, not threading.Thread: its start has no hand-off for a
            # signal to break (one that left the hand-off's lock taken would have stuck the
            # starter before it began, and every later stream with it). Marked running
            # only once started: an interrupt in between costs at most a second starter.
            _thread.start_new_thread(_start_workers, ())
            _starter.append(True)


def _start_workers() -> None:
    try:
        while True:
            try:
                run = _to_start.get(timeout=STARTER_IDLE)
            except queue.Empty:
                with _starter_lock:
                    # A thread queued before this lock was taken is still ours to start.
                    if _to_start.empty():
                        _starter.clear()
                        return
                continue
            run.start()
            del run  # not kept alive (its loop, its text) while the starter idles
    except BaseException:
        # Never expected (each start ends its own failures): the next call starts a new one.
        with _starter_lock:
            _starter.clear()
        raise


def _forget_starter() -> None:
    # A forked child has no starter thread, whatever the parent had.
    global _starter_lock, _to_start
    _starter.clear()
    _starter_lock = threading.Lock()
    _to_start = queue.SimpleQueue()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_starter)


class Phase(enum.IntEnum):
    """Where a worker thread is in its life; it only ever moves forward."""

    #: Made, not started: no thread exists.
    NEW = 0
    #: ``Thread.start`` has been asked for (a thread may exist from then on).
    STARTING = 1
    #: The worker has begun its work (its first act): from then on it exits on its own.
    RUNNING = 2
    #: The worker will touch nothing of the caller's any more (its last act but one).
    EXITED = 3


class StreamWorker:
    """One request on its worker thread: the thread, its phase, and where its events go.

    Each phase is written by one party, in order: the starter (or the caller) writes
    ``STARTING`` before ``Thread.start``, the worker ``RUNNING`` and ``EXITED``; so no two
    threads race to write it. (``start`` writes ``EXITED`` too when no thread could start.)
    """

    __slots__ = ("_gone", "_patience", "exchange", "phase", "put", "queued", "thread")

    def __init__(
        self,
        model: BoundModel,
        req: CompletionRequest,
        put: Callable[[WorkerEvent], Any],
        *,
        stream: bool = True,
    ) -> None:
        self.put = put
        self.exchange = Exchange(model, req, self.post, Abort(), stream=stream)
        self.thread = threading.Thread(target=self._work, name="blazen-stream", daemon=True)
        self.phase = Phase.NEW
        #: The caller handed this run to the starter thread (:func:`start_soon`). The
        #: caller's own note, written on its thread only: not a phase of the worker's.
        self.queued = False
        # Held from here until the worker's last act releases it (a plain lock may be
        # released by any thread). The caller waits on it, never on a threading.Event:
        # Event and Condition are Python code, and a signal handler raising inside them on
        # the caller's thread can leave their lock held for good, so that the next wait
        # (or the worker's set()) blocks forever. Lock.acquire is one C call.
        self._gone = threading.Lock()
        self._gone.acquire()
        # How long, over all wait_exit calls, a worker that has not begun is waited for.
        self._patience = _UNBEGUN_WAIT

    @property
    def abort(self) -> Abort:
        """Tears this stream's connection down from any thread."""
        return self.exchange.abort

    @property
    def state(self) -> StreamState:
        """What the current attempt has read."""
        return self.exchange.state

    @property
    def stream(self) -> bool:
        """Whether the request streams."""
        return self.exchange.stream

    def usage_so_far(self) -> Optional[TokenUsage]:
        """The usage an error carries: what the provider reported, else an estimate."""
        return self.exchange.usage_so_far()

    def _work(self) -> None:
        if self.phase < Phase.RUNNING:  # a start() given up on has written EXITED already
            self.phase = Phase.RUNNING
        try:
            self.exchange.run()
        except BaseException as exc:
            err = InternalError(f"blazen's stream worker failed: {type(exc).__name__}: {exc}")
            err.__cause__ = exc
            self.post(Failed(err))
        finally:
            try:
                self.post(EXIT)
            finally:
                self._exit()

    def _exit(self) -> None:
        self.phase = Phase.EXITED
        # Twice is possible: Thread.start can raise RuntimeError from threading's own
        # waits broken by an interrupt after the thread did start (start() then ends the
        # stream, and the worker exits later too). Released once is all a waiter needs.
        with contextlib.suppress(RuntimeError):
            self._gone.release()

    def start(self) -> None:
        """Start the worker; if no thread can be started, end the stream with an error."""
        self.phase = Phase.STARTING
        try:
            self.thread.start()
        except RuntimeError as exc:  # "can't start new thread": out of threads or memory
            err = InternalError(
                f"blazen could not start the stream's worker thread ({exc}); the process "
                "may have too many threads"
            )
            self.post(Failed(err))
            self.post(EXIT)
            self._exit()

    def wait_exit(self) -> None:
        """Wait until the worker has exited, or return if it can no longer do anything.

        Safe to interrupt anywhere and to call again, and it never waits forever: the
        caller's thread only ever blocks in bounded ``Lock.acquire`` calls (C code, which
        a signal handler's exception leaves consistent) and reads the phase.

        - The worker's last act releases :attr:`_gone`: the wait returns on ``EXITED``,
          even if an interrupt left the lock taken by this thread (no ``Thread.join``: an
          interrupted join leaves CPython sure a running thread has stopped).
        - A worker that never began (``Thread.start`` interrupted before the thread ran, or
          the thread stuck in threading's own start hand-off) is waited for a moment, then
          left to itself if the run is aborted: it sends nothing once it begins.
        - A worker thread that is gone without its last act (killed at shutdown) is gone.
        """
        gone = self._gone
        thread = self.thread
        abort = self.abort
        if self.phase is Phase.NEW:
            return  # interrupted before Thread.start was even asked for: no thread
        while self.phase is not Phase.EXITED:
            began = self.phase is Phase.RUNNING
            if not began and abort.aborted and self._patience <= 0:
                return
            if gone.acquire(timeout=_EXIT_POLL):
                gone.release()  # another wait_exit (or a retry) may ask again
                continue
            if not began:
                self._patience -= _EXIT_POLL
            elif not _thread_alive(thread):
                return  # gone without its last act (the phase is read again first)

    def post(self, item: WorkerEvent) -> None:
        """Hand ``item`` to the caller; if nobody listens any more, end the stream."""
        try:
            self.put(item)
        except RuntimeError:
            # The caller's event loop is gone: nobody is listening any more.
            self.abort.abort()


#: How long one bounded wait for the worker's exit lasts before the flags are read again.
_EXIT_POLL = 0.05
#: How long an aborted worker that has not begun is waited for before it is left to itself.
_UNBEGUN_WAIT = 0.1


def _thread_alive(thread: threading.Thread) -> bool:
    # Asked of the interpreter, not of Thread.is_alive(), which an interrupt inside a join
    # (or inside is_alive itself) can leave wrong. Only asked after a bounded wait ran out.
    ident = thread.ident
    return ident is not None and ident in sys._current_frames()
