"""Scenario (h), the soak: resident memory over a long-lived worker's many short streams.

A worker process (Celery, a web server, a batch runner) keeps one client object for weeks
and streams through it from several threads. Here, in a fresh runner process, one client
object is shared by four threads that stream short completions (a few chunks each); after a
warm-up, resident memory is read after every ``every`` streams (after a full garbage
collection, so that what is counted is what is still reachable, plus what the allocator
keeps). The slope of a least-squares line through those samples is the growth per 10,000
streams; a census of the garbage collector's objects by type, at the end of the warm-up and
at the end, names what grew.

blazen streams through one model in every form a worker uses: blocking calls with a
callback, ``complete_async`` on each thread's event loop, ``Streaming.start`` handles, and
every so often a server error, a callback that raises, and three kinds of cancel (a
``CancelToken``, ``handle.cancel()``, a cancelled asyncio task) of a stream the server holds
open. The peers stream the same short stream the way each one documents it.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import logging
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from .clients import KEY, Client, make_client
from .streams import Spec, expected

__all__ = ["soak"]

THREADS = 4
#: Text chunks per stream: a short answer, so that what each stream costs once dominates.
CHUNKS = 5
#: No stream of the soak should take this long; a hang fails the run instead of stalling it.
TIMEOUT = 30.0


def _rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _census() -> collections.Counter[str]:
    """How many objects the garbage collector tracks, by type."""
    gc.collect()
    return collections.Counter(
        f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.get_objects()
    )


def slope(points: list[tuple[float, float]]) -> float:
    """The slope of the least-squares line through ``points``."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0


class _Boom(Exception):
    """What the soak's raising callback raises."""


class BlazenMix:
    """One blazen model, streamed through in every form, with failures mixed in.

    The model's base URL is the server's ``/by-model/`` route, so one model (as a worker
    keeps) asks for a normal stream, a stream held open after two chunks, or a 500 by the
    request's ``model`` alone.
    """

    def __init__(self, base: str, baseline: bool = False) -> None:
        if baseline:
            # As BlazenBaseline does: nothing of blazen is imported before this.
            sys.path.insert(0, os.environ["BLAZEN_BASELINE"])
        import blazen

        self.blazen = blazen
        # A callback that raises is logged on the blazen logger; a worker would have a
        # handler, and the traceback is not what is measured.
        logging.getLogger("blazen").addHandler(logging.NullHandler())
        self.model = blazen.Providers.openai(
            api_key=KEY, base_url=base + "/by-model/v1", max_retries=0
        )
        ok = Spec(n=CHUNKS, tag="soak")
        held = Spec(n=CHUNKS, mode="each", stall=2, tag="soak")

        def request(model: str) -> Any:
            return blazen.Llm.completion_request(
                [blazen.Llm.user("Tell me a joke.")], max_tokens=256, model=model
            )

        self.ok = request(ok.path()[len("/s/") :])
        self.held = request(held.path()[len("/s/") :])
        self.failing = request("error-500")
        self.text = expected(ok)[0]
        self.local = threading.local()
        self.loops: list[asyncio.AbstractEventLoop] = []
        self.lock = threading.Lock()
        # Every 100 streams of a thread: one of each failure; otherwise two in ten on
        # asyncio, one in ten a handle, the rest blocking calls.
        self.kinds: dict[int, Callable[[], bool]] = {
            17: self.cancel_token,
            37: self.server_error,
            57: self.cancel_handle,
            77: self.callback_raises,
            97: self.cancel_task,
        }

    def _loop(self) -> asyncio.AbstractEventLoop:
        loop: asyncio.AbstractEventLoop | None = getattr(self.local, "loop", None)
        if loop is None:
            loop = self.local.loop = asyncio.new_event_loop()
            with self.lock:
                self.loops.append(loop)
        return loop

    def run(self, j: int) -> tuple[str, bool]:
        """Stream number ``j`` of this thread: its kind, and whether it ended as it should."""
        special = self.kinds.get(j % 100)
        if special is not None:
            return special.__name__, special()
        if j % 10 in (3, 6):
            return "complete_async", self.complete_async()
        if j % 10 == 8:
            return "start", self.start()
        return "complete", self.complete()

    def complete(self) -> bool:
        resp = self.blazen.Streaming.complete(
            self.model, self.ok, on_chunk=_ignore, timeout=TIMEOUT
        )
        return resp is not None and resp.content == self.text

    def complete_async(self) -> bool:
        coro = self.blazen.Streaming.complete_async(
            self.model, self.ok, on_chunk=_ignore, timeout=TIMEOUT
        )
        resp = self._loop().run_until_complete(coro)
        return resp is not None and resp.content == self.text

    def start(self) -> bool:
        handle = self.blazen.Streaming.start(self.model, self.ok, on_chunk=_ignore, timeout=TIMEOUT)
        return bool(handle.result(timeout=TIMEOUT).content == self.text)

    def server_error(self) -> bool:
        errors: list[Exception] = []
        resp = self.blazen.Streaming.complete(
            self.model, self.failing, on_chunk=_ignore, on_error=errors.append, timeout=TIMEOUT
        )
        return resp is None and [type(e) for e in errors] == [self.blazen.ProviderError]

    def callback_raises(self) -> bool:
        def on_chunk(chunk: Any) -> None:
            raise _Boom

        try:
            self.blazen.Streaming.complete(self.model, self.ok, on_chunk=on_chunk, timeout=TIMEOUT)
        except self.blazen.CallbackError as exc:
            return isinstance(exc.__cause__, _Boom)
        return False

    def cancel_token(self) -> bool:
        # Cancelled from the callback while the worker waits for bytes the server holds.
        token = self.blazen.CancelToken()
        errors: list[Exception] = []

        def on_chunk(chunk: Any) -> None:
            if chunk.content_delta:
                token.cancel()

        self.blazen.Streaming.complete(
            self.model,
            self.held,
            on_chunk=on_chunk,
            on_error=errors.append,
            cancel=token,
            timeout=TIMEOUT,
        )
        return [type(e) for e in errors] == [self.blazen.CancelledError]

    def cancel_handle(self) -> bool:
        seen = threading.Event()
        handle = self.blazen.Streaming.start(
            self.model, self.held, on_chunk=lambda chunk: seen.set(), timeout=TIMEOUT
        )
        seen.wait(TIMEOUT)
        handle.cancel()
        try:
            handle.result(timeout=TIMEOUT)
        except self.blazen.CancelledError:
            return True
        return False

    def cancel_task(self) -> bool:
        async def go() -> bool:
            seen = asyncio.Event()
            task = asyncio.ensure_future(
                self.blazen.Streaming.complete_async(
                    self.model, self.held, on_chunk=lambda chunk: seen.set(), timeout=TIMEOUT
                )
            )
            await asyncio.wait_for(seen.wait(), TIMEOUT)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                return True
            return False

        return self._loop().run_until_complete(go())

    def close(self) -> None:
        for loop in self.loops:
            loop.close()
        self.model.close()


class PeerMix:
    """A peer client made long-lived, streaming the same short stream every time."""

    def __init__(self, client: Client) -> None:
        client.long_lived()
        self.client = client
        self.spec = Spec(fmt=client.formats[0], n=CHUNKS, tag="soak")
        self.want = expected(self.spec)

    def run(self, j: int) -> tuple[str, bool]:
        """One stream: its kind, and whether the client assembled what was sent."""
        got = self.client.stream(self.spec)
        return "stream", (got[0], tuple(got[1])) == self.want

    def close(self) -> None:
        self.client.close()


def _ignore(chunk: Any) -> None:
    return None


def soak(
    key: str, base: str, warmup: int, every: int, rounds: int, budget: float
) -> dict[str, Any]:
    """Stream ``warmup`` then up to ``rounds`` x ``every`` streams; sample RSS after each.

    Stops early, after at least three samples, once ``budget`` seconds have gone: the
    slope per 10,000 streams of a slower client is then fitted over fewer streams.
    """
    if key.startswith("blazen"):
        mix: Any = BlazenMix(base, baseline=key == "blazen-baseline")
    else:
        mix = PeerMix(make_client(key, base))
    local = threading.local()
    kinds: collections.Counter[str] = collections.Counter()
    failed: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()

    def work(count: int) -> None:
        j = getattr(local, "j", 0)
        mine: collections.Counter[str] = collections.Counter()
        bad: collections.Counter[str] = collections.Counter()
        for _ in range(count):
            try:
                kind, ok = mix.run(j)
            except Exception as exc:
                kind, ok = f"raised {type(exc).__name__}: {exc}"[:200], False
            mine[kind] += 1
            if not ok:
                bad[kind] += 1
            j += 1
        local.j = j
        with lock:
            kinds.update(mine)
            failed.update(bad)

    pool = ThreadPoolExecutor(THREADS, thread_name_prefix="soak")

    def streams(n: int) -> float:
        t0 = time.perf_counter()
        shares = [n // THREADS + (i < n % THREADS) for i in range(THREADS)]
        for future in [pool.submit(work, share) for share in shares]:
            future.result()
        return time.perf_counter() - t0

    try:
        streams(warmup)
        before = _census()
        gc.collect()
        samples = [(0, _rss_kib(), threading.active_count(), _fds())]
        seconds = 0.0
        for r in range(1, rounds + 1):
            seconds += streams(every)
            gc.collect()
            samples.append((r * every, _rss_kib(), threading.active_count(), _fds()))
            print(
                f"soak {key}: {r * every:,} streams after warm-up, "
                f"RSS +{samples[-1][1] - samples[0][1]:,} KiB",
                file=sys.stderr,
                flush=True,
            )
            if seconds > budget and r >= 2:
                break
        after = _census()
    finally:
        pool.shutdown()
        mix.close()
    grown = sorted(((n - before[t], t) for t, n in after.items() if n > before[t]), reverse=True)
    measured = samples[-1][0]
    return {
        "warmup": warmup,
        "every": every,
        "streams": measured,
        "samples": samples,
        "us_per_stream": seconds / measured * 1e6,
        "kib_per_10k": slope([(s / 10_000, rss) for s, rss, _, _ in samples]),
        "growth_kib": samples[-1][1] - samples[0][1],
        "threads_left": samples[-1][2] - samples[0][2],
        "fds_left": samples[-1][3] - samples[0][3],
        "objects": [[t, n] for n, t in grown[:12]],
        "kinds": dict(kinds),
        "failed": dict(failed),
        "ok": not failed,
    }
