"""The backlog of one run: step calls waiting for a worker, started oldest first.

Each step keeps its own queue of waiting events, and a heap holds the steps that could start
a call now (something waiting, fewer calls running than their ``max_concurrency``), keyed by
the arrival number of their oldest waiting event. Queueing, starting and finishing a call
each cost O(log steps), however long the backlog: a capped step with thousands of events
waiting behind it no longer makes the dispatcher walk all of them whenever a call ends.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from typing import Optional

from .events import Event, Step

__all__ = ["Backlog"]


class Backlog:
    """Events waiting for a call of the step that accepts them; used by the dispatcher only."""

    __slots__ = ("_arrivals", "_busy", "_ready", "_waiting")

    def __init__(self) -> None:
        self._arrivals = itertools.count()
        self._waiting: dict[str, deque[tuple[int, Event]]] = {}
        self._busy: dict[str, int] = {}
        # The invariant: a step is in this heap exactly once while it has events waiting and
        # room under its cap, keyed by its oldest one's arrival; arrivals are unique, so the
        # step itself is never compared.
        self._ready: list[tuple[int, str, Step]] = []

    def add(self, step: Step, event: Event) -> None:
        """Queue ``event`` for a call of ``step``."""
        waiting = self._waiting.setdefault(step.name, deque())
        arrival = next(self._arrivals)
        waiting.append((arrival, event))
        if len(waiting) == 1 and self._has_room(step):
            heapq.heappush(self._ready, (arrival, step.name, step))

    def take(self) -> Optional[tuple[Step, Event]]:
        """The oldest event whose step has room, counted as running; None if there is none."""
        if not self._ready:
            return None
        _, name, step = heapq.heappop(self._ready)
        waiting = self._waiting[name]
        _, event = waiting.popleft()
        self._busy[name] = self._busy.get(name, 0) + 1
        if waiting and self._has_room(step):
            heapq.heappush(self._ready, (waiting[0][0], name, step))
        return step, event

    def done(self, step: Step) -> None:
        """A call of ``step`` taken from here has ended: its room goes to the next event."""
        busy = self._busy[step.name]
        self._busy[step.name] = busy - 1
        waiting = self._waiting.get(step.name)
        # Only a step that was at its cap is missing from the heap while events wait.
        if waiting and busy == step.max_concurrency:
            heapq.heappush(self._ready, (waiting[0][0], step.name, step))

    def _has_room(self, step: Step) -> bool:
        cap = step.max_concurrency
        return cap is None or self._busy.get(step.name, 0) < cap
