"""Attacks on the direct-socket read of a chunked body (blazen._http.source.BodySource).

Once http.client's buffer is drained, a chunked body is read with ``sock.recv`` itself;
on Linux a plain socket trades Python's timeout (a poll before each read) for the
kernel's ``SO_RCVTIMEO``, and ``restore()`` gives Python's timeout back before the
connection is pooled. Everything here runs real sockets and real threads, and holds that
path to the stream's promises: exactly one terminal, the idle timeout per read (reset by
each read, bounded whatever interrupts the read), a cancel that wakes a blocked read, a
pooled connection that serves the next request, and no fd or thread left behind.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, Optional, Union

import pytest

import blazen
from blazen._http.source import BodySource
from blazen.testing import Drop, Pause, Recorder, Reply, Stall, StreamServer, openai_sse

LINUX = sys.platform.startswith("linux")
KEY = "k" * 20


def _model(server: Any, **options: Any) -> blazen.ChatModel:
    options.setdefault("max_retries", 0)
    return blazen.Providers.openai(api_key=KEY, base_url=server.base_url, **options)


def _run(
    model: blazen.ChatModel, req: blazen.CompletionRequest, rec: Optional[Recorder] = None, **kw
) -> tuple[Recorder, float]:
    rec = rec or Recorder()
    t0 = time.monotonic()
    blazen.Streaming.complete(
        model, req, on_chunk=rec.on_chunk, on_done=rec.on_done, on_error=rec.on_error, **kw
    )
    return rec, time.monotonic() - t0


def _spaced(events: list[bytes], gap: float) -> list[Any]:
    """Each event its own write, ``gap`` seconds apart (so the socket is read directly)."""
    out: list[Any] = []
    for event in events:
        out += [event, Pause(gap)]
    return out[:-1]


def _stream_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "blazen-stream"]


def _wait_until(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())


def _kernel_timeout(sock: socket.socket) -> float:
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.calcsize("ll"))
    seconds, micros = struct.unpack("ll", raw)
    return seconds + micros / 1e6


@pytest.fixture
def kernel_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of the read each BodySource switched to (``_timed``: the kernel's timeout).

    A spy, not a mock: the real switch runs; the tests use it to prove they reached the
    direct path they attack.
    """
    seen: list[str] = []
    original = BodySource._direct

    def spy(self: BodySource) -> Any:
        read = original(self)
        seen.append(getattr(read, "__name__", repr(read)))
        return read

    monkeypatch.setattr(BodySource, "_direct", spy)
    return seen


def _assert_kernel_path(seen: list[str]) -> None:
    if LINUX:
        assert "_timed" in seen, f"the kernel-timeout read was never used: {seen}"


# -- a keep-alive server whose chunked framing is written by hand ------------------------

_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
#: One step of a hand-written reply: bytes to write, seconds to pause, None to stall.
Step = Union[bytes, float, None]


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class _RawServer:
    """Writes each reply's bytes exactly as scripted and keeps the connection alive."""

    def __init__(self, scripts: list[list[Step]]) -> None:
        self._scripts = collections.deque(scripts)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.requests_per_connection: list[int] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.base_url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def __enter__(self) -> _RawServer:
        self._spawn(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in list(self._threads):
            thread.join(5)
        self._listener.close()

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            if not select.select([self._listener], [], [], 0.05)[0]:
                continue
            conn, _ = self._listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.requests_per_connection.append(0)
                index = len(self.requests_per_connection) - 1
            self._spawn(self._serve, conn, index)

    def _recv(self, conn: socket.socket, seconds: Optional[float]) -> Optional[bytes]:
        """b"" at EOF (or stop), None when ``seconds`` passed with nothing."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while not self._stop.is_set():
            step = 0.05 if deadline is None else max(0.0, min(0.05, deadline - time.monotonic()))
            if select.select([conn], [], [], step)[0]:
                try:
                    return conn.recv(65536)
                except OSError:
                    return b""
            if deadline is not None and time.monotonic() >= deadline:
                return None
        return b""

    def _serve(self, conn: socket.socket, index: int) -> None:
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = self._recv(conn, None)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buf) < length:
                    data = self._recv(conn, None)
                    if not data:
                        return
                    buf += data
                buf = buf[length:]
                with self._lock:
                    self.requests_per_connection[index] += 1
                    script = self._scripts.popleft() if self._scripts else [None]
                for step in script:
                    if isinstance(step, bytes):
                        conn.sendall(step)
                    elif self._recv(conn, step) == b"":  # a pause (float) or a stall (None)
                        return  # the client hung up


def _raw_reply(events: list[bytes], ending: list[Step]) -> list[Step]:
    """The head, each event its own chunk in its own write (0.02 s apart), then ``ending``."""
    steps: list[Step] = [_HEAD]
    for event in events:
        steps += [_chunk(event), 0.02]
    return steps + ending


# -- 1. a trickle resets the timeout at every read ---------------------------------------


def test_a_trickle_faster_than_the_idle_timeout_never_times_out(req, kernel_reads):
    """One event every 0.2 s for 2.4 s (almost 5x idle_timeout=0.5): each read gets the
    whole timeout again, so the stream ends in on_done."""
    parts = [f"p{i} " for i in range(10)]
    with StreamServer([Reply.sse(_spaced(openai_sse(parts), 0.2))]) as server:
        rec, took = _run(_model(server, idle_timeout=0.5), req)
    assert rec.kinds[-1] == "done", rec.error
    assert rec.terminals == 1
    assert rec.text == "".join(parts)
    assert took > 2.0  # it really trickled past several idle timeouts
    _assert_kernel_path(kernel_reads)


# -- 2. stalls after events, on a pooled connection, again and again ---------------------


def test_stalls_on_pooled_connections_time_out_and_the_model_recovers(req, kernel_reads):
    """normal, stall, normal, stall, normal, stall, normal on one model: every stall is
    the idle timeout at about 0.3 s (on the connection the normal stream before it pooled),
    and every normal stream is done."""
    events = openai_sse(["a", "b"])
    normal = Reply.sse(_spaced(events, 0.01))
    stall = Reply.sse([*_spaced(events[:3], 0.02), Stall()])
    replies = [normal, stall] * 3 + [normal]
    with StreamServer(replies) as server:
        model = _model(server, idle_timeout=0.3)
        for i, _ in enumerate(replies):
            rec, took = _run(model, req)
            assert rec.terminals == 1, rec.kinds
            if i % 2 == 0:
                assert rec.kinds[-1] == "done", (i, rec.error)
                assert rec.text == "ab"
            else:
                err = rec.error
                assert isinstance(err, blazen.TimeoutError) and err.limit == "idle", (i, err)
                assert err.partial == "ab"
                assert 0.25 < took < 2.0, (i, took)
        # Each stall came on the connection the normal stream before it handed back.
        assert [c.requests for c in server.connections] == [2, 2, 2, 1]
    _assert_kernel_path(kernel_reads)


# -- 3. a cancel wakes a worker blocked in the direct read -------------------------------


@pytest.mark.parametrize("reused", [False, True], ids=["fresh", "pooled"])
def test_a_cancel_wakes_a_read_blocked_on_the_socket_itself(req, kernel_reads, reused):
    events = openai_sse(["one", " two"])
    replies = [Reply.sse(_spaced(events, 0.01))] if reused else []
    replies.append(Reply.sse([*_spaced(events[:3], 0.02), Stall()]))
    with StreamServer(replies) as server:
        model = _model(server, idle_timeout=10)
        if reused:
            first, _ = _run(model, req)
            assert first.kinds[-1] == "done"
        token = blazen.CancelToken()
        cancelled_at: list[float] = []
        started: list[bool] = []
        rec = Recorder()

        def cancel_later() -> None:
            time.sleep(0.3)  # long enough for the worker to block in recv
            cancelled_at.append(time.monotonic())
            token.cancel("stop")

        def on_chunk(chunk: Any) -> None:
            rec.on_chunk(chunk)
            if rec.text == "one two" and not cancelled_at and not started:
                started.append(True)
                threading.Thread(target=cancel_later, daemon=True).start()

        t0 = time.monotonic()
        blazen.Streaming.complete(
            model, req, on_chunk=on_chunk, on_done=rec.on_done, on_error=rec.on_error, cancel=token
        )
        ended = time.monotonic()
        assert rec.terminals == 1 and rec.kinds[-1] == "error", rec.kinds
        assert isinstance(rec.error, blazen.CancelledError), rec.error
        assert rec.error.partial == "one two"
        assert cancelled_at, f"the stream ended before the cancel ({ended - t0:.2f} s)"
        woke = ended - cancelled_at[0]
        print(f"\n[cancel {'pooled' if reused else 'fresh'}] woke after {woke * 1000:.1f} ms")
        assert woke < 1.0, f"cancel took {woke:.3f} s to wake the read"
        assert server.wait_closed(1.0)
        closed = server.connections[-1]
        assert closed.closed_by == "client"
        assert closed.closed_at is not None and closed.closed_at - cancelled_at[0] < 1.0
    _assert_kernel_path(kernel_reads)


# -- 4. signals while the read is blocked ------------------------------------------------


@contextlib.contextmanager
def _noop_sigalrm() -> Iterator[list[int]]:
    """SIGALRM handled by a handler that only counts; the old handler and itimer restored."""
    count = [0]

    def handler(signum: int, frame: Any) -> None:
        count[0] += 1

    old_handler = signal.signal(signal.SIGALRM, handler)
    old_delay, old_interval = signal.getitimer(signal.ITIMER_REAL)
    t0 = time.monotonic()
    try:
        yield count
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay > 0:  # pytest-timeout's alarm, say: what is left of it
            left = max(old_delay - (time.monotonic() - t0), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)


def _stall_reply() -> Reply:
    return Reply.sse([*_spaced(openai_sse(["x", "y"])[:3], 0.02), Stall()])


@pytest.mark.skipif(not LINUX, reason="setitimer/the kernel timeout path")
def test_a_process_itimer_during_a_blocked_read_does_not_stretch_the_idle_timeout(
    req, kernel_reads
):
    """SIGALRM every 50 ms to the process (as a profiler or an alarm-based timeout would
    send it) while the stream waits on a silent server: the idle timeout of 0.5 s still
    ends it, well within 3x."""
    idle = 0.5
    with StreamServer([_stall_reply()]) as server, _noop_sigalrm() as count:
        token = blazen.CancelToken()
        safety = threading.Timer(6.0, token.cancel, args=("safety cancel",))
        safety.start()
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
            rec, took = _run(_model(server, idle_timeout=idle), req, cancel=token)
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            safety.cancel()
            safety.join()
    print(f"\n[itimer] idle_timeout={idle} took={took:.3f}s signals={count[0]}")
    assert count[0] > 3  # signals really were delivered meanwhile
    assert rec.terminals == 1
    assert isinstance(rec.error, blazen.TimeoutError) and rec.error.limit == "idle", rec.error
    assert took < 3 * idle, f"the idle timeout took {took:.2f} s under signals"
    _assert_kernel_path(kernel_reads)


def _tgkill() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    return getattr(libc, "tgkill", None)


@pytest.mark.skipif(not LINUX or _tgkill() is None, reason="tgkill: Linux, glibc >= 2.30")
def test_signals_to_the_reading_thread_do_not_stretch_the_idle_timeout(req, kernel_reads):
    """The same signals, aimed at the worker thread blocked in recv (as a process-directed
    signal is whenever the main thread has it blocked or already pending): each one
    interrupts the read with EINTR. The idle timeout must still end the stream at about
    0.5 s; the signals stop after 4 s in any case, so a stream bounded only by a read that
    restarts its timeout at each one would end at about 4.5 s instead. (It is bounded: the
    delivery's own idle deadline aborts the read; the read itself is not, see the test
    below.)"""
    idle = 0.5
    tgkill = _tgkill()
    first_chunk = threading.Event()
    finished = threading.Event()
    sent = [0]

    def kicker() -> None:
        if not first_chunk.wait(5):
            return
        workers = _stream_threads()
        if len(workers) != 1 or workers[0].native_id is None:
            return
        tid = workers[0].native_id
        stop_at = time.monotonic() + 4.0
        while not finished.is_set() and time.monotonic() < stop_at:
            # tgkill on an exited thread id is a harmless ESRCH (pthread_kill would be UB).
            if tgkill(os.getpid(), tid, signal.SIGALRM) != 0:
                return
            sent[0] += 1
            time.sleep(0.05)

    rec = Recorder()

    def on_chunk(chunk: Any) -> None:
        rec.on_chunk(chunk)
        first_chunk.set()

    with StreamServer([_stall_reply()]) as server, _noop_sigalrm():
        thread = threading.Thread(target=kicker, daemon=True)
        thread.start()
        t0 = time.monotonic()
        try:
            blazen.Streaming.complete(
                _model(server, idle_timeout=idle),
                req,
                on_chunk=on_chunk,
                on_done=rec.on_done,
                on_error=rec.on_error,
            )
        finally:
            took = time.monotonic() - t0
            finished.set()
            thread.join(6)
    print(f"\n[tgkill] idle_timeout={idle} took={took:.3f}s signals to the worker={sent[0]}")
    assert sent[0] > 3
    assert rec.terminals == 1
    assert isinstance(rec.error, blazen.TimeoutError) and rec.error.limit == "idle", rec.error
    _assert_kernel_path(kernel_reads)
    assert took < 3 * idle, f"the idle timeout took {took:.2f} s under signals"


@pytest.mark.skipif(not LINUX or _tgkill() is None, reason="tgkill: Linux, glibc >= 2.30")
def test_signals_to_the_reading_thread_restart_the_kernel_timeout_and_no_more():
    """The one way the kernel's timeout differs from Python's (documented in
    blazen/_http/source.py): a signal that interrupts the read restarts it, where Python
    keeps one deadline over the retries. A silent read under signals every 50 ms for 2 s
    ends one timeout after the last of them, never later; Python's ends at 0.3 s. No stream
    waits for this: its idle limit is the caller's own deadline (the next test), and on
    Linux a signal sent to the process goes to the main thread as a rule, not a worker."""
    tgkill = _tgkill()

    def timed_read(direct: bool) -> float:
        ours, theirs = socket.socketpair()
        fp = ours.makefile("rb")
        stop = threading.Event()
        tid = threading.get_native_id()

        def kicker() -> None:
            stop_at = time.monotonic() + 2.0
            while not stop.is_set() and time.monotonic() < stop_at:
                tgkill(os.getpid(), tid, signal.SIGALRM)
                time.sleep(0.05)

        thread = threading.Thread(target=kicker, daemon=True)
        try:
            ours.settimeout(0.3)
            theirs.sendall(b"h\nx")
            assert fp.readline() == b"h\n"
            source = BodySource(fp, ours)
            # source.read1 looked up at each call: the source swaps it at the switch.
            read = (lambda n: source.read1(n)) if direct else fp.read1
            assert read(100) == b"x"
            if direct:
                assert ours.gettimeout() is None  # the kernel times the next read
            thread.start()
            t0 = time.monotonic()
            with pytest.raises(socket.timeout):
                read(100)
            return time.monotonic() - t0
        finally:
            stop.set()
            if thread.is_alive():
                thread.join()
            fp.close()
            theirs.close()
            ours.close()

    with _noop_sigalrm() as count:
        through_python = timed_read(direct=False)
        direct = timed_read(direct=True)
    print(f"\n[unit] python timeout {through_python:.3f}s, direct {direct:.3f}s ({count[0]} sig)")
    assert through_python < 0.9  # the reference: Python's deadline survives EINTR
    # Restarted by each signal, then one timeout after the last: 2 s of signals + 0.3 s.
    assert 1.9 < direct < 3.2, f"a read with a 0.3 s timeout took {direct:.2f} s under signals"


# -- 5. the body's end as servers really write it, then the connection reused -------------

_ENDINGS: dict[str, list[Step]] = {
    "trailers-with-the-last-chunk": [
        _chunk(b"data: [DONE]\n\n") + b"0\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n"
    ],
    "terminator-split-across-writes": [
        _chunk(b"data: [DONE]\n\n"),
        0.05,
        b"0",
        0.05,
        b"\r\n",
        0.05,
        b"\r",
        0.05,
        b"\n",
    ],
    "trailer-lines-split-across-writes": [
        _chunk(b"data: [DONE]\n\n"),
        0.03,
        b"0\r\nX-A: 1",
        0.05,
        b"\r\nX-B:",
        0.05,
        b" 2\r\n",
        0.05,
        b"\r\n",
    ],
    "terminator-after-more-than-idle-timeout": [_chunk(b"data: [DONE]\n\n"), 0.45, b"0\r\n\r\n"],
    "body-and-terminator-in-one-write": [
        b"".join(_chunk(e) for e in openai_sse(["z"])) + b"0\r\n\r\n",
    ],
}


@pytest.mark.parametrize("ending", list(_ENDINGS))
def test_a_body_ended_as_servers_end_it_hands_back_a_connection_that_works(req, ending):
    """The first answer ends with trailers or a terminator cut in pieces; the next request
    goes on the same connection and reads fine, and a stall on it is still the idle
    timeout (the socket has a read timeout again)."""
    events = openai_sse(["he", "llo"])[:-1]  # [DONE] is in the ending
    if ending == "body-and-terminator-in-one-write":
        first: list[Step] = [_HEAD, *_ENDINGS[ending]]
        text = "z"
    else:
        first = _raw_reply(events, _ENDINGS[ending])
        text = "hello"
    second = _raw_reply(openai_sse(["again"]), [b"0\r\n\r\n"])
    third = _raw_reply(openai_sse(["s"])[:2], [None])
    with _RawServer([first, second, third]) as server:
        model = _model(server, idle_timeout=0.3)
        rec1, _ = _run(model, req)
        assert rec1.kinds[-1] == "done" and rec1.terminals == 1, rec1.error
        assert rec1.text == text
        rec2, _ = _run(model, req)
        assert rec2.kinds[-1] == "done" and rec2.terminals == 1, rec2.error
        assert rec2.text == "again"
        rec3, took = _run(model, req)
        assert rec3.terminals == 1
        assert isinstance(rec3.error, blazen.TimeoutError) and rec3.error.limit == "idle"
        assert took < 2.0
        # All three on the one connection: it was pooled after each clean end.
        assert server.requests_per_connection == [3], server.requests_per_connection


def test_a_chunk_much_larger_than_one_read_and_a_cut_size_line(req, kernel_reads):
    """A 300 KB event in one chunk written in pieces, and a chunk size line cut in two:
    read directly, the text arrives whole and in order."""
    big = "w" * 300_000
    events = openai_sse([big, "tail"])
    big_chunk = _chunk(events[1])
    pieces: list[Step] = []
    for i in range(0, len(big_chunk), 70_000):
        pieces += [big_chunk[i : i + 70_000], 0.02]
    tail = _chunk(events[2])
    cut = tail.index(b"\r\n") - 1
    script: list[Step] = [
        _HEAD,
        _chunk(events[0]),
        0.02,
        *pieces,
        tail[:cut],
        0.05,
        tail[cut:],
        0.02,
        *[_chunk(e) for e in events[3:]],
        b"0\r\n\r\n",
    ]
    with _RawServer([script]) as server:
        rec, _ = _run(_model(server, idle_timeout=2, max_event_bytes=1_000_000), req)
    assert rec.kinds[-1] == "done", rec.error
    assert rec.text == big + "tail"
    _assert_kernel_path(kernel_reads)


# -- 6. Connection: close ------------------------------------------------------------------


def test_a_connection_close_answer_is_read_and_not_reused(req):
    events = openai_sse(["c", "d"])
    close = {"Connection": "close"}
    replies = [
        Reply.sse(_spaced(events, 0.02), headers=close),
        Reply.sse([*_spaced(events[:3], 0.02), Stall()], headers=close),
        Reply.sse(_spaced(events, 0.02)),
    ]
    with StreamServer(replies) as server:
        model = _model(server, idle_timeout=0.3)
        rec1, _ = _run(model, req)
        assert rec1.kinds[-1] == "done" and rec1.terminals == 1, rec1.error
        assert rec1.text == "cd"
        rec2, took = _run(model, req)
        assert rec2.terminals == 1
        assert isinstance(rec2.error, blazen.TimeoutError) and rec2.error.limit == "idle"
        assert 0.25 < took < 2.0
        rec3, _ = _run(model, req)
        assert rec3.kinds[-1] == "done" and rec3.text == "cd", rec3.error
        assert [c.requests for c in server.connections] == [1, 1, 1]
        assert _wait_until(lambda: server.connections[0].closed_by == "client", 2.0)


# -- a server that hangs up mid-body -------------------------------------------------------


def test_a_server_hanging_up_mid_body_is_one_error_at_once_and_the_model_recovers(
    req, kernel_reads
):
    events = openai_sse(["e", "f"])
    replies = [
        Reply.sse(_spaced(events, 0.01)),
        Reply.sse([*_spaced(events[:3], 0.02), Drop()]),
        Reply.sse(_spaced(events, 0.01)),
    ]
    with StreamServer(replies) as server:
        model = _model(server, idle_timeout=10)
        assert _run(model, req)[0].kinds[-1] == "done"
        rec, took = _run(model, req)
        assert rec.terminals == 1 and rec.kinds[-1] == "error", rec.kinds
        assert not isinstance(rec.error, blazen.TimeoutError), rec.error
        assert rec.error.partial == "ef"
        assert took < 2.0
        rec3, _ = _run(model, req)
        assert rec3.kinds[-1] == "done" and rec3.text == "ef", rec3.error
    _assert_kernel_path(kernel_reads)


# -- the kernel timeout's arithmetic at odd values ------------------------------------------


@pytest.mark.skipif(not LINUX, reason="the kernel's receive timeout is used on Linux only")
@pytest.mark.parametrize("timeout", [1e-7, 0.0005, 0.25, 1.0000001, 1.5])
def test_odd_timeouts_become_a_nonzero_kernel_timeout_and_come_back(timeout):
    """Any positive Python timeout becomes a kernel timeout that is not 0 (which would be
    none: a read waiting for ever), ends a silent read, and restore() gives it back."""
    ours, theirs = socket.socketpair()
    fp = ours.makefile("rb")
    try:
        ours.settimeout(timeout)
        theirs.sendall(b"h\nx")
        assert fp.readline() == b"h\n"
        source = BodySource(fp, ours)
        assert source.read1(100) == b"x"
        assert ours.gettimeout() is None
        kernel = _kernel_timeout(ours)
        assert kernel > 0
        assert kernel == pytest.approx(timeout, abs=0.005)
        t0 = time.monotonic()
        with pytest.raises(socket.timeout):
            source.read1(100)
        assert time.monotonic() - t0 < timeout + 1.0
        source.restore()
        assert ours.gettimeout() == timeout
        assert _kernel_timeout(ours) == 0
        theirs.sendall(b"after")
        assert ours.recv(100) == b"after"
    finally:
        fp.close()
        theirs.close()
        ours.close()


# -- 7. many streams, one model: one terminal each, nothing left behind --------------------


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_two_hundred_streams_alternating_ends_and_stalls_leak_nothing(req, kernel_reads):
    events = openai_sse(["m", "n"])
    normal = Reply.sse(_spaced(events, 0.001))
    stall = Reply.sse([*_spaced(events[:3], 0.002), Stall()])
    count = 200
    with StreamServer([normal, stall] * (count // 2)) as server:
        model = _model(server, idle_timeout=0.05)

        def settled() -> bool:
            return not _stream_threads() and server.open_connections() <= 1

        baseline_fds = baseline_threads = 0
        for i in range(count):
            rec, _ = _run(model, req)
            assert rec.terminals == 1, (i, rec.kinds)
            if i % 2 == 0:
                assert rec.kinds[-1] == "done" and rec.text == "mn", (i, rec.error)
            else:
                err = rec.error
                assert isinstance(err, blazen.TimeoutError) and err.limit == "idle", (i, err)
            if i == 19:
                assert _wait_until(settled, 2.0)
                baseline_fds, baseline_threads = _fds(), threading.active_count()
        assert _wait_until(settled, 2.0), (_stream_threads(), server.open_connections())
        fds, threads = _fds(), threading.active_count()
    print(f"\n[soak] fds {baseline_fds} -> {fds}, threads {baseline_threads} -> {threads}")
    assert fds <= baseline_fds + 2, (baseline_fds, fds)
    assert threads <= baseline_threads + 2, (baseline_threads, threads)
    _assert_kernel_path(kernel_reads)
