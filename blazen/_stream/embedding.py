"""Embeddings: any number of texts, cut into the provider's batches, sent a few at a time.

One :func:`embed_blocking` call (:mod:`.embedding_aio` for asyncio) splits its inputs
into the wire's batch size, and a few worker threads (``concurrency``, bounded by the
model's ``max_connections``) take batches in turn, each request with the same retries,
connect and idle limits, typed errors and key masking as a stream. The calling thread
waits in a way Ctrl-C interrupts; a cancel token, ``timeout=`` or the first batch that
fails tears every open connection down at once, and the call returns only after its
workers are gone. Results are put back in input order.
"""

from __future__ import annotations

import itertools
import logging
import queue
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, Union

from .._cancel import CancelToken, tokens_for
from .._http import Abort, HttpRequest, map_exception, retry_delay
from .._kit import SHAPE_ERRORS, EmbeddingBatch, EmbeddingWire, malformed, shape_error
from .._types import EmbeddingResponse, TokenUsage
from ..errors import (
    BlazenError,
    CancelledError,
    InternalError,
    TimeoutError,
    UnsupportedError,
)
from .delivery import leaving
from .worker import start_elsewhere

if TYPE_CHECKING:
    from .model import BoundModel

__all__ = [
    "EMBED_BODY_CAP",
    "Inputs",
    "check_embed",
    "embed_blocking",
]

logger = logging.getLogger("blazen")

#: The largest embedding response body read: 2,048 vectors of 3,072 floats as JSON text
#: are about 120 MiB (as base64, a fifth of that), far past a stream event's cap.
EMBED_BODY_CAP = 256 * 1024 * 1024
#: Batches in flight at once for one call, unless ``concurrency=`` says otherwise.
DEFAULT_CONCURRENCY = 4


Inputs = Union[str, Sequence[str]]


def texts_of(inputs: Inputs) -> list[str]:
    """``inputs`` as a list of texts; ``TypeError`` for anything else (before any I/O)."""
    if isinstance(inputs, str):
        return [inputs]
    if isinstance(inputs, (bytes, bytearray, Mapping)) or not isinstance(inputs, Sequence):
        msg = f"embed() takes a text or a sequence of texts, got {type(inputs).__name__}"
        raise TypeError(msg)
    texts = list(inputs)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            msg = f"embed() takes texts only: item {i} is {type(text).__name__}"
            raise TypeError(msg)
    return texts


def _check(dimensions: Optional[int], concurrency: Optional[int]) -> None:
    for name, value in (("dimensions", dimensions), ("concurrency", concurrency)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            msg = f"{name} must be a whole number or None, got {value!r}"
            raise TypeError(msg)
        if value is not None and value < 1:
            msg = f"{name} must be at least 1, got {value}"
            raise ValueError(msg)


def _sum_usage(batches: Sequence[EmbeddingBatch]) -> Optional[TokenUsage]:
    reported = [b.usage for b in batches if b.usage is not None]
    if not reported:
        return None
    total = reported[0]
    for usage in reported[1:]:
        total = total + usage
    return total


class _Finished:
    """A worker has taken its last batch (or was told to stop)."""


_FINISHED = _Finished()
_CANCEL = object()


class _Embedding:
    """One ``embed`` call: its batches, its workers, their aborts and their results."""

    def __init__(
        self,
        model: BoundModel,
        wire: EmbeddingWire,
        batches: list[list[str]],
        name: str,
        dimensions: Optional[int],
        workers: int,
    ) -> None:
        self.model = model
        self.wire = wire
        self.batches = batches
        self.name = name
        self.dimensions = dimensions
        self.events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # itertools.count's next() is one C call: workers take batches without a lock.
        self._next = itertools.count()
        self.aborts = [Abort() for _ in range(workers)]
        self.threads = [
            threading.Thread(target=self._work, args=(a,), name="blazen-embed", daemon=True)
            for a in self.aborts
        ]
        self.stopped = False

    def start(self) -> None:
        """Start the workers; called on blazen's starter thread (see ``start_elsewhere``).

        A worker not started (the call already stopped, or no thread could be started)
        counts as finished, so the caller's count of running workers still reaches zero.
        """
        for thread in self.threads:
            if self.stopped:
                self.events.put(_FINISHED)
                continue
            try:
                thread.start()
            except RuntimeError as exc:  # "can't start new thread"
                self.events.put(
                    (
                        -1,
                        InternalError(
                            f"blazen could not start an embedding worker thread ({exc}); the "
                            "process may have too many threads"
                        ),
                    )
                )
                self.events.put(_FINISHED)

    def stop(self) -> None:
        """Tear every open connection down; workers take no further batch."""
        self.stopped = True
        for abort in self.aborts:
            abort.abort()

    def _work(self, abort: Abort) -> None:
        try:
            while not self.stopped:
                index = next(self._next)
                if index >= len(self.batches):
                    return
                outcome = self._send(abort, self.batches[index])
                if outcome is None:
                    return  # aborted: the caller decided how this ends
                self.events.put((index, outcome))
        except BaseException as exc:
            self.events.put((-1, _internal(exc)))
        finally:
            self.events.put(_FINISHED)

    def _send(self, abort: Abort, texts: list[str]) -> Optional[Union[EmbeddingBatch, BlazenError]]:
        """One batch, retried as a stream is; None once aborted."""
        model = self.model
        opts = model.options
        transport = model.transport
        try:
            http = self.wire.build(texts, model=self.name, dimensions=self.dimensions)
        except BlazenError as build_error:
            return build_error
        attempt = 0
        while True:
            try:
                with transport.slot(abort):
                    return self._once(abort, http, len(texts))
            except Exception as exc:
                if abort.aborted:
                    return None
                err = map_exception(
                    exc,
                    provider=self.wire.provider,
                    url=http.url,
                    connect_timeout=opts.connect_timeout,
                    read_timeout=opts.idle_timeout,
                    proxy=transport.proxy,
                )
            if attempt < opts.max_retries:
                delay = retry_delay(attempt, err, cap=opts.retry_after_cap)
                if delay is not None:
                    attempt += 1
                    logger.info(
                        "%s embeddings: %s; retrying in %.2f s (retry %d of %d)",
                        self.wire.provider,
                        model.redact(err.message),
                        delay,
                        attempt,
                        opts.max_retries,
                    )
                    if abort.wait(delay):
                        return None
                    continue
            return err

    def _once(self, abort: Abort, http: HttpRequest, count: int) -> EmbeddingBatch:
        opts = self.model.options
        wire = self.wire
        resp = self.model.transport.open(
            http,
            abort,
            provider=wire.provider,
            stream=False,
            connect_timeout=opts.connect_timeout,
            read_timeout=opts.idle_timeout,
        )
        finished = False
        try:
            if resp.status != 200:
                raise wire.error(resp.status, resp.headers, resp.read_error_body())
            cap = max(opts.max_event_bytes, EMBED_BODY_CAP)
            body = resp.read_body(cap, within=opts.idle_timeout)
            finished = True
            resp.release()
        finally:
            if not finished:
                resp.close()
        try:
            batch = wire.parse(body, count)
        except BlazenError:
            raise
        except SHAPE_ERRORS as exc:
            raise shape_error(wire.provider, exc, body) from exc
        width = len(batch.vectors[0]) if batch.vectors else None
        if self.dimensions is not None and width is not None and width != self.dimensions:
            msg = f"embeddings of {width} dimensions where dimensions={self.dimensions} was asked"
            raise malformed(wire.provider, msg, body)
        return batch


def _internal(exc: BaseException) -> BlazenError:
    err = InternalError(f"blazen's embedding worker failed: {type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err


def check_embed(
    model: BoundModel,
    inputs: Inputs,
    *,
    model_name: Optional[str],
    dimensions: Optional[int],
    concurrency: Optional[int],
    batch_size: Optional[int],
) -> tuple[EmbeddingWire, list[list[str]], str, int]:
    texts = texts_of(inputs)
    _check(dimensions, concurrency)
    _check(batch_size, None)
    wire = model.embedder
    if wire is None:
        raise UnsupportedError(
            f"{model.provider} has no embedding endpoint blazen knows; pass "
            "embedding_model= to the factory if the server has one",
            provider=model.provider,
        )
    if model_name is not None and (not isinstance(model_name, str) or not model_name):
        msg = f"model must be a non-empty string or None, got {model_name!r}"
        raise TypeError(msg)
    size = min(batch_size or wire.batch_size, wire.batch_size)
    batches = [texts[i : i + size] for i in range(0, len(texts), size)]
    workers = min(
        len(batches),
        concurrency or DEFAULT_CONCURRENCY,
        wire.concurrency,
        model.options.max_connections,
    )
    return wire, batches, model_name or wire.model, workers


def embed_blocking(
    model: BoundModel,
    inputs: Inputs,
    *,
    model_name: Optional[str] = None,
    dimensions: Optional[int] = None,
    timeout: Optional[float] = None,
    cancel: Optional[CancelToken] = None,
    concurrency: Optional[int] = None,
    batch_size: Optional[int] = None,
) -> EmbeddingResponse:
    """Embed ``inputs`` on ``model``'s embedding endpoint; raise the one error on failure."""
    wire, batches, name, workers = check_embed(
        model,
        inputs,
        model_name=model_name,
        dimensions=dimensions,
        concurrency=concurrency,
        batch_size=batch_size,
    )
    if not batches:
        return EmbeddingResponse(vectors=(), usage=None, model=name)
    total = timeout if timeout is not None else model.options.timeout
    job = _Embedding(model, wire, batches, name, dimensions, workers)
    tokens = tokens_for(cancel)
    unsubscribe = [t.subscribe(lambda: job.events.put(_CANCEL)) for t in tokens]
    # An exception the caller is handling while it calls: not an interrupt of this one.
    outer = sys.exc_info()[1]
    try:
        # Started on blazen's starter thread: Thread.start's hand-off is not safe against
        # a signal (Ctrl-C), which only ever lands on the main thread.
        start_elsewhere(job)
        results = _collect(job, tokens, total)
    finally:
        # A finally whose first statement is a try, not an except: Python 3.10 runs a
        # pending signal handler at an except clause's entry, and a second Ctrl-C there
        # skipped the stop (the workers went on waiting on their connections).
        try:
            if leaving(outer) is not None:
                job.stop()
        except BaseException:  # a second interrupt: stop all the same (idempotent)
            job.stop()
        for unsub in unsubscribe:
            unsub()
        _join(job)
    vectors = tuple(v for batch in results for v in batch.vectors)
    answered = next((b.model for b in results if b.model), name)
    usage = _sum_usage(results)
    return EmbeddingResponse(
        vectors=vectors,
        # Named like a completion's usage, so that usage.cost prices the embedding model.
        usage=None if usage is None else usage.priced_as(wire.provider, answered),
        model=answered,
    )


def _collect(
    job: _Embedding, tokens: list[CancelToken], total: Optional[float]
) -> list[EmbeddingBatch]:
    results: list[Optional[EmbeddingBatch]] = [None] * len(job.batches)
    left = len(job.batches)
    running = len(job.threads)
    end = None if total is None else time.monotonic() + total
    provider = job.wire.provider
    while left and running:
        wait = None if end is None else max(end - time.monotonic(), 0.0)
        try:
            # SimpleQueue.get is interruptible: Ctrl-C raises KeyboardInterrupt here.
            item = job.events.get(timeout=wait)
        except queue.Empty:
            job.stop()
            raise job.model.scrub(
                TimeoutError(
                    f"embedding {sum(map(len, job.batches))} texts on {provider} did not "
                    f"finish within the total timeout of {total:g} s",
                    limit="total",
                    seconds=total or 0.0,
                    provider=provider,
                )
            ) from None
        if item is _CANCEL:
            job.stop()
            reason = next((t.reason for t in tokens if t.cancelled and t.reason), "")
            raise CancelledError("the embedding was cancelled" + (f": {reason}" if reason else ""))
        if item is _FINISHED:
            running -= 1
            continue
        index, outcome = item
        if isinstance(outcome, BlazenError):
            job.stop()
            raise job.model.scrub(outcome) from outcome.__cause__
        results[index] = outcome
        left -= 1
    if left:  # every worker stopped with batches left: only after an abort
        raise CancelledError("the embedding was aborted")
    done = [r for r in results if r is not None]
    widths = {len(v) for r in done for v in r.vectors[:1]}
    if len(widths) > 1:
        # Each batch was whole, but together they are not one space: never a ragged list.
        msg = f"the batches of one call came back with {len(widths)} different widths"
        raise job.model.scrub(malformed(provider, msg, ""))
    return done


def _join(job: _Embedding) -> None:
    # Workers exit once aborted (their sockets shut down) or out of batches; a bounded
    # wait each, so an interrupt here cannot hang the caller.
    deadline = time.monotonic() + 5.0
    for thread in job.threads:
        if thread.ident is not None:
            thread.join(max(deadline - time.monotonic(), 0.0))
