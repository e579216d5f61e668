"""``batch.run``: many requests through one model, bounded, resumable and rate-limit aware.

The calling thread owns the run: it pulls requests from the iterable only when a slot is
free (so a generator of millions costs no more than ``concurrency`` items), hands each to
the executor, and takes every event back from one :class:`~.work.Pipe`: chunks, and
"item done". Writing ``out=``, the callbacks, the progress bar and the :class:`Limiter` all
live on this one thread, so none of them needs a lock.

Every wait of a run and the deadline that bounds it (one test each in
``tests/hostile/test_waits_are_bounded.py`` or ``tests/test_batch.py``):

| wait                                          | bounded by                                  |
|-----------------------------------------------|---------------------------------------------|
| one item's stream, on a pool thread           | the model's connect and idle timeouts, and  |
|                                               | ``timeout=``; Ctrl-C cancels it             |
| the loop waiting for the next event           | 1 s a turn (``_wait``), then it looks again |
| a rate-limited item waiting to run again      | ``Retry-After`` up to the model's           |
|                                               | ``retry_after_cap`` (longer: the item fails |
|                                               | with its ``RateLimitError``), else backoff  |
|                                               | capped at 8 s; at most ``max_attempts``     |
| a pool thread posting a chunk (``Pipe``)      | the calling thread taking it; a cancel ends |
|                                               | it within 0.05 s                            |
| an interrupted run waiting for its items      | ``DRAIN_TIMEOUT`` (30 s)                    |
| the pool's shutdown at the end                | the items, all ended or cancelled by then   |

The tests, row by row: ``test_a_stalled_batch_item_ends_by_its_time_limit_and_the_run_goes_on``
(and, for Ctrl-C, ``test_ctrl_c_cancels_the_streams_in_flight_reports_and_says_how_to_resume``
in ``tests/test_batch_process.py``);
``test_a_batch_item_told_to_wait_too_long_fails_instead_of_pausing_the_run`` (rows 2 and 3:
nothing arrives while an item waits out its backoff);
``test_a_pool_thread_waiting_for_room_gives_up_on_cancel``;
``test_an_interrupted_run_waits_for_items_that_never_come_back_at_most_drain_timeout`` and
``test_a_raising_on_result_stops_the_run_with_a_callback_error`` (its pool threads gone) in
``tests/test_batch.py``. ``batch.embed`` (:mod:`.embed`) and ``via="provider"``
(:mod:`.provider.run`) have tables of their own.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import os
import sys
import time
from collections.abc import Iterable
from typing import Any, Callable, Optional, Union

import attrs

from .._cancel import CancelToken
from .._stream import ChatModel
from .._types import CompletionRequest, StreamChunk
from ..errors import (
    CallbackError,
    CancelledError,
    InternalError,
    OverloadedError,
    RateLimitError,
    safe_str,
)
from .inputs import Item, check_arguments, pairs
from .limiter import Limiter
from .progress import Progress, open_progress
from .provider import run_via_provider
from .report import BatchReport, UsageTally
from .results import BatchResult, PathLike, ResultsFile
from .work import ItemChunk, ItemLeft, Pipe, RemoteModel, run_item

__all__ = ["run"]

#: Chunks that may wait for the calling thread, per unit of concurrency.
CHUNK_ROOM = 64
#: Events handled in a row before the loop looks at starting more items.
DRAIN_BATCH = 256
#: Seconds an interrupted run waits for its cancelled items to come back.
DRAIN_TIMEOUT = 30.0


@attrs.define
class _Try:
    key: int
    id: str
    req: CompletionRequest
    attempt: int = 1
    epoch: int = 0
    not_before: float = 0.0
    cancel: Optional[CancelToken] = None

    def __lt__(self, other: _Try) -> bool:  # the retry heap orders by time
        return (self.not_before, self.key) < (other.not_before, other.key)


class _BatchRun:
    def __init__(
        self,
        model: ChatModel,
        requests: Iterable[Item],
        *,
        concurrency: int,
        results: Optional[ResultsFile],
        max_attempts: int,
        on_result: Optional[Callable[[BatchResult], Any]],
        on_chunk: Optional[Callable[[str, StreamChunk], Any]],
        progress: Optional[Progress],
        executor: concurrent.futures.Executor,
        local: bool,
        timeout: Optional[float],
    ) -> None:
        self.model = model
        # What the executor gets: the model itself on our threads, its recipe elsewhere.
        self.shipped: Union[ChatModel, RemoteModel] = model if local else RemoteModel.of(model)
        self.source = pairs(requests)
        self.exhausted = False
        self.results = results
        self.max_attempts = max_attempts
        self.on_result = on_result
        self.on_chunk = on_chunk
        self.progress = progress
        self.executor = executor
        self.local = local
        self.timeout = timeout
        self.limiter = Limiter(concurrency)
        self.retry_after_cap = model.options.retry_after_cap
        self.pipe = Pipe(CHUNK_ROOM * concurrency)
        self.in_flight: dict[int, tuple[_Try, concurrent.futures.Future[BatchResult]]] = {}
        self.waiting: list[_Try] = []  # rate-limited tries, a heap by not_before
        self.keys = 0
        self.counts = {"ok": 0, "failed": 0, "skipped": 0, "cancelled": 0, "rate_limited": 0}
        self.usage = UsageTally()
        self.stopping = False
        self.started = time.monotonic()

    # -- the loop ----------------------------------------------------------------------

    def loop(self) -> None:
        while True:
            self._start_items()
            if not self.in_flight and not self.waiting and self.exhausted:
                return
            event = self.pipe.get(self._wait())
            # What else has arrived, within reason: busy streams must not starve new starts.
            for _ in range(DRAIN_BATCH):
                if event is None:
                    break
                self._handle(event)
                event = self.pipe.get(0) if self.in_flight else None
            if event is not None:
                self._handle(event)

    def _wait(self) -> float:
        # Until the next event, or the moment a paused or waiting try may start: at most 1 s.
        wake = self.limiter.paused_until
        if self.waiting:
            wake = max(wake, self.waiting[0].not_before)
        left = wake - time.monotonic()
        return min(1.0, left) if left > 0 else (1.0 if self.in_flight else 0.0)

    def _start_items(self) -> None:
        now = time.monotonic()
        while (
            not self.stopping
            and len(self.in_flight) < self.limiter.current
            and now >= self.limiter.paused_until
        ):
            if self.waiting and self.waiting[0].not_before <= now:
                self._submit(heapq.heappop(self.waiting))
                continue
            # Tries waiting out a rate limit hold their slots: at most `ceiling` items live.
            if self.exhausted or len(self.in_flight) + len(self.waiting) >= self.limiter.ceiling:
                return
            fresh = self._next_fresh()
            if fresh is None:
                return
            self._submit(fresh)

    def _next_fresh(self) -> Optional[_Try]:
        done = self.results.done if self.results is not None else ()
        for item_id, req in self.source:
            if item_id in done:
                self.counts["skipped"] += 1
                if self.progress is not None:
                    self.progress.skip()
                continue
            self.keys += 1
            return _Try(key=self.keys, id=item_id, req=req)
        self.exhausted = True
        return None

    def _submit(self, item: _Try) -> None:
        item.epoch = self.limiter.epoch
        if self.local:
            item.cancel = CancelToken()
            future = self.executor.submit(
                run_item,
                self.model,
                item.id,
                item.req,
                item.attempt,
                self.timeout,
                item.cancel,
                self.pipe if self.on_chunk is not None else None,
            )
        else:
            future = self.executor.submit(
                run_item, self.shipped, item.id, item.req, item.attempt, self.timeout
            )
        self.in_flight[item.key] = (item, future)
        done = ItemLeft(item.key)
        future.add_done_callback(lambda _f: self.pipe.done(done))

    # -- one event ---------------------------------------------------------------------

    def _handle(self, event: Union[ItemChunk, ItemLeft]) -> None:
        if isinstance(event, ItemChunk):
            if self.on_chunk is not None and not self.stopping:
                self._call("on_chunk", self.on_chunk, event.id, event.chunk)
            return
        entry = self.in_flight.pop(event.key, None)
        if entry is None:
            return
        item, future = entry
        result = self._result(item, future)
        err = result.error
        if isinstance(err, CancelledError) and self.stopping:
            self.counts["cancelled"] += 1
            return
        if (
            isinstance(err, (RateLimitError, OverloadedError))
            and item.attempt < self.max_attempts
            and not self.stopping
            # A longer wait than the model's retry_after_cap fails the item (retry_after on
            # its error), as one stream does: one item never pauses the whole run for a day.
            and (err.retry_after is None or err.retry_after <= self.retry_after_cap)
        ):
            self.counts["rate_limited"] += 1
            delay = self.limiter.rate_limited(item.epoch, err.retry_after, item.attempt)
            item.attempt += 1
            item.not_before = time.monotonic() + delay
            heapq.heappush(self.waiting, item)
            return
        self._finish(result)

    def _result(self, item: _Try, future: concurrent.futures.Future[BatchResult]) -> BatchResult:
        if future.cancelled():
            return BatchResult(id=item.id, error=CancelledError("cancelled before it started"))
        exc = future.exception()
        if exc is None:
            return future.result()
        # The executor failed the task (a lost worker, an unpicklable argument...).
        msg = f"the executor failed batch item {item.id!r}: {type(exc).__name__}: {safe_str(exc)}"
        return BatchResult(id=item.id, error=InternalError(self.model.redact(msg)))

    def _finish(self, result: BatchResult) -> None:
        if self.results is not None:
            self.results.write(result)
        if result.response is not None:
            self.counts["ok"] += 1
            self.limiter.succeeded()
            self.usage.answered(result.response.usage)
        else:
            self.counts["failed"] += 1
            self.usage.spent(result.error.usage if result.error is not None else None)
        if self.progress is not None:
            self.progress.update(
                ok=self.counts["ok"],
                failed=self.counts["failed"],
                tokens=self.usage.tokens_out,
                concurrency=self.limiter.current,
            )
        if self.on_result is not None and not self.stopping:
            self._call("on_result", self.on_result, result)

    @staticmethod
    def _call(name: str, callback: Callable[..., Any], *args: Any) -> None:
        try:
            callback(*args)
        except Exception as exc:
            msg = f"{name} raised {type(exc).__name__}: {safe_str(exc)}; the run stopped"
            raise CallbackError(msg) from exc

    # -- the end -----------------------------------------------------------------------

    def stop(self) -> None:
        """Start nothing more, cancel what is in flight and wait for it to come back."""
        self.stopping = True
        self.counts["cancelled"] += len(self.waiting)  # waiting out a rate limit: not started
        self.waiting.clear()
        for item, future in self.in_flight.values():
            future.cancel()
            if item.cancel is not None:
                item.cancel.cancel()
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while self.in_flight and time.monotonic() < deadline:
            event = self.pipe.get(0.1)
            if event is not None:
                self._handle(event)

    def report(self, out: Optional[PathLike], interrupted: bool) -> BatchReport:
        return BatchReport(
            ok=self.counts["ok"],
            failed=self.counts["failed"],
            skipped=self.counts["skipped"],
            cancelled=self.counts["cancelled"] + (len(self.in_flight) if interrupted else 0),
            rate_limited=self.counts["rate_limited"],
            input_tokens=self.usage.tokens_in,
            output_tokens=self.usage.tokens_out,
            cost=self.usage.cost,
            no_usage=self.usage.no_usage,
            elapsed=time.monotonic() - self.started,
            concurrency=self.limiter.ceiling,
            lowest_concurrency=self.limiter.lowest,
            final_concurrency=self.limiter.current,
            interrupted=interrupted,
            out=os.fspath(out) if out is not None else None,
        )


def run(
    model: ChatModel,
    requests: Iterable[Item],
    *,
    concurrency: int = 16,
    out: Optional[PathLike] = None,
    retry_failed: bool = False,
    max_attempts: int = 6,
    on_result: Optional[Callable[[BatchResult], Any]] = None,
    on_chunk: Optional[Callable[[str, StreamChunk], Any]] = None,
    progress: Optional[bool] = None,
    executor: Optional[concurrent.futures.Executor] = None,
    timeout: Optional[float] = None,
    via: str = "stream",
    poll_interval: float = 5.0,
    max_poll_interval: float = 60.0,
    cancel_on_interrupt: bool = False,
) -> BatchReport:
    """Run every request through ``model``, ``concurrency`` at a time; return the counts.

    ``requests`` is any iterable (a generator is read as slots free up) of
    :class:`~blazen.CompletionRequest`, or of ``(id, request)`` pairs with string ids;
    without ids the position is the id. With ``out=`` each finished item is appended to a
    JSONL file as it finishes, and a later run with the same ``out=`` skips the ids already
    there (``retry_failed=True`` runs the failed ones again). A rate-limited item halves
    the concurrency, waits as ``Retry-After`` says and runs again (up to ``max_attempts``
    tries); other errors are recorded and the run goes on. ``on_result(result)`` and
    ``on_chunk(id, chunk)`` run on this thread, one at a time. ``progress`` shows a tqdm
    bar (None: when stderr is a terminal). ``executor`` runs the items elsewhere, such as
    ``dask.distributed.Client(...).get_executor()``. Ctrl-C cancels the items in flight,
    prints the report and how to resume, and raises ``KeyboardInterrupt``.

    ``via="provider"`` sends the items as the provider's own batches instead (OpenAI's
    Batch API, Anthropic's Message Batches, Gemini's batch mode: about half the price,
    answers within 24 hours). ``out=`` is then required: the batch ids are recorded beside
    it (``out + ".batches"``), so running the same call again after the process died
    collects the batches already sent and never sends an item twice. Status is polled
    every ``poll_interval`` seconds, growing to ``max_poll_interval`` while nothing
    changes; Ctrl-C stops waiting and leaves the batches running unless
    ``cancel_on_interrupt=True``. Example::

        report = batch.run(model, requests, concurrency=32, out="results.jsonl")
        print(report)
    """
    check_arguments(model, concurrency, max_attempts, executor, on_chunk, on_result=on_result)
    if via == "provider":
        return _via_provider(
            model,
            requests,
            out=out,
            retry_failed=retry_failed,
            on_result=on_result,
            on_chunk=on_chunk,
            progress=progress,
            executor=executor,
            timeout=timeout,
            poll_interval=poll_interval,
            max_poll_interval=max_poll_interval,
            cancel_on_interrupt=cancel_on_interrupt,
        )
    if via != "stream":
        msg = f"via must be 'stream' or 'provider', got {via!r}"
        raise ValueError(msg)
    if retry_failed and out is None:
        msg = "retry_failed=True needs out=: the failed items are read from that file"
        raise ValueError(msg)
    results = ResultsFile(out, retry_failed=retry_failed) if out is not None else None
    local = executor is None
    pool = executor or concurrent.futures.ThreadPoolExecutor(
        max_workers=concurrency, thread_name_prefix="blazen-batch"
    )
    total = len(requests) if hasattr(requests, "__len__") else None  # type: ignore[arg-type]
    state: Optional[_BatchRun] = None
    try:
        bar = open_progress(progress, total)
        state = _BatchRun(
            model,
            requests,
            concurrency=concurrency,
            results=results,
            max_attempts=max_attempts,
            on_result=on_result,
            on_chunk=on_chunk,
            progress=bar,
            executor=pool,
            local=local,
            timeout=timeout,
        )
        state.loop()
    except BaseException as exc:
        if state is not None:
            state.stop()
            if isinstance(exc, KeyboardInterrupt):
                _tell_how_to_resume(state.report(out, interrupted=True), out)
        raise
    finally:
        if state is not None and state.progress is not None:
            state.progress.close()
        if local:
            pool.shutdown(wait=True)
        if results is not None:
            results.close()
    return state.report(out, interrupted=False)


def _via_provider(
    model: ChatModel,
    requests: Iterable[Item],
    *,
    out: Optional[PathLike],
    on_chunk: Optional[Callable[[str, StreamChunk], Any]],
    executor: Optional[concurrent.futures.Executor],
    timeout: Optional[float],
    poll_interval: float,
    max_poll_interval: float,
    **kw: Any,
) -> BatchReport:
    # What only a streamed run can do is refused by name, before anything is sent.
    for name, value in (("on_chunk", on_chunk), ("executor", executor), ("timeout", timeout)):
        if value is not None:
            msg = f"{name}= is for streamed runs; via='provider' sends no stream to follow"
            raise ValueError(msg)
    if out is None:
        msg = (
            "via='provider' needs out=: answers can take a day, and the batch ids are kept "
            "beside that file so a later run collects them"
        )
        raise ValueError(msg)
    if len(model.chain) > 1:
        # Its answers would go to the primary alone, named and priced as "fallback".
        msg = (
            "via='provider' sends the items as one provider's batch, which cannot switch to "
            "another provider as a fallback chain does; pass one model (such as "
            "model.chain[0]), or use via='stream'"
        )
        raise ValueError(msg)
    for name, value in (("poll_interval", poll_interval), ("max_poll_interval", max_poll_interval)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            msg = f"{name} must be a number of seconds above 0, got {value!r}"
            raise ValueError(msg)
    if max_poll_interval < poll_interval:
        msg = "max_poll_interval must be at least poll_interval"
        raise ValueError(msg)
    return run_via_provider(
        model,
        requests,
        out=out,
        poll_interval=float(poll_interval),
        max_poll_interval=float(max_poll_interval),
        **kw,
    )


def _tell_how_to_resume(report: BatchReport, out: Optional[PathLike]) -> None:
    if out is not None:
        hint = f"run again with the same out={os.fspath(out)!r} to resume where it stopped"
    else:
        hint = "nothing was saved: pass out='results.jsonl' to make a run resumable"
    print(f"{report}\n{hint}", file=sys.stderr, flush=True)
