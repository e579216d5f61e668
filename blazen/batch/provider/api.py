"""What ``via="provider"`` needs of one provider's batch API, and the values it passes.

Each provider module (:mod:`.openai`, :mod:`.anthropic`, :mod:`.gemini`) implements
:class:`BatchAPI`: encode one request as a batch line with the same wire code a stream uses,
submit lines as one batch, tell a batch's state, read its results back as
:class:`~blazen.CompletionResponse` values or typed errors, and cancel it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional, Protocol, Union

import attrs

from ..._types import ChatMessage, CompletionRequest, CompletionResponse
from ...errors import BlazenError, ProviderError, safe_str
from .calls import Caller

__all__ = [
    "BatchAPI",
    "BatchState",
    "ItemResult",
    "auth_headers",
    "custom_id",
    "line_result",
    "malformed",
    "payload_guard",
    "required_field",
]

logger = logging.getLogger("blazen")

#: One item's outcome: ``(custom id, the response or the error)``.
ItemResult = tuple[str, Union[CompletionResponse, BlazenError]]

# The strictest provider rule (Anthropic's, "Create a Message Batch"); OpenAI and Gemini
# take any string, so one rule serves all three.
_PLAIN_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}\Z")


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
    #: :meth:`find` can tell whether a batch tagged so exists (so a create whose answer
    #: was lost can be looked for instead of sent again).
    tagged: bool

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


def malformed(provider: str, what: str, detail: str = "") -> ProviderError:
    """The error for an answer of the batch API that is not in its documented shape."""
    msg = f"{provider}'s batch API answered {what} in a shape blazen cannot read"
    if detail:
        msg += f" ({detail[:200]})"
    return ProviderError(msg, provider=provider, error_type="malformed_payload")


@contextlib.contextmanager
def payload_guard(provider: str, what: str) -> Iterator[None]:
    """Turn a wrongly shaped answer met while reading ``what`` into one typed error.

    The batch modules read JSON a server chose: a list where an object belongs, a word
    where a count does. Whatever Python error that reading meets becomes the
    ``malformed_payload`` :class:`~blazen.ProviderError` (blazen's own errors pass).
    """
    try:
        yield
    except BlazenError:
        raise
    except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
        raise malformed(provider, what, f"{type(exc).__name__}: {safe_str(exc)}") from exc


def line_result(
    provider: str, line: bytes, read: Callable[[str, dict[str, Any]], ItemResult]
) -> Optional[ItemResult]:
    """One results line read by ``read(custom_id, row)``, or None for a line naming no item.

    A line that is not a JSON object with a string ``custom_id`` cannot be given to any
    item: it is logged and skipped (the items it might have answered are reported without
    a result). A line that names its item but cannot be read is that item's typed error.
    """
    try:
        row = json.loads(line)
    except ValueError:
        row = None
    cid = row.get("custom_id") if isinstance(row, dict) else None
    if not isinstance(cid, str) or not isinstance(row, dict):
        logger.warning(
            "%s's batch results hold a line that names no item; skipped: %.200r", provider, line
        )
        return None
    try:
        with payload_guard(provider, f"the result of {cid!r}"):
            return read(cid, row)
    except BlazenError as err:  # this item's answer, unreadable: its error
        return cid, err
