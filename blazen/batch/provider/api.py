"""What ``via="provider"`` needs of one provider's batch API, and the values it passes.

Each provider module (:mod:`.openai`, :mod:`.anthropic`, :mod:`.gemini`) implements
:class:`BatchAPI`: encode one request as a batch line with the same wire code a stream uses,
submit lines as one batch, tell a batch's state, read its results back as
:class:`~blazen.CompletionResponse` values or typed errors, and cancel it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from typing import Any, Optional, Protocol, Union

import attrs

from ..._types import ChatMessage, CompletionRequest, CompletionResponse
from ...errors import BlazenError, ProviderError
from .calls import Caller

__all__ = ["BatchAPI", "BatchState", "ItemResult", "auth_headers", "required_field", "custom_id"]

#: One item's outcome: ``(custom id, the response or the error)``.
ItemResult = tuple[str, Union[CompletionResponse, BlazenError]]

# The strictest provider rule (Anthropic's, "Create a Message Batch"); OpenAI and Gemini
# take any string, so one rule serves all three.
_PLAIN_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def custom_id(item_id: str) -> str:
    """The id an item goes to the provider under: itself when plain enough, else a digest.

    The mapping is a pure function of the id, so a resumed run (another process) maps the
    provider's answers back without a table of its own.
    """
    if _PLAIN_ID.match(item_id) and not item_id.startswith("h_"):
        return item_id
    return "h_" + hashlib.sha256(item_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def auth_headers(wire: Any) -> dict[str, str]:
    """The headers (key, version) the wire sends with every request, without a body type."""
    # The wire is the one place that knows how its provider authenticates: ask it for a
    # request and keep its headers.
    probe = wire.build(
        CompletionRequest(messages=(ChatMessage(role="user", content="."),)), stream=False
    )
    return {k: v for k, v in probe.headers.items() if k.lower() not in ("content-type", "accept")}


@attrs.frozen(kw_only=True)
class BatchState:
    """Where one provider batch stands."""

    #: The provider's own word for it (``in_progress``, ``ended``, ``BATCH_STATE_RUNNING``).
    status: str
    #: No more results will come: they can be read.
    ended: bool
    #: Items the provider has finished (either way), and how many there are.
    finished: int = 0
    total: int = 0
    #: Why the batch as a whole failed, when it did (its items are then all errors).
    failure: Optional[str] = None


class BatchAPI(Protocol):
    """One provider's batch endpoints, for :func:`~blazen.batch.run` with ``via="provider"``."""

    #: The provider name, as on the model.
    provider: str
    #: The most items and bytes one batch may hold (the provider's documented limits).
    max_items: int
    max_bytes: int

    def line(self, cid: str, req: CompletionRequest) -> tuple[str, bytes]:
        """``(group, line)``: the JSON the batch carries for ``req`` (no newline), and the
        group it must be submitted in (lines of one batch share an endpoint and a model
        where the provider asks for that)."""
        ...

    def submit(self, calls: Caller, group: str, lines: Sequence[bytes], tag: str) -> str:
        """Submit ``lines`` of ``group`` as one batch tagged ``tag``; return its id."""
        ...

    def find(self, calls: Caller, tag: str) -> Optional[str]:
        """The id of a batch submitted with ``tag``, if the provider can tell (else None)."""
        ...

    def state(self, calls: Caller, batch_id: str) -> BatchState:
        """The batch's state now."""
        ...

    def results(self, calls: Caller, batch_id: str, cids: Sequence[str]) -> Iterator[ItemResult]:
        """Every result the ended batch holds, in the provider's order.

        ``cids`` are the custom ids submitted, in order (Gemini answers by position).
        Items with no result (expired, cancelled) may be left out: the caller reports them.
        """
        ...

    def cancel(self, calls: Caller, batch_id: str) -> None:
        """Ask the provider to stop the batch (its finished items still come back)."""
        ...


def required_field(provider: str, obj: Any, name: str) -> str:
    """``obj[name]``, a non-empty string, or a malformed-payload error naming it."""
    value = obj.get(name) if isinstance(obj, dict) else None
    if not isinstance(value, str) or not value:
        msg = f"{provider}'s batch API answered without {name!r}: {str(obj)[:200]}"
        raise ProviderError(msg, provider=provider, error_type="malformed_payload")
    return value
