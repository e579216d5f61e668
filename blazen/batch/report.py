"""What a batch run did, counted: the value ``batch.run`` returns and prints."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Optional

import attrs

if TYPE_CHECKING:
    from .._types import TokenUsage
    from ..errors import Usage

__all__ = ["BatchReport", "UsageTally"]


@attrs.frozen(kw_only=True)
class BatchReport:
    """The counts of a finished (or interrupted) run; ``print(report)`` gives one line."""

    #: Items that succeeded in this run.
    ok: int = 0
    #: Items that failed in this run (written to ``out=`` with their error).
    failed: int = 0
    #: Items skipped because ``out=`` already held them.
    skipped: int = 0
    #: Items started and cancelled by Ctrl-C (a resumed run does them).
    cancelled: int = 0
    #: Tries that were rate-limited and ran again.
    rate_limited: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    #: Items that succeeded with no token usage from the server (llama.cpp's server, say).
    no_usage: int = 0
    #: Seconds from start to end.
    elapsed: float = 0.0
    #: Concurrency asked for, the lowest rate limits brought it to, and where it ended.
    concurrency: int = 0
    lowest_concurrency: int = 0
    final_concurrency: int = 0
    interrupted: bool = False
    out: Optional[str] = None
    #: Provider batches sent or picked up (``via="provider"``); 0 for streamed runs.
    batches: int = 0
    #: What this run's tokens cost in US dollars (``usage.cost`` summed over the items the
    #: price table knows, failed items' partial usage included), or None if it knows none.
    cost: Optional[Decimal] = None

    @property
    def requests_per_second(self) -> float:
        """Finished items (ok and failed) per second of the run."""
        return (self.ok + self.failed) / self.elapsed if self.elapsed > 0 else 0.0

    def _tokens(self) -> str:
        # "0 in, 0 out" would read as free answers: say when the server did not tell.
        if self.ok and self.no_usage == self.ok:
            return "tokens unknown (the server reported none)"
        text = f"tokens {self.input_tokens} in, {self.output_tokens} out"
        return text + (f" ({self.no_usage} answers reported none)" if self.no_usage else "")

    def __str__(self) -> str:
        head = "batch interrupted" if self.interrupted else "batch"
        if self.batches:
            head += f" ({self.batches} provider batch{'es' if self.batches != 1 else ''})"
        text = (
            f"{head}: {self.ok} ok, {self.failed} failed, {self.skipped} skipped"
            f"{f', {self.cancelled} cancelled' if self.cancelled else ''}"
            f" in {self.elapsed:.1f} s ({self.requests_per_second:.1f} requests/s); "
            f"{self._tokens()}"
        )
        if self.cost is not None:
            text += f", ${self.cost:.4f}"
        if self.rate_limited:
            text += (
                f"; {self.rate_limited} rate-limited tries retried, concurrency "
                f"{self.concurrency} fell to {self.lowest_concurrency}, "
                f"ended at {self.final_concurrency}"
            )
        return text


class UsageTally:
    """Tokens, answers without usage and cost, summed over a run's items (both kinds of run)."""

    __slots__ = ("cost", "no_usage", "tokens_in", "tokens_out")

    def __init__(self) -> None:
        self.tokens_in = self.tokens_out = self.no_usage = 0
        #: usage.cost summed over what the price table knows, or None.
        self.cost: Optional[Decimal] = None

    def answered(self, usage: Optional[TokenUsage]) -> None:
        """An answer's usage: counted, or noted as missing (the report says "unknown")."""
        if usage is None:
            self.no_usage += 1
            return
        self.tokens_in += usage.prompt_tokens
        self.tokens_out += usage.completion_tokens
        self.spent(usage)

    def spent(self, usage: Optional[Usage]) -> None:
        """Add what ``usage`` cost, where it is priced (a failed item's usage too)."""
        cost = None if usage is None else usage.cost
        if cost is not None:
            self.cost = cost if self.cost is None else self.cost + cost
