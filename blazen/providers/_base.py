"""What every wire format provides, and the helpers they share. No I/O here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Callable, Optional, Protocol

import attrs

from .._types import CompletionRequest, CompletionResponse, StreamChunk
from ..errors import ProviderError, error_from_provider, parse_retry_after
from ._state import StreamState

__all__ = ["HttpRequest", "WireFormat", "error_from_body", "malformed", "parse_json"]


@attrs.frozen(kw_only=True)
class HttpRequest:
    """A request ready to send: the transport adds nothing but the socket."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes

    def __repr__(self) -> str:
        # Headers carry the key: never show them.
        return f"HttpRequest({self.method} {self.url}, {len(self.body)} bytes)"


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


# json.loads reaches the C scanner through two Python wrappers and two whitespace regexes,
# a third of its time on a small payload. Stream payloads are bare JSON: try the scanner on
# its own, and leave anything it declines (whitespace, trailing data, errors) to json.loads.
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def parse_json(provider: str, data: str) -> dict[str, Any]:
    """Decode one payload that must be a JSON object."""
    try:
        obj, end = _scan_once(data, 0)
        if end != len(data):
            raise ValueError(end)
    except (StopIteration, ValueError):
        try:
            obj = json.loads(data)
        except ValueError as exc:
            raise malformed(provider, "not JSON", data) from exc
    if not isinstance(obj, dict):
        raise malformed(provider, "not a JSON object", data)
    return obj


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
        error_type = _first_str(err.get("type"), err.get("status"))
        code = _first_str(err.get("code"))
    elif isinstance(err, str):
        message = err
    if isinstance(payload, dict) and error_type is None:
        error_type = _first_str(payload.get("type")) if payload.get("type") != "error" else None
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
        retry_after=parse_retry_after(headers) if headers else None,
        secrets=secrets,
    )
