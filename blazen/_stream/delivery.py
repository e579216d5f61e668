"""What each event from the worker means for the caller, written once for every driver.

:meth:`Delivery.steps` is a generator that performs no I/O and calls no user code. It
yields *operations* (:data:`~.events.Op`) and the driver (blocking, asyncio, or background
thread) carries them out and sends back the result:

- :class:`~.events.Wait`: the next worker event, or None after ``seconds``;
- :class:`~.events.Deliver`: call the chunk callback with each chunk; send back the
  exception it raised, or None;
- :class:`~.events.Stop`: tear the worker's connection down and wait until it has exited;
- :class:`~.events.Join`: wait until the worker has exited (it is finishing on its own);
- :class:`~.events.Call`: call on_done/on_error; its exceptions propagate to the caller.

So the rules live in one place: exactly one terminal, nothing after it, the idle and total
limits, a raising chunk callback aborting the stream, and the worker gone before returning.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Generator, Iterator
from itertools import compress, starmap
from operator import length_hint
from traceback import format_exception
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from .._cancel import CancelToken, tokens_for
from .._types import CompletionRequest, CompletionResponse, StreamChunk, TokenUsage
from ..errors import BlazenError, CallbackError, CancelledError, TimeoutError, safe_str
from .events import (
    CANCEL,
    JOIN,
    STOP,
    Call,
    Cancel,
    Chunks,
    Deliver,
    Done,
    Exit,
    Failed,
    Op,
    Queued,
    Switched,
    Wait,
    WorkerEvent,
)
from .worker import StreamWorker

if TYPE_CHECKING:
    from .._telemetry import StreamSpan
    from .model import BoundModel

__all__ = [
    "INTERRUPT_RETRIES",
    "ChunkCallback",
    "Delivery",
    "DoneCallback",
    "ErrorCallback",
    "call_once",
    "leaving",
    "new_gate",
    "not_started",
]

#: How often a driver starts the steps after an interrupt over when interrupted again
#: (Ctrl-C pressed twice); bounded, so a step failing for another reason cannot spin. A
#: tuple to loop over: iterating it calls nothing, and a signal handler runs at a call
#: (``range()`` at the loop's head was a place where a second interrupt escaped).
INTERRUPT_RETRIES = tuple(range(20))

logger = logging.getLogger("blazen")

ChunkCallback = Callable[[StreamChunk], Any]
DoneCallback = Callable[[str, Optional[TokenUsage]], Any]
ErrorCallback = Callable[[BlazenError], Any]


def new_gate() -> Iterator[bool]:
    """A one-shot gate for :func:`call_once`: open until one call has gone through it."""
    return iter((True,))


def call_once(gate: Iterator[bool], fn: Callable[..., Any], args: tuple[Any, ...]) -> list[Any]:
    """Call ``fn(*args)`` unless ``gate`` has let a call through; ``[its result]`` or ``[]``.

    The gate closing and the call starting are one C-level operation (``list`` draining
    ``starmap`` over ``compress``: compress takes the gate's only item, then starmap calls
    ``fn``, with no Python bytecode in between), so no signal handler can raise between
    them: an interrupt either lands before (the gate is open, the call is still owed and
    a retry makes it) or after the callback was entered (the call was made; a retry finds
    the gate closed and makes none). A flag set just before the call would leave a gap
    where an interrupt loses the terminal; set just after, one where it doubles it.
    """
    return list(starmap(fn, compress((args,), gate)))


def leaving(outer: Optional[BaseException]) -> Optional[BaseException]:
    """In a ``finally``: the exception leaving it, or None if none is.

    ``outer`` is what ``sys.exc_info()`` gave as the function began: an exception the
    caller was handling when it called, which is no interrupt of this call.
    """
    exc = sys.exc_info()[1]
    return None if exc is outer else exc


def not_started(how: str) -> CancelledError:
    """The error of a stream interrupted while it was being set up (nothing was sent)."""
    return CancelledError(
        f"the stream was interrupted by {how} before it started; nothing was sent"
    )


class Delivery:
    """The caller's half of one stream, as a sans-I/O state machine."""

    def __init__(
        self,
        model: BoundModel,
        run: StreamWorker,
        *,
        on_chunk: Optional[ChunkCallback],
        on_done: Optional[DoneCallback],
        on_error: Optional[ErrorCallback],
        tokens: list[CancelToken],
        timeout: Optional[float],
    ) -> None:
        self.model = model
        self.run = run
        self.on_chunk = on_chunk
        self.on_done = on_done
        self.on_error = on_error
        self.tokens = tokens
        self.timeout = timeout if timeout is not None else model.options.timeout
        # Without streaming there is no content to be idle between: the socket's read
        # timeout still bounds a silent server.
        self.idle = model.options.idle_timeout if run.stream else None
        #: A terminal event has been decided; nothing else may be delivered.
        self.ended = False
        #: What was decided: the response, or the error (before its partial text is known).
        self.outcome: Optional[Union[CompletionResponse, BlazenError]] = None
        # Closed as the terminal callback is entered (see call_once, settled).
        self._gate = new_gate()
        #: A cancel token fired: from then on no chunk is delivered, and the stream ends
        #: cancelled even if the worker's done is already queued behind the chunks.
        self.cancelled = False
        #: ``time.monotonic()`` past which the total timeout has struck (None: no limit).
        #: The drivers read it between the chunks of one batch, too.
        self.deadline: Optional[float] = None
        #: The cancel came before the outcome was decided, so the stream ends cancelled.
        self.cancel_won = False
        # Deciding the outcome and a cancel from another thread exclude each other.
        self._deciding = threading.Lock()
        #: The worker has exited, so it holds no connection any more (set by the driver).
        self.worker_gone = False
        #: The stream's OpenTelemetry span, None unless the application uses OpenTelemetry;
        #: ended (and set back to None) with the terminal.
        self.telemetry: Optional[StreamSpan] = None

    @classmethod
    def open(
        cls,
        model: BoundModel,
        req: CompletionRequest,
        put: Callable[[WorkerEvent], Any],
        *,
        stream: bool,
        on_chunk: Optional[ChunkCallback],
        on_done: Optional[DoneCallback],
        on_error: Optional[ErrorCallback],
        cancel: Optional[CancelToken],
        timeout: Optional[float],
    ) -> Delivery:
        """A stream's worker (posting to ``put``, not started) and the caller's half of it."""
        run = StreamWorker(model, req, put, stream=stream)
        delivery = cls(
            model,
            run,
            on_chunk=on_chunk,
            on_done=on_done,
            on_error=on_error,
            tokens=tokens_for(cancel),
            timeout=timeout,
        )
        # On the calling thread: the span is a child of the span current here. Without
        # OpenTelemetry loaded by the application there is no span, and the telemetry
        # module is never imported.
        if "opentelemetry.trace" in sys.modules:
            from .._telemetry import stream_span

            delivery.telemetry = stream_span(model.provider, model.base_url, model.model, req)
        return delivery

    def _end_span(self, outcome: Union[CompletionResponse, BlazenError]) -> None:
        """End the OpenTelemetry span, if any, with the stream's outcome (once)."""
        span = self.telemetry
        if span is not None:
            self.telemetry = None
            if isinstance(outcome, BlazenError):
                span.failed(outcome)
            else:
                span.succeeded(outcome)

    @property
    def settled(self) -> bool:
        """The terminal callback has been entered (:meth:`call` makes it, at most once)."""
        return length_hint(self._gate) == 0

    def call(self, call: Call) -> list[Any]:
        """Make the terminal ``call`` unless one was made: ``[its result]`` or ``[]``.

        Safe to retry after an interrupt anywhere: see :func:`call_once`.
        """
        return call_once(self._gate, call.fn, call.args)

    def subscribe(self) -> None:
        """Make every cancel token wake the caller, until :meth:`unsubscribe`."""
        for t in self.tokens:
            t.subscribe(self._cancelled)

    def unsubscribe(self) -> None:
        """Undo :meth:`subscribe`; idempotent, and complete even where an interrupt cut
        :meth:`subscribe` short (a long-lived token must not keep the stream alive)."""
        for t in self.tokens:
            t._discard(self._cancelled)

    def _cancelled(self) -> None:
        # Runs on whichever thread called cancel(), synchronously inside cancel(): once it
        # returns no chunk may be delivered. Wake the caller first: the abort makes the
        # worker exit, and its EXIT must not overtake CANCEL in the caller's queue.
        with self._deciding:
            self.cancelled = True
            self.cancel_won = not self.ended
        self.run.post(CANCEL)
        self.run.abort.abort()

    def with_progress(self, err: BlazenError) -> BlazenError:
        """``err`` with what the stream got so far: its partial text and its usage."""
        # Only called once the worker has handed over its last event (after STOP or JOIN),
        # so its state no longer changes.
        run = self.run
        if not err.partial:
            err.partial = run.state.text
            err.partial_reasoning = run.state.reasoning
        if err.usage is None:  # an ending the caller decided: cancel, a time limit
            err.usage = run.usage_so_far()
        return err

    def caller_error(self, err: BlazenError) -> BlazenError:
        """The error as the caller receives it: with the stream's progress, keys masked."""
        return self.model.scrub(self.with_progress(err))

    def interrupt(self, how: str) -> None:
        """Ctrl-C or a cancelled task: end the stream as cancelled unless it had ended.

        The driver then waits for the worker and calls :meth:`owed`: the caller gets exactly
        one terminal before the interrupt propagates, whatever moment it struck.
        """
        # Built before the lock: constructing it runs Python code, where a second interrupt
        # may land, and ``ended`` must never be True while ``outcome`` is still None (the
        # retry would then find the stream ended and nothing owed). Outcome first, then
        # ended: two attribute stores, with no call in between.
        err = CancelledError(f"the stream was interrupted by {how}")
        with self._deciding:
            if not self.ended:
                self.outcome = err
                self.ended = True
        self.run.abort.abort()

    def owed(self) -> Optional[Call]:
        """The terminal callback still owed after an interrupt (the worker has exited).

        It changes nothing, so an interrupt while it runs can ask again: the caller makes
        the call with :meth:`call`, which makes it at most once.
        """
        if self.settled:
            return None
        outcome = self.outcome
        if isinstance(outcome, BlazenError):
            err = self.caller_error(outcome)
            self._end_span(err)
            if self.on_error is None:
                return None
            return Call(self.on_error, (err,))
        if outcome is not None:
            self._end_span(outcome)
        if outcome is None or self.on_done is None:
            return None
        return Call(self.on_done, (outcome.finish_reason, outcome.usage))

    def cancel_error(self) -> CancelledError:
        """The error of a stream a cancel token ended, with the token's reason."""
        reason = next((t.reason for t in self.tokens if t.cancelled and t.reason), "")
        return CancelledError("the stream was cancelled" + (f": {reason}" if reason else ""))

    def steps(self) -> Generator[Op, Any, Optional[CompletionResponse]]:
        """The protocol; see the module docstring."""
        on_chunk = self.on_chunk
        idle = self.idle
        total = self.timeout
        now = time.monotonic
        start = last = now()
        end = start + total if total is not None else None
        self.deadline = end
        queued = False  # waiting for a connection: the idle limit does not run
        # The span waiting for its first chunk: one None check per socket read, no more.
        first = self.telemetry
        while True:
            wait: Optional[float] = None
            if idle is not None and not queued:
                wait = last + idle - now()
            if end is not None:
                left = end - now()
                wait = left if wait is None or left < wait else wait
            # A deadline that has passed wins even when events are queued: a caller slower
            # than the stream must still hit its total timeout.
            expired = end is not None and now() >= end
            item: Optional[WorkerEvent] = (
                None if expired else (yield Wait(None if wait is None else max(wait, 0.0)))
            )
            if item is None:
                yield from self._fail(self._timed_out(end, idle, total), stop=True)
                return None
            if isinstance(item, Chunks):
                last = now()
                if first is not None:
                    first.first_chunk()
                    first = None
                if on_chunk is not None:
                    raised = yield Deliver(on_chunk, item.chunks)
                    if raised is not None:
                        yield from self._callback_raised(raised)
                        return None
            elif isinstance(item, Done):
                response = item.response
                if isinstance(self._decide(response), BlazenError):
                    # cancel() returned before this done was read: the caller asked first.
                    yield from self._fail(self.cancel_error(), stop=True)
                    return None
                yield JOIN
                self._end_span(response)
                if self.on_done is not None:
                    yield Call(self.on_done, (response.finish_reason, response.usage))
                return response
            elif isinstance(item, Failed):
                yield from self._fail(item.error, stop=False)
                return None
            elif isinstance(item, Cancel):
                yield from self._fail(self.cancel_error(), stop=True)
                return None
            elif isinstance(item, Exit):
                # The worker exited without a terminal event: only possible if it was
                # aborted, which the caller would have decided. Treat as cancelled.
                yield from self._fail(CancelledError("the stream was aborted"), stop=False)
                return None
            elif isinstance(item, Queued):
                queued = item.waiting
                last = now()
            elif isinstance(item, Switched):
                last = now()  # a fallback's next model starts: its own time, not idleness
                if self.telemetry is not None:
                    self.telemetry.hop(item.provider, item.model, item.error)
            else:  # Progress: a retry is starting, which is not being idle
                last = now()
                if self.telemetry is not None:
                    self.telemetry.retry()

    def _decide(
        self, outcome: Union[CompletionResponse, BlazenError]
    ) -> Union[CompletionResponse, BlazenError]:
        """Fix how the stream ends: ``outcome``, unless a cancel came first."""
        with self._deciding:
            if not self.ended:
                if self.cancelled and not isinstance(outcome, CancelledError):
                    outcome = self.cancel_error()
                self.outcome = outcome  # before ended: see interrupt
                self.ended = True
            assert self.outcome is not None
            return self.outcome

    def _fail(self, err: BlazenError, *, stop: bool) -> Generator[Op, Any, None]:
        decided = self._decide(err)
        assert isinstance(decided, BlazenError)
        err = decided
        yield STOP if stop else JOIN
        err = self.caller_error(err)
        self._end_span(err)
        # Not settled here: the driver's Delivery.call settles as it enters the callback,
        # so an interrupt at any moment before (while the error is scrubbed, say) still
        # finds it owed.
        if self.on_error is None:
            raise err from err.__cause__
        yield Call(self.on_error, (err,))
        return None

    def _callback_raised(self, exc: BaseException) -> Generator[Op, Any, None]:
        # Tear the connection down first, so the server stops sending at once.
        self.run.abort.abort()
        # The traceback is logged as text the model has scrubbed: a callback's exception
        # may quote what the server sent, key and all.
        logger.error(
            "on_chunk raised %s; aborting the %s stream\n%s",
            type(exc).__name__,
            self.model.provider,
            self.model.redact("".join(format_exception(type(exc), exc, exc.__traceback__))),
        )
        err = CallbackError(
            f"on_chunk raised {type(exc).__name__}: {safe_str(exc)}; the stream was aborted"
        )
        err.__cause__ = exc
        yield from self._fail(err, stop=True)
        return None

    def _timed_out(
        self, end: Optional[float], idle: Optional[float], total: Optional[float]
    ) -> TimeoutError:
        provider = self.model.provider
        if end is not None and total is not None and time.monotonic() >= end:
            return TimeoutError(
                f"the stream from {provider} did not finish within the total timeout of "
                f"{total:g} s",
                limit="total",
                seconds=total,
                provider=provider,
            )
        seconds = idle or 0.0
        return TimeoutError(
            f"{provider} sent no content for {seconds:g} s (idle timeout; keep-alives do "
            "not count); the stream was stopped (raise idle_timeout= for slow models)",
            limit="idle",
            seconds=seconds,
            provider=provider,
        )
