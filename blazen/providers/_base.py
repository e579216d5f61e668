"""What every wire format provides, and the helpers they share. No I/O here."""

from __future__ import annotations

import json
import mimetypes
import re
from collections.abc import Mapping
from typing import Any, Callable, Optional, Protocol
from urllib.parse import urlsplit

from .._frozen import Frozen
from .._types import CompletionRequest, CompletionResponse, ImagePart, StreamChunk, ToolCall
from ..errors import (
    ProviderError,
    UnsupportedError,
    ValidationError,
    error_from_provider,
    parse_retry_after,
)
from ._state import StreamState

__all__ = [
    "HttpRequest",
    "WireFormat",
    "call_arguments",
    "error_from_body",
    "error_from_http",
    "image_source",
    "malformed",
    "parse_json",
    "system_text",
    "tool_names",
]


class HttpRequest(Frozen):
    """A request ready to send: the transport adds nothing but the socket."""

    __slots__ = ("body", "headers", "method", "url")

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes

    def __init__(self, *, method: str, url: str, headers: Mapping[str, str], body: bytes) -> None:
        self._fill(locals())

    def __repr__(self) -> str:
        # Headers carry the key: never show them.
        return f"HttpRequest({self.method} {self.url}, {len(self.body)} bytes)"

    @classmethod
    def post_json(
        cls, url: str, headers: Mapping[str, str], body: Any, *, sse: bool = False
    ) -> HttpRequest:
        """A JSON POST; ``sse`` asks for an event stream."""
        all_headers = dict(headers)
        if sse:
            all_headers["Accept"] = "text/event-stream"
        return cls(method="POST", url=url, headers=all_headers, body=json.dumps(body).encode())


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


# -- request helpers shared by the wire formats ------------------------------------------

_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?((?:;[^,;]*)*);base64,(.*)$", re.DOTALL)


def image_source(provider: str, image: ImagePart) -> tuple[str, str, str]:
    """``("url", media_type, url)`` or ``("base64", media_type, data)`` for an image.

    A ``data:`` URL is opened up into its media type and base64 payload, since several
    providers take base64 but not data URLs.
    """
    if image.data is not None:
        return "base64", image.media_type, image.data
    url = image.url or ""
    if url.startswith("data:"):
        match = _DATA_URL.match(url)
        if match is None:
            msg = f"{provider}: an image data: URL must be base64-encoded (data:<type>;base64,...)"
            raise UnsupportedError(msg, provider=provider)
        return "base64", match.group(1) or image.media_type, match.group(3)
    # An image given as a bare URL string carries the default media type; the URL's own
    # extension is the better guess for providers that want one (Gemini's fileData).
    guessed, _ = mimetypes.guess_type(urlsplit(url).path)
    if guessed and guessed.startswith("image/"):
        return "url", guessed, url
    return "url", image.media_type, url


def system_text(req: CompletionRequest) -> Optional[str]:
    """The request's system prompt and any system messages, joined (for top-level fields)."""
    parts = [req.system] if req.system else []
    parts += [m.content for m in req.messages if m.role == "system" and m.content]
    return "\n\n".join(parts) or None


def tool_names(req: CompletionRequest) -> dict[str, str]:
    """Tool-call id to function name, from the assistant turns of a conversation.

    Gemini and Ollama answer a tool result by function name, not by call id.
    """
    return {c.id: c.name for m in req.messages for c in m.tool_calls}


def call_arguments(provider: str, call: ToolCall) -> dict[str, Any]:
    """An earlier tool call's arguments as an object, for providers that want JSON, not text."""
    try:
        return call.arguments()
    except ValueError as exc:
        msg = (
            f"{provider} needs tool-call arguments as a JSON object, but call {call.id!r} "
            f"({call.name}) has {call.arguments_json[:200]!r}"
        )
        raise ValidationError(msg) from exc


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
