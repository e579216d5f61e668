"""Reading a provider's error: an HTTP error body, an ``{"error": ...}`` payload in a stream,
an SSE ``event: error``. No I/O.

The generic reader understands the shapes most servers share: ``{"error": {"message",
"type", "code"}}`` (OpenAI and compatibles, Anthropic) and ``{"error": "text"}`` (Ollama,
llama.cpp). A wire whose errors say more (Google's ``status`` labels and ``details``) reads
those itself and hands what it read to :func:`error_from_body`, which classifies every
error through :func:`blazen.errors.error_from_provider`: an error inside a 200 stream gets
the class the same error sent as an HTTP status gets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional

from ..errors import ProviderError, error_from_provider, parse_retry_after

__all__ = [
    "error_event",
    "error_from_body",
    "error_from_http",
    "error_payload",
    "event_error_payload",
    "first_str",
    "malformed",
]


def malformed(provider: str, what: str, data: str) -> ProviderError:
    """A payload that is not what the provider's wire format promises."""
    return ProviderError(
        f"{provider} sent a payload blazen cannot read ({what}): {data[:200]!r}",
        provider=provider,
        error_type="malformed_payload",
        body=data[:4096],
    )


def first_str(*values: Any) -> Optional[str]:
    """The first value that is non-empty text, or an integer as text (an error code)."""
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
    error_type: Optional[str] = None,
    code: Optional[str] = None,
    retry_after: Optional[float] = None,
) -> ProviderError:
    """Classify an error from a decoded body, for both HTTP errors and in-stream errors.

    ``status`` is None for an error inside a 200 stream; 200 (an error body a server sent
    with a success status) is classified the same way. ``error_type``, ``code`` and
    ``retry_after`` are what a wire read from the body itself; each one given wins over the
    generic reading (the body's ``type`` and ``code``, the ``Retry-After`` headers).
    """
    if status == 200:
        status = None
    headers = headers or {}
    err: Any = payload.get("error", payload) if isinstance(payload, dict) else payload
    message: Optional[str] = None
    if isinstance(err, dict):
        message = first_str(err.get("message"), err.get("detail"), err.get("msg"))
        error_type = error_type or first_str(err.get("type"))
        code = code or first_str(err.get("code"))
    elif isinstance(err, str):
        message = err
    if isinstance(payload, dict) and error_type is None and payload.get("type") != "error":
        error_type = first_str(payload.get("type"))
    if retry_after is None and headers:
        retry_after = parse_retry_after(headers)
    if message is None:
        message = raw.strip()[:500] or "no error message"
    lowered = {k.lower(): v for k, v in headers.items()}
    request_id = first_str(
        lowered.get("x-request-id"), lowered.get("request-id"), lowered.get("cf-ray")
    )
    if request_id is None and isinstance(payload, dict):
        request_id = first_str(payload.get("request_id"))
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


def error_payload(body: str) -> Any:
    """An HTTP error body decoded: the JSON value, or None when the body is not JSON.

    A body that is a list of errors is its first one: Google wraps errors in an array
    (its native API outside ``alt=sse``, and its OpenAI-compatible endpoint too).
    """
    try:
        payload: Any = json.loads(body)
    except ValueError:
        return None
    if isinstance(payload, list) and payload:
        payload = payload[0]
    return payload


def error_from_http(
    provider: str, status: int, headers: Mapping[str, str], body: str
) -> ProviderError:
    """The error for a non-success HTTP response whose body may or may not be JSON."""
    return error_from_body(provider, status, error_payload(body), headers=headers, raw=body)


def event_error_payload(data: str) -> dict[str, Any]:
    """The data of an SSE ``event: error`` as an object :func:`error_from_body` reads.

    An object stays as it is (``{"error": {...}}``, or the fields at the top); anything
    else (a string, a list, text that is not JSON) becomes the error's message.
    """
    try:
        payload: Any = json.loads(data)
    except ValueError:
        payload = data
    if isinstance(payload, dict):
        return payload
    text = payload if isinstance(payload, str) else data
    return {"error": {"message": text.strip()[:500] or "no error message"}}


def error_event(provider: str, data: str) -> ProviderError:
    """The error an SSE ``event: error`` reports, whatever the shape of its data."""
    return error_from_body(provider, None, event_error_payload(data), raw=data)
