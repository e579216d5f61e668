"""The benchmark server: stdlib sockets, pre-rendered bytes, chunked transfer encoding.

Run as its own process (``python -m benchmarks.server``) so that serving never competes with
the client under test for the GIL. Each connection gets a thread; each request path names
the stream it wants (see :class:`benchmarks.streams.Spec`). Bodies are rendered once and
cached, so in "all" mode a whole response is one ``sendall`` and the server is never the
bottleneck. ``GET /closed/<tag>`` answers when the server saw the client close the
connection of the stream tagged ``<tag>`` (``time.monotonic()``, the same clock in every
process of the machine), for the teardown scenario. Under ``/by-model/`` the request body's
``model`` names the stream instead of the path (``Spec.path()`` without its ``/s/``), or an
error status (``error-500``): one client object with one base URL can then ask for any
stream, a stalled one or a failure, as the soak scenario does.
"""

from __future__ import annotations

import argparse
import functools
import heapq
import itertools
import json
import re
import select
import socket
import sys
import threading
import time

from .streams import Spec, render_events

__all__ = ["main", "serve"]

_HEAD = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/event-stream; charset=utf-8\r\n"
    b"Cache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n"
    b"request-id: req_bench\r\n"
    b"\r\n"
)
_END = b"0\r\n\r\n"
_closed: dict[str, float] = {}
_MODEL = re.compile(rb'"model"\s*:\s*"([^"]*)"')
_lock = threading.Lock()


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@functools.lru_cache(maxsize=64)
def _framed(spec: Spec) -> tuple[bytes, ...]:
    return tuple(_frame(e) for e in render_events(spec))


@functools.lru_cache(maxsize=64)
def _whole(spec: Spec) -> bytes:
    return _HEAD + b"".join(_framed(spec)) + _END


def _plain(conn: socket.socket, status: str, body: bytes) -> None:
    conn.sendall(
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def _wait_close(conn: socket.socket, tag: str) -> None:
    # Hold the stream open until the client hangs up; note when it did.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([conn], [], [], 1.0)
        if not ready:
            continue
        try:
            data = conn.recv(65536)
        except OSError:
            data = b""
        if not data:
            with _lock:
                _closed[tag] = time.monotonic()
            return


class _Pacer:
    """Writes every paced stream from one thread.

    Hundreds of handler threads each sleeping between events would cost this process more
    CPU than the clients under test spend, and the concurrency scenario would measure the
    server. One thread with a schedule wakes once per due event instead.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, socket.socket, tuple[bytes, ...], int, float]] = []
        self._done: dict[int, threading.Event] = {}
        self._cv = threading.Condition()
        self._seq = itertools.count()
        threading.Thread(target=self._run, daemon=True).start()

    def stream(self, conn: socket.socket, frames: tuple[bytes, ...], delay: float) -> None:
        """Write ``frames`` one every ``delay`` seconds; return when all are written."""
        done = threading.Event()
        seq = next(self._seq)
        with self._cv:
            self._done[seq] = done
            heapq.heappush(self._heap, (time.monotonic(), seq, conn, frames, 0, delay))
            self._cv.notify()
        done.wait()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._heap:
                    self._cv.wait()
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cv.wait(wait)
                    continue
                due, seq, conn, frames, i, delay = heapq.heappop(self._heap)
            try:
                conn.sendall(frames[i])
                if i + 1 < len(frames):
                    # On a fixed schedule: a late write does not delay the ones after it.
                    with self._cv:
                        heapq.heappush(self._heap, (due + delay, seq, conn, frames, i + 1, delay))
                    continue
                conn.sendall(_END)
            except OSError:
                pass
            with self._cv:
                self._done.pop(seq).set()


_pacer: _Pacer | None = None


def _by_model(body: bytes) -> str:
    """The path a ``/by-model/`` request asks for, named by its body's ``model``."""
    found = _MODEL.search(body)
    name = found.group(1).decode() if found else ""
    if name.startswith("error-"):
        return f"/error/{name[len('error-') :]}"
    return f"/s/{name}"


def _respond(conn: socket.socket, path: str, body: bytes = b"") -> bool:
    """Answer one request; return whether the connection may serve another."""
    if path.startswith("/by-model/"):
        path = _by_model(body)
    if path.startswith("/error/"):
        status = int(path.split("/")[2])
        message = f"benchmark error {status}"
        error = {"error": {"message": message, "type": "server_error", "code": None}}
        _plain(conn, f"{status} Error", json.dumps(error).encode())
        return True
    if path.startswith("/closed/"):
        with _lock:
            seen = _closed.get(path[len("/closed/") :])
        _plain(conn, "200 OK", json.dumps({"t": seen}).encode())
        return True
    if not path.startswith("/s/"):
        _plain(conn, "404 Not Found", b'{"error": {"message": "unknown path"}}')
        return True
    spec = Spec.from_path(path)
    if spec.stall:
        conn.sendall(_HEAD + b"".join(_framed(spec)))
        _wait_close(conn, spec.tag)
        return False
    if spec.mode == "all":
        conn.sendall(_whole(spec))
        return True
    conn.sendall(_HEAD)
    if spec.delay_us:
        global _pacer
        with _lock:
            if _pacer is None:
                _pacer = _Pacer()
        _pacer.stream(conn, _framed(spec), spec.delay_us / 1e6)
        return True
    for frame in _framed(spec):
        conn.sendall(frame)
    conn.sendall(_END)
    return True


def _serve_conn(conn: socket.socket) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            length = 0
            chunked = False
            for line in lines[1:]:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                if name == "content-length":
                    length = int(value)
                elif name == "transfer-encoding" and "chunked" in value.lower():
                    chunked = True
            if chunked:
                # A chunked request body: read to its terminating zero-size chunk.
                while b"0\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                body, buf = buf.split(b"0\r\n\r\n", 1)
            else:
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                body, buf = buf[:length], buf[length:]
            if not _respond(conn, path, body):
                return
    except OSError:
        return
    finally:
        conn.close()


def serve(sock: socket.socket) -> None:
    """Accept connections forever, one thread each."""
    while True:
        conn, _ = sock.accept()
        threading.Thread(target=_serve_conn, args=(conn,), daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    """Listen on loopback, print the port, serve until killed or stdin closes."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    sock = socket.create_server(("127.0.0.1", args.port), backlog=2048)
    threading.Thread(target=serve, args=(sock,), daemon=True).start()
    print(sock.getsockname()[1], flush=True)
    # The parent closes our stdin when it is done: that is the signal to stop.
    sys.stdin.read()


if __name__ == "__main__":
    main()
