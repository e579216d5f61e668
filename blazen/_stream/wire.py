"""What the stream engine needs of a wire format, and the error helpers every wire shares.

A provider plugs into the engine by implementing :class:`WireFormat`; the engine knows no
provider by name. No I/O here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Optional, Protocol

from .._http import HttpRequest
from .._types import CompletionRequest, CompletionResponse, StreamChunk
from ..errors import ProviderError, error_from_provider, parse_retry_after
from .state import StreamState

__all__ = ["WireFormat", "error_event", "error_from_body", "error_from_http", "malformed"]


class WireFormat(Protocol):
    """One provider's wire format: build the request, fold payloads, read error bodies."""

    #: Name used in errors and logs ("openai", "groq", "anthropic"...).
    provider: str
    #: "sse" or "ndjson".
    framing: str
    #: Content types a successful streaming response may carry.
    stream_content_types: tuple[str, ...]

    def build(self, req: CompletionRequest, *, stream: bool) -> HttpRequest:
        """The HTTP request for ``req``."""
        ...

    def fold(self, state: StreamState, event: str, data: str) -> Optional[StreamChunk]:
        """Fold one payload into ``state``; return the chunk to deliver, if any.

        Raises a :class:`~blazen.ProviderError` subclass for an error event or a payload
        of the wrong shape. Sets ``state.finished`` on the provider's end signal.
        """
        ...

    def error(self, status: int, headers: Mapping[str, str], body: str) -> ProviderError:
        """The error for a non-success HTTP response."""
        ...

    def parse_response(self, body: str) -> CompletionResponse:
        """The response of a non-streaming request (``build(req, stream=False)``)."""
        ...


def malformed(provider: str, what: str, data: str) -> ProviderError:
    """A payload that is not what the provider's wire format promises."""
    return ProviderError(
        f"{provider} sent a payload blazen cannot read ({what}): {data[:200]!r}",
        provider=provider,
        error_type="malformed_payload",
        body=data[:4096],
    )


def _first_str(*values: Any) -> Optional[str]:
    for v in values:
        if isinstance(v, str) and v:
            return v
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
    return None


def error_from_body(
    provider: str,
    status: Optional[int],
    payload: Any,
    *,
    headers: Optional[Mapping[str, str]] = None,
    raw: str = "",
    secrets: tuple[str, ...] = (),
) -> ProviderError:
    """Classify an error from a decoded body, for both HTTP errors and in-stream errors.

    Understands the common shapes: ``{"error": {"message", "type", "code"}}`` (OpenAI and
    compatibles, Anthropic), ``{"error": "text"}`` (Ollama, llama.cpp) and
    ``{"error": {"status": "RESOURCE_EXHAUSTED"}}`` (Google).
    """
    headers = headers or {}
    err: Any = payload.get("error", payload) if isinstance(payload, dict) else payload
    message: Optional[str] = None
    error_type: Optional[str] = None
    code: Optional[str] = None
    if isinstance(err, dict):
        message = _first_str(err.get("message"), err.get("detail"), err.get("msg"))
        # Google's "status" is a label (RESOURCE_EXHAUSTED); Azure's is the HTTP number.
        status_label = err.get("status") if isinstance(err.get("status"), str) else None
        error_type = _first_str(err.get("type"), status_label)
        code = _first_str(err.get("code"))
    elif isinstance(err, str):
        message = err
    if isinstance(payload, dict) and error_type is None:
        error_type = _first_str(payload.get("type")) if payload.get("type") != "error" else None
    retry_after = parse_retry_after(headers) if headers else None
    if isinstance(err, dict) and isinstance(err.get("details"), list):
        reason, delay = _google_details(err["details"])
        code = reason or code
        if retry_after is None:
            retry_after = delay
    if message is None:
        message = raw.strip()[:500] or "no error message"
    lowered = {k.lower(): v for k, v in headers.items()}
    request_id = _first_str(
        lowered.get("x-request-id"), lowered.get("request-id"), lowered.get("cf-ray")
    )
    if request_id is None and isinstance(payload, dict):
        request_id = _first_str(payload.get("request_id"))
    return error_from_provider(
        provider=provider,
        status=status,
        message=message,
        error_type=error_type,
        code=code,
        body=raw or json.dumps(payload),
        request_id=request_id,
        retry_after=retry_after,
        secrets=secrets,
    )


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _google_details(details: list[Any]) -> tuple[Optional[str], Optional[float]]:
    """The ErrorInfo reason and the RetryInfo delay of a google.rpc error, if present.

    https://cloud.google.com/apis/design/errors#error_details: a 429 carries
    ``{"@type": ".../google.rpc.RetryInfo", "retryDelay": "34s"}``, a wrong key
    ``{"@type": ".../google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}``.
    """
    reason: Optional[str] = None
    delay: Optional[float] = None
    for item in details:
        if not isinstance(item, dict):
            continue
        kind = str(item.get("@type", ""))
        if kind.endswith("google.rpc.ErrorInfo") and isinstance(item.get("reason"), str):
            reason = item["reason"]
        elif kind.endswith("google.rpc.RetryInfo") and isinstance(item.get("retryDelay"), str):
            match = _DURATION.match(item["retryDelay"])
            if match:
                delay = float(match.group(1))
    return reason, delay


def error_from_http(
    provider: str, status: int, headers: Mapping[str, str], body: str
) -> ProviderError:
    """The error for a non-success HTTP response whose body may or may not be JSON."""
    try:
        payload: Any = json.loads(body)
    except ValueError:
        payload = None
    # Google wraps even an error in a JSON array when the request was not alt=sse.
    if isinstance(payload, list) and payload:
        payload = payload[0]
    return error_from_body(provider, status, payload, headers=headers, raw=body)


def error_event(provider: str, data: str) -> ProviderError:
    """The error an SSE ``event: error`` reports, whatever the shape of its data.

    An object is classified like an error body (``{"error": {...}}``, or the fields at the
    top); anything else (a string, a list, text that is not JSON) is the error's message.
    """
    try:
        payload: Any = json.loads(data)
    except ValueError:
        payload = data
    if not isinstance(payload, dict):
        text = payload if isinstance(payload, str) else data
        payload = {"error": {"message": text.strip()[:500] or "no error message"}}
    return error_from_body(provider, None, payload, raw=data)
