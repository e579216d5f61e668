"""One request from its first send to its last event: retries, each attempt, the folding.

:class:`Exchange` is the request algorithm of a stream, with no thread of its own: the
worker thread (:mod:`.worker`) runs it, and a test can run it on its own thread with a
list's ``append`` as ``post``. It talks HTTP only through :mod:`blazen._http`'s
:class:`~blazen._http.Response`, which raises nothing but blazen errors, and reads the
provider only through the model's :class:`~blazen._kit.WireFormat`.

The way up for a chunk: each socket read (:meth:`Response.read`) goes to the framer, which
returns the batch of events it completed; the wire's fold turns each into a chunk (or
none); the chunks of one read go to the caller as one :class:`~.events.Chunks`. Nothing
waits between them: the next blocking read starts only after the batch is posted.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Optional

from .._http import (
    Abort,
    Frame,
    HttpRequest,
    ReadBudget,
    Response,
    busy,
    framer,
    reading_body,
    retry_delay,
)
from .._kit import SHAPE_ERRORS, StreamState, shape_error
from .._types import CompletionRequest, CompletionResponse, StreamChunk, TokenUsage
from ..errors import BlazenError, ConnectionError, InternalError, safe_str
from .continuation import continuation_limit, joined, next_request, next_whole_request
from .events import PROGRESS, Chunks, Done, Failed, Queued, Switched, WorkerEvent
from .output import with_output
from .usage import priced, usage_so_far

if TYPE_CHECKING:
    from .model import BoundModel

__all__ = ["Exchange"]

logger = logging.getLogger("blazen")


class Exchange:
    """One request's algorithm: send, check, read and fold, retry; each event to ``post``.

    ``post`` receives :class:`~.events.Chunks`, then exactly one of
    :class:`~.events.Done` or :class:`~.events.Failed`, with :data:`~.events.PROGRESS`
    before each retry and :class:`~.events.Queued` while it waits for a connection. After
    ``abort`` it posts nothing more: the caller has decided how the stream ends.
    """

    __slots__ = ("abort", "delivered", "model", "post", "req", "sent", "state", "stream")

    def __init__(
        self,
        model: BoundModel,
        req: CompletionRequest,
        post: Callable[[WorkerEvent], Any],
        abort: Abort,
        *,
        stream: bool = True,
    ) -> None:
        self.model = model
        self.req = req
        self.post = post
        self.abort = abort
        self.stream = stream
        #: What the current attempt has read (a retry starts a fresh one).
        self.state = StreamState()
        #: Whether a chunk has been posted (after that, nothing is retried).
        self.delivered = False
        #: Whether a request reached the provider (an answer's headers came back).
        self.sent = False

    def usage_so_far(self) -> Optional[TokenUsage]:
        """The usage an error carries: what the provider reported, else an estimate."""
        return usage_so_far(
            self.state, self.req, self.model.provider, self.model.model, sent=self.sent
        )

    def run(self) -> None:
        """Send the request until it succeeds, fails for good or is aborted.

        A fallback model (its ``chain`` of members) is tried member by member while nothing
        has reached the caller and the failure is one the chain moves on for; the stream
        still has one terminal in all.
        """
        if self.abort.aborted:
            return  # ended before the worker ran (a task cancelled at once): send nothing
        chain = self.model.chain
        if len(chain) == 1:
            err = self.member()
            if err is not None:
                self.post(Failed(err))
            return
        fallback = self.model
        tried: list[tuple[BoundModel, BlazenError]] = []
        for member in chain:
            self.model = member
            err = self.member()
            if err is None or self.abort.aborted:
                return
            tried.append((member, err))
            try:
                stop = self.delivered or member is chain[-1] or not fallback.switches(err)
            except BlazenError as rule_error:  # the caller's on= rule raised
                rule_error.attempts = tuple(e for _, e in tried)
                self.post(Failed(fallback.scrub(rule_error)))
                return
            if stop:
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
                f"the fallback tried {len(tried)} models and none answered: {_describe(tried)}"
            )
            last.args = (last.message,)
        last.attempts = tuple(e for _, e in tried)
        self.post(Failed(last))

    def member(self) -> Optional[BlazenError]:
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
                    self.attempt(http)
                return None
            except Exception as exc:
                if self.abort.aborted:
                    return None  # the caller decided how this stream ends
                err = exc if isinstance(exc, BlazenError) else self._bug(exc)
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
                    if self.abort.wait(delay):
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

    def attempt(self, http: HttpRequest) -> None:
        """Send ``http`` once and read the answer to its end; raises a blazen error if not.

        A streamed turn the provider paused goes on inside this attempt: the next request
        (:func:`~.continuation.next_request`) is sent and its body folded into the same
        state by the same fold, so the caller sees one stream and one terminal.
        """
        model = self.model
        wire = model.wire
        opts = model.options
        resp = self._open(http)
        finished = False
        try:
            if not self.stream:
                response = self._parsed(resp)
                limit = continuation_limit(opts.max_continuations, self.req)
                continued = 0
                while True:
                    # A paused turn goes on here too, each whole answer joined to the last.
                    nxt = next_whole_request(wire, self.req, response, continued, limit)
                    if nxt is None:
                        break
                    finished = True
                    resp.release()
                    continued += 1
                    # The usage of the answers so far is reported usage: an error in the
                    # next request carries it (err.usage), never an estimate instead.
                    self.state.usage = response.usage
                    resp = self._open(wire.build(nxt, stream=False))
                    finished = False
                    response = joined(response, self._parsed(resp))
                response = self._finished_whole(response)
                finished = True
                resp.release()
                self.post(Done(response))
                return
            fold = wire.start(self.state).fold
            limit = continuation_limit(opts.max_continuations, self.req)
            continued = 0
            while True:
                cut, data, pending = self.fold_body(resp, fold)
                try:
                    nxt = next_request(wire, self.req, self.state, continued, limit)
                    if nxt is None:
                        response = self._assembled(data, pending)
                finally:
                    # Whatever ends the stream, the chunks read before it reach the caller
                    # first, in one batch with the final chunk.
                    self._post(pending)
                if nxt is None:
                    break
                # A paused turn goes on in the same stream: this body is over, the next
                # request carries the content so far (see .continuation).
                finished = True
                _end(resp, cut)
                continued += 1
                resp = self._open(wire.build(nxt, stream=True))
                finished = False
            # Done goes before the drain: the caller may finish while the rest is read.
            self.post(Done(response))
            finished = True
            _end(resp, cut)
        finally:
            if not finished:
                resp.close()

    def _open(self, http: HttpRequest) -> Response:
        """Send ``http``; the response once it is one this request can read (else raises)."""
        model = self.model
        wire = model.wire
        opts = model.options
        resp = model.transport.open(
            http,
            self.abort,
            provider=wire.provider,
            stream=self.stream,
            connect_timeout=opts.connect_timeout,
            read_timeout=opts.idle_timeout,
        )
        self.sent = True
        try:
            resp.check(wire.error, stream_types=wire.stream_content_types if self.stream else None)
        except BaseException:
            resp.close()
            raise
        return resp

    def _parsed(self, resp: Response) -> CompletionResponse:
        """A whole (non-streamed) body, read and parsed."""
        wire = self.model.wire
        opts = self.model.options
        body = resp.read_body(opts.max_event_bytes, within=opts.idle_timeout)
        try:
            return wire.parse_response(body)
        except BlazenError:
            raise
        except SHAPE_ERRORS as exc:
            # A body of the wrong shape, as a streamed payload would be: not a bug.
            raise shape_error(wire.provider, exc, body) from exc

    def _finished_whole(self, response: CompletionResponse) -> CompletionResponse:
        """The whole answer priced, and read as the typed output when one was asked for."""
        response = priced(response, self.model.wire.provider, self.model.model)
        if self.req.output is not None:
            response = with_output(self.req.output, response)
        return response

    def fold_body(
        self, resp: Response, fold: Callable[[str, str], Optional[StreamChunk]]
    ) -> tuple[bool, str, list[StreamChunk]]:
        """Fold one streamed body into :attr:`state`, posting each read's chunks as one batch.

        Returns at the provider's end signal: whether the body was given up on after it
        (see ``StreamState.read_on``), the last payload, and the last read's chunks, not
        yet posted (the final chunk joins them). Raises if the body ends before the signal.
        """
        wire = self.model.wire
        provider = wire.provider
        state = self.state
        cap = self.model.options.max_event_bytes
        frames = framer(wire.framing, provider=provider, max_event_bytes=cap)
        feed = frames.feed
        read = resp.read
        data = ""
        # Reading on after an end signal that may not be the last (state.read_on): the
        # reads get TAIL_GRACE in all, so a server that goes quiet (or trickles keep-alives,
        # or repeats the ending with no content) after it holds the call about a second at
        # most. Content after it means the answer goes on: the stream is mid-answer again
        # (reads wait as any read does, and the body ending there is a cut answer) until
        # the next end signal starts a fresh grace.
        tail: Optional[ReadBudget] = None

        def take(raw: bytes, batch: list[Frame]) -> Optional[tuple[bool, str, list[StreamChunk]]]:
            # One read's events folded: the result once the body is over, else None.
            nonlocal tail, data
            pending: list[StreamChunk] = []
            ended = not raw
            kept = False
            try:
                for event, data in batch:
                    try:
                        chunk = fold(event, data)
                    except BlazenError:
                        raise
                    except SHAPE_ERRORS as exc:
                        raise shape_error(provider, exc, data) from exc
                    if chunk is not None:
                        pending.append(chunk)
                        if tail is not None and not state.read_on:
                            # Content after the end signal: the answer goes on, and has not
                            # ended until another end signal comes.
                            tail = None
                            resp.unlimit_reads()
                            state.finished = False
                    if state.finished:
                        if state.read_on:
                            # An end signal that may not be the last: read on, a short while.
                            # A repeat with no content since the last one keeps its deadline
                            # (else a server repeating it forever would hold the call).
                            state.read_on = False
                            if tail is None or chunk is not None:
                                tail = resp.limit_reads(TAIL_GRACE)
                        elif tail is None:
                            ended = True  # the end signal, and nothing may follow it
                            break
                if ended:
                    if not state.finished:
                        raise ConnectionError(
                            f"{provider} ended the stream before its end signal: the answer "
                            "is incomplete (the text received so far is on err.partial)",
                            provider=provider,
                            error_type="truncated",
                            retryable=True,
                        )
                    kept = True
                    return False, data, pending
            finally:
                # Whatever ends the stream, the chunks read before it reach the caller first.
                if not kept:
                    self._post(pending)
            return None

        def take_elsewhere(raw: bytes) -> Any:
            # On the shared reader's thread: the same steps; a read past an end signal that
            # may not be the last (its reads are timed) goes back to this thread.
            out = take(raw, feed(raw))
            if out is None and tail is not None:
                return _BACK
            return out

        abort = self.abort

        def aborted() -> bool:
            return abort.aborted

        with reading_body():
            while True:
                if tail is None and busy():
                    # Many bodies are read at once: one thread reads them all (see
                    # _http.reader), this one waits until the body comes back.
                    out = resp.read_elsewhere(take_elsewhere, aborted)
                    if out is not None and out is not _BACK:
                        return out  # type: ignore[no-any-return]
                try:
                    raw = read()
                    batch = feed(raw) if raw else frames.end()
                except BlazenError:
                    if tail is None or self.abort.aborted:
                        raise
                    # The grace ran out, or the connection failed with nothing after the
                    # end signal: the answer ended at it.
                    return True, data, []
                out = take(raw, batch)
                if out is not None:
                    return out

    def _post(self, pending: list[StreamChunk]) -> None:
        if pending:
            self.delivered = True
            self.post(Chunks(pending))

    def _assembled(self, data: str, pending: list[StreamChunk]) -> CompletionResponse:
        """The finished stream's response; its final chunk joins ``pending``."""
        state = self.state
        provider = self.model.wire.provider
        # Assembled before the final chunk goes out: a value of the wrong type (a number as
        # finish_reason) is a malformed payload, never an is_final chunk followed by an error.
        try:
            response = priced(state.response(), provider, self.model.model)
        except SHAPE_ERRORS as exc:
            raise shape_error(provider, exc, data) from exc
        # Typed output is read once, here: an answer that is not the type is the stream's
        # one error, and the final chunk never goes out before it.
        spec = self.req.output
        if spec is not None:
            response = with_output(spec, response)
        pending.append(state.final_chunk())
        return response

    def _queued(self, waiting: bool) -> None:
        self.post(Queued(waiting))

    def _bug(self, exc: Exception) -> BlazenError:
        # Not the HTTP stack's (the transport maps all of those), nor a payload of the wrong
        # shape: a wire format or blazen itself failed.
        provider = self.model.provider
        err = InternalError(
            f"unexpected {type(exc).__name__} reading {provider}'s answer: {safe_str(exc)}"
        )
        err.__cause__ = exc
        return err


# What a read on the shared reader returns to go on reading here (past an end signal).
_BACK = object()

#: How long the stream waits for more after an end signal that may not be the last
#: (Gemini's finishReason, see StreamState.read_on); content after it ends the wait (the
#: answer goes on), and only the next end signal starts a fresh one.
TAIL_GRACE = 1.0


def _describe(tried: list[tuple[BoundModel, BlazenError]]) -> str:
    """One line naming each attempt: ``openai (gpt-4o): RateLimitError: ...; ...``."""
    return "; ".join(f"{m.provider} ({m.model}): {type(e).__name__}: {e.message}" for m, e in tried)


def _end(resp: Response, cut: bool) -> None:
    # A body the server never ended is not a connection to reuse.
    if cut:
        resp.close()
    else:
        resp.release()
