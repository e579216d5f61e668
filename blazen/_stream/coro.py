"""Coroutines that keep their terminal promise even when cancelled before they start."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Coroutine, Generator
from typing import Any, Callable, TypeVar, cast

__all__ = ["cancel_safe", "guarded"]

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Coroutine[Any, Any, Any]])


class _Guarded(Coroutine[Any, Any, _T]):
    """A coroutine that, cancelled before its first step, still runs to its first wait.

    A task cancelled before it ever ran throws ``CancelledError`` into a coroutine that has
    not started, and Python then skips the body entirely: no terminal callback would run.
    Here the body first runs up to its first wait (where a stream has subscribed its
    callbacks), and the cancel lands there, as it would one step later.
    """

    __slots__ = ("_coro", "_started")

    def __init__(self, coro: Coroutine[Any, Any, _T]) -> None:
        self._coro = coro
        self._started = False

    def send(self, value: Any) -> Any:
        self._started = True
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        if not self._started:
            self._started = True
            # Finished without waiting? Then throwing re-raises the cancel, as it should.
            with contextlib.suppress(StopIteration):
                self._coro.send(None)
        return self._coro.throw(*args)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, _T]:
        return self

    def __iter__(self) -> _Guarded[_T]:
        return self

    def __next__(self) -> Any:
        return self.send(None)


def guarded(coro: Coroutine[Any, Any, _T]) -> Coroutine[Any, Any, _T]:
    """``coro``, keeping its terminal promise when its task is cancelled before it ran."""
    return _Guarded(coro)


def cancel_safe(fn: _F) -> _F:
    """Make an ``async def`` keep its terminal promise when its task is cancelled unstarted."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> _Guarded[Any]:
        return _Guarded(fn(*args, **kwargs))

    mark = getattr(inspect, "markcoroutinefunction", None)  # Python 3.12+
    return cast(_F, mark(call) if mark is not None else call)
