"""Every private name of urllib3, http.client and requests that blazen overrides or reads.

blazen reaches below the public APIs of its HTTP stack in a few places, each for a promise
the public API cannot keep (a cancel that wakes a blocked ``connect``, 1xx responses
skipped, a chunked body cut a read at a time, idle pools closed). They are all here, named
in :data:`HOOKS`; ``tests/test_http_hooks.py`` fails on an installed version where one of
them is gone, and ``pyproject.toml`` bounds the versions they were checked on.
"""

from __future__ import annotations

import functools
import http.client
import select
import socket
from typing import Any, Callable, Optional

import urllib3.exceptions
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from .abort import Abort, connect, current

__all__ = [
    "HOOKS",
    "POOLS",
    "Hook",
    "http_response",
    "own_pools",
    "raw_read1",
    "response_socket",
]


class Hook:
    """One private name blazen depends on: whose it is, and what for."""

    __slots__ = ("instance", "name", "owner", "why")

    def __init__(self, owner: str, name: str, why: str, *, instance: bool = False) -> None:
        #: The dotted path of the class or module that has it.
        self.owner = owner
        self.name = name
        self.why = why
        #: Set on instances (in ``__init__`` or by the library), not on the class.
        self.instance = instance

    def __repr__(self) -> str:
        return f"{self.owner}.{self.name}"


HOOKS: tuple[Hook, ...] = (
    Hook("urllib3.connection.HTTPConnection", "_new_conn", "connects a cancel interrupts"),
    Hook("urllib3.connection.HTTPConnection", "_dns_host", "the host to resolve", instance=True),
    Hook("http.client.HTTPConnection", "_tunnel", "a proxy's silent CONNECT is a timeout"),
    Hook("http.client.HTTPConnection", "_tunnel_host", "named in that error", instance=True),
    Hook("urllib3.connectionpool.HTTPConnectionPool", "_make_request", "the socket to abort"),
    Hook("http.client.HTTPResponse", "_read_status", "interim 1xx responses skipped"),
    Hook("http.client", "_MAXLINE", "the limits of a skipped 1xx header block"),
    Hook("http.client", "_MAXHEADERS", "the limits of a skipped 1xx header block"),
    Hook(
        "urllib3.poolmanager.PoolManager", "pool_classes_by_scheme", "its pools", instance=True
    ),
    Hook("urllib3.poolmanager.PoolManager", "pools", "the pools it keeps", instance=True),
    Hook(
        "urllib3._collections.RecentlyUsedContainer",
        "dispose_func",
        "dropped pools closed",
        instance=True,
    ),
    Hook("urllib3.response.HTTPResponse", "_fp", "http.client's response under it", instance=True),
    Hook(
        "urllib3.response.HTTPResponse", "_connection", "the socket a budget times", instance=True
    ),
    Hook("http.client.HTTPResponse", "chunk_left", "a chunked body not begun", instance=True),
    Hook("http.client.HTTPResponse", "length", "a sized body cut short", instance=True),
)


def own_pools(manager: Any, pools: dict[str, type]) -> None:
    """Make ``manager`` (a urllib3 PoolManager) open ``pools`` and close the pools it drops."""
    manager.pool_classes_by_scheme = pools
    # urllib3 2 drops a pool from its manager (on clear(), or when too many hosts evict it)
    # without closing it: its idle sockets stay open until the pool is collected, which a
    # reference anywhere (an error's traceback) can put off for ever. Close them then.
    manager.pools.dispose_func = _close_pool


def _close_pool(pool: Any) -> None:
    pool.close()


def http_response(raw: Any) -> Optional[http.client.HTTPResponse]:
    """http.client's response under a urllib3 response, if it is one."""
    inner = getattr(raw, "_fp", None)
    return inner if isinstance(inner, http.client.HTTPResponse) else None


def response_socket(raw: Any) -> Any:
    """The socket a urllib3 response reads from, or None (a budget sets its timeout)."""
    return getattr(getattr(raw, "_connection", None), "sock", None)


def raw_read1(raw: Any) -> Callable[[int], bytes]:
    """One socket read of a urllib3 response's body, undecoded: whatever one recv gave.

    urllib3 >= 2.1 has ``read1`` (raw here: blazen decodes); 2.0 exposes http.client's
    response, raw too, as ``_fp``.
    """
    if hasattr(raw, "read1"):
        return functools.partial(raw.read1, decode_content=False)
    inner = raw._fp
    read1: Callable[[int], bytes] = inner.read1

    def checked(size: int) -> bytes:
        # http.client's read1 ends a body cut short of its Content-Length quietly (urllib3's
        # own read1 raises): what it still owed says the body was cut.
        data = read1(size)
        if not data and size and getattr(inner, "length", None):
            raise http.client.IncompleteRead(b"", inner.length)
        return data

    return checked


class _AbortAware:
    """Connection mixin: connects that a cancel interrupts, and sockets an abort can reach."""

    sock: Any
    _held: Optional[bytes] = None

    def _new_conn(self) -> socket.socket:
        abort: Optional[Abort] = getattr(current(), "abort", None)
        me: Any = self
        if abort is None or not hasattr(select, "poll"):
            sock: socket.socket = super()._new_conn()  # type: ignore[misc]
            return sock
        timeout = me.timeout if isinstance(me.timeout, (int, float)) else None
        # The same exceptions urllib3's own _new_conn raises, so requests maps them alike.
        try:
            sock = connect(
                (me._dns_host, me.port), timeout, me.source_address, me.socket_options, abort
            )
            abort.attach_handshake(sock)
            return sock
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

    def request(
        self, method: str, url: str, body: Any = None, headers: Any = None, **kw: Any
    ) -> None:
        # http.client writes the head and then the body: two writes, and on loopback two
        # wake-ups of the server. A request whose body is bytes goes out in one write.
        self._held: Optional[bytes] = b"" if isinstance(body, bytes) and body else None
        try:
            super().request(method, url, body=body, headers=headers, **kw)  # type: ignore[misc]
        finally:
            self._held = None

    def send(self, data: Any) -> None:
        held = self._held
        if held is not None:
            if not held:
                self._held = bytes(data)  # the head: wait for the body
                return
            self._held = None
            data = held + data
        super().send(data)  # type: ignore[misc]

    def _tunnel(self) -> None:
        try:
            super()._tunnel()  # type: ignore[misc]
        except socket.timeout as exc:
            # The proxy took the connection and never answered CONNECT: its fault, not a
            # TLS handshake's with the provider.
            me: Any = self
            raise urllib3.exceptions.ConnectTimeoutError(
                me,
                f"the proxy {me.host}:{me.port} did not answer CONNECT to {me._tunnel_host} "
                f"(connect timeout={me.timeout})",
            ) from exc

    def connect(self) -> None:
        abort: Optional[Abort] = getattr(current(), "abort", None)
        try:
            super().connect()  # type: ignore[misc]
        except socket.timeout as exc:
            # The TLS handshake ran out of the connect timeout. urllib3 would report it as a
            # read timeout, blaming a provider that never got the request.
            me: Any = self
            raise urllib3.exceptions.ConnectTimeoutError(
                me, f"TLS handshake with {me.host} timed out (connect timeout={me.timeout})"
            ) from exc
        finally:
            if abort is not None:
                abort.end_handshake()
        if abort is not None:
            abort.attach(self)


class _FinalResponse(http.client.HTTPResponse):
    """http.client's response, passing over every interim 1xx response, not only 100.

    A server may send ``103 Early Hints`` (or 102) before the real status; http.client
    would take it for the response itself. 101 (switching protocols) is final.
    """

    def _read_status(self) -> tuple[str, int, str]:
        # A bounded number: a server sending interim responses for ever never answers.
        for _ in range(_MAX_INTERIM):
            version, status, reason = super()._read_status()  # type: ignore[misc]
            if not 100 < status < 200 or status == 101:
                return version, status, reason
            _skip_headers(self.fp)
        raise http.client.HTTPException(
            f"more than {_MAX_INTERIM} interim (1xx) responses and no real one"
        )


_MAX_INTERIM = 32


def _skip_headers(fp: Any) -> None:
    # The interim response's header block, up to its blank line, with http.client's limits.
    for _ in range(http.client._MAXHEADERS + 1):  # type: ignore[attr-defined]
        line = fp.readline(http.client._MAXLINE + 1)  # type: ignore[attr-defined]
        if len(line) > http.client._MAXLINE:  # type: ignore[attr-defined]
            raise http.client.LineTooLong("header line")
        if line in (b"\r\n", b"\n", b""):
            return
    raise http.client.HTTPException("got more than 100 headers in an interim response")


class _Conn(_AbortAware, HTTPConnection):
    response_class = _FinalResponse


class _TLSConn(_AbortAware, HTTPSConnection):
    response_class = _FinalResponse


class _PoolMixin:
    def _make_request(self, conn: Any, *args: Any, **kwargs: Any) -> Any:
        abort: Optional[Abort] = getattr(current(), "abort", None)
        if abort is not None:
            abort.attach(conn)
        return super()._make_request(conn, *args, **kwargs)  # type: ignore[misc]


class _Pool(_PoolMixin, HTTPConnectionPool):
    ConnectionCls = _Conn


class _TLSPool(_PoolMixin, HTTPSConnectionPool):
    ConnectionCls = _TLSConn


POOLS = {"http": _Pool, "https": _TLSPool}
