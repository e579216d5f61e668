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
import errno
import http.client
import logging
import os
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any, Callable, Optional

import requests
import requests.adapters
import urllib3.exceptions
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.connection import allowed_gai_family

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

    def detach(self) -> bool:
        """Forget the socket before it goes back to the pool; False if already aborted.

        A pooled socket may serve another stream next, so no later abort may touch it.
        """
        with self._lock:
            self._sock = None
            return not self.aborted

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


def _connect(
    address: tuple[str, int],
    timeout: Optional[float],
    source_address: Any,
    socket_options: Any,
    abort: Abort,
) -> socket.socket:
    """``socket.create_connection`` that a cancel interrupts within 50 ms.

    A thread blocked in ``connect()`` cannot be woken from outside (neither close nor
    shutdown interrupts it), so the connect is made non-blocking and polled.
    """
    host, port = address
    err: Optional[OSError] = None
    deadline = None if timeout is None else time.monotonic() + timeout
    for family, kind, proto, _, addr in socket.getaddrinfo(
        host.strip("[]"), port, allowed_gai_family(), socket.SOCK_STREAM
    ):
        sock = socket.socket(family, kind, proto)
        try:
            for option in socket_options or ():
                sock.setsockopt(*option)
            if source_address:
                sock.bind(source_address)
            sock.setblocking(False)
            code = sock.connect_ex(addr)
            poller = select.poll()
            poller.register(sock, select.POLLOUT)
            while code in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
                if abort.aborted:
                    raise CancelledError("the stream was cancelled while connecting")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise socket.timeout("timed out")
                if poller.poll(50 if left is None else max(1, min(50, int(left * 1000)))):
                    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise OSError(code, os.strerror(code))
            sock.settimeout(timeout)
            return sock
        except OSError as exc:
            err = exc
            sock.close()
        except BaseException:
            sock.close()
            raise
    raise err or OSError(f"no address found for {host}")


class _AbortAware:
    """Connection mixin: connects that a cancel interrupts, and sockets an abort can reach."""

    sock: Any

    def _new_conn(self) -> socket.socket:
        abort: Optional[Abort] = getattr(_local, "abort", None)
        me: Any = self
        if abort is None or not hasattr(select, "poll"):
            sock: socket.socket = super()._new_conn()  # type: ignore[misc]
            return sock
        timeout = me.timeout if isinstance(me.timeout, (int, float)) else None
        # The same exceptions urllib3's own _new_conn raises, so requests maps them alike.
        try:
            return _connect(
                (me._dns_host, me.port), timeout, me.source_address, me.socket_options, abort
            )
        except socket.gaierror as exc:
            raise urllib3.exceptions.NameResolutionError(me.host, me, exc) from exc
        except socket.timeout as exc:
            raise urllib3.exceptions.ConnectTimeoutError(
                me, f"Connection to {me.host} timed out. (connect timeout={timeout})"
            ) from exc
        except OSError as exc:
            raise urllib3.exceptions.NewConnectionError(
                me, f"Failed to establish a new connection: {exc}"
            ) from exc

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
        # Bounds the connections in use at once; the pool keeps at most as many idle ones.
        self._slots = threading.BoundedSemaphore(max_connections)

    @contextlib.contextmanager
    def slot(self, abort: Abort) -> Iterator[None]:
        """Hold one of ``max_connections`` slots; waiting for one still obeys ``abort``."""
        while not self._slots.acquire(timeout=0.05):
            if abort.aborted:
                raise CancelledError("the stream was cancelled while waiting for a connection")
        try:
            yield
        finally:
            self._slots.release()

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
                proxies=requests.utils.get_environ_proxies(request.url),
            )
        finally:
            _local.abort = None


def iter_bytes(resp: requests.Response) -> Iterator[bytes]:
    """Yield body bytes as soon as the socket has any, chunked or close-delimited."""
    raw = resp.raw
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
