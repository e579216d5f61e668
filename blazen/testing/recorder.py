"""A :class:`Recorder` of stream callbacks, to assert on what a stream delivered and where."""

from __future__ import annotations

import threading
from typing import Any, Optional

__all__ = ["Recorder"]


class Recorder:
    """Records every callback of a stream, with the thread it ran on, for assertions.

    Pass ``recorder.handler`` as the block-form handler, or its ``on_chunk``/``on_done``/
    ``on_error`` methods as keyword callbacks::

        rec = Recorder()
        Streaming.complete(model, req, rec.handler)
        assert rec.kinds[-1] == "done" and rec.text == "Hello"
    """

    def __init__(self) -> None:
        #: ``(kind, args, thread_name)`` for every callback, in order.
        self.events: list[tuple[str, tuple[Any, ...], str]] = []
        # Callbacks may come from several threads (a pool, a background handle, or a stream
        # that breaks its promise to call back on the caller's thread, which tests look for).
        self._lock = threading.Lock()

    def handler(self, kind: str, *args: Any) -> None:
        """A block-form handler that records ``kind`` and ``args``."""
        with self._lock:
            self.events.append((kind, args, threading.current_thread().name))

    def on_chunk(self, chunk: Any) -> None:
        """Record a chunk."""
        self.handler("chunk", chunk)

    def on_done(self, finish_reason: str, usage: Any) -> None:
        """Record a done."""
        self.handler("done", finish_reason, usage)

    def on_error(self, err: Any) -> None:
        """Record an error."""
        self.handler("error", err)

    @property
    def kinds(self) -> list[str]:
        """The kinds of every callback, in order."""
        return [k for k, _, _ in self.events]

    @property
    def chunks(self) -> list[Any]:
        """Every chunk delivered."""
        return [a[0] for k, a, _ in self.events if k == "chunk"]

    @property
    def text(self) -> str:
        """The content deltas joined."""
        return "".join(c.content_delta or "" for c in self.chunks)

    @property
    def done(self) -> Optional[tuple[Any, ...]]:
        """``(finish_reason, usage)`` if done fired, else None."""
        return next((a for k, a, _ in self.events if k == "done"), None)

    @property
    def errors(self) -> list[Any]:
        """Every error delivered (a correct stream delivers at most one)."""
        return [a[0] for k, a, _ in self.events if k == "error"]

    @property
    def error(self) -> Any:
        """The single error delivered, or None."""
        errs = self.errors
        return errs[0] if errs else None

    @property
    def terminals(self) -> int:
        """How many done or error callbacks fired (exactly 1 for a correct stream)."""
        return sum(1 for k in self.kinds if k in ("done", "error"))

    @property
    def threads(self) -> set[str]:
        """Names of the threads the callbacks ran on."""
        return {t for _, _, t in self.events}
