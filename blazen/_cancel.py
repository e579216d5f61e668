"""``CancelToken``: a thread-safe flag that ends every stream it was handed to."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Callable, Optional

__all__ = ["CancelToken", "ambient_token", "cancel_scope", "tokens_for"]


class CancelToken:
    """Cancels the streams it is passed to, from any thread.

    Example::

        token = blazen.CancelToken()
        threading.Timer(2.0, token.cancel).start()
        Streaming.complete(model, req, on_chunk=..., on_error=..., cancel=token)
    """

    __slots__ = ("_callbacks", "_cancelled", "_lock", "_reason")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._reason = ""
        self._callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` has been called."""
        return self._cancelled

    @property
    def reason(self) -> str:
        """The reason given to :meth:`cancel` (empty when none)."""
        return self._reason

    def cancel(self, reason: str = "") -> None:
        """Cancel every stream using this token. Idempotent; safe from any thread."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            self._reason = reason
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn()

    def subscribe(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn`` on cancel (at once if already cancelled); returns an unsubscribe."""
        with self._lock:
            if not self._cancelled:
                self._callbacks.append(fn)

                def unsubscribe() -> None:
                    with self._lock, contextlib.suppress(ValueError):
                        self._callbacks.remove(fn)

                return unsubscribe
        fn()
        return lambda: None

    def _discard(self, fn: Callable[[], None]) -> None:
        """Forget every subscription of ``fn`` (compared with ``==``); idempotent.

        For a subscriber that an interrupt may cut off before it kept its unsubscribe.
        """
        with self._lock:
            self._callbacks = [f for f in self._callbacks if f != fn]

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self._cancelled})"


# The tokens that streams started in this context obey even when none is passed, outermost
# first: workflows set one around their steps so their time budget reaches the streams
# inside them, and a step's own scope nests inside it rather than hiding it.
_AMBIENT: contextvars.ContextVar[tuple[CancelToken, ...]] = contextvars.ContextVar(
    "blazen_cancel", default=()
)


def ambient_token() -> Optional[CancelToken]:
    """The token set by the innermost :func:`cancel_scope`, if any."""
    ambient = _AMBIENT.get()
    return ambient[-1] if ambient else None


@contextlib.contextmanager
def cancel_scope(token: CancelToken) -> Iterator[CancelToken]:
    """Make ``token`` cancel every stream started inside this block (on this context).

    Scopes nest: a stream obeys every enclosing scope's token, and its own ``cancel=``.
    Example::

        token = CancelToken()
        threading.Timer(30, token.cancel).start()     # a deadline for the whole block
        with cancel_scope(token):
            summary = Streaming.complete(model, summarize_req)
            answer = Streaming.complete(model, answer_req)
    """
    if not isinstance(token, CancelToken):
        msg = f"cancel_scope needs a blazen.CancelToken, got {type(token).__name__}"
        raise TypeError(msg)
    reset = _AMBIENT.set((*_AMBIENT.get(), token))
    try:
        yield token
    finally:
        _AMBIENT.reset(reset)


def tokens_for(cancel: Optional[CancelToken]) -> list[CancelToken]:
    """The explicit token and every ambient one (a workflow's budget), without duplicates."""
    ambient = _AMBIENT.get()
    if not ambient:  # the common case: no scope at all
        return [] if cancel is None else [cancel]
    tokens = [] if cancel is None else [cancel]
    tokens += [t for t in ambient if all(t is not seen for seen in tokens)]
    return tokens
