"""``batch.run(..., via="provider")``: the items as the provider's own batches, at half price.

The calling thread does everything, in three steps, and each step survives the process
dying: the :class:`~.ledger.Ledger` beside ``out=`` says what was sent, ``out=`` says what
came back.

1. *Reconcile*: batches an earlier run sent are picked up; one it may have sent (it died
   between the provider's answer and the ledger line) is looked for by its tag.
2. *Submit*: the items not in ``out=`` and not in a batch already are read one by one,
   encoded with the same wire code a stream uses, and sent in batches cut at the
   provider's limits (items and bytes): only one batch's lines are held at a time.
3. *Collect*: every open batch is polled, ``poll_interval`` seconds apart at first and
   up to ``max_poll_interval`` while nothing changes; an ended batch's results are written
   to ``out=`` as they are read, each id once, in the same records as a streamed run.

Every wait of a provider run and the deadline that bounds it:

| wait                                         | bounded by                                  |
|----------------------------------------------|---------------------------------------------|
| each HTTP call (upload, create, status,      | the model's ``connect_timeout`` and         |
| results download)                            | ``idle_timeout``, and its retries           |
| a create whose answer was lost, before the   | ``Retry-After`` up to ``retry_after_cap``,  |
| batches are looked through for its tag       | else backoff; at most ``max_retries``       |
| the sleep between polls                      | ``max_poll_interval``; Ctrl-C ends it       |
| polls (or results downloads) that keep       | :data:`MAX_POLL_FAILURES` rounds in a row:  |
| failing                                      | the run stops with that error               |
| the provider's batch itself                  | its completion window (24 h), then          |
|                                              | ``expired``; Ctrl-C stops waiting for it    |

Stopped, the batch goes on at the provider and the next run picks it up. The tests, row by
row, in ``tests/hostile/test_attack_round5.py`` unless named otherwise:
``test_a_stalled_results_download_is_bounded_by_the_idle_timeout``;
``test_a_create_whose_answer_is_lost_is_found_by_its_tag_not_sent_again``;
``test_the_sleep_between_polls_grows_no_longer_than_max_poll_interval`` (in
``tests/hostile/test_waits_are_bounded.py``) and
``test_ctrl_c_leaves_the_batch_running_and_a_rerun_collects_it`` (in
``tests/test_batch_provider.py``);
``test_polls_that_keep_failing_stop_the_run_after_max_poll_failures`` (in
``tests/hostile/test_waits_are_bounded.py``);
``test_an_expired_batch_fails_the_rest_and_retry_failed_sends_them_again`` (in
``tests/test_batch_provider.py``).
"""

from __future__ import annotations

import logging
import os
import sys
import time
import uuid
from collections.abc import Iterable
from typing import Any, Callable, Optional

import attrs

from ..._http import retry_delay
from ..._schema.output import OutputSpec
from ..._stream import ChatModel
from ..._stream.output import with_output
from ..._stream.usage import priced
from ..._types import CompletionResponse
from ...errors import (
    AuthError,
    BlazenError,
    CallbackError,
    CancelledError,
    ConnectionError,
    InvalidRequestError,
    ProviderError,
    TimeoutError,
    safe_str,
)
from ..inputs import Item, pairs
from ..report import BatchReport, UsageTally
from ..results import BatchResult, PathLike, ResultsFile
from .api import BatchAPI, BatchState, custom_id, payload_guard
from .calls import Caller, maybe_done
from .choose import batch_api_for
from .ledger import Entry, Ledger, ledger_path

__all__ = ["run_via_provider"]

logger = logging.getLogger("blazen")

#: Poll rounds in a row a batch may fail to answer before the run stops with the error.
MAX_POLL_FAILURES = 20
#: How much longer each quiet poll round waits than the one before.
POLL_GROWTH = 1.5


@attrs.define
class _Group:
    ids: list[str] = attrs.Factory(list)
    lines: list[bytes] = attrs.Factory(list)
    size: int = 0


class _ProviderRun:
    def __init__(
        self,
        model: ChatModel,
        api: BatchAPI,
        results: ResultsFile,
        ledger: Ledger,
        *,
        on_result: Optional[Callable[[BatchResult], Any]],
        progress: bool,
        poll_interval: float,
        max_poll_interval: float,
    ) -> None:
        self.model = model
        self.api = api
        self.results = results
        self.ledger = ledger
        self.calls = Caller(model)
        self.on_result = on_result
        self.progress = progress
        self.poll_interval = poll_interval
        self.max_poll_interval = max_poll_interval
        #: Ids in a batch sent (or maybe sent) and not collected: never sent again.
        self.held: set[str] = set()
        #: The typed answer asked for, by id (only for items that ask for one).
        self.specs: dict[str, OutputSpec] = {}
        self.groups: dict[str, _Group] = {}
        self.counts = {"ok": 0, "failed": 0, "skipped": 0, "batches": 0, "submitted": 0}
        self.usage = UsageTally()
        self.states: dict[str, BatchState] = {}
        self.started = time.monotonic()
        #: The progress line shown last (a poll round that changed nothing shows none).
        self.shown = ""

    # -- 1. reconcile ------------------------------------------------------------------

    def reconcile(self) -> None:
        for entry in self.ledger.open_entries():
            if entry.provider != self.api.provider:
                msg = (
                    f"{self.ledger.path} records a batch sent to {entry.provider}, not "
                    f"{self.api.provider}: resume with the same model, or use another out="
                )
                raise ValueError(msg)
            if entry.batch is None:
                with payload_guard(self.api.provider, "the list of batches"):
                    found = self.api.find(self.calls, entry.tag)
                if found is None:
                    logger.warning(
                        "%s: a batch of %d items may not have reached %s before the last "
                        "run stopped; %s",
                        self.ledger.path,
                        len(entry.ids),
                        entry.provider,
                        "none carries its tag, so they are sent again"
                        if entry.provider != "anthropic"
                        else "Anthropic batches carry no tag to look for, so they are sent "
                        "again (check the console for a duplicate)",
                    )
                    self.ledger.collected(entry)  # given up: its items go again below
                    continue
                self.ledger.submitted(entry, found)
            self.held.update(entry.ids)
            self.counts["batches"] += 1
            self.counts["submitted"] += len(entry.ids)

    # -- 2. submit ---------------------------------------------------------------------

    def submit_all(self, requests: Iterable[Item]) -> None:
        done = self.results.done
        for item_id, req in pairs(requests):
            if item_id in done:
                self.counts["skipped"] += 1
                continue
            if req.output is not None:
                self.specs[item_id] = req.output
            if item_id in self.held:
                continue  # in a batch already: its result comes from there
            self.held.add(item_id)
            try:
                group, line = self.api.line(custom_id(item_id), req)
            except BlazenError as err:  # what the wire refuses to send: this item's error
                self._finish(BatchResult(id=item_id, error=self.model.scrub(err)))
                continue
            if len(line) > self.api.max_bytes:
                msg = (
                    f"batch item {item_id!r} is {len(line)} bytes, more than one "
                    f"{self.api.provider} batch may hold ({self.api.max_bytes})"
                )
                self._finish(BatchResult(id=item_id, error=InvalidRequestError(msg)))
                continue
            pending = self.groups.setdefault(group, _Group())
            if (
                len(pending.ids) >= self.api.max_items
                or pending.size + len(line) + 1 > self.api.max_bytes
            ):
                self._send(group, pending)
                pending = self.groups[group] = _Group()
            pending.ids.append(item_id)
            pending.lines.append(line)
            pending.size += len(line) + 1
        for group, pending in list(self.groups.items()):
            if pending.ids:
                self._send(group, pending)
        self.groups.clear()

    def _send(self, group: str, pending: _Group) -> None:
        tag = uuid.uuid4().hex
        entry = self.ledger.intend(tag, self.api.provider, group, pending.ids)
        try:
            batch_id = self._submit(group, pending, tag)
        except (InvalidRequestError, AuthError) as err:
            if isinstance(err, AuthError):
                raise self.model.scrub(err) from None
            # The provider refused the batch as a whole: each of its items fails with that.
            self.ledger.collected(entry)
            for item_id in pending.ids:
                self._finish(BatchResult(id=item_id, error=self.model.scrub(err)))
            return
        self.ledger.submitted(entry, batch_id)
        self.counts["batches"] += 1
        self.counts["submitted"] += len(pending.ids)
        self._say(f"sent batch {batch_id} ({len(pending.ids)} items)")

    def _submit(self, group: str, pending: _Group, tag: str) -> str:
        """Create the batch; after a lost answer, look for it by its tag before sending again."""
        provider = self.api.provider
        opts = self.model.options
        attempt = 0
        while True:
            try:
                with payload_guard(provider, "a batch creation"):
                    return self.api.submit(self.calls, group, pending.lines, tag)
            except BlazenError as err:
                if not maybe_done(err):
                    raise
                lost = err
            # The create may have been carried out with only its answer lost.
            if not self.api.tagged:
                msg = (
                    f"{self.model.redact(lost.message)}; the {provider} batch of "
                    f"{len(pending.ids)} items may have been made all the same, and its "
                    "batches carry no tag to look for: check the console for it before "
                    "running again (a rerun sends these items again)"
                )
                raise ConnectionError(msg, provider=provider) from None
            with payload_guard(provider, "the list of batches"):
                found = self.api.find(self.calls, tag)
            if found is not None:
                return found
            delay = retry_delay(attempt, lost, cap=opts.retry_after_cap)
            if delay is None or attempt >= opts.max_retries:
                raise self.model.scrub(lost) from None
            attempt += 1
            time.sleep(delay)

    # -- 3. collect --------------------------------------------------------------------

    def wait(self) -> None:
        interval = self.poll_interval
        failures: dict[str, int] = {}
        #: Failed results downloads, by batch: not reset by a poll that answers.
        broken: dict[str, int] = {}
        while True:
            open_entries = [e for e in self.ledger.open_entries() if e.batch is not None]
            if not open_entries:
                return
            changed = False
            for entry in open_entries:
                assert entry.batch is not None
                try:
                    with payload_guard(self.api.provider, "a batch's status"):
                        state = self.api.state(self.calls, entry.batch)
                except BlazenError as err:
                    failures[entry.tag] = failures.get(entry.tag, 0) + 1
                    if not _transient(err) or failures[entry.tag] >= MAX_POLL_FAILURES:
                        raise self.model.scrub(err) from None
                    logger.info(
                        "%s: polling batch %s failed (%s); trying again",
                        self.api.provider,
                        entry.batch,
                        self.model.redact(err.message),
                    )
                    continue
                failures.pop(entry.tag, None)
                if self.states.get(entry.tag) != state:
                    changed = True
                self.states[entry.tag] = state
                if not state.ended:
                    continue
                try:
                    self._collect(entry, state)
                except BlazenError as err:
                    # A download that broke or stalled, a batch that says it is running
                    # again: what arrived is written; the next round reads the rest.
                    broken[entry.tag] = broken.get(entry.tag, 0) + 1
                    if not _transient(err) or broken[entry.tag] >= MAX_POLL_FAILURES:
                        raise self.model.scrub(err) from None
                    logger.info(
                        "%s: reading the results of batch %s failed (%s); trying again",
                        self.api.provider,
                        entry.batch,
                        self.model.redact(err.message),
                    )
            self._show()
            if not any(e.batch is not None for e in self.ledger.open_entries()):
                return
            interval = (
                self.poll_interval
                if changed
                else min(interval * POLL_GROWTH, self.max_poll_interval)
            )
            time.sleep(interval)

    def _collect(self, entry: Entry, state: BatchState) -> None:
        assert entry.batch is not None
        by_cid = {custom_id(i): i for i in entry.ids}
        cids = [custom_id(i) for i in entry.ids]
        seen: set[str] = set()
        done = self.results.done
        if state.failure is None:
            answers = self.api.results(self.calls, entry.batch, cids)
            while True:
                with payload_guard(self.api.provider, "a batch's results"):
                    got = next(answers, None)
                if got is None:
                    break
                cid, outcome = got
                item_id = by_cid.get(cid)
                if item_id is None or item_id in seen or item_id in done:
                    continue  # not ours, a duplicate line, or written by an earlier run
                seen.add(item_id)
                self._finish(self._result(item_id, outcome))
        for item_id in entry.ids:
            if item_id in seen or item_id in done:
                continue
            self._finish(BatchResult(id=item_id, error=self._missing(entry, state)))
        self.ledger.collected(entry)
        self.held.difference_update(entry.ids)
        self._say(f"batch {entry.batch} finished ({state.status}): {len(seen)} results")

    def _result(self, item_id: str, outcome: Any) -> BatchResult:
        if isinstance(outcome, BlazenError):
            return BatchResult(id=item_id, error=self.model.scrub(outcome))
        # Priced as the answering model at the provider's batch rates (about half).
        response: CompletionResponse = priced(
            outcome, self.api.provider, self.model.model, batch=True
        )
        spec = self.specs.get(item_id)
        if spec is not None:
            try:
                response = with_output(spec, response)
            except BlazenError as err:
                return BatchResult(id=item_id, error=err)
        return BatchResult(id=item_id, response=response)

    def _missing(self, entry: Entry, state: BatchState) -> BlazenError:
        provider = self.api.provider
        status = state.status.lower()
        if state.failure is not None:
            return ProviderError(
                f"{provider}'s batch {entry.batch} failed: {state.failure}",
                provider=provider,
                error_type="batch_failed",
            )
        if "cancel" in status:
            return CancelledError(f"{provider}'s batch {entry.batch} was cancelled first")
        expired = "expire" in status
        what = (
            "expired (24 hours) before this item ran"
            if expired
            else f"ended {state.status} without a result for this item"
        )
        return ProviderError(
            f"{provider}'s batch {entry.batch} {what}; run again with retry_failed=True to "
            "send it again",
            provider=provider,
            error_type="batch_expired" if expired else "no_result",
        )

    def _finish(self, result: BatchResult) -> None:
        self.results.write(result)
        self.results.done.add(result.id)
        if result.response is not None:
            self.counts["ok"] += 1
            self.usage.answered(result.response.usage)
        else:
            self.counts["failed"] += 1
        if self.on_result is not None:
            try:
                self.on_result(result)
            except Exception as exc:
                msg = f"on_result raised {type(exc).__name__}: {safe_str(exc)}; the run stopped"
                raise CallbackError(msg) from exc

    # -- the end -----------------------------------------------------------------------

    def cancel_open(self) -> None:
        for entry in self.ledger.open_entries():
            if entry.batch is None:
                continue
            try:
                self.api.cancel(self.calls, entry.batch)
            except BlazenError as err:
                logger.warning(
                    "could not cancel %s batch %s: %s",
                    self.api.provider,
                    entry.batch,
                    self.model.redact(err.message),
                )

    def report(self, out: PathLike, interrupted: bool) -> BatchReport:
        return BatchReport(
            ok=self.counts["ok"],
            failed=self.counts["failed"],
            skipped=self.counts["skipped"],
            input_tokens=self.usage.tokens_in,
            output_tokens=self.usage.tokens_out,
            no_usage=self.usage.no_usage,
            cost=self.usage.cost,
            elapsed=time.monotonic() - self.started,
            interrupted=interrupted,
            out=os.fspath(out),
            batches=self.counts["batches"],
        )

    def _show(self) -> None:
        if not self.progress:
            return
        open_states = [
            self.states[e.tag] for e in self.ledger.open_entries() if e.tag in self.states
        ]
        # The provider's own word for each open batch, and how far it says it got.
        running = ", ".join(f"{s.status} {s.finished}/{s.total}" for s in open_states[:4])
        if len(open_states) > 4:
            running += ", ..."
        batches = self.counts["batches"]
        line = (
            f"{self.counts['submitted']} items submitted in {batches} "
            f"batch{'' if batches == 1 else 'es'}; {len(open_states)} in progress"
            f"{f' ({running})' if running else ''}; {self.counts['ok']} ok, "
            f"{self.counts['failed']} failed"
        )
        if line != self.shown:
            self.shown = line
            self._say(line)

    def _say(self, text: str) -> None:
        if self.progress:
            print(f"blazen batch ({self.api.provider}): {text}", file=sys.stderr, flush=True)


def _transient(err: BlazenError) -> bool:
    return err.retryable or isinstance(err, (ConnectionError, TimeoutError))


def run_via_provider(
    model: ChatModel,
    requests: Iterable[Item],
    *,
    out: PathLike,
    retry_failed: bool,
    on_result: Optional[Callable[[BatchResult], Any]],
    progress: Optional[bool],
    poll_interval: float,
    max_poll_interval: float,
    cancel_on_interrupt: bool,
) -> BatchReport:
    """The body of ``batch.run(..., via="provider")`` (arguments checked by the caller)."""
    api = batch_api_for(model)
    results = ResultsFile(out, retry_failed=retry_failed)
    ledger = Ledger(ledger_path(out))
    show = progress if progress is not None else bool(getattr(sys.stderr, "isatty", bool)())
    state = _ProviderRun(
        model,
        api,
        results,
        ledger,
        on_result=on_result,
        progress=show,
        poll_interval=poll_interval,
        max_poll_interval=max_poll_interval,
    )
    try:
        state.reconcile()
        state.submit_all(requests)
        state.wait()
    except KeyboardInterrupt:
        if cancel_on_interrupt:
            state.cancel_open()
            hint = "the provider's batches were asked to stop; run again to collect what ran"
        else:
            hint = (
                "the provider's batches keep running: run again with the same "
                f"out={os.fspath(out)!r} to collect their results (nothing is sent twice)"
            )
        print(f"{state.report(out, interrupted=True)}\n{hint}", file=sys.stderr, flush=True)
        raise
    finally:
        results.close()
        ledger.close()
    return state.report(out, interrupted=False)
