"""Anthropic's Message Batches: requests sent inline, results streamed back as JSONL.

https://docs.claude.com/en/docs/build-with-claude/batch-processing and the API reference
("Create a Message Batch", "Retrieve Message Batch results"): each request is
``{"custom_id", "params"}`` with ``params`` a non-streaming Messages request; a batch holds at
most 100,000 requests and 256 MB; ``processing_status`` ends ``ended``; each result line is
``{"custom_id", "result": {"type": "succeeded" | "errored" | "canceled" | "expired"}}``, in
no promised order. ``custom_id`` must match ``^[a-zA-Z0-9_-]{1,64}$`` (see
:func:`~.api.custom_id`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, Optional

from ..._kit import error_from_body
from ..._stream import ChatModel
from ..._types import CompletionRequest
from ...errors import CancelledError, error_from_provider
from ...providers.anthropic import AnthropicWire
from .api import BatchState, ItemResult, auth_headers, line_result, required_field
from .calls import Caller

__all__ = ["AnthropicBatches"]


class AnthropicBatches:
    """The ``/v1/messages/batches`` endpoints under the model's ``base_url``."""

    max_items = 100_000
    max_bytes = 256 * 1024 * 1024
    #: A Message Batch has no field a tag could travel in (see find).
    tagged = False

    def __init__(self, model: ChatModel, wire: AnthropicWire) -> None:
        self.provider = model.provider
        self._wire = wire
        self._url = model.base_url.rstrip("/") + "/v1/messages/batches"
        self._headers = auth_headers(wire)

    def line(self, cid: str, req: CompletionRequest) -> tuple[str, bytes]:
        """``{"custom_id", "params"}`` for ``req``; one batch may mix models."""
        params = json.loads(self._wire.build(req, stream=False).body)
        line = json.dumps({"custom_id": cid, "params": params}, ensure_ascii=False)
        return "", line.encode("utf-8", "surrogatepass")

    def submit(self, calls: Caller, group: str, lines: Sequence[bytes], tag: str) -> str:
        """``POST /v1/messages/batches`` with the requests inline."""
        del group, tag  # a Message Batch has no field to carry a tag (see find)
        body = b'{"requests":[' + b",".join(lines) + b"]}"
        headers = {**self._headers, "Content-Type": "application/json"}
        created = calls.json("POST", self._url, headers, raw=body, idempotent=False)
        return required_field(self.provider, created, "id")

    def find(self, calls: Caller, tag: str) -> Optional[str]:
        """None: a Message Batch keeps no metadata a tag could travel in."""
        del calls, tag
        return None

    def state(self, calls: Caller, batch_id: str) -> BatchState:
        """``processing_status`` and ``request_counts``."""
        batch = calls.json("GET", f"{self._url}/{batch_id}", self._headers)
        counts = batch.get("request_counts") or {}
        done = sum(int(counts.get(k) or 0) for k in ("succeeded", "errored", "canceled", "expired"))
        status = str(batch.get("processing_status", ""))
        return BatchState(
            status=status,
            ended=status == "ended",
            finished=done,
            total=done + int(counts.get("processing") or 0),
        )

    def results(self, calls: Caller, batch_id: str, cids: Sequence[str]) -> Iterator[ItemResult]:
        """The results file, line by line."""
        del cids
        # The documented path under our own base_url, never results_url's host: the key
        # goes with the request.
        for line in calls.lines(f"{self._url}/{batch_id}/results", self._headers):
            item = line_result(self.provider, line, self._item)
            if item is not None:
                yield item

    def _item(self, cid: str, row: dict[str, Any]) -> ItemResult:
        result = row.get("result") or {}
        kind = result.get("type")
        if kind == "succeeded":
            return cid, self._wire.parse_response(json.dumps(result.get("message")))
        if kind == "errored":
            error = result.get("error") or {}
            return cid, error_from_body(self.provider, None, error, raw=json.dumps(error))
        if kind == "canceled":
            return cid, CancelledError("the provider's batch was cancelled before this item ran")
        return cid, error_from_provider(
            provider=self.provider,
            status=None,
            message="the batch expired (24 hours) before this item ran",
            error_type=str(kind or "expired"),
        )

    def cancel(self, calls: Caller, batch_id: str) -> None:
        """``POST /v1/messages/batches/{id}/cancel``."""
        calls.json("POST", f"{self._url}/{batch_id}/cancel", self._headers, {})
