"""The worker half of a stream: send, read, fold, retry, and hand events to the caller.

The worker runs on its own thread and never calls user code. It hands typed events
(:mod:`.events`) to a ``put`` callable (a queue for blocking callers, the event loop for
asyncio) and always ends with :data:`~.events.EXIT`. Whatever the caller decides (cancel,
timeout, a raising callback), it tears the socket down through the run's
:class:`~blazen._http.Abort` and the worker exits. It talks HTTP only through
:mod:`blazen._http`'s small response object.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable, Optional

from .._http import (
    Abort,
    HttpRequest,
    ReadBudget,
    Response,
    iter_ndjson,
    iter_sse,
    map_exception,
    proxy_refused,
    retry_delay,
)
from .._kit import SHAPE_ERRORS, StreamState, error_from_body, shape_error
from .._types import CompletionRequest, CompletionResponse, StreamChunk, TokenUsage
from ..errors import BlazenError, ConnectionError, InternalError, ProviderError
from .events import EXIT, PROGRESS, Chunks, Done, Failed, Queued, Switched, WorkerEvent
from .output import with_output
from .usage import priced, usage_so_far

if TYPE_CHECKING:
    from .model import ChatModel

__all__ = ["Run", "start_soon"]

logger = logging.getLogger("blazen")


# Runs waiting to be started by the starter thread (see start_soon).
_to_start: queue.SimpleQueue[Run] = queue.SimpleQueue()
_starter_lock = threading.Lock()
_starter: list[threading.Thread] = []  # the running starter, if any
#: How long the starter waits for more work before it exits.
STARTER_IDLE = 5.0


def start_soon(run: Run) -> None:
    """Start ``run``'s worker from blazen's own starter thread, and return at once.

    ``Thread.start`` waits until the new thread runs, which under a busy GIL can take
    milliseconds; an event loop must not wait that long per stream, nor borrow the
    application's executor, which may be busy for seconds. One daemon thread starts the
    workers in order and exits after :data:`STARTER_IDLE` seconds without work.
    """
    _to_start.put(run)
    run.queued = True
    with _starter_lock:
        if not _starter:
            starter = threading.Thread(target=_start_workers, name="blazen-starter", daemon=True)
            _starter.append(starter)
            starter.start()


def _start_workers() -> None:
    while True:
        try:
            run = _to_start.get(timeout=STARTER_IDLE)
        except queue.Empty:
            with _starter_lock:
                # A thread queued before this lock was taken is still ours to start.
                if _to_start.empty():
                    _starter.clear()
                    return
            continue
        run.start()
        del run  # not kept alive (its loop, its text) while the starter idles


def _forget_starter() -> None:
    # A forked child has no starter thread, whatever the parent had.
    global _starter_lock, _to_start
    _starter.clear()
    _starter_lock = threading.Lock()
    _to_start = queue.SimpleQueue()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_starter)


class Run:
    """One request: its worker thread, its abort handle, and where its events go."""

    __slots__ = (
        "_gone",
        "_patience",
        "abort",
        "began",
        "delivered",
        "exited",
        "model",
        "put",
        "queued",
        "req",
        "sent",
        "starting",
        "state",
        "stream",
        "thread",
    )

    def __init__(
        self,
        model: ChatModel,
        req: CompletionRequest,
        put: Callable[[WorkerEvent], Any],
        *,
        stream: bool = True,
    ) -> None:
        self.model = model
        self.req = req
        self.put = put
        self.stream = stream
        self.abort = Abort()
        self.state = StreamState()
        #: Whether a chunk has been handed to the caller (after that, nothing is retried).
        self.delivered = False
        #: Whether a request reached the provider (an answer's headers came back).
        self.sent = False
        self.thread = threading.Thread(target=self._work, name="blazen-stream", daemon=True)
        #: Handed to the starter thread (asyncio callers), which will start it.
        self.queued = False
        #: Thread.start has been asked for (a thread may exist from then on).
        self.starting = False
        #: The worker has begun its work (its first act): from then on it exits on its own.
        self.began = False
        #: The worker will touch nothing of the caller's any more (its last act but one).
        self.exited = False
        # Held from here until the worker's last act releases it (a plain lock may be
        # released by any thread). The caller waits on it, never on a threading.Event:
        # Event and Condition are Python code, and a signal handler raising inside them on
        # the caller's thread can leave their lock held for good, so that the next wait
        # (or the worker's set()) blocks forever. Lock.acquire is one C call.
        self._gone = threading.Lock()
        self._gone.acquire()
        # How long, over all wait_exit calls, a worker that has not begun is waited for.
        self._patience = _UNBEGUN_WAIT

    def _work(self) -> None:
        self.began = True
        try:
            self._attempts()
        except BaseException as exc:
            err = InternalError(f"blazen's stream worker failed: {type(exc).__name__}: {exc}")
            err.__cause__ = exc
            self.post(Failed(err))
        finally:
            try:
                self.post(EXIT)
            finally:
                self._exit()

    def _exit(self) -> None:
        self.exited = True
        # Twice is possible: Thread.start can raise RuntimeError from threading's own
        # waits broken by an interrupt after the thread did start (start() then ends the
        # stream, and the worker exits later too). Released once is all a waiter needs.
        with contextlib.suppress(RuntimeError):
            self._gone.release()

    def start(self) -> None:
        """Start the worker; if no thread can be started, end the stream with an error."""
        self.starting = True
        try:
            self.thread.start()
        except RuntimeError as exc:  # "can't start new thread": out of threads or memory
            err = InternalError(
                f"blazen could not start the stream's worker thread ({exc}); the process "
                "may have too many threads"
            )
            self.post(Failed(err))
            self.post(EXIT)
            self._exit()

    def wait_exit(self) -> None:
        """Wait until the worker has exited, or return if it can no longer do anything.

        Safe to interrupt anywhere and to call again, and it never waits forever: the
        caller's thread only ever blocks in bounded ``Lock.acquire`` calls (C code, which
        a signal handler's exception leaves consistent) and reads plain flags.

        - The worker's last act releases :attr:`_gone`: the wait returns on :attr:`exited`,
          even if an interrupt left the lock taken by this thread (no ``Thread.join``: an
          interrupted join leaves CPython sure a running thread has stopped).
        - A worker that never began (``Thread.start`` interrupted before the thread ran, or
          the thread stuck in threading's own start hand-off) is waited for a moment, then
          left to itself if the run is aborted: it sends nothing once it begins.
        - A worker thread that is gone without its last act (killed at shutdown) is gone.
        """
        gone = self._gone
        thread = self.thread
        if not self.starting:
            return  # interrupted before Thread.start was even asked for: no thread
        while not self.exited:
            if not self.began and self.abort.aborted and self._patience <= 0:
                return
            if gone.acquire(timeout=_EXIT_POLL):
                gone.release()  # another wait_exit (or a retry) may ask again
                continue
            if not self.began:
                self._patience -= _EXIT_POLL
            elif not self.exited and not _thread_alive(thread):
                return

    def usage_so_far(self) -> Optional[TokenUsage]:
        """The usage an error carries: what the provider reported, else an estimate."""
        return usage_so_far(
            self.state, self.req, self.model.provider, self.model.model, sent=self.sent
        )

    def post(self, item: WorkerEvent) -> None:
        """Hand ``item`` to the caller; if nobody listens any more, end the stream."""
        try:
            self.put(item)
        except RuntimeError:
            # The caller's event loop is gone: nobody is listening any more.
            self.abort.abort()

    def _queued(self, waiting: bool) -> None:
        self.post(Queued(waiting))

    def _attempts(self) -> None:
        if self.abort.aborted:
            return  # ended before the worker ran (a task cancelled at once): send nothing
        chain = self.model.chain
        if len(chain) == 1:
            err = self._member_attempts()
            if err is not None:
                self.post(Failed(err))
            return
        # A fallback: each member in turn, while nothing has reached the caller and the
        # failure is one the chain moves on for (fallback.switches); one terminal in all.
        fallback = self.model
        tried: list[tuple[ChatModel, BlazenError]] = []
        for member in chain:
            self.model = member
            err = self._member_attempts()
            if err is None or self.abort.aborted:
                return
            tried.append((member, err))
            if self.delivered or member is chain[-1] or not fallback.switches(err):
                break
            logger.info(
                "fallback: %s (%s) failed before any chunk (%s); trying %s",
                member.provider,
                member.model,
                member.redact(f"{type(err).__name__}: {err.message}"),
                chain[len(tried)].provider,
            )
            self.post(Switched(member.provider, member.model, err))
        last = tried[-1][1]
        if len(tried) > 1:
            last.message = (
                f"the fallback tried {len(tried)} models and none answered: "
                f"{_describe(tried)}"
            )
            last.args = (last.message,)
        last.attempts = tuple(e for _, e in tried)
        self.post(Failed(last))

    def _member_attempts(self) -> Optional[BlazenError]:
        """Send the request to :attr:`model` with its retries: None if it ended (answered or
        aborted), else the error to report."""
        model = self.model
        opts = model.options
        try:
            http = model.wire.build(self.req, stream=self.stream)
        except BlazenError as build_error:
            return build_error
        attempt = 0
        while True:
            self.state = StreamState()
            try:
                with model.transport.slot(self.abort, self._queued):
                    self._attempt(http)
                return None
            except Exception as exc:
                if self.abort.aborted:
                    return None  # the caller decided how this stream ends
                err = map_exception(
                    exc,
                    provider=model.provider,
                    url=http.url,
                    connect_timeout=opts.connect_timeout,
                    read_timeout=opts.idle_timeout,
                    proxy=model.transport.proxy,
                )
            if not self.delivered and attempt < opts.max_retries:
                delay = retry_delay(attempt, err, cap=opts.retry_after_cap)
                if delay is not None:
                    attempt += 1
                    logger.info(
                        "%s: %s; retrying in %.2f s (retry %d of %d)",
                        model.provider,
                        model.redact(err.message),
                        delay,
                        attempt,
                        opts.max_retries,
                    )
                    self.post(PROGRESS)
                    if self.abort.event.wait(delay):
                        return None
                    continue
            if err.retry_after is not None and err.retry_after > opts.retry_after_cap:
                err.message += (
                    f" (the server asked to wait {err.retry_after:g} s, longer than "
                    f"retry_after_cap={opts.retry_after_cap:g} s, so blazen did not retry)"
                )
            err.partial = self.state.text
            err.partial_reasoning = self.state.reasoning
            err.usage = self.usage_so_far()
            return err

    def _attempt(self, http: HttpRequest) -> None:
        model = self.model
        wire = model.wire
        opts = model.options
        resp = model.transport.open(
            http,
            self.abort,
            stream=self.stream,
            connect_timeout=opts.connect_timeout,
            read_timeout=opts.idle_timeout,
        )
        self.sent = True
        finished = False
        try:
            status = resp.status
            if status != 200:
                self._raise_for_status(resp, status)
            if not self.stream:
                body = resp.read_body(opts.max_event_bytes, wire.provider, within=opts.idle_timeout)
                try:
                    response = priced(wire.parse_response(body), wire.provider, model.model)
                except BlazenError:
                    raise
                except SHAPE_ERRORS as exc:
                    # A body of the wrong shape, as a streamed payload would be: not a bug.
                    raise shape_error(wire.provider, exc, body) from exc
                finished = True
                resp.release()
                if self.req.output is not None:
                    response = with_output(self.req.output, response)
                self.post(Done(response))
                return
            ctype = resp.content_type
            if ctype not in wire.stream_content_types:
                raise self._wrong_content_type(ctype, resp.read_error_body(), http.url)
            cut = self._fold_stream(resp)
            finished = True
            if cut:
                resp.close()  # the server never ended the body: not a connection to reuse
            else:
                resp.release()
        finally:
            if not finished:
                resp.close()

    def _fold_stream(self, resp: Response) -> bool:
        """Fold the stream and post its done; True if its body was cut (see read_on)."""
        post = self.post
        pending: list[StreamChunk] = []

        def flush() -> None:
            if pending:
                post(Chunks(pending[:]))
                pending.clear()

        try:
            response, cut = self._fold_frames(_flushing(resp.iter_bytes(), flush), pending, resp)
        finally:
            # Whatever ends the stream, the chunks parsed before it reach the caller first.
            flush()
        post(Done(response))
        return cut

    def _fold_frames(
        self, byte_chunks: Iterator[bytes], pending: list[StreamChunk], resp: Response
    ) -> tuple[CompletionResponse, bool]:
        wire = self.model.wire
        cap = self.model.options.max_event_bytes
        frames: Any
        if wire.framing == "sse":
            frames = iter_sse(byte_chunks, provider=wire.provider, max_event_bytes=cap)
        else:
            lines = iter_ndjson(byte_chunks, provider=wire.provider, max_line_bytes=cap)
            frames = (("", line) for line in lines)
        state = self.state
        fold = wire.start(state).fold
        add = pending.append
        data = ""
        # Reading on after an end signal that may not be the last (state.read_on): each
        # wait for more gets TAIL_GRACE, renewed only by content, so a server that goes
        # quiet (or trickles nothing new) after it holds the call about a second at most.
        tail: Optional[ReadBudget] = None
        grew = False  # content came after the latest end signal
        cut = False  # the body was given up on after the end signal
        frames = iter(frames)
        while True:
            try:
                event, data = next(frames)
            except StopIteration:
                break
            except Exception:
                if tail is None or self.abort.aborted or (grew and not tail.spent()):
                    raise
                # The grace ran out, or the connection failed with nothing after the end
                # signal: the answer ended at it.
                cut = True
                break
            try:
                chunk = fold(event, data)
            except BlazenError:
                raise
            except SHAPE_ERRORS as exc:
                raise shape_error(wire.provider, exc, data) from exc
            if chunk is not None:
                self.delivered = True
                add(chunk)
                if tail is not None:
                    # More came after the end signal: the answer goes on.
                    grew = True
                    tail = resp.limit_reads(TAIL_GRACE)
            if state.finished:
                if not state.read_on:
                    if tail is None:
                        break  # the end signal, and nothing may follow it
                else:
                    # An end signal that may not be the last: read on, for a short while.
                    state.read_on = False
                    grew = False
                    tail = resp.limit_reads(TAIL_GRACE)
        if not state.finished:
            raise ConnectionError(
                f"{wire.provider} ended the stream before its end signal: the answer is "
                "incomplete (the text received so far is on err.partial)",
                provider=wire.provider,
                error_type="truncated",
                retryable=True,
            )
        # Assembled before the final chunk goes out: a value of the wrong type (a number as
        # finish_reason) is a malformed payload, never an is_final chunk followed by an error.
        try:
            response = priced(state.response(), wire.provider, self.model.model)
        except SHAPE_ERRORS as exc:
            raise shape_error(wire.provider, exc, data) from exc
        # Typed output is read once, here: an answer that is not the type is the stream's
        # one error, and the final chunk never goes out before it.
        spec = self.req.output
        if spec is not None:
            response = with_output(spec, response)
        add(state.final_chunk())
        return response, cut

    def _raise_for_status(self, resp: Response, status: int) -> None:
        wire = self.model.wire
        if status == 407:
            # Only a proxy answers 407 (RFC 9110, 15.5.8): the provider never saw the request.
            raise proxy_refused(
                wire.provider, self.model.transport.proxy, status, "Proxy Authentication Required"
            )
        body = resp.read_error_body()
        if 300 <= status < 400:
            raise ProviderError(
                f"{wire.provider} answered with a redirect ({status}) to "
                f"{resp.location() or '?'!r}; blazen does not follow redirects "
                "(they could carry the key elsewhere): set base_url to the final address",
                provider=wire.provider,
                status=status,
            )
        raise wire.error(status, resp.headers, body)

    def _wrong_content_type(self, ctype: str, body: str, url: str) -> ProviderError:
        provider = self.model.provider
        if ctype == "application/json":
            try:
                payload = json.loads(body)
            except ValueError:
                payload = None
            if isinstance(payload, dict) and payload.get("error") is not None:
                return error_from_body(provider, None, payload, raw=body)
        what = "an HTML page" if ctype == "text/html" else f"Content-Type {ctype or 'none'!r}"
        return ProviderError(
            f"{provider} answered 200 with {what} instead of an event stream; is base_url "
            f"right? (request went to {url})",
            provider=provider,
            status=200,
            error_type="wrong_content_type",
            body=body[:4096],
        )


#: How long the stream waits for more after an end signal that may not be the last
#: (Gemini's finishReason, see StreamState.read_on), renewed by each payload with content.
TAIL_GRACE = 1.0

#: How long one bounded wait for the worker's exit lasts before the flags are read again.
_EXIT_POLL = 0.05
#: How long an aborted worker that has not begun is waited for before it is left to itself.
_UNBEGUN_WAIT = 0.1


def _describe(tried: list[tuple[ChatModel, BlazenError]]) -> str:
    """One line naming each attempt: ``openai (gpt-4o): RateLimitError: ...; ...``."""
    return "; ".join(f"{m.provider} ({m.model}): {type(e).__name__}: {e.message}" for m, e in tried)


def _thread_alive(thread: threading.Thread) -> bool:
    # Asked of the interpreter, not of Thread.is_alive(), which an interrupt inside a join
    # (or inside is_alive itself) can leave wrong. Only asked after a bounded wait ran out.
    ident = thread.ident
    return ident is not None and ident in sys._current_frames()


def _flushing(chunks: Iterator[bytes], flush: Callable[[], None]) -> Iterator[bytes]:
    """``chunks``, calling ``flush`` before each next (possibly blocking) read."""
    for data in chunks:
        yield data
        flush()
