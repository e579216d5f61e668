"""One function maps what the HTTP stack raises to the blazen error that says what happened.

requests, urllib3, http.client, socket and ssl each raise their own classes; the table below
lists them most specific first, and a test fails when one of those libraries has an
exception class the table does not place.
"""

from __future__ import annotations

import http.client
import re
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
    safe_str,
)
from .urls import Proxy, shown_url

__all__ = ["CATCH_ALL", "EXCEPTIONS", "Target", "map_exception", "proxy_refused"]

# Most specific first: the first class that matches decides. Every exception class of
# requests, urllib3, http.client, ssl and socket is placed here by name or by a parent that
# says what it means; the broad bases at the end (CATCH_ALL) only catch classes a new
# release adds, and a test fails until those are placed too.
U = urllib3.exceptions
EXCEPTIONS: list[tuple[type[BaseException], str]] = [
    # requests wraps what urllib3 raises while connecting and sending.
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
    # raise_for_status raises it; blazen reads statuses itself and never calls that.
    (requests.exceptions.HTTPError, "internal"),
    # urllib3 raises these itself while a body is read (the stream reads the raw body).
    (U.ConnectTimeoutError, "connect_timeout"),
    (U.ReadTimeoutError, "read_timeout"),
    (U.TimeoutStateError, "internal"),
    (U.TimeoutError, "read_timeout"),
    (U.SSLError, "tls"),
    (U.ProxySchemeUnknown, "proxy"),
    (U.ProxySchemeUnsupported, "proxy"),
    (U.ProxyError, "proxy"),
    (U.NameResolutionError, "connect"),
    (U.NewConnectionError, "connect"),
    (U.MaxRetryError, "connect"),
    (U.HostChangedError, "internal"),
    (U.ResponseNotChunked, "internal"),
    (U.ProtocolError, "broken"),
    (U.IncompleteRead, "broken"),
    (U.InvalidChunkLength, "broken"),
    (U.DecodeError, "decoding"),
    (U.HeaderParsingError, "broken"),
    (U.InvalidHeader, "bad_url"),
    (U.URLSchemeUnknown, "bad_url"),
    (U.LocationParseError, "bad_url"),
    (U.LocationValueError, "bad_url"),
    # A model closed (blazen.shutdown) while a stream waited for its pool.
    (U.ClosedPoolError, "connect"),
    (U.EmptyPoolError, "connect"),
    (U.FullPoolError, "internal"),
    (U.ResponseError, "connect"),
    (U.BodyNotHttplibCompatible, "internal"),
    (U.UnrewindableBodyError, "internal"),
    (U.PoolError, "connect"),
    (U.RequestError, "connect"),
    # http.client, under urllib3, while the status line, headers and chunks are read.
    (http.client.IncompleteRead, "broken"),
    (http.client.RemoteDisconnected, "broken"),
    (http.client.BadStatusLine, "broken"),
    (http.client.LineTooLong, "broken"),
    (http.client.UnknownProtocol, "broken"),
    (http.client.UnknownTransferEncoding, "broken"),
    (http.client.InvalidURL, "bad_url"),
    (http.client.NotConnected, "internal"),
    (http.client.ImproperConnectionState, "internal"),
    (http.client.UnimplementedFileMode, "internal"),
    # The socket and TLS layers.
    (socket.timeout, "read_timeout"),
    (socket.gaierror, "connect"),
    (socket.herror, "connect"),
    (ssl.SSLError, "tls"),
    (ssl.CertificateError, "tls"),
    (ConnectionRefusedError, "connect"),
    # The broad bases, last: they only catch a class none of the entries above names.
    (requests.exceptions.RequestException, "connect"),
    (U.HTTPError, "broken"),
    (http.client.HTTPException, "broken"),
    (OSError, "broken"),
]
CATCH_ALL: tuple[type[BaseException], ...] = (
    requests.exceptions.RequestException,
    U.HTTPError,
    http.client.HTTPException,
    OSError,
)


class Target:
    """Where one request goes, for the errors that name it: the provider, URL, limits, proxy.

    The transport maps every exception of the HTTP stack inside itself with
    :meth:`error`: only blazen errors leave :mod:`blazen._http`.
    """

    __slots__ = ("connect_timeout", "provider", "proxy", "read_timeout", "url")

    def __init__(
        self,
        provider: str,
        url: str,
        *,
        connect_timeout: Optional[float],
        read_timeout: Optional[float],
        proxy: Optional[Proxy],
    ) -> None:
        self.provider = provider
        self.url = url
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.proxy = proxy

    def error(self, exc: BaseException) -> BlazenError:
        """The blazen error for ``exc``, raised while talking to this target."""
        return map_exception(
            exc,
            provider=self.provider,
            url=self.url,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            proxy=self.proxy,
        )


def map_exception(
    exc: BaseException,
    *,
    provider: str,
    url: str,
    connect_timeout: Optional[float],
    read_timeout: Optional[float],
    proxy: Optional[Proxy] = None,
) -> BlazenError:
    """Map an exception raised while talking HTTP to the blazen error that says what happened.

    With a ``proxy``, a failure to connect is the proxy's and says so; ``url`` and the
    proxy are shown with their passwords masked.
    """
    if isinstance(exc, BlazenError):
        return exc
    what = next((w for cls, w in EXCEPTIONS if isinstance(exc, cls)), "unknown")
    if what == "proxy" and _timed_out(_innermost(exc)):
        # urllib3 wraps a timeout reaching the proxy (a stalled TLS handshake with an
        # https:// proxy) as a proxy error; it is the connect timeout all the same.
        what = "connect_timeout"
    text = safe_str(exc)
    url = shown_url(url)
    # Through a proxy every socket blazen opens goes to the proxy: say so.
    via = "" if proxy is None else f" through the proxy {proxy}"
    err: BlazenError
    if what == "connect_timeout":
        hint = "is the server up?" if proxy is None else f"is the {proxy.variable} proxy up?"
        err = TimeoutError(
            f"could not connect to {provider} at {url}{via} within the connect timeout of "
            f"{_seconds(connect_timeout)} ({hint} raise connect_timeout= if it is slow)",
            limit="connect",
            seconds=connect_timeout or 0.0,
            provider=provider,
            retryable=True,
        )
    elif what == "read_timeout":
        err = TimeoutError(
            f"{provider} sent nothing{via} for {_seconds(read_timeout)} (idle timeout); the "
            "stream was stopped (raise idle_timeout= for slow models)",
            limit="idle",
            seconds=read_timeout or 0.0,
            provider=provider,
        )
    elif what == "tls":
        err = ConnectionError(
            f"TLS handshake with {provider} at {url}{via} failed: {text} (check the "
            "certificate; verify= can point at a CA bundle)",
            provider=provider,
        )
    elif what == "proxy" or (what == "connect" and proxy is not None):
        err = _proxy_failed(exc, provider, url, proxy)
    elif what == "connect":
        err = ConnectionError(
            f"could not connect to {provider} at {url}: {_reason(exc)} (is the server running "
            "and base_url right?)",
            provider=provider,
            retryable=True,
        )
    elif what == "broken":
        err = ConnectionError(
            f"the connection to {provider}{via} broke: {_reason(exc)}",
            provider=provider,
            retryable=True,
        )
    elif what == "decoding":
        err = ProviderError(
            f"{provider} sent a body that could not be decoded: {text}", provider=provider
        )
    elif what == "redirect":
        err = ProviderError(f"{provider} redirected too often: {text}", provider=provider)
    elif what == "bad_url":
        err = ValidationError(f"the URL for {provider} cannot be used: {url} ({text})")
    else:
        err = InternalError(f"unexpected {type(exc).__name__} talking to {provider}: {text}")
    err.__cause__ = exc
    return err


# http.client's words when a proxy answers CONNECT with anything but 200.
_TUNNEL_FAILED = r"Tunnel connection failed: (\d{3})\b ?(.*)$"


def _proxy_failed(
    exc: BaseException, provider: str, url: str, proxy: Optional[Proxy]
) -> ConnectionError:
    reason = _reason(exc)
    refused = re.search(_TUNNEL_FAILED, reason, re.DOTALL)
    if refused is not None:
        return proxy_refused(provider, proxy, int(refused.group(1)), refused.group(2))
    if proxy is None:
        return ConnectionError(
            f"the proxy for {provider} at {url} failed: {reason} (check the proxy settings)",
            provider=provider,
            retryable=True,
        )
    return ConnectionError(
        f"could not reach the proxy {proxy} for {provider} at {url}: {reason} (is the proxy "
        f"up and {proxy.variable} right?)",
        provider=provider,
        retryable=True,
    )


def proxy_refused(
    provider: str, proxy: Optional[Proxy], status: int, reason: str
) -> ConnectionError:
    """A proxy answered ``status`` itself (to CONNECT, or 407 to a forwarded request).

    A proxy that asks for credentials (407) or forbids the host (403) answers the same
    again: only its 5xx answers are worth a retry.
    """
    who = f"the proxy {proxy}" if proxy is not None else f"a proxy between blazen and {provider}"
    answer = f"HTTP {status} {reason}".strip()
    if status == 407:
        where = proxy.variable if proxy is not None else "HTTPS_PROXY"
        what = f"asks for credentials ({answer}); check the user and password in {where}"
        what += " (http://user:password@host:port)"
    elif status >= 500:
        what = f"could not reach {provider} ({answer}); is {provider} up, and reachable from it?"
    else:
        what = f"refused the request to {provider} ({answer}); check that it lets the host through"
    return ConnectionError(
        f"{who} {what}", provider=provider, status=status, retryable=status >= 500
    )


_CONNECTION_PREFIX = r"^(?:<[^>]*object at 0x[0-9a-fA-F]+>|\w+\(host=[^)]*\)): "


def _innermost(exc: BaseException) -> BaseException:
    # requests nests urllib3's reason several levels deep; the innermost says the most.
    seen: BaseException = exc
    for _ in range(5):
        inner = seen.args[0] if seen.args and isinstance(seen.args[0], BaseException) else None
        # urllib3 keeps its inner error on .reason, or on .original_error for a proxy's.
        inner = inner or getattr(seen, "reason", None) or getattr(seen, "original_error", None)
        if not isinstance(inner, BaseException):
            break
        seen = inner
    return seen


def _timed_out(exc: BaseException) -> bool:
    # urllib3 derives NewConnectionError (refused, unresolved) from ConnectTimeoutError.
    if isinstance(exc, U.NewConnectionError):
        return False
    return isinstance(exc, (U.ConnectTimeoutError, socket.timeout))


def _reason(exc: BaseException) -> str:
    seen = _innermost(exc)
    args = seen.args
    if len(args) == 2 and isinstance(args[1], str) and not isinstance(args[0], str):
        return args[1]  # urllib3's (connection, message): the message alone
    # urllib3 names the connection first ("HTTPConnection(host='h', port=1): Failed to
    # ..." or "<... object at 0x...>: Failed to ..."); the reason after it is what helps.
    return re.sub(_CONNECTION_PREFIX, "", safe_str(seen))



def _seconds(limit: Optional[float]) -> str:
    # A limit of None means none was set; the socket's own timeout fired (a TLS handshake
    # runs under the connect timeout).
    return "its time limit" if limit is None else f"{limit:g} s"
