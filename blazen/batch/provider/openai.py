"""OpenAI's Batch API: a JSONL input file uploaded, a batch made of it, output files read.

Chat-completions models batch on ``/v1/chat/completions``, Responses-API models
(``api="responses"``) on ``/v1/responses``: the endpoint is the wire's own path.

https://platform.openai.com/docs/guides/batch and the API reference (Files, Batches): each
input line is ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}``
with the body a non-streaming request; a batch holds at most 50,000 lines and 200 MB; its
``status`` ends ``completed``, ``failed``, ``expired`` or ``cancelled``; answers come in an
output file and failures in an error file, each line keyed by ``custom_id``, in no
promised order. OpenAI-compatible servers that serve the same endpoints work the same way.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, Optional, Union

from ..._stream import ChatModel
from ..._types import CompletionRequest
from ...errors import ProviderError, error_from_provider
from ...providers.openai import OpenAIWire
from ...providers.responses import ResponsesWire
from .api import BatchState, ItemResult, auth_headers, line_result, required_field
from .calls import Caller

__all__ = ["OpenAIBatches"]

_ENDED = frozenset({"completed", "failed", "expired", "cancelled"})


class OpenAIBatches:
    """The Files + Batches endpoints under the model's ``base_url``."""

    max_items = 50_000
    max_bytes = 200 * 1024 * 1024
    tagged = True

    def __init__(self, model: ChatModel, wire: Union[OpenAIWire, ResponsesWire]) -> None:
        self.provider = model.provider
        self._wire = wire
        self._base = model.base_url.rstrip("/")
        self._headers = auth_headers(wire)

    def line(self, cid: str, req: CompletionRequest) -> tuple[str, bytes]:
        """``{"custom_id", "method", "url", "body"}`` for ``req``, grouped by endpoint and model."""
        http = self._wire.build(req, stream=False)
        # The line names the endpoint as a path under /v1 (the batch's own `endpoint`).
        path = "/v1" + http.url[len(self._base) :] if http.url.startswith(self._base) else "/v1"
        body = json.loads(http.body)
        line = json.dumps(
            {"custom_id": cid, "method": "POST", "url": path, "body": body}, ensure_ascii=False
        ).encode("utf-8", "surrogatepass")
        # One batch, one model (OpenAI's batch guide): the group holds both.
        return f"{path} {body.get('model', '')}", line

    def submit(self, calls: Caller, group: str, lines: Sequence[bytes], tag: str) -> str:
        """Upload ``lines`` as a ``purpose=batch`` file and create the batch from it."""
        boundary = uuid.uuid4().hex
        data = b"\n".join(lines) + b"\n"
        form = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                f'filename="blazen-{tag}.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n'
            ).encode()
            + data
            + f"\r\n--{boundary}--\r\n".encode()
        )
        headers = {**self._headers, "Content-Type": f"multipart/form-data; boundary={boundary}"}
        uploaded = calls.json("POST", f"{self._base}/files", headers, raw=form)
        file_id = required_field(self.provider, uploaded, "id")
        created = calls.json(
            "POST",
            f"{self._base}/batches",
            {**self._headers, "Content-Type": "application/json"},
            {
                "input_file_id": file_id,
                "endpoint": group.split(" ", 1)[0],
                "completion_window": "24h",
                # Found again by this tag if the process dies before it wrote the id down.
                "metadata": {"blazen_tag": tag},
            },
            idempotent=False,
        )
        return required_field(self.provider, created, "id")

    def find(self, calls: Caller, tag: str) -> Optional[str]:
        """The batch whose metadata carries ``tag``, among the newest hundred."""
        listing = calls.json("GET", f"{self._base}/batches?limit=100", self._headers)
        for batch in listing.get("data") or ():
            if isinstance(batch, dict) and (batch.get("metadata") or {}).get("blazen_tag") == tag:
                return str(batch.get("id"))
        return None

    def state(self, calls: Caller, batch_id: str) -> BatchState:
        """``status`` and ``request_counts`` of the batch."""
        batch = calls.json("GET", f"{self._base}/batches/{batch_id}", self._headers)
        status = str(batch.get("status", ""))
        counts = batch.get("request_counts") or {}
        failure = None
        if status == "failed":
            errors = (batch.get("errors") or {}).get("data") or []
            failure = "; ".join(str(e.get("message", e)) for e in errors if isinstance(e, dict))
            failure = failure or "the batch failed validation"
        return BatchState(
            status=status,
            ended=status in _ENDED,
            finished=int(counts.get("completed") or 0) + int(counts.get("failed") or 0),
            total=int(counts.get("total") or 0),
            failure=failure,
        )

    def results(self, calls: Caller, batch_id: str, cids: Sequence[str]) -> Iterator[ItemResult]:
        """Every line of the output file, then of the error file."""
        del cids  # every line names its custom_id
        batch = calls.json("GET", f"{self._base}/batches/{batch_id}", self._headers)
        status = batch.get("status")
        if status not in _ENDED:
            # It said it had ended, and now says otherwise: its files may not be whole yet.
            msg = (
                f"{self.provider}'s batch {batch_id} said it had ended and now says "
                f"{status!r}; its results are read when it ends again"
            )
            raise ProviderError(
                msg, provider=self.provider, error_type="batch_not_ended", retryable=True
            )
        for key in ("output_file_id", "error_file_id"):
            file_id = batch.get(key)
            if not file_id:
                continue
            for line in calls.lines(f"{self._base}/files/{file_id}/content", self._headers):
                item = line_result(self.provider, line, self._item)
                if item is not None:
                    yield item

    def _item(self, cid: str, row: dict[str, Any]) -> ItemResult:
        response = row.get("response")
        if isinstance(response, dict) and response.get("status_code") == 200:
            return cid, self._wire.parse_response(json.dumps(response.get("body")))
        if isinstance(response, dict) and isinstance(response.get("body"), dict):
            body = json.dumps(response["body"])
            return cid, self._wire.error(int(response.get("status_code") or 500), {}, body)
        err = row.get("error") or {}
        code = str(err.get("code") or "batch_error")
        return cid, error_from_provider(
            provider=self.provider,
            status=None,
            message=f"{err.get('message') or 'the request was not run'} ({code})",
            error_type=code,
            code=code,
            body=json.dumps(row)[:4096],
        )

    def cancel(self, calls: Caller, batch_id: str) -> None:
        """``POST /batches/{id}/cancel``."""
        calls.json("POST", f"{self._base}/batches/{batch_id}/cancel", self._headers, {})
