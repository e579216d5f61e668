"""The stream lifecycle: a worker thread does the I/O, the caller's thread runs the callbacks.

The worker sends the request, reads bytes, folds them into chunks and hands each chunk to
the caller through a queue. The caller waits on that queue in a way Ctrl-C interrupts, runs
the callbacks one at a time, and is the only place a terminal event is delivered, so exactly
one of done or error fires and nothing follows it. Every limit that is not a socket timeout
(idle with keep-alives, total, cancel) is enforced from the caller's side by tearing the
worker's socket down, so the worker never outlives ``complete``.
"""

from __future__ import annotations

import functools
import json
import logging
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any, Callable, Optional

from ._cancel import CancelToken, ambient_token
from ._framing import iter_ndjson, iter_sse
from ._model import ChatModel
from ._retry import retry_delay
from ._transport import Abort, iter_bytes, map_exception, read_error_body, release
from ._types import CompletionRequest, CompletionResponse, StreamChunk, TokenUsage
from .errors import (
    BlazenError,
    CallbackError,
    CancelledError,
    ConnectionError,
    InternalError,
    ProviderError,
    TimeoutError,
    redact,
)
from .providers._base import HttpRequest, error_from_body, malformed
from .providers._state import StreamState

__all__ = ["Streaming"]

logger = logging.getLogger("blazen")

ChunkCallback = Callable[[StreamChunk], Any]
DoneCallback = Callable[[str, Optional[TokenUsage]], Any]
ErrorCallback = Callable[[BlazenError], Any]

# What the worker hands to the caller: (tag, payload). _CHUNKS carries a list of chunks:
# every chunk parsed from one socket read travels in one hand-off, since waking the
# caller's thread once per chunk costs more than parsing the chunk.
_CHUNKS, _DONE, _ERROR, _PROGRESS, _CANCEL = range(5)


class _Run:
    """One stream: its worker thread and the queue it fills."""

    __slots__ = ("abort", "delivered", "model", "queue", "req", "state", "thread")

    def __init__(self, model: ChatModel, req: CompletionRequest) -> None:
        self.model = model
        self.req = req
        self.queue: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()
        self.abort = Abort()
        self.state = StreamState()
        #: Whether a chunk has been handed to the caller (after that, nothing is retried).
        self.delivered = False
        self.thread = threading.Thread(target=self._work, name="blazen-stream", daemon=True)

    # -- worker thread -----------------------------------------------------------------

    def _work(self) -> None:
        try:
            self._attempts()
        except BaseException as exc:
            err = InternalError(f"blazen's stream worker failed: {type(exc).__name__}: {exc}")
            err.__cause__ = exc
            self.queue.put((_ERROR, err))

    def _attempts(self) -> None:
        model = self.model
        opts = model.options
        try:
            http = model._wire.build(self.req, stream=True)
        except BlazenError as build_error:
            self.queue.put((_ERROR, build_error))
            return
        attempt = 0
        while True:
            self.state = StreamState()
            try:
                self._attempt(http)
                return
            except Exception as exc:
                if self.abort.aborted:
                    return  # the caller decided how this stream ends
                err = map_exception(
                    exc,
                    provider=model.provider,
                    url=http.url,
                    connect_timeout=opts.connect_timeout,
                    read_timeout=opts.idle_timeout,
                )
            if not self.delivered and attempt < opts.max_retries:
                delay = retry_delay(attempt, err, cap=opts.retry_after_cap)
                if delay is not None:
                    attempt += 1
                    logger.info(
                        "%s: %s; retrying in %.2f s (retry %d of %d)",
                        model.provider,
                        redact(err.message, model._secrets),
                        delay,
                        attempt,
                        opts.max_retries,
                    )
                    self.queue.put((_PROGRESS, None))
                    if self.abort.event.wait(delay):
                        return
                    continue
            if err.retry_after is not None and err.retry_after > opts.retry_after_cap:
                err.message += (
                    f" (the server asked to wait {err.retry_after:g} s, longer than "
                    f"retry_after_cap={opts.retry_after_cap:g} s, so blazen did not retry)"
                )
            err.partial = self.state.text
            err.partial_reasoning = self.state.reasoning
            self.queue.put((_ERROR, err))
            return

    def _attempt(self, http: HttpRequest) -> None:
        model = self.model
        wire = model._wire
        opts = model.options
        resp = model._transport.open(
            http,
            self.abort,
            stream=True,
            connect_timeout=opts.connect_timeout,
            read_timeout=opts.idle_timeout,
        )
        put = self.queue.put
        pending: list[StreamChunk] = []

        def flush() -> None:
            if pending:
                put((_CHUNKS, pending[:]))
                pending.clear()

        finished = False
        try:
            status = resp.status_code
            if status != 200:
                body = read_error_body(resp)
                if 300 <= status < 400:
                    raise ProviderError(
                        f"{wire.provider} answered with a redirect ({status}) to "
                        f"{resp.headers.get('Location', '?')!r}; blazen does not follow "
                        "redirects (they could carry the key elsewhere): set base_url to "
                        "the final address",
                        provider=wire.provider,
                        status=status,
                    )
                raise wire.error(status, resp.headers, body)
            ctype = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if ctype not in wire.stream_content_types:
                raise self._wrong_content_type(ctype, read_error_body(resp), http.url)
            byte_chunks = _flushing(iter_bytes(resp), flush)
            frames: Any
            if wire.framing == "sse":
                frames = iter_sse(
                    byte_chunks, provider=wire.provider, max_event_bytes=opts.max_event_bytes
                )
            else:
                frames = (
                    ("", line)
                    for line in iter_ndjson(
                        byte_chunks, provider=wire.provider, max_line_bytes=opts.max_event_bytes
                    )
                )
            fold = wire.fold
            state = self.state
            for event, data in frames:
                try:
                    chunk = fold(state, event, data)
                except BlazenError:
                    raise
                except (LookupError, TypeError, AttributeError, ValueError) as exc:
                    raise malformed(wire.provider, "unexpected shape", data) from exc
                if chunk is not None:
                    self.delivered = True
                    pending.append(chunk)
                if state.finished:
                    break
            if not state.finished:
                raise ConnectionError(
                    f"{wire.provider} ended the stream before its end signal: the answer is "
                    "incomplete (the text received so far is on err.partial)",
                    provider=wire.provider,
                    error_type="truncated",
                    retryable=True,
                )
            pending.append(state.final_chunk())
            flush()
            put((_DONE, state.response()))
            finished = True
            release(resp)
        finally:
            if not finished:
                resp.close()
                flush()  # the chunks before a failure still precede its error

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


def _flushing(chunks: Iterator[bytes], flush: Callable[[], None]) -> Iterator[bytes]:
    """``chunks``, calling ``flush`` each time before the next (possibly blocking) read."""
    for data in chunks:
        yield data
        flush()


def _check_callable(name: str, fn: Any) -> None:
    if fn is not None and not callable(fn):
        msg = f"{name} must be callable or None, got {type(fn).__name__}"
        raise TypeError(msg)


def _scrub(err: BlazenError, secrets: tuple[str, ...]) -> BlazenError:
    # Last line of defence: whatever path built this error, no key leaves in it.
    if secrets:
        err.message = redact(err.message, secrets)
        err.args = (err.message,)
        if err.body:
            err.body = redact(err.body, secrets)
        err.partial = redact(err.partial, secrets)
    return err


class Streaming:
    """Streamed completions delivered through callbacks.

    Example::

        def handler(kind, *args):
            if kind == "chunk":
                print(args[0].content_delta or "", end="", flush=True)
            elif kind == "done":
                reason, usage = args
            elif kind == "error":
                print("failed:", args[0])

        response = Streaming.complete(model, req, handler)
    """

    @staticmethod
    def complete(
        model: ChatModel,
        req: CompletionRequest,
        handler: Optional[Callable[..., Any]] = None,
        *,
        on_chunk: Optional[ChunkCallback] = None,
        on_done: Optional[DoneCallback] = None,
        on_error: Optional[ErrorCallback] = None,
        cancel: Optional[CancelToken] = None,
        timeout: Optional[float] = None,
    ) -> Optional[CompletionResponse]:
        """Stream ``req`` from ``model``, calling back on this thread; block until it ends.

        ``handler(kind, *args)`` receives every kind (``"chunk"``, ``"done"``, ``"error"``);
        a keyword callback wins over it for its kind. Exactly one of done or error fires.
        Returns the :class:`CompletionResponse` on success; on failure returns None if an
        error handler was given, else raises the error.
        """
        if not isinstance(model, ChatModel):
            msg = f"model must come from blazen.Providers, got {type(model).__name__}"
            raise TypeError(msg)
        if not isinstance(req, CompletionRequest):
            msg = (
                "req must be built with blazen.Llm.completion_request(...), got "
                f"{type(req).__name__}"
            )
            raise TypeError(msg)
        for name, fn in (
            ("handler", handler),
            ("on_chunk", on_chunk),
            ("on_done", on_done),
            ("on_error", on_error),
        ):
            _check_callable(name, fn)
        if cancel is not None and not isinstance(cancel, CancelToken):
            msg = f"cancel must be a blazen.CancelToken, got {type(cancel).__name__}"
            raise TypeError(msg)
        if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
            msg = f"timeout must be a positive number of seconds, got {timeout!r}"
            raise ValueError(msg)
        if handler is not None:
            on_chunk = on_chunk or functools.partial(handler, "chunk")
            on_done = on_done or functools.partial(handler, "done")
            on_error = on_error or functools.partial(handler, "error")
        return _Caller(model, req, on_chunk, on_done, on_error, cancel, timeout).run()


class _Caller:
    """The calling thread's half of a stream: waits, runs callbacks, ends exactly once."""

    def __init__(
        self,
        model: ChatModel,
        req: CompletionRequest,
        on_chunk: Optional[ChunkCallback],
        on_done: Optional[DoneCallback],
        on_error: Optional[ErrorCallback],
        cancel: Optional[CancelToken],
        timeout: Optional[float],
    ) -> None:
        self.model = model
        self.run_ = _Run(model, req)
        self.on_chunk = on_chunk
        self.on_done = on_done
        self.on_error = on_error
        self.tokens = [t for t in {id(t): t for t in (cancel, ambient_token()) if t}.values()]
        self.timeout = timeout if timeout is not None else model.options.timeout
        self.ended = False

    def run(self) -> Optional[CompletionResponse]:
        run = self.run_
        unsubscribe = [t.subscribe(self._cancelled) for t in self.tokens]
        run.thread.start()
        try:
            return self._loop()
        except KeyboardInterrupt:
            if not self.ended:
                self.ended = True
                run.abort.abort()
                err = CancelledError("the stream was interrupted by Ctrl-C (KeyboardInterrupt)")
                self._join()
                if self.on_error is not None:
                    self.on_error(self._finish(err))
            raise
        finally:
            for unsub in unsubscribe:
                unsub()
            if not self.ended:
                run.abort.abort()
            self._join()

    def _cancelled(self) -> None:
        # Runs on whichever thread called cancel(): tear the socket down, wake the caller.
        self.run_.abort.abort()
        self.run_.queue.put((_CANCEL, None))

    def _join(self) -> None:
        thread = self.run_.thread
        if thread.is_alive() and thread is not threading.current_thread():
            thread.join()

    def _finish(self, err: BlazenError) -> BlazenError:
        if not err.partial and self.run_.state is not None and not self.run_.thread.is_alive():
            err.partial = self.run_.state.text
            err.partial_reasoning = self.run_.state.reasoning
        return _scrub(err, self.model._secrets)

    def _fail(self, err: BlazenError) -> None:
        """End the stream with ``err``: deliver it, or raise it with no error handler."""
        self.ended = True
        self.run_.abort.abort()
        self._join()
        err = self._finish(err)
        if self.on_error is None:
            raise err from err.__cause__
        self.on_error(err)

    def _loop(self) -> Optional[CompletionResponse]:
        run = self.run_
        get = run.queue.get
        on_chunk = self.on_chunk
        idle = self.model.options.idle_timeout
        total = self.timeout
        now = time.monotonic
        start = last = now()
        end = start + total if total is not None else None
        while True:
            wait: Optional[float] = None
            if idle is not None:
                wait = last + idle - now()
            if end is not None:
                left = end - now()
                wait = left if wait is None else min(wait, left)
            try:
                tag, payload = get(timeout=max(wait, 0.0)) if wait is not None else get()
            except queue.Empty:
                self._fail(self._timed_out(end, idle, total))
                return None
            if tag == _CHUNKS:
                last = now()
                if on_chunk is not None:
                    try:
                        for chunk in payload:
                            on_chunk(chunk)
                    except Exception as exc:
                        self._callback_raised(exc)
                        return None
            elif tag == _DONE:
                self.ended = True
                response: CompletionResponse = payload
                self._join()
                if self.on_done is not None:
                    self.on_done(response.finish_reason, response.usage)
                return response
            elif tag == _ERROR:
                self._fail(payload)
                return None
            elif tag == _CANCEL:
                reason = next((t.reason for t in self.tokens if t.cancelled and t.reason), "")
                self._fail(
                    CancelledError("the stream was cancelled" + (f": {reason}" if reason else ""))
                )
                return None
            else:  # _PROGRESS: a retry is starting, which is not being idle
                last = now()

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

    def _callback_raised(self, exc: Exception) -> None:
        # Tear the connection down first, so the server stops sending at once.
        self.run_.abort.abort()
        logger.error(
            "on_chunk raised %s; aborting the %s stream",
            type(exc).__name__,
            self.model.provider,
            exc_info=exc,
        )
        err = CallbackError(f"on_chunk raised {type(exc).__name__}: {exc}; the stream was aborted")
        err.__cause__ = exc
        self._fail(err)
