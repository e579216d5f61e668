"""Where an interrupt struck a call, read from its traceback: whether a terminal was owed.

A signal handler's exception (Ctrl-C's ``KeyboardInterrupt``, a SIGALRM deadline) can land
anywhere, including before a call has begun its stream: in the caller's own code, at the
entry point, or while the arguments are checked. There it propagates with no terminal, like
a refused argument (the documented edge in docs/streaming.md). A loaded machine can delay a
call past a 1 ms timer, so a test that strikes at random moments must tell the two apart,
and does so here from where each interrupt was raised.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from types import CodeType

__all__ = ["reached_the_stream", "reached_the_try"]


def _frames(exc: BaseException) -> Iterator[tuple[CodeType, int]]:
    """(code, line) of every frame the interrupt, and any it interrupted, was raised through."""
    seen: BaseException | None = exc
    while seen is not None:
        tb = seen.__traceback__
        while tb is not None:
            yield tb.tb_frame.f_code, tb.tb_lineno
            tb = tb.tb_next
        seen = seen.__context__


def _first_line(fn: Callable[..., object], pattern: str) -> int:
    """The file line of the first line of ``fn``'s source that matches ``pattern``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if re.search(pattern, line))


def reached_the_try(exc: BaseException, fn: Callable[..., object]) -> bool:
    """Whether an interrupt (or one before it in its chain) struck ``fn`` past its first ``try``."""
    code = fn.__code__  # type: ignore[attr-defined]
    try_line = _first_line(fn, r"^\s*try:\s*$")
    return any(c is code and line > try_line for c, line in _frames(exc))


def reached_the_stream(exc: BaseException) -> bool:
    """Whether a blocking call had begun its stream: ``complete_blocking`` owes a terminal
    from its ``try`` on, and an interrupt before it (the argument checks) owes none.
    """
    from blazen._stream.blocking import complete_blocking

    return reached_the_try(exc, complete_blocking)
