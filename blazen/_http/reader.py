"""One thread that reads the bodies of many streams at once, instead of one thread each.

With a worker thread per stream, every event wakes two threads: the worker returns from
``recv`` and the caller from its queue, and each must get the GIL back. With hundreds of
streams at once, hundreds of threads queue for the GIL; a thread may wait 100 ms for it,
and a thread pool starting more streams starves (benchmark (d): 256 streams took 2.0x one
stream's time, where requests + sseclient-py took 1.6x). Here one thread waits on every
parked stream's socket (epoll) and runs that stream's step on each read: an event wakes
the reader and the caller only, and a busy moment serves several sockets per wake.

A worker parks with :func:`read_elsewhere` once its body is read straight from the standard
library's socket, plain TCP or TLS (see :mod:`.source`), and :data:`PARK_FROM` bodies or
more are being read at once (:func:`reading_body`): a lone stream's events go from its
worker to its caller as before.
The worker then waits, and goes on with the blocking reads when the reader hands the body
back (its end, a read that failed, anything but the steady flow of events).

What keeps it safe:

- The reader never calls user code: a step cuts chunks, frames, folds and posts to the
  caller's queue, as the worker would. It never blocks: the socket is non-blocking while
  parked.
- It never dies with work in hand: a step that raises ends its own job (the worker raises
  the exception); if the selector itself fails, every job is handed back.
- The worker's wait is bounded: should the reader thread be gone, or its stream be aborted
  without the reader answering within :data:`_ABORT_GRACE`, the worker takes its socket back
  (only between two reads: a read in progress is always finished first).
- A forked child starts with no reader (the parent's jobs are the parent's).
- Flat: the selector holds the jobs in flight, nothing else; the thread exits after
  :data:`READER_IDLE` seconds without one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any, Callable, Optional

__all__ = ["PARK_FROM", "READER_IDLE", "busy", "read_elsewhere", "reading_body"]

#: How many bodies must be read at once before a worker parks its body with the reader.
PARK_FROM = 8
#: How long the reader thread waits without a job before it exits.
READER_IDLE = 5.0
#: How long a parked worker whose stream was aborted waits for the reader before it takes
#: its socket back (an abort shuts the socket down, which the reader sees at once).
_ABORT_GRACE = 1.0
#: How often the reader looks for parked reads past their timeout.
_SCAN = 0.25
#: One bounded wait of a parked worker, between checks of the reader and the abort (a
#: parked worker wakes this often only if nothing else wakes it).
_PARK_POLL = 0.5
_READ_SIZE = 65536

# A selector that sees a socket registered while another thread waits in it: epoll, kqueue.
# Elsewhere (select() or poll() on a copied list) nothing parks.
_SELECTOR: Optional[Callable[[], selectors.BaseSelector]] = getattr(
    selectors, "EpollSelector", None
) or getattr(selectors, "KqueueSelector", None)

# Job states: each changes under _lock only.
_PARKED, _RUNNING, _DONE = 0, 1, 2

logger = logging.getLogger("blazen")

_lock = threading.Lock()
_selector: Optional[selectors.BaseSelector] = None
_reader: Optional[threading.Thread] = None
_bodies = 0


@contextlib.contextmanager
def reading_body() -> Iterator[None]:
    """Count a body being read (by its worker or by the reader) while inside."""
    global _bodies
    with _lock:
        _bodies += 1
    try:
        yield
    finally:
        with _lock:
            _bodies -= 1


def busy() -> bool:
    """Whether enough bodies are read at once for a worker to park its own."""
    return _bodies >= PARK_FROM


class _Job:
    __slots__ = ("deadline", "done", "idle", "outcome", "sock", "state", "step")

    def __init__(
        self, sock: socket.socket, step: Callable[[bytes], Any], idle: Optional[float]
    ) -> None:
        self.sock = sock
        self.step = step
        #: The socket's read timeout: a read that waits longer fails, as on the worker.
        self.idle = idle
        self.deadline = None if idle is None else time.monotonic() + idle
        self.state = _PARKED
        #: What ends the job: ``(False, value)`` from the step, ``(True, exc)`` raised by
        #: it or by the read, or None: the body goes back to its worker as it is.
        self.outcome: Optional[tuple[bool, Any]] = None
        self.done = threading.Lock()
        self.done.acquire()


def read_elsewhere(
    sock: socket.socket,
    step: Callable[[bytes], Any],
    aborted: Callable[[], bool],
    timeout: Optional[float],
) -> Optional[tuple[bool, Any]]:
    """Have the reader call ``step(data)`` with each read of ``sock`` until it returns a value.

    Returns ``(False, value)`` once ``step`` returned a value other than None, ``(True, exc)``
    when a read or ``step`` raised, or None when the body comes back to the caller's blocking
    reads: at its end (EOF, the socket shut down) or whenever the reader cannot go on. A read
    that waits more than ``timeout`` seconds (the socket's read timeout) fails with
    :class:`socket.timeout`, as it would on the worker, within :data:`_SCAN` seconds. The
    socket has its timeout back on return.
    """
    if _SELECTOR is None:
        return None
    pending = getattr(sock, "pending", None)
    if pending is not None and pending():
        # TLS: bytes already decrypted wait in the TLS object, where epoll cannot see them.
        return None
    job = _Job(sock, step, timeout)
    kept = sock.gettimeout()
    try:
        sock.setblocking(False)
        if not _park(job):
            return None
        try:
            waited = 0.0
            while not job.done.acquire(timeout=_PARK_POLL):
                waited += _PARK_POLL
                reader = _reader
                gone = reader is None or not reader.is_alive()
                if (gone or (aborted() and waited >= _ABORT_GRACE)) and _take_back(job):
                    return None
        except BaseException:
            # Whatever broke the wait (nothing raises into a worker thread, but an
            # exception set on it could): the socket is not left with the reader.
            while not _take_back(job) and job.state == _RUNNING:
                job.done.acquire(timeout=0.01)
            raise
        return job.outcome
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(kept)  # as it was (plain TCP: the kernel's timeout stands)


def _park(job: _Job) -> bool:
    global _selector, _reader
    with _lock:
        if _reader is None or not _reader.is_alive():
            assert _SELECTOR is not None
            _selector = _SELECTOR()
            thread = threading.Thread(
                target=_serve, args=(_selector,), name="blazen-reader", daemon=True
            )
            try:
                thread.start()
            except RuntimeError:  # "can't start new thread": the worker reads on its own
                _selector = None
                return False
            _reader = thread
        assert _selector is not None
        try:
            _selector.register(job.sock, selectors.EVENT_READ, job)
        except (KeyError, ValueError, OSError):
            return False  # a closed socket, or one registered already: read it here
        return True


def _take_back(job: _Job) -> bool:
    """Unpark ``job`` if the reader is not in the middle of it; whether it was unparked."""
    with _lock:
        if job.state != _PARKED:
            return False  # the reader is in the middle of a read, or has answered
        job.state = _DONE
        if _selector is not None:
            with contextlib.suppress(KeyError, ValueError, OSError):
                _selector.unregister(job.sock)
        return True


def _serve(selector: selectors.BaseSelector) -> None:
    global _selector, _reader
    try:
        scan = time.monotonic() + _SCAN
        empty_since: Optional[float] = None
        while True:
            # Never a longer wait: a job registered meanwhile must have its timeout kept.
            ready = selector.select(_SCAN)
            for key, _ in ready:
                _serve_one(selector, key.data)
            now = time.monotonic()
            if now >= scan:
                scan = now + _SCAN
                for key in list(selector.get_map().values()):
                    _expire(selector, key.data, now)
            if ready or selector.get_map():
                empty_since = None
            elif empty_since is None:
                empty_since = now
            elif now - empty_since >= READER_IDLE:
                with _lock:
                    if not selector.get_map():
                        if _selector is selector:
                            _selector = None
                            _reader = None
                        selector.close()
                        return
    except BaseException as exc:
        # Never expected (each job's failures end that job): hand every job back, so that
        # no worker waits on a reader that is gone; the next park starts a new reader.
        logger.error(
            "blazen's shared reader failed (%s: %s); its streams read on their own threads",
            type(exc).__name__,
            exc,
        )
        with _lock:
            if _selector is selector:
                _selector = None
                _reader = None
            jobs = [key.data for key in list(selector.get_map().values())]
            for job in jobs:
                if job.state != _DONE:
                    job.state = _DONE
                    job.done.release()
            with contextlib.suppress(Exception):
                selector.close()


def _serve_one(selector: selectors.BaseSelector, job: _Job) -> None:
    with _lock:
        if job.state != _PARKED:
            return  # taken back by its worker since select() answered
        job.state = _RUNNING
    outcome: Optional[tuple[bool, Any]] = None
    finished = False
    data: Optional[bytes] = None
    try:
        data = _recv(job.sock)
    except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
        pass  # nothing after all (or not a whole TLS record yet): wait again
    except ssl.SSLWantWriteError:
        finished = True  # TLS wants to write first: the worker's blocking read does that
    except OSError as exc:
        outcome, finished = (True, exc), True
    else:
        if not data:
            finished = True  # EOF (or shut down): the worker reads the end itself
    if data:
        if job.idle is not None:
            job.deadline = time.monotonic() + job.idle
        try:
            value = job.step(data)
        except BaseException as exc:  # ends this job only; the worker raises it
            outcome, finished = (True, exc), True
        else:
            if value is not None:
                outcome, finished = (False, value), True
    with _lock:
        if not finished:
            job.state = _PARKED
            return
        job.state = _DONE
        job.outcome = outcome
        with contextlib.suppress(KeyError, ValueError, OSError):
            selector.unregister(job.sock)
    job.done.release()


def _expire(selector: selectors.BaseSelector, job: _Job, now: float) -> None:
    """End ``job`` with a read timeout if its socket has been quiet past it."""
    deadline = job.deadline
    if deadline is None or now < deadline:
        return
    with _lock:
        if job.state != _PARKED:
            return
        job.state = _DONE
        job.outcome = (True, socket.timeout("timed out"))
        with contextlib.suppress(KeyError, ValueError, OSError):
            selector.unregister(job.sock)
    job.done.release()


def _recv(sock: socket.socket) -> bytes:
    data = sock.recv(_READ_SIZE)
    pending = getattr(sock, "pending", None)
    if data and pending is not None:
        # TLS hands out one record per recv: take every byte it has decrypted now, since
        # epoll only tells of bytes still in the kernel.
        parts = [data]
        while pending():
            try:
                more = sock.recv(_READ_SIZE)
            except (ssl.SSLWantReadError, BlockingIOError):
                break
            if not more:
                break
            parts.append(more)
        if len(parts) > 1:
            data = b"".join(parts)
    return data


def _forget_reader() -> None:
    # A forked child has no reader thread, whatever the parent had.
    global _lock, _selector, _reader, _bodies
    _lock = threading.Lock()
    if _selector is not None:
        # The child's copy of the parent's epoll: never waited on here, so closed.
        with contextlib.suppress(Exception):
            _selector.close()
    _selector = None
    _reader = None
    _bodies = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_reader)
