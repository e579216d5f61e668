"""The typed hand-offs of a stream: worker to caller, and delivery protocol to driver.

The worker thread hands the caller one :data:`WorkerEvent` at a time; the delivery protocol
(:mod:`.delivery`) answers each with :data:`Op` values that a driver (blocking, asyncio,
background thread) carries out. All are small slotted classes: a driver dispatches on the
class, and mypy checks every field.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from .._types import CompletionResponse, StreamChunk
from ..errors import BlazenError

__all__ = [
    "CANCEL",
    "EXIT",
    "JOIN",
    "PROGRESS",
    "STOP",
    "Call",
    "Cancel",
    "Chunks",
    "Deliver",
    "Done",
    "Exit",
    "Failed",
    "Join",
    "Op",
    "Progress",
    "Queued",
    "Stop",
    "Switched",
    "Wait",
    "WorkerEvent",
]


# -- worker -> caller ----------------------------------------------------------------


class Chunks:
    """Every chunk parsed from one socket read: waking the caller once per read, not per chunk."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list[StreamChunk]) -> None:
        self.chunks = chunks


class Done:
    """The stream ended with the provider's end signal; the assembled response."""

    __slots__ = ("response",)

    def __init__(self, response: CompletionResponse) -> None:
        self.response = response


class Failed:
    """The stream failed (after any retries) with this error."""

    __slots__ = ("error",)

    def __init__(self, error: BlazenError) -> None:
        self.error = error


class Progress:
    """A retry is starting: not content, but not idleness either."""

    __slots__ = ()


class Switched:
    """A fallback moves on: ``error`` ended the attempt on ``provider``'s ``model``.

    Not content, but not idleness either; the stream's span records the hop.
    """

    __slots__ = ("error", "model", "provider")

    def __init__(self, provider: str, model: str, error: BaseException) -> None:
        self.provider = provider
        self.model = model
        self.error = error


class Queued:
    """The stream waits for one of the model's connections (``waiting``), or has one now.

    Waiting for a connection is not the provider sending nothing: the idle limit pauses.
    """

    __slots__ = ("waiting",)

    def __init__(self, waiting: bool) -> None:
        self.waiting = waiting


class Cancel:
    """A cancel token fired (posted by the cancelling thread, not the worker)."""

    __slots__ = ()


class Exit:
    """The worker's last act: nothing follows from it."""

    __slots__ = ()


PROGRESS = Progress()
CANCEL = Cancel()
EXIT = Exit()

WorkerEvent = Union[Chunks, Done, Failed, Progress, Queued, Switched, Cancel, Exit]


# -- delivery protocol -> driver ------------------------------------------------------


class Wait:
    """Send back the next worker event, or None after ``seconds`` (None: wait for ever)."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: Optional[float]) -> None:
        self.seconds = seconds


class Deliver:
    """Call ``fn`` with each chunk in order; send back the first exception raised, or None.

    A chunk after one whose callback raised is not delivered.
    """

    __slots__ = ("chunks", "fn")

    def __init__(self, fn: Callable[[StreamChunk], Any], chunks: list[StreamChunk]) -> None:
        self.fn = fn
        self.chunks = chunks


class Stop:
    """Tear the worker's connection down, then wait until the worker has exited."""

    __slots__ = ()


class Join:
    """Wait until the worker has exited (it is finishing on its own)."""

    __slots__ = ()


class Call:
    """Call the terminal callback (``on_done``/``on_error``); its exceptions propagate."""

    __slots__ = ("args", "fn")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args


STOP = Stop()
JOIN = Join()

Op = Union[Wait, Deliver, Stop, Join, Call]
