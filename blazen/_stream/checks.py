"""Programming mistakes raise here, before any thread or socket exists."""

from __future__ import annotations

import contextvars
import sys
import threading
from typing import TYPE_CHECKING, Any

from .._cancel import CancelToken
from .._types import CompletionRequest
from ..errors import ValidationError

if TYPE_CHECKING:
    from .delivery import Delivery
    from .model import BoundModel

__all__ = [
    "check_callable",
    "check_controls",
    "check_reentry",
    "check_request",
    "start_delivering",
    "stop_delivering",
]

# The streams whose callbacks the current context is running, each with its owner (the
# asyncio task, else the thread, that runs them): a stream started from inside one of
# their callbacks runs in the same context and on the same owner. A task spawned from a
# callback inherits the context but not the owner: it may wait, the outer stream goes on.
_DELIVERING: contextvars.ContextVar[tuple[tuple[Delivery, object], ...]] = contextvars.ContextVar(
    "blazen_delivering", default=()
)


def _owner() -> object:
    """The asyncio task running this code, else the thread."""
    aio = sys.modules.get("asyncio")  # never imported just to ask
    if aio is not None:
        try:
            task = aio.current_task()
        except RuntimeError:  # no running loop on this thread
            task = None
        if task is not None:
            return task
    return threading.get_ident()


def check_callable(name: str, fn: Any) -> None:
    """``TypeError`` unless ``fn`` is callable or None."""
    if fn is not None and not callable(fn):
        msg = f"{name} must be callable or None, got {type(fn).__name__}"
        raise TypeError(msg)


def check_blocking_callbacks(callbacks: dict[str, Any], call: str) -> None:
    """``TypeError`` if a callback of blocking ``call`` is a coroutine function.

    A blocking call would call it, get a coroutine back, and never await it: every chunk
    would be dropped without a word.
    """
    import inspect  # on first use: `import blazen` does not pay for it

    for name, fn in callbacks.items():
        if fn is not None and (
            inspect.iscoroutinefunction(fn)
            or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004
        ):
            msg = (
                f"{name} is a coroutine function, which Streaming.{call} cannot await: use "
                "`await Streaming.complete_async(...)`, or pass a plain function"
            )
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


def check_reentry(model: BoundModel) -> None:
    """``ValidationError`` if a stream started here could only wait for ever.

    That is when every one of the model's ``max_connections`` is held by a stream whose
    callback is running in this very context: they cannot finish until this one does.
    Streams on other threads or tasks release theirs, so waiting for those is fine.
    """
    me = _owner()
    held = sum(
        1
        for d, owner in _DELIVERING.get()
        if owner == me and d.model is model and not d.worker_gone
    )
    limit = model.options.max_connections
    if held >= limit:
        msg = (
            f"all {limit} connection(s) of this {model.provider} model are held by streams "
            "whose callbacks are running here, so a stream started from inside one would "
            "wait for ever; raise max_connections=, use another model, or start the stream "
            "after the callback returns"
        )
        raise ValidationError(msg)


def start_delivering(delivery: Delivery) -> None:
    """Record ``delivery`` as running its callbacks here, until :func:`stop_delivering`."""
    _DELIVERING.set((*_DELIVERING.get(), (delivery, _owner())))


def stop_delivering(delivery: Delivery) -> None:
    """Undo :func:`start_delivering` in this context; idempotent.

    By identity rather than with a ``contextvars.Token``: an interrupt may land after the
    record was made and before its token was kept, or after the reset and before it was
    noted; calling this again (or without the start having happened) is always right. A
    record left behind would hold the stream for the thread's lifetime and, once
    ``max_connections`` of them piled up, refuse every later stream on it.
    """
    held = _DELIVERING.get()
    if any(d is delivery for d, _ in held):
        _DELIVERING.set(tuple(entry for entry in held if entry[0] is not delivery))
