"""Programming mistakes raise here, before any thread or socket exists."""

from __future__ import annotations

from typing import Any

from .._cancel import CancelToken
from .._types import CompletionRequest

__all__ = ["check_callable", "check_controls", "check_request"]


def check_callable(name: str, fn: Any) -> None:
    """``TypeError`` unless ``fn`` is callable or None."""
    if fn is not None and not callable(fn):
        msg = f"{name} must be callable or None, got {type(fn).__name__}"
        raise TypeError(msg)


def check_request(req: Any) -> None:
    """``TypeError`` unless ``req`` is a :class:`~blazen.CompletionRequest`."""
    if not isinstance(req, CompletionRequest):
        msg = f"req must be built with blazen.Llm.completion_request(...), got {type(req).__name__}"
        raise TypeError(msg)


def check_controls(callbacks: dict[str, Any], cancel: Any, timeout: Any) -> None:
    """Callbacks callable (or None), ``cancel`` a CancelToken, ``timeout`` positive seconds."""
    for name, fn in callbacks.items():
        check_callable(name, fn)
    if cancel is not None and not isinstance(cancel, CancelToken):
        msg = f"cancel must be a blazen.CancelToken, got {type(cancel).__name__}"
        raise TypeError(msg)
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
    ):
        msg = f"timeout must be a positive number of seconds, got {timeout!r}"
        raise ValueError(msg)
