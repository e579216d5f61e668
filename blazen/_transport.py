"""HTTP for blazen: pooled sessions, socket teardown from another thread, error mapping.

This is the only module that imports ``requests``. Three things here are not what a plain
``requests.post(stream=True)`` gives:

- **Teardown that works.** Closing a response from another thread does not wake a thread
  blocked in ``recv``; shutting the socket down does. Every connection a stream uses is
  registered with that stream's :class:`Abort`, which shuts the socket down on cancel.
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
import weakref
from collections.abc import Iterator
from typing import Any, Callable, Optional

import requests
import requests.adapters
import urllib3.exceptions
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

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

__all__ = ["Abort", "Transport", "iter_bytes", "map_exception"]

logger = logging.getLogger("blazen")

USER_AGENT = f"blazen-python/{__version__}"
_READ_SIZE = 65536
_MAX_LINE = 65536
_ERROR_BODY_CAP = 64 * 1024

# The stream whose connections the current worker thread opens (set by the worker).
_local = threading.local()


class Abort:
    """Tears one stream's connection down from any thread, even mid-``recv``."""

    __slots__ = ("_lock", "_sock", "aborted", "event")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: Optional[socket.socket] = None
        self.aborted = False
        #: Set on abort; the worker waits on it between retries.
        self.event = threading.Event()

    def attach(self, conn: HTTPConnection) -> None:
        """Register the socket of the connection the worker is using.

        The socket itself is kept, not the connection: http.client drops ``conn.sock``
        as soon as a close-delimited response begins, while the response still reads it.
        """
        sock = getattr(conn, "sock", None)
        if sock is None:
            return  # not connected yet: connect() attaches again
        with self._lock:
            self._sock = sock
            if self.aborted:
                _shutdown(sock)

    def abort(self) -> None:
        """Shut the socket down now; the blocked worker wakes with an error."""
        with self._lock:
            if self.aborted:
                return
            self.aborted = True
            self.event.set()
            if self._sock is not None:
                _shutdown(self._sock)


def _shutdown(sock: socket.socket) -> None:
    # socket.socket.shutdown, not SSLSocket.shutdown: the latter also drops the TLS object
    # under the feet of the thread that is reading it.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _AbortAware:
    """Connection mixin: a connection made after an abort is shut down at once."""

    sock: Any

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        abort: Optional[Abort] = getattr(_local, "abort", None)
        if abort is not None:
            abort.attach(self)  # type: ignore[arg-type]


class _Conn(_AbortAware, HTTPConnection):
    pass


class _TLSConn(_AbortAware, HTTPSConnection):
    pass


class _PoolMixin:
    def _make_request(self, conn: Any, *args: Any, **kwargs: Any) -> Any:
        abort: Optional[Abort] = getattr(_local, "abort", None)
        if abort is not None:
            abort.attach(conn)
        return super()._make_request(conn, *args, **kwargs)  # type: ignore[misc]


class _Pool(_PoolMixin, HTTPConnectionPool):
    ConnectionCls = _Conn


class _TLSPool(_PoolMixin, HTTPSConnectionPool):
    ConnectionCls = _TLSConn


_POOLS = {"http": _Pool, "https": _TLSPool}


class _Adapter(requests.adapters.HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = _POOLS
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
        headers = {"User-Agent": USER_AGENT, **request.headers}
        if stream:
            # Compression buffers a stream; providers do not compress SSE anyway.
            headers.setdefault("Accept-Encoding", "identity")
        prepared = requests.Request(
            request.method, request.url, headers=headers, data=request.body
        ).prepare()
        session = self._get_session()
        _local.abort = abort
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
            _local.abort = None


def iter_bytes(resp: requests.Response) -> Iterator[bytes]:
    """Yield body bytes as soon as the socket has any, chunked or close-delimited."""
    raw = resp.raw
    chunked = _chunked_body(resp)
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


# One reader per response, so that release() drains from where the stream stopped reading.
_chunked_bodies: weakref.WeakKeyDictionary[http.client.HTTPResponse, _ChunkedBody] = (
    weakref.WeakKeyDictionary()
)


def _chunked_body(resp: requests.Response) -> Optional[_ChunkedBody]:
    inner = getattr(resp.raw, "_fp", None)
    if not isinstance(inner, http.client.HTTPResponse):
        return None
    body = _chunked_bodies.get(inner)
    if (
        body is None
        and inner.chunked
        and inner.chunk_left is None  # http.client has read none of the body
        and inner.fp is not None
        and resp.headers.get("Content-Encoding", "identity").lower() == "identity"
    ):
        body = _chunked_bodies[inner] = _ChunkedBody(inner)
    return body


class _ChunkedBody:
    """The data of a chunked body, one piece per socket read however many chunks it holds.

    http.client returns one chunk per ``read1`` and parses each size line with ``readline``;
    providers send one event per chunk, so that costs more per event than the event's JSON.
    Here the socket's buffer is read in blocks and the chunks are cut out of it. At the end
    the response is closed as http.client closes it, so the connection can be pooled again;
    a body cut short raises ``IncompleteRead``, as http.client does.
    """

    __slots__ = ("_buf", "_inner", "_left", "_read1", "_skip", "done")

    def __init__(self, inner: http.client.HTTPResponse) -> None:
        assert inner.fp is not None
        self._inner = inner
        self._read1: Callable[[int], bytes] = inner.fp.read1
        self._buf = b""
        self._left = 0  # bytes of the current chunk's data still to come
        self._skip = 0  # bytes of the CRLF that ends a chunk's data still to come
        self.done = False

    def read(self) -> bytes:
        """The data of every chunk in the next socket read; ``b""`` at the end of the body."""
        out: list[bytes] = []
        while not out and not self.done:
            data = self._read1(_READ_SIZE)
            if not data:
                raise http.client.IncompleteRead(b"")
            self._cut(self._buf + data if self._buf else data, out)
        return out[0] if len(out) == 1 else b"".join(out)

    def _cut(self, buf: bytes, out: list[bytes]) -> None:
        pos = 0
        end = len(buf)
        left = self._left
        skip = self._skip
        while pos < end:
            if left:
                stop = pos + left
                if stop > end:
                    out.append(buf[pos:] if pos else buf)
                    left = stop - end
                    pos = end
                    break
                out.append(buf[pos:stop])
                pos = stop
                left = 0
                skip = 2
            if skip:
                step = min(skip, end - pos)
                pos += step
                skip -= step
                if skip:
                    break
            nl = buf.find(b"\r\n", pos)
            if nl < 0:
                if end - pos > _MAX_LINE:
                    raise http.client.LineTooLong("chunk size")
                break
            size = _chunk_size(buf[pos:nl])
            pos = nl + 2
            if size == 0:
                _discard_trailer(buf[pos:], self._read1)
                self.done = True
                self._inner.close()
                break
            left = size
        self._buf = buf[pos:] if pos < end else b""
        self._left = left
        self._skip = skip


def _chunk_size(line: bytes) -> int:
    # As http.client reads it: extensions after ";" ignored, anything unreadable is a cut body.
    try:
        size = int(line.split(b";", 1)[0], 16)
    except ValueError:
        raise http.client.IncompleteRead(b"") from None
    if size < 0:
        raise http.client.IncompleteRead(b"")
    return size


def _discard_trailer(rest: bytes, read1: Callable[[int], bytes]) -> None:
    # Trailer fields up to the empty line; like http.client, EOF instead of it is accepted.
    while True:
        nl = rest.find(b"\n")
        if nl < 0:
            if len(rest) > _MAX_LINE:
                raise http.client.LineTooLong("trailer line")
            data = read1(_READ_SIZE)
            if not data:
                return
            rest += data
            continue
        line, rest = rest[: nl + 1], rest[nl + 1 :]
        if line in (b"\r\n", b"\n"):
            return


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


def release(resp: requests.Response, *, drain_timeout: float = 1.0) -> None:
    """Return a finished response's connection to the pool, or close it.

    After the end signal most servers end the body at once; a server that keeps it open
    gets its connection closed after ``drain_timeout`` rather than holding the caller.
    """
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
