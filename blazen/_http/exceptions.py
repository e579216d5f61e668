"""One function maps what the HTTP stack raises to the blazen error that says what happened.

requests, urllib3, http.client, socket and ssl each raise their own classes; the table below
lists them most specific first, and a test fails when one of those libraries has an
exception class the table does not place.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from typing import Optional

import requests
import urllib3.exceptions

from ..errors import (
    BlazenError,
    ConnectionError,
    InternalError,
    ProviderError,
    TimeoutError,
    ValidationError,
)

__all__ = ["EXCEPTIONS", "map_exception"]

# Most specific first: the first class that matches decides.
EXCEPTIONS: list[tuple[type[BaseException], str]] = [
    (requests.exceptions.ConnectTimeout, "connect_timeout"),
    (requests.exceptions.ReadTimeout, "read_timeout"),
    (requests.exceptions.SSLError, "tls"),
    (requests.exceptions.ProxyError, "proxy"),
    (requests.exceptions.ConnectionError, "connect"),
    (requests.exceptions.ChunkedEncodingError, "broken"),
    (requests.exceptions.ContentDecodingError, "decoding"),
    (requests.exceptions.StreamConsumedError, "internal"),
    (requests.exceptions.RetryError, "connect"),
    (requests.exceptions.TooManyRedirects, "redirect"),
    (requests.exceptions.InvalidJSONError, "internal"),
    (requests.exceptions.MissingSchema, "bad_url"),
    (requests.exceptions.InvalidSchema, "bad_url"),
    (requests.exceptions.InvalidURL, "bad_url"),
    (requests.exceptions.InvalidHeader, "bad_url"),
    (requests.exceptions.URLRequired, "bad_url"),
    (requests.exceptions.UnrewindableBodyError, "internal"),
    (requests.exceptions.Timeout, "read_timeout"),
    (urllib3.exceptions.ReadTimeoutError, "read_timeout"),
    (urllib3.exceptions.SSLError, "tls"),
    (urllib3.exceptions.ProtocolError, "broken"),
    (urllib3.exceptions.DecodeError, "decoding"),
    (urllib3.exceptions.HTTPError, "broken"),
    (http.client.IncompleteRead, "broken"),
    (http.client.HTTPException, "broken"),
    (socket.timeout, "read_timeout"),
    (ssl.SSLError, "tls"),
    (OSError, "broken"),
]


def map_exception(
    exc: BaseException,
    *,
    provider: str,
    url: str,
    connect_timeout: Optional[float],
    read_timeout: Optional[float],
) -> BlazenError:
    """Map an exception raised while talking HTTP to the blazen error that says what happened."""
    if isinstance(exc, BlazenError):
        return exc
    what = next((w for cls, w in EXCEPTIONS if isinstance(exc, cls)), "unknown")
    err: BlazenError
    if what == "connect_timeout":
        err = TimeoutError(
            f"could not connect to {provider} at {url} within the connect timeout of "
            f"{connect_timeout:g} s (is the server up? raise connect_timeout= if it is slow)",
            limit="connect",
            seconds=connect_timeout or 0.0,
            provider=provider,
            retryable=True,
        )
    elif what == "read_timeout":
        err = TimeoutError(
            f"{provider} sent nothing for {read_timeout:g} s (idle timeout); the stream was "
            "stopped (raise idle_timeout= for slow models)",
            limit="idle",
            seconds=read_timeout or 0.0,
            provider=provider,
        )
    elif what == "tls":
        err = ConnectionError(
            f"TLS handshake with {provider} at {url} failed: {exc} (check the certificate; "
            "verify= can point at a CA bundle)",
            provider=provider,
        )
    elif what == "proxy":
        err = ConnectionError(
            f"the proxy for {url} refused or failed: {exc}", provider=provider, retryable=True
        )
    elif what == "connect":
        err = ConnectionError(
            f"could not connect to {provider} at {url}: {_reason(exc)} (is the server running "
            "and base_url right?)",
            provider=provider,
            retryable=True,
        )
    elif what == "broken":
        err = ConnectionError(
            f"the connection to {provider} broke: {_reason(exc)}",
            provider=provider,
            retryable=True,
        )
    elif what == "decoding":
        err = ProviderError(
            f"{provider} sent a body that could not be decoded: {exc}", provider=provider
        )
    elif what == "redirect":
        err = ProviderError(f"{provider} redirected too often: {exc}", provider=provider)
    elif what == "bad_url":
        err = ValidationError(f"the URL for {provider} cannot be used: {url} ({exc})")
    else:
        err = InternalError(f"unexpected {type(exc).__name__} talking to {provider}: {exc}")
    err.__cause__ = exc
    return err


def _reason(exc: BaseException) -> str:
    # requests nests urllib3's reason several levels deep; the innermost says the most.
    seen: BaseException = exc
    for _ in range(5):
        inner = seen.args[0] if seen.args and isinstance(seen.args[0], BaseException) else None
        inner = inner or getattr(seen, "reason", None)
        if not isinstance(inner, BaseException):
            break
        seen = inner
    text = str(seen) or type(seen).__name__
    return text.split(": ", 1)[-1] if "object at 0x" in text else text
