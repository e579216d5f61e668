"""Redis calls with a deadline, whatever the client was built with.

A Redis that stops answering (a frozen host, a paused container, a network that drops
packets) still accepts connections, so a call can wait as long as the client's
``socket_timeout`` allows: for ever without one, and far longer than it with redis-py's
own retries (53-59 s measured for ``socket_timeout=5``). :class:`Caller` runs each call on
a thread of its own and waits for it with a bounded lock wait; a call that outlives its
deadline is given up (:class:`Unanswered`), and the caller never waits for that thread.
The thread ends when the call does (Redis answers, or the client's own timeout or the
process ends it); until then it holds one connection of the client's pool.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Optional

__all__ = ["Caller", "Unanswered"]


class Unanswered(Exception):
    """Redis did not answer a call within its deadline (the call was given up)."""


class _Job:
    __slots__ = ("args", "done", "error", "fn", "result")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.result: Any = None
        self.error: Optional[BaseException] = None
        # Held until the call ends: a bounded C-level lock wait is the hand-off (it stays
        # interruptible by Ctrl-C on the main thread, as blazen's other waits are).
        self.done = threading.Lock()
        self.done.acquire()


def _serve(jobs: queue.SimpleQueue[Optional[_Job]]) -> None:
    while (job := jobs.get()) is not None:
        try:
            job.result = job.fn(*job.args)
        except BaseException as exc:  # handed to the waiting thread, which raises it
            job.error = exc
        finally:
            job.done.release()
        del job


class Caller:
    """One call at a time on a daemon thread, each waited for at most its ``timeout``.

    After a call is given up, or :meth:`close`, the caller is spent: every later call
    raises :class:`Unanswered` at once (the thread may still be inside the unanswered call).
    """

    __slots__ = ("_jobs", "_name", "_spent", "_thread")

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[Optional[_Job]] = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None
        self._spent = False

    def call(self, timeout: float, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the caller's thread; :class:`Unanswered` after ``timeout`` s."""
        if self._spent:
            msg = "closed, or an earlier call was not answered"
            raise Unanswered(msg)
        if self._thread is None:
            # Daemon: a thread stuck in a frozen Redis must not hold up the interpreter's exit.
            self._thread = threading.Thread(
                target=_serve, args=(self._jobs,), name=self._name, daemon=True
            )
            self._thread.start()
        job = _Job(fn, args)
        self._jobs.put(job)
        if not job.done.acquire(timeout=max(0.0, timeout)):
            self._spent = True
            self._jobs.put(None)  # the thread ends after the call it is stuck in
            msg = f"no answer within {timeout:.3g} s"
            raise Unanswered(msg)
        if job.error is not None:
            error, job.error = job.error, None
            raise error
        return job.result

    def close(self) -> None:
        """End the thread (after its current call, if any); later calls raise Unanswered."""
        if self._thread is not None and not self._spent:
            self._jobs.put(None)
        self._spent = True
