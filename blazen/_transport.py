"""HTTP for blazen: pooled sessions, socket teardown from another thread, error mapping.

This module and :mod:`blazen._chunked` are the only ones that import ``requests``. Three
things here are not what a plain ``requests.post(stream=True)`` gives:

- **Teardown that works** (:mod:`blazen._abort`): every socket a stream uses is registered
  with that stream's :class:`Abort`, which shuts it down on cancel, even mid-``recv``.
- **Bytes as they arrive.** ``iter_content`` on a close-delimited body waits for a full
  buffer; :func:`iter_bytes` uses ``read1`` so one event is delivered the moment it lands.
- **One mapping** from requests/urllib3/socket exceptions to blazen's own errors
  (:func:`map_exception`), most specific first.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any, Callable, Optional

import requests
import requests.adapters
import urllib3.exceptions

from ._abort import POOLS, Abort, current
from ._chunked import chunked_body
from ._version import __version__
from .errors import (
    BlazenError,
    CancelledError,
    ConnectionError,
    InternalError,
    ProviderError,
    TimeoutError,
    ValidationError,
)
from .providers._base import HttpRequest

__all__ = ["Abort", "Transport", "iter_bytes", "map_exception", "read_body", "read_error_body"]

logger = logging.getLogger("blazen")

USER_AGENT = f"blazen-python/{__version__}"
_READ_SIZE = 65536
_ERROR_BODY_CAP = 64 * 1024
#: Prepared request templates kept per model (distinct URL and header sets).
_PREPARED_CAP = 64


class _Adapter(requests.adapters.HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = POOLS
        return manager


class _NoCookies(requests.cookies.RequestsCookieJar):
    """A shared model must not carry one caller's cookies into another's request."""

    def set_cookie(self, *args: Any, **kwargs: Any) -> None:
        return None


class Transport:
    """One model's connection pool. Thread-safe; re-opens itself after :meth:`close`."""

    def __init__(self, *, max_connections: int, verify: bool | str) -> None:
        self._max = max_connections
        self._verify = verify
        self._lock = threading.Lock()
        self._session: Optional[requests.Session] = None
        self._proxy_cache: dict[str, dict[str, str]] = {}
        self._prepared: dict[tuple[Any, ...], requests.PreparedRequest] = {}
        # Bounds the connections in use at once; the pool keeps at most as many idle ones.
        self._slots = threading.BoundedSemaphore(max_connections)
        self._told_full = False

    @contextlib.contextmanager
    def slot(self, abort: Abort) -> Iterator[None]:
        """Hold one of ``max_connections`` slots; waiting for one still obeys ``abort``."""
        if not self._slots.acquire(blocking=False):
            if not self._told_full:
                # Once per model: a thread pool larger than the model's pool runs in waves.
                self._told_full = True
                logger.info(
                    "all %d connections of this model are in use; further streams wait for "
                    "one (raise max_connections= to run more at once)",
                    self._max,
                )
            self._wait_for_slot(abort)
        try:
            yield
        finally:
            self._slots.release()

    def _wait_for_slot(self, abort: Abort) -> None:
        while not self._slots.acquire(timeout=0.05):
            if abort.aborted:
                raise CancelledError("the stream was cancelled while waiting for a connection")

    def _get_session(self) -> requests.Session:
        session = self._session
        if session is None:
            with self._lock:
                session = self._session
                if session is None:
                    session = requests.Session()
                    session.cookies = _NoCookies()
                    adapter = _Adapter(pool_connections=4, pool_maxsize=self._max, max_retries=0)
                    session.mount("http://", adapter)
                    session.mount("https://", adapter)
                    self._session = session
        return session

    def _prepare(self, request: HttpRequest, stream: bool) -> requests.PreparedRequest:
        # requests prepares a request by parsing and re-validating its URL and every header
        # (0.13 ms, as much as a short stream's parsing). A model sends the same URL and
        # headers every time, so prepare them once and copy with the new body.
        key = (request.method, request.url, stream, *request.headers.items())
        template = self._prepared.get(key)
        if template is None:
            headers = {"User-Agent": USER_AGENT, **request.headers}
            if stream:
                # Compression buffers a stream; providers do not compress SSE anyway.
                headers.setdefault("Accept-Encoding", "identity")
            prepared = requests.Request(
                request.method, request.url, headers=headers, data=request.body
            ).prepare()
            if len(self._prepared) >= _PREPARED_CAP:
                self._prepared.clear()
            self._prepared[key] = prepared
            return prepared.copy()
        prepared = template.copy()
        prepared.body = request.body
        prepared.headers["Content-Length"] = str(len(request.body))
        return prepared

    def _proxies(self, url: str) -> dict[str, str]:
        # Reading the proxy variables walks and decodes the whole environment, twice: that
        # was a quarter of the CPU a short stream costs. Like httpx, read them once per
        # client (here per model and URL) rather than on every request.
        proxies = self._proxy_cache.get(url)
        if proxies is None:
            proxies = self._proxy_cache[url] = requests.utils.get_environ_proxies(url)
        return proxies

    def close(self) -> None:
        """Close every pooled connection."""
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            session.close()

    def open(
        self,
        request: HttpRequest,
        abort: Abort,
        *,
        stream: bool,
        connect_timeout: Optional[float],
        read_timeout: Optional[float],
    ) -> requests.Response:
        """Send ``request`` and return once the status and headers have arrived.

        Redirects are never followed: a redirect would carry the key to another host.
        """
        prepared = self._prepare(request, stream)
        session = self._get_session()
        local = current()
        local.abort = abort
        try:
            if abort.aborted:
                raise CancelledError("the stream was cancelled before it was sent")
            return session.send(
                prepared,
                stream=True,
                timeout=(connect_timeout, read_timeout),
                allow_redirects=False,
                verify=self._verify,
                proxies=self._proxies(request.url),
            )
        finally:
            local.abort = None


def iter_bytes(resp: requests.Response) -> Iterator[bytes]:
    """Yield body bytes as soon as the socket has any, chunked or close-delimited."""
    raw = resp.raw
    chunked = chunked_body(resp)
    if chunked is not None:
        while True:
            data = chunked.read()
            if not data:
                return
            yield data
    # urllib3 >= 2 has read1; older versions expose http.client's response as _fp.
    read1: Callable[[int], bytes] = getattr(raw, "read1", None) or raw._fp.read1  # type: ignore[union-attr]
    while True:
        data = read1(_READ_SIZE)
        if not data:
            return
        yield data


def read_body(resp: requests.Response, cap: int, provider: str) -> str:
    """A whole (non-streamed) response body as text, refusing one larger than ``cap``."""
    data = resp.raw.read(cap + 1, decode_content=True)
    if len(data) > cap:
        raise ProviderError(
            f"{provider} sent a response larger than {cap} bytes; it was not read "
            "(raise max_event_bytes if this is expected)",
            provider=provider,
            error_type="response_too_large",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProviderError(
            f"{provider} sent a response that is not valid UTF-8", provider=provider
        ) from exc


def read_error_body(resp: requests.Response) -> str:
    """Up to 64 KiB of an error response's body, decoded leniently."""
    try:
        data = resp.raw.read(_ERROR_BODY_CAP, decode_content=True)
    except Exception:
        data = b""
    finally:
        resp.close()
    encoding = resp.encoding or "utf-8"
    try:
        return data.decode(encoding, errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def release(resp: requests.Response, abort: Abort, *, drain_timeout: float = 1.0) -> None:
    """Return a finished response's connection to the pool, or close it.

    After the end signal most servers end the body at once; a server that keeps it open
    gets its connection closed after ``drain_timeout`` rather than holding the caller.
    A stream that was aborted meanwhile has its connection closed, never pooled.
    """
    if not abort.detach():
        resp.close()
        return
    raw = resp.raw
    try:
        sock = raw._connection.sock if raw._connection is not None else None
        if sock is not None:
            sock.settimeout(drain_timeout)
        for _ in iter_bytes(resp):
            pass
    except Exception:
        resp.close()
        return
    raw.release_conn()


# Most specific first: the first class that matches decides.
_EXCEPTIONS: list[tuple[type[BaseException], str]] = [
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
    what = next((w for cls, w in _EXCEPTIONS if isinstance(exc, cls)), "unknown")
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
