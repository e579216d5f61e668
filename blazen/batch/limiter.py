"""How many items may be in flight: additive increase, multiplicative decrease (AIMD).

TCP's congestion rule applied to a provider's rate limit: every success grows the limit by
``1/limit`` (one more item per round of ``limit`` successes), a rate limit halves it, and a
``Retry-After`` pauses every start until then. Only the calling thread touches it.
"""

from __future__ import annotations

import random
import time
from typing import Optional

__all__ = ["Limiter"]

#: Backoff for a rate limit that came without ``Retry-After``: base and cap, in seconds.
BACKOFF_BASE = 0.25
BACKOFF_CAP = 8.0


class Limiter:
    """The run's current concurrency, between 1 and ``ceiling``."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = float(ceiling)
        self.lowest = ceiling
        #: No item starts before this ``time.monotonic()``.
        self.paused_until = 0.0
        # Bumped at each decrease: a rate limit on an item started before the last decrease
        # is the same storm already answered, not a reason to halve again.
        self.epoch = 0

    @property
    def current(self) -> int:
        """Items that may be in flight now."""
        return int(self.limit)

    def succeeded(self) -> None:
        """An item finished: grow back towards the ceiling."""
        if self.limit < self.ceiling:
            self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)

    def rate_limited(self, epoch: int, retry_after: Optional[float], attempt: int) -> float:
        """An item started in ``epoch`` was rate-limited: seconds before it may run again."""
        if epoch == self.epoch:
            self.limit = max(1.0, self.limit / 2)
            self.lowest = min(self.lowest, self.current)
            self.epoch += 1
        if retry_after is not None:
            self.paused_until = max(self.paused_until, time.monotonic() + retry_after)
            return retry_after
        backoff = min(BACKOFF_CAP, BACKOFF_BASE * (2.0 ** (attempt - 1)))
        return backoff / 2 + random.uniform(0, backoff / 2)
