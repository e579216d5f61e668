"""Where a chunked body's bytes come from: what http.client buffered, then the socket itself.

http.client reads a response through a ``BufferedReader`` over a ``SocketIO``: each read
of the body goes through both (Python code in ``SocketIO``), and with a read timeout set,
Python polls the socket before every ``recv``. A stream whose events arrive one at a time
pays all of that per event, and under a busy GIL each extra release of it (the poll) is one
more wait to get it back. Once the reader's buffer is drained, nothing else will read from
it, so the body is read from the socket directly; on Linux a plain TCP socket also trades
the poll for the kernel's own receive timeout (``SO_RCVTIMEO``), the same timeout per read.

One difference remains: a signal that interrupts a read restarts the kernel's timeout,
where Python keeps one deadline over its retries, so a thread that signals kept reaching
would wait until a timeout after the last one. No stream waits for that: its idle limit is
the caller's own deadline, which aborts the socket; and on Linux a signal sent to the process
goes to the main thread as a rule (which never reads a body), not to a worker.

Once the socket is read directly, read the body only through :attr:`BodySource.read1`:
http.client's reader would take a read the kernel timed out for the end of the body.

A TLS socket keeps Python's timeout: with a blocking TLS socket, ``ssl`` would retry a read
the kernel timed out for ever. So does any socket that is not the standard library's own
(gevent's, say, which waits in its hub and would not see the kernel's timeout). Before the
connection goes back to the pool, :meth:`BodySource.restore` gives the socket its timeout
back: the next request on it is sent and read as urllib3 expects.
"""

from __future__ import annotations

import socket
import ssl
import struct
import sys
from typing import Any, Callable, Optional

__all__ = ["BodySource"]

#: The kernel's receive timeout, where it works as Python's does (an EAGAIN when it ends).
_KERNEL_TIMEOUT = sys.platform.startswith("linux") and hasattr(socket, "SO_RCVTIMEO")


class BodySource:
    """A body's reads: ``read1(size)`` returns whatever one read brought, ``b""`` at EOF.

    A read the kernel's timeout ended raises :class:`socket.timeout`, as a read under
    Python's own timeout does.
    """

    __slots__ = ("_direct_now", "_fp", "_kept", "_sock", "read1")

    def __init__(self, fp: Any, sock: Optional[socket.socket]) -> None:
        self._fp = fp
        self._sock = sock
        #: The timeout Python had on the socket while the kernel's stands in for it.
        self._kept: Optional[float] = None
        #: http.client's buffer is drained: every read goes to the socket now.
        self._direct_now = False
        self.read1: Callable[[int], bytes] = fp.read1 if sock is None else self._buffered

    def _buffered(self, size: int) -> bytes:
        # read1 hands out what is buffered (at most ``size``) before it reads the socket:
        # a short answer means the buffer is empty, and the socket is ours from now on.
        data: bytes = self._fp.read1(size)
        if len(data) < size:
            self.read1 = self._direct()
            self._direct_now = True
        return data

    def _direct(self) -> Callable[[int], bytes]:
        sock = self._sock
        assert sock is not None
        if not _KERNEL_TIMEOUT or type(sock) is not socket.socket:
            return sock.recv
        timeout = sock.gettimeout()
        if timeout is None or timeout <= 0:
            return sock.recv  # blocking already (no read timeout), or non-blocking
        seconds = int(timeout)
        micros = max(int((timeout - seconds) * 1_000_000), 0 if seconds else 1)  # 0 is none
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(seconds, micros))
            sock.settimeout(None)
        except OSError:
            return sock.recv  # a socket already shut: its next read says so
        self._kept = timeout
        return self._timed

    def _timed(self, size: int) -> bytes:
        assert self._sock is not None
        try:
            return self._sock.recv(size)
        except BlockingIOError:
            # The kernel's timeout ended the read (only a blocking socket gets here).
            raise socket.timeout("timed out") from None

    @property
    def own_socket(self) -> Optional[socket.socket]:
        """The socket the body is read from directly now, if it is the standard library's
        (plain TCP or TLS); None while http.client's buffer is still read, and for any other
        socket (gevent's, urllib3's TLS-in-TLS).

        Only such a socket may be read elsewhere (:mod:`.reader`): made non-blocking for a
        while and given its timeout back after, it reads as before.
        """
        sock = self._sock
        if not self._direct_now or sock is None:
            return None
        return sock if type(sock) in (socket.socket, ssl.SSLSocket) else None

    def restore(self) -> None:
        """Give the socket Python's timeout back (before the connection is pooled again).

        Idempotent; it never raises (a socket already closed has nothing to restore).
        """
        kept = self._kept
        sock = self._sock
        if kept is None or sock is None:
            return
        self._kept = None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(0, 0))
            sock.settimeout(kept)
        except OSError:
            pass


def _timeval(seconds: int, micros: int) -> bytes:
    # struct timeval: two C longs on Linux.
    return struct.pack("ll", seconds, micros)
