"""Coroutines that keep their terminal promise even when cancelled before they start."""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import types
from collections.abc import Coroutine, Generator
from typing import Any, Callable, Optional, TypeVar, cast

__all__ = ["cancel_safe", "cancelled_unstarted"]

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Coroutine[Any, Any, Any]])


class _Flag(threading.local):
    flag = False


_cancelled_unstarted = _Flag()


def cancelled_unstarted() -> bool:
    """Whether the coroutine running now was cancelled before its first step.

    It runs to its first wait all the same (see :class:`_Guarded`); a stream it starts
    there is cancelled at that wait, so it should not send its request at all.
    """
    return _cancelled_unstarted.flag


class _Guarded(Coroutine[Any, Any, _T]):
    """A coroutine that, cancelled before its first step, still runs to its first wait.

    A task cancelled before it ever ran throws ``CancelledError`` into a coroutine that has
    not started, and Python then skips the body entirely: no terminal callback would run.
    Here the body first runs up to its first wait (where a stream has subscribed its
    callbacks), and the cancel lands there, as it would one step later. Everything else
    (its name, frame and state, for task reprs, ``get_stack()`` and debuggers) is the
    inner coroutine's.
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
            # Meanwhile the body knows it is already cancelled: it sends nothing.
            _cancelled_unstarted.flag = True
            try:
                with contextlib.suppress(StopIteration):
                    self._coro.send(None)
            finally:
                _cancelled_unstarted.flag = False
        return self._coro.throw(*args)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, _T]:
        return self

    def __iter__(self) -> _Guarded[_T]:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def __getattr__(self, name: str) -> Any:
        # cr_frame, cr_await, cr_running, cr_code, __name__, __qualname__...
        return getattr(self._coro, name)

    def __repr__(self) -> str:
        return repr(self._coro)


class _CoroutineFunction:
    """An async function whose calls are :class:`_Guarded`; still a coroutine function.

    asyncio and inspect (and the frameworks that ask them whether to await a callable)
    recognise it through the markers they look for, read lazily so that ``import blazen``
    does not import asyncio.
    """

    def __init__(self, fn: Callable[..., Coroutine[Any, Any, Any]]) -> None:
        self._fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> _Guarded[Any]:
        return _Guarded(self._fn(*args, **kwargs))

    def __get__(self, obj: Any, objtype: Optional[type] = None) -> Any:
        # A method: bound like a function (a bound method forwards the markers below).
        return self if obj is None else types.MethodType(self, obj)

    @property
    def _is_coroutine(self) -> Any:
        # What asyncio.iscoroutinefunction looks for (asyncio is loaded if it asks).
        import asyncio.coroutines

        return getattr(asyncio.coroutines, "_is_coroutine", None)

    @property
    def _is_coroutine_marker(self) -> Any:
        # What inspect.markcoroutinefunction sets (Python 3.12+). The sentinel it compares
        # with is inspect._is_coroutine_mark, named _is_coroutine_marker in 3.12.0-3.12.x
        # releases before the rename.
        mark = getattr(inspect, "_is_coroutine_mark", None)
        return mark if mark is not None else getattr(inspect, "_is_coroutine_marker", None)


def cancel_safe(fn: _F) -> _F:
    """Make an async function keep its terminal promise when its task is cancelled unstarted.

    ``fn`` is an ``async def``, or a plain function that checks its arguments at once and
    returns the coroutine to run.
    """
    return cast(_F, _CoroutineFunction(fn))
