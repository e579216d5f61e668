"""``blazen.init`` and ``blazen.shutdown``: process-wide set-up and tear-down."""

from __future__ import annotations

import threading

from .model import close_all_models

__all__ = ["init", "shutdown"]

_lock = threading.Lock()
_initialised = False


def init() -> None:
    """Prepare blazen for use. Optional and idempotent: every call after the first does nothing."""
    global _initialised
    with _lock:
        _initialised = True


def shutdown() -> None:
    """Close every model's pooled connections. Idempotent; models reconnect if used again."""
    global _initialised
    with _lock:
        _initialised = False
    close_all_models()
