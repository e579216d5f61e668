"""Tearing one stream's connection down from another thread, at any stage.

Closing a response from another thread does not wake a thread blocked in ``recv``, and
nothing wakes a thread blocked in a blocking ``connect``. So every socket a stream uses is
registered with that stream's :class:`Abort` as soon as it exists (the pool and connection
classes here do that for the worker thread that set ``_local.abort``), connects are made
non-blocking and polled, and an abort shuts the socket down. This module imports urllib3's
connection classes but not requests.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import os
import select
import socket
import threading
import time
from typing import Any, Optional

import urllib3.exceptions
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.connection import allowed_gai_family

from ..errors import CancelledError

__all__ = ["POOLS", "Abort", "current"]


# The stream whose connections the current worker thread opens (set by the worker).
_local = threading.local()


class Abort:
    """Tears one stream's connection down from any thread, even mid-``recv``."""

    __slots__ = ("_handshake", "_lock", "_pid", "_sock", "aborted", "event")

    def __init__(self) -> None:
        # A forked child inherits the parent's sockets: shutting one down there would end
        # the parent's connection too. An abort only ever touches its own process's.
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._sock: Optional[socket.socket] = None
        self._handshake: Optional[socket.socket] = None
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

    def attach_handshake(self, sock: socket.socket) -> None:
        """Reach a new socket while its TLS handshake runs, until :meth:`end_handshake`.

        A handshake that stalls blocks in ``recv`` like any read, and only a shutdown wakes
        it. But wrapping a socket in TLS detaches its descriptor from the object we were
        handed, so the abort keeps a duplicate descriptor: a shutdown through it ends the
        one connection both name, and no recycled descriptor can be hit by mistake.
        """
        dup = sock.dup()
        with self._lock:
            self._handshake = dup
            if self.aborted:
                _shutdown(dup)

    def end_handshake(self) -> None:
        """The handshake is over (done or failed): close the duplicate descriptor."""
        with self._lock:
            dup, self._handshake = self._handshake, None
        if dup is not None:
            dup.close()

    def detach(self) -> bool:
        """Forget the socket before it goes back to the pool; False if already aborted.

        A pooled socket may serve another stream next, so no later abort may touch it.
        """
        with self._lock:
            self._sock = None
            return not self.aborted

    def abort(self) -> None:
        """Shut the socket down now; the blocked worker wakes with an error.

        Every call shuts down again (a second shutdown is a no-op): an interrupt landing in
        a first call after the flag was set, before the shutdown, must not leave the worker
        blocked in a read when the interrupt's handling calls again.
        """
        with self._lock:
            self.aborted = True
            self.event.set()
            if self._pid != os.getpid():
                return
            if self._sock is not None:
                _shutdown(self._sock)
            if self._handshake is not None:
                _shutdown(self._handshake)


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
    _held: Optional[bytes] = None

    def _new_conn(self) -> socket.socket:
        abort: Optional[Abort] = getattr(_local, "abort", None)
        me: Any = self
        if abort is None or not hasattr(select, "poll"):
            sock: socket.socket = super()._new_conn()  # type: ignore[misc]
            return sock
        timeout = me.timeout if isinstance(me.timeout, (int, float)) else None
        # The same exceptions urllib3's own _new_conn raises, so requests maps them alike.
        try:
            sock = _connect(
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
        abort: Optional[Abort] = getattr(_local, "abort", None)
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
            abort.attach(self)  # type: ignore[arg-type]


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
        abort: Optional[Abort] = getattr(_local, "abort", None)
        if abort is not None:
            abort.attach(conn)
        return super()._make_request(conn, *args, **kwargs)  # type: ignore[misc]


class _Pool(_PoolMixin, HTTPConnectionPool):
    ConnectionCls = _Conn


class _TLSPool(_PoolMixin, HTTPSConnectionPool):
    ConnectionCls = _TLSConn


POOLS = {"http": _Pool, "https": _TLSPool}


def current() -> threading.local:
    """The thread-local slot in which the worker names the stream it is serving."""
    return _local
