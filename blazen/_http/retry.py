"""When to try a request again, and how long to wait first."""

from __future__ import annotations

import random
from typing import Optional

from ..errors import BlazenError

__all__ = ["retry_delay"]

BASE_DELAY = 0.5
MAX_BACKOFF = 8.0


def retry_delay(attempt: int, err: BlazenError, *, cap: float) -> Optional[float]:
    """Seconds to wait before attempt ``attempt + 1``, or None if ``err`` must not be retried.

    The server's ``Retry-After`` wins when it gave one, but a demand longer than ``cap`` is
    not waited for: the caller gets the error (with ``retry_after``) and decides. Otherwise
    exponential backoff with "equal jitter", so that many clients do not retry in step.
    """
    if not err.retryable:
        return None
    asked: Optional[float] = err.retry_after
    if asked is not None:
        return float(asked) if asked <= cap else None
    backoff = min(MAX_BACKOFF, BASE_DELAY * (2.0**attempt))
    return backoff / 2 + random.uniform(0, backoff / 2)
