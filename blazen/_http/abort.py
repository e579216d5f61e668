"""Tearing one stream's connection down from another thread, at any stage.

Closing a response from another thread does not wake a thread blocked in ``recv``, and
nothing wakes a thread blocked in a blocking ``connect``. So every socket a stream uses is
registered with that stream's :class:`Abort` as soon as it exists (the pool and connection
classes of :mod:`.hooks` do that for the worker thread that named its stream in
:func:`current`), connects are made non-blocking and polled (:func:`connect`), and an abort
shuts the socket down.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import threading
import time
from typing import Any, Optional

from urllib3.util.connection import allowed_gai_family

from ..errors import CancelledError

__all__ = ["Abort", "connect", "current"]


# The stream whose connections the current worker thread opens (set by the worker).
_local = threading.local()


class Abort:
    """Tears one stream's connection down from any thread, even mid-``recv``."""

    __slots__ = ("_handshake", "_lock", "_pid", "_sock", "_wake", "aborted")

    def __init__(self) -> None:
        # A forked child inherits the parent's sockets: shutting one down there would end
        # the parent's connection too. An abort only ever touches its own process's.
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._sock: Optional[socket.socket] = None
        self._handshake: Optional[socket.socket] = None
        self.aborted = False
        # Held until the abort releases it; the worker waits on it between retries. Not a
        # threading.Event: its set() takes a Condition's lock in Python code, and an
        # interrupt landing there (Ctrl-C pressed twice) left that lock taken for good, so
        # the handling's next abort() hung the caller. A release is one C call.
        self._wake = threading.Lock()
        self._wake.acquire()

    def attach(self, conn: Any) -> None:
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

    @property
    def attached_socket(self) -> Optional[socket.socket]:
        """The socket attached now, or None: still there after http.client drops its own."""
        return self._sock

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

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds on the worker's thread; True once aborted."""
        if self._wake.acquire(timeout=timeout):
            # Given back at once, so every later wait (and the abort's release) sees it
            # free; an abort releasing it in between makes this release the one refused.
            with contextlib.suppress(RuntimeError):
                self._wake.release()
            return True
        return self.aborted

    def abort(self) -> None:
        """Shut the socket down now; the blocked worker wakes with an error.

        Every call shuts down again (a second shutdown is a no-op): an interrupt landing in
        a first call after the flag was set, before the shutdown, must not leave the worker
        blocked in a read when the interrupt's handling calls again.
        """
        with self._lock:
            self.aborted = True
            # No contextlib.suppress() here: building it is a Python call an interrupt may
            # land in, on the caller's thread.
            try:  # noqa: SIM105
                self._wake.release()
            except RuntimeError:
                pass  # released by an earlier call: the worker is awake already
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


def connect(
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


def current() -> threading.local:
    """The thread-local slot in which the worker names the stream it is serving."""
    return _local
