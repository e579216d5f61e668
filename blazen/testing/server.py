"""The server: :class:`StreamServer` and what it records of each request and connection."""

from __future__ import annotations

import json
import select
import socket
import ssl
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional

import attrs

from .replies import Action, Drop, Pause, Reply, Stall

__all__ = ["ConnectionRecord", "RecordedRequest", "StreamServer"]


@attrs.frozen(kw_only=True)
class RecordedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body decoded as JSON."""
        return json.loads(self.body)

    def header(self, name: str) -> Optional[str]:
        """A header's value, looked up without regard to case."""
        low = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == low), None)


# Not frozen: the serving thread fills in how the connection ended. Compared by identity:
# two connections opened at the same instant are still two connections.
@attrs.define(eq=False)
class ConnectionRecord:
    """One TCP connection: when it opened and closed, and which side closed it."""

    #: ``time.monotonic()`` when it was accepted.
    opened_at: float
    #: ``time.monotonic()`` when it closed; None while it is open.
    closed_at: Optional[float] = attrs.field(default=None, init=False)
    #: ``"client"`` or ``"server"``; None while it is open.
    closed_by: Optional[str] = attrs.field(default=None, init=False)
    #: How many requests it carried.
    requests: int = attrs.field(default=0, init=False)


class _ClientGone(Exception):
    """The client hung up, or the server is stopping: end this connection's thread."""


class StreamServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 that replays scripted :class:`Reply` values.

    Replies are served in order, one per request; when none are left the server answers
    ``respond(request)`` if given (a reply made from what was asked), else ``default`` if
    given, else 500. Connections are kept alive between requests (unless a reply says
    otherwise: :attr:`Reply.close`, a close-delimited body), as real
    providers do. Use it as a context manager, or call :meth:`start` and :meth:`stop`.
    Example::

        with StreamServer([Reply.sse(openai_sse(["Hel", "lo"]))]) as server:
            model = Providers.openai_compat("test", server.base_url)
            assert Streaming.complete(model, req).content == "Hello"
            assert server.requests[0].json()["stream"] is True
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        default: Optional[Reply] = None,
        respond: Optional[Callable[[RecordedRequest], Reply]] = None,
        host: str = "127.0.0.1",
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        self._replies: deque[Reply] = deque(replies)
        self._default = default
        self._respond = respond
        self._host = host
        self._ssl = ssl_context
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._listener: Optional[socket.socket] = None
        self._closed = threading.Condition(self._lock)
        #: Every request received, in order.
        self.requests: list[RecordedRequest] = []
        #: Every connection accepted, in order.
        self.connections: list[ConnectionRecord] = []
        self.port = 0

    # -- control -----------------------------------------------------------------------

    def start(self) -> StreamServer:
        """Bind a free port and start serving."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self._host, 0))
        listener.listen(256)
        self._listener = listener
        self.port = listener.getsockname()[1]
        thread = threading.Thread(target=self._accept_loop, name="blazen-test-server", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop serving, close every connection and wait for the server's threads."""
        self._stop.set()
        if self._listener is not None:
            self._listener.close()
        for thread in list(self._threads):
            thread.join(timeout=5)

    def __enter__(self) -> StreamServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, *replies: Reply) -> None:
        """Queue more replies."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (``https://`` when serving TLS)."""
        scheme = "https" if self._ssl is not None else "http"
        return f"{scheme}://{self._host}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: what an OpenAI-style client wants."""
        return self.url + "/v1"

    def open_connections(self) -> int:
        """Connections accepted and not yet closed by either side."""
        with self._lock:
            return sum(1 for c in self.connections if c.closed_at is None)

    def wait_closed(self, timeout: float = 5.0) -> bool:
        """Wait until every connection is closed; True if they all are."""
        deadline = time.monotonic() + timeout
        with self._closed:
            while any(c.closed_at is None for c in self.connections):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._closed.wait(left)
        return True

    # -- serving -----------------------------------------------------------------------

    def _accept_loop(self) -> None:
        assert self._listener is not None
        listener = self._listener
        while not self._stop.is_set():
            # Closing a listening socket does not wake a thread blocked in accept(): poll.
            try:
                readable, _, _ = select.select([listener], [], [], 0.05)
                if not readable:
                    continue
                conn, _ = listener.accept()
            except (OSError, ValueError):
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            record = ConnectionRecord(opened_at=time.monotonic())
            with self._lock:
                self.connections.append(record)
                self._threads = [t for t in self._threads if t.is_alive()]
            thread = threading.Thread(
                target=self._serve, args=(conn, record), name="blazen-test-conn", daemon=True
            )
            with self._lock:
                self._threads.append(thread)
            thread.start()

    def _close(self, conn: socket.socket, record: ConnectionRecord, by: str) -> None:
        try:
            conn.close()
        finally:
            with self._closed:
                if record.closed_at is None:
                    record.closed_at = time.monotonic()
                    record.closed_by = by
                self._closed.notify_all()

    def _serve(self, conn: socket.socket, record: ConnectionRecord) -> None:
        buf = b""
        if self._ssl is not None:
            try:
                conn = self._ssl.wrap_socket(conn, server_side=True)
            except (OSError, ssl.SSLError):
                self._close(conn, record, "client")  # the client refused our certificate
                return
        try:
            while not self._stop.is_set():
                request, buf = self._read_request(conn, buf)
                if request is None:
                    self._close(conn, record, "client")
                    return
                with self._lock:
                    self.requests.append(request)
                    record.requests += 1
                    reply = self._replies.popleft() if self._replies else None
                if reply is None and self._respond is not None:
                    # Outside the lock: a responder may take its time without holding up
                    # the other connections' bookkeeping.
                    reply = self._respond(request)
                if reply is None:
                    reply = self._default
                if reply is None:
                    reply = Reply.json({"error": {"message": "no scripted reply left"}}, status=500)
                if not self._send(conn, reply):
                    self._close(conn, record, "server")
                    return
        except _ClientGone:
            self._close(conn, record, "client")
        except OSError:
            self._close(conn, record, "client")
        finally:
            if record.closed_at is None:
                self._close(conn, record, "server")

    def _recv(self, conn: socket.socket, timeout: Optional[float]) -> Optional[bytes]:
        """Bytes from the client; b"" at EOF; None if nothing came within ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stop.is_set():
            step = 0.05 if deadline is None else max(0.0, min(0.05, deadline - time.monotonic()))
            # TLS may hold decrypted bytes that select() cannot see.
            buffered = isinstance(conn, ssl.SSLSocket) and conn.pending() > 0
            readable = [conn] if buffered else select.select([conn], [], [], step)[0]
            if readable:
                try:
                    return conn.recv(65536)
                except OSError:
                    return b""
            if deadline is not None and time.monotonic() >= deadline:
                return None
        raise _ClientGone

    def _read_request(
        self, conn: socket.socket, buf: bytes
    ) -> tuple[Optional[RecordedRequest], bytes]:
        while b"\r\n\r\n" not in buf:
            data = self._recv(conn, None)
            if not data:
                return None, b""
            buf += data
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = [*lines[0].split(" ", 2), "", ""][:3]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip()] = value.strip()
        length = int(next((v for k, v in headers.items() if k.lower() == "content-length"), "0"))
        while len(rest) < length:
            data = self._recv(conn, None)
            if not data:
                return None, b""
            rest += data
        body, rest = rest[:length], rest[length:]
        return RecordedRequest(method=method, path=path, headers=headers, body=body), rest

    def _wait(self, conn: socket.socket, seconds: Optional[float]) -> None:
        """Pause (or stall when ``seconds`` is None), noticing at once if the client hangs up."""
        data = self._recv(conn, seconds)
        if data == b"":
            raise _ClientGone
        # Anything else the client sent mid-response is ignored (it may pipeline).

    def _send(self, conn: socket.socket, reply: Reply) -> bool:
        """Write one reply; False if the connection must close afterwards."""
        chunked = reply.transfer == "chunked" and not reply.raw
        body = _encoded(reply.body, reply.encoding) if reply.encoding else reply.body
        if not reply.raw:
            headers = dict(reply.headers)
            if reply.encoding:
                headers["Content-Encoding"] = reply.encoding
            if reply.transfer == "chunked":
                headers["Transfer-Encoding"] = "chunked"
            elif reply.transfer == "length":
                size = sum(len(a) for a in body if isinstance(a, bytes))
                headers["Content-Length"] = str(size if reply.length is None else reply.length)
            if reply.close or reply.transfer == "close":
                headers["Connection"] = "close"
            head = f"{reply.version} {reply.status} {_REASONS.get(reply.status, 'Status')}\r\n"
            head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
            conn.sendall(head.encode("latin-1"))
        for action in body:
            if isinstance(action, bytes):
                if not action:
                    continue
                if chunked:
                    conn.sendall(b"%x\r\n%s\r\n" % (len(action), action))
                else:
                    conn.sendall(action)
            elif isinstance(action, Pause):
                self._wait(conn, action.seconds)
            elif isinstance(action, Stall):
                self._wait(conn, None)
            else:  # Drop
                return False
        if chunked:
            conn.sendall(b"0\r\n\r\n")
        if reply.raw or reply.close or reply.length is not None:
            return False
        return chunked or reply.transfer == "length"


def _encoded(body: Sequence[Action], encoding: str) -> list[Action]:
    """``body`` compressed as one stream, each write flushed so it inflates on arrival."""
    if encoding not in ("gzip", "deflate"):
        msg = f"encoding must be 'gzip' or 'deflate', not {encoding!r}"
        raise ValueError(msg)
    # gzip's header and trailer (wbits 31); HTTP's "deflate" is the zlib format (RFC 9110 8.4.1.2).
    packer = zlib.compressobj(wbits=31 if encoding == "gzip" else 15)
    out: list[Action] = []
    for action in body:
        if isinstance(action, bytes):
            if action:
                out.append(packer.compress(action) + packer.flush(zlib.Z_SYNC_FLUSH))
        else:
            if isinstance(action, Drop):
                return [*out, action]  # cut mid-stream: the trailer never comes
            out.append(action)
    out.append(packer.flush())
    return out


_REASONS = {
    200: "OK",
    301: "Moved Permanently",
    302: "Found",
    307: "Temporary Redirect",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}
