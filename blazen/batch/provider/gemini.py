"""Gemini's batch mode, with the requests inline: one long-running operation per batch.

https://ai.google.dev/gemini-api/docs/batch-api and the API reference (``batchGenerateContent``,
``batches.get``, ``batches.cancel``): the batch is ``{"batch": {"displayName", "inputConfig":
{"requests": {"requests": [{"request", "metadata": {"key"}}]}}}}`` (inline requests: 20 MB
at most in all); ``metadata.state`` ends ``BATCH_STATE_SUCCEEDED``, ``_FAILED``,
``_CANCELLED`` or ``_EXPIRED``; the inlined responses come in input order (their ``metadata``
is not always echoed back, so the position names the item).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, Optional

from ..._stream import ChatModel
from ..._types import CompletionRequest
from ...errors import BlazenError, ProviderError, error_from_provider
from ...providers.gemini import GeminiWire
from .api import BatchState, ItemResult, auth_headers, malformed, payload_guard, required_field
from .calls import Caller

__all__ = ["GeminiBatches"]

_ENDED = ("_SUCCEEDED", "_FAILED", "_CANCELLED", "_EXPIRED")

# google.rpc.Code -> (HTTP status, canonical name), from googleapis google/rpc/code.proto.
_GRPC: dict[int, tuple[int, str]] = {
    1: (499, "CANCELLED"),
    2: (500, "UNKNOWN"),
    3: (400, "INVALID_ARGUMENT"),
    4: (504, "DEADLINE_EXCEEDED"),
    5: (404, "NOT_FOUND"),
    6: (409, "ALREADY_EXISTS"),
    7: (403, "PERMISSION_DENIED"),
    8: (429, "RESOURCE_EXHAUSTED"),
    9: (400, "FAILED_PRECONDITION"),
    10: (409, "ABORTED"),
    11: (400, "OUT_OF_RANGE"),
    12: (501, "UNIMPLEMENTED"),
    13: (500, "INTERNAL"),
    14: (503, "UNAVAILABLE"),
    15: (500, "DATA_LOSS"),
    16: (401, "UNAUTHENTICATED"),
}


class GeminiBatches:
    """``models/{model}:batchGenerateContent`` and ``batches/*`` under the model's base_url."""

    #: Gemini documents no count limit for inline requests, only their 20 MB. But their
    #: answers come back inside the batch's operation, one JSON document read whole: a
    #: batch of 100,000 short answers took 350 MB to read. Ten thousand keeps that to
    #: tens of MB (and more batches cost nothing: up to 100 may run at once).
    max_items = 10_000
    max_bytes = 20 * 1024 * 1024
    tagged = True

    def __init__(self, model: ChatModel, wire: GeminiWire) -> None:
        self.provider = model.provider
        self._wire = wire
        self._base = model.base_url.rstrip("/")
        self._headers = auth_headers(wire)

    def line(self, cid: str, req: CompletionRequest) -> tuple[str, bytes]:
        """``{"request", "metadata": {"key"}}`` for ``req``, grouped by its model's endpoint."""
        http = self._wire.build(req, stream=False)
        # The model is in the URL: a batch goes to that model's :batchGenerateContent.
        create = http.url.rsplit(":", 1)[0] + ":batchGenerateContent"
        request = json.loads(http.body)
        line = json.dumps({"request": request, "metadata": {"key": cid}}, ensure_ascii=False)
        return create, line.encode("utf-8", "surrogatepass")

    def submit(self, calls: Caller, group: str, lines: Sequence[bytes], tag: str) -> str:
        """One ``batchGenerateContent`` call; the operation's name is the batch id."""
        head = json.dumps({"displayName": tag})[:-1].encode()
        body = head + b',"inputConfig":{"requests":{"requests":[' + b",".join(lines) + b"]}}}"
        headers = {**self._headers, "Content-Type": "application/json"}
        op = calls.json("POST", group, headers, raw=b'{"batch":' + body + b"}", idempotent=False)
        return required_field(self.provider, op, "name")

    def find(self, calls: Caller, tag: str) -> Optional[str]:
        """The batch whose ``displayName`` is ``tag``, among the newest hundred."""
        listing = calls.json("GET", f"{self._base}/batches?pageSize=100", self._headers)
        for op in listing.get("operations") or ():
            meta = op.get("metadata") or {} if isinstance(op, dict) else {}
            if meta.get("displayName") == tag:
                return str(op.get("name"))
        return None

    def state(self, calls: Caller, batch_id: str) -> BatchState:
        """``metadata.state`` and ``metadata.batchStats``."""
        op = calls.json("GET", f"{self._base}/{batch_id}", self._headers)
        meta = op.get("metadata") or {}
        state = str(meta.get("state", ""))
        stats = meta.get("batchStats") or {}
        total = int(stats.get("requestCount") or 0)
        pending = int(stats.get("pendingRequestCount") or 0)
        failure = None
        if state.endswith("_FAILED"):
            failure = str((op.get("error") or {}).get("message") or "the batch failed")
        return BatchState(
            status=state,
            ended=state.endswith(_ENDED),
            finished=max(total - pending, 0),
            total=total,
            failure=failure,
        )

    def results(self, calls: Caller, batch_id: str, cids: Sequence[str]) -> Iterator[ItemResult]:
        """The inlined responses, matched to the items by position."""
        op = calls.json("GET", f"{self._base}/{batch_id}", self._headers)
        output: Any = op.get("response") or (op.get("metadata") or {}).get("output") or {}
        answers = (output.get("inlinedResponses") or {}).get("inlinedResponses") or []
        if len(answers) > len(cids):
            msg = (
                f"{self.provider}'s batch {batch_id} holds {len(answers)} responses for "
                f"{len(cids)} requests"
            )
            raise ProviderError(msg, provider=self.provider, error_type="malformed_payload")
        for cid, answer in zip(cids, answers):
            yield self._answer(cid, answer)

    def _answer(self, cid: str, answer: Any) -> ItemResult:
        if not isinstance(answer, dict):
            return cid, malformed(self.provider, f"the result of {cid!r}", str(answer))
        key = (answer.get("metadata") or {}).get("key") or cid
        key = key if isinstance(key, str) else cid
        try:
            with payload_guard(self.provider, f"the result of {key!r}"):
                if "response" in answer:
                    return key, self._wire.parse_response(json.dumps(answer["response"]))
                return key, self._error(answer.get("error") or {})
        except BlazenError as err:  # this item's answer, unreadable: its error
            return key, err

    def _error(self, status: Any) -> BlazenError:
        # A google.rpc.Status: a gRPC code (3, INVALID_ARGUMENT), read as the HTTP status
        # the same failure gets from generateContent, so it is classified the same way.
        code = status.get("code") if isinstance(status, dict) else None
        http, label = _GRPC.get(code, (None, None)) if isinstance(code, int) else (None, None)
        if http is None:
            text = status.get("message") if isinstance(status, dict) else status
            return error_from_provider(
                provider=self.provider, status=None, message=str(text or "no response")
            )
        body = {"error": {"code": http, "message": status.get("message", ""), "status": label}}
        return self._wire.error(http, {}, json.dumps(body))

    def cancel(self, calls: Caller, batch_id: str) -> None:
        """``POST {name}:cancel``."""
        calls.json("POST", f"{self._base}/{batch_id}:cancel", self._headers, {})
