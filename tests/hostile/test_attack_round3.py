"""Round 3 attacks on 521ca25 (stream lifecycle): each test fails on that commit.

A hostile server (gzip that decodes to nothing for a long time) and a careless caller
(closing a suspended coroutine, frameworks asking whether a function is a coroutine
function, a decorator that hides ``async def``, tuple arithmetic on a snapshot).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import signal
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any, Optional

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Pause, Recorder, Reply, Stall, StreamServer, openai_sse

from ..conftest import KEY_FOR_TESTS
from .interrupts import reached_the_stream, reached_the_try

REQ = Llm.completion_request([Llm.user("hi")])


def _model(base_url: str, **options: object) -> blazen.ChatModel:
    options.setdefault("max_retries", 0)
    return blazen.Providers.openai_compat("test", base_url, api_key=KEY_FOR_TESTS, **options)


def _stream_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "blazen-stream"]


# -- asyncio: a suspended complete_async closed (what garbage collection of a task does) --


def test_closing_a_suspended_complete_async_coroutine_does_not_raise_and_hangs_up():
    """coroutine.close() (GeneratorExit) ends the stream quietly: no RuntimeError, socket closed.

    It is what Python does to a pending task's coroutine that is garbage collected (an
    event loop closed with the task still pending); before 521ca25 the finally block simply
    aborted the stream.
    """
    with StreamServer([Reply.sse([*openai_sse(["partial"])[:2], Stall()])]) as server:
        rec = Recorder()

        async def main() -> None:
            coro = Streaming.complete_async(_model(server.base_url), REQ, rec.handler)
            coro.send(None)  # runs to its first wait: the worker is on its way
            deadline = time.monotonic() + 5
            while not server.connections and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            coro.close()  # must not raise "coroutine ignored GeneratorExit"

        asyncio.run(main())
        assert server.wait_closed(timeout=5)
    deadline = time.monotonic() + 5
    while _stream_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _stream_threads()
    assert rec.terminals <= 1, rec.kinds


# -- asyncio: the entry points are still coroutine functions --------------------------------


def test_complete_async_and_agent_run_async_are_still_coroutine_functions():
    """Frameworks dispatch on iscoroutinefunction (Starlette's BackgroundTask, asgiref, DI).

    Reported as plain functions, they are run in a thread pool and their coroutine is never
    awaited: the stream never happens.
    """
    assert asyncio.iscoroutinefunction(Streaming.complete_async)
    assert asyncio.iscoroutinefunction(blazen.Agent.run_async)
    agent = blazen.Agent(blazen.Providers.openai_compat("t", "http://127.0.0.1:9", api_key="k"))
    assert asyncio.iscoroutinefunction(agent.run_async)
    if sys.version_info >= (3, 12):  # inspect knows only real functions before 3.12
        assert inspect.iscoroutinefunction(Streaming.complete_async)
        assert inspect.iscoroutinefunction(agent.run_async)


def test_a_pending_stream_task_can_be_inspected_like_any_coroutine_task():
    """task.get_stack() shows where a stuck stream waits, and the coroutine has a name."""
    with StreamServer([Reply.sse([*openai_sse(["partial"])[:2], Stall()])]) as server:

        async def main() -> tuple[list[object], str, str]:
            task = asyncio.ensure_future(
                Streaming.complete_async(_model(server.base_url), REQ, on_error=lambda e: None)
            )
            await asyncio.sleep(0.2)
            stack = task.get_stack()
            coro = task.get_coro()
            name = getattr(coro, "__qualname__", "")
            text = repr(task)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return stack, name, text

        stack, name, text = asyncio.run(main())
    assert stack, "no stack for a suspended stream task"
    assert "complete_async" in name
    assert "without __name__" not in text


# -- blocking: a coroutine hidden behind a plain function is not silently dropped -----------


def _logged(fn):  # a decorator without functools.wraps, as many are
    def wrapper(*args):
        return fn(*args)

    return wrapper


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_callback_that_returns_a_coroutine_to_a_blocking_call_is_not_silently_dropped():
    """A plain function returning a coroutine (a decorated ``async def``) is not a silent no-op.

    The coroutine-function check refuses ``async def`` callbacks up front; one behind a
    decorator returns a coroutine at each chunk that nobody awaits, and the text is lost
    while complete() reports success.
    """
    got: list[str] = []

    @_logged
    async def on_chunk(chunk: blazen.StreamChunk) -> None:
        got.append(chunk.content_delta or "")

    with StreamServer([Reply.sse(openai_sse(["a", "b"]))]) as server:
        rec = Recorder()
        try:
            Streaming.complete(
                _model(server.base_url), REQ, on_chunk=on_chunk, on_error=rec.on_error
            )
        except TypeError:
            return  # refused: fine
    assert isinstance(rec.error, blazen.CallbackError), (
        f"on_chunk's coroutines were dropped without a word (callback saw {got!r})"
    )


# -- ToolCalls: tuple arithmetic ------------------------------------------------------------


def _snapshot(calls: int) -> blazen.StreamChunk:
    from blazen.testing import openai_tool_sse

    with StreamServer(
        [Reply.sse(openai_tool_sse([(f"id{i}", "f", "{}") for i in range(calls)]))]
    ) as server:
        rec = Recorder()
        Streaming.complete(_model(server.base_url), REQ, rec.handler)
    return rec.chunks[-1]


def test_a_tool_call_snapshot_does_tuple_arithmetic_from_either_side():
    """It "behaves as the tuple of its calls": ``() + snap`` and ``snap * 2`` work as for a tuple."""
    snap = _snapshot(12).tool_calls
    calls = tuple(snap)
    assert len(calls) == 12
    assert () + snap == calls  # type: ignore[operator]  # noqa: RUF005
    assert snap * 2 == calls * 2  # type: ignore[operator]
    assert 2 * snap == 2 * calls  # type: ignore[operator]


# -- gzip bodies trickled so that they decode to nothing for a long time ---------------------


def _gzip_with_a_trickled_comment(payload: bytes, pieces: int, gap: float) -> list[object]:
    # A gzip member whose header carries a comment (FLG.FCOMMENT): the decoder consumes it
    # and yields no output, so urllib3's read1 keeps reading the socket for more.
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = deflate.compress(payload) + deflate.flush()
    header = b"\x1f\x8b\x08\x10" + b"\x00\x00\x00\x00" + b"\x00\xff"
    trailer = struct.pack("<II", zlib.crc32(payload) & 0xFFFFFFFF, len(payload))
    comment = [part for _ in range(pieces) for part in (b"c", Pause(gap))]
    return [header, *comment, b"\x00" + body + trailer]


@pytest.mark.parametrize("transfer", ["close", "chunked", "length"])
def test_a_gzip_body_that_decodes_to_nothing_for_ever_still_ends_at_the_idle_timeout(transfer):
    """model.complete(): a gzip body trickled inside its header cannot outlast idle_timeout."""
    payload = json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "hi"},
                    "finish_reason": "stop",
                }
            ],
        }
    ).encode()
    reply = Reply(
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        body=_gzip_with_a_trickled_comment(payload, 40, 0.2),  # about 8 s
        transfer=transfer,
    )
    with StreamServer([reply]) as server:
        model = _model(server.base_url, idle_timeout=0.6)
        start = time.monotonic()
        with pytest.raises(blazen.TimeoutError) as info:
            model.complete(REQ)
        took = time.monotonic() - start
    assert took < 3, f"the trickled gzip body held the call for {took:.1f} s"
    assert info.value.limit == "idle"


@pytest.mark.parametrize("transfer", ["close", "chunked"])
def test_a_gzip_stream_that_sends_empty_blocks_after_done_cannot_hold_the_call(transfer):
    """After [DONE], empty deflate blocks (decoding to nothing) cannot hold the drain past ~1 s."""
    gzip = zlib.compressobj(6, zlib.DEFLATED, 31)
    first = gzip.compress(b"".join(openai_sse(["hi"]))) + gzip.flush(zlib.Z_SYNC_FLUSH)
    empty_block = b"\x00\x00\x00\xff\xff"  # a stored block of length 0
    body = [first] + [part for _ in range(30) for part in (Pause(0.3), empty_block)]
    reply = Reply(
        headers={"Content-Type": "text/event-stream", "Content-Encoding": "gzip"},
        body=body,
        transfer=transfer,
    )
    with StreamServer([reply]) as server:
        start = time.monotonic()
        resp = Streaming.complete(_model(server.base_url), REQ)
        took = time.monotonic() - start
    assert resp.content == "hi"
    assert took < 3, f"the drain after [DONE] took {took:.1f} s"


# -- signals: a second interrupt while the first is being handled ----------------------------


class Deadline(BaseException):
    """What the SIGALRM handler raises: a BaseException, as Ctrl-C's KeyboardInterrupt is.

    An Exception landing inside ``threading.Thread.start`` is caught there by the standard
    library's own clean-up, which then fails with a KeyError of its own: that is CPython's
    behaviour with any Exception raised from a signal handler, not blazen's.
    """


def _pressed_twice(fired: list[int]) -> Callable[[int, object], None]:
    """A SIGALRM handler that raises :class:`Deadline` at the first two alarms only.

    It stops the interval timer at the second; a third already on its way is ignored.
    ``fired[0]`` counts the alarms (:func:`_strike` sets it back to 0 before each call).
    """

    def on_alarm(signum: int, frame: object) -> None:
        fired[0] += 1
        if fired[0] > 2:
            return
        if fired[0] == 2:
            signal.setitimer(signal.ITIMER_REAL, 0)
        raise Deadline("again")

    return on_alarm


@contextlib.contextmanager
def _alarms() -> Iterator[list[int]]:
    """SIGALRM raises :class:`Deadline` twice per :func:`_strike` inside the block."""
    fired = [0]
    saved = signal.getsignal(signal.SIGALRM)
    signal.signal(signal.SIGALRM, _pressed_twice(fired))
    try:
        yield fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, saved)


def _strike(
    fired: list[int], first: float, then: float, call: Callable[[], object]
) -> Optional[Deadline]:
    """``call()`` with an alarm ``first`` seconds in and a second ``then`` seconds after it.

    Returns the :class:`Deadline` that came out of the call, or None if it ended by itself
    (both alarms struck where Python ignores them, such as a collector's callback).
    """
    fired[0] = 0
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, first, then)
            call()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except Deadline as exc:
        return exc
    return None


_ON_THE_MAIN_THREAD = pytest.mark.skipif(
    not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread(),
    reason="POSIX interval timers on the main thread",
)
# A signal landing in a collector's weakref callback is "ignored" by Python itself (reported
# as unraisable): it never reached blazen, so it is no failure of these tests.
_IGNORED_BY_PYTHON = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def _one_terminal_each(
    model: blazen.ChatModel,
    attempts: int,
    first: Callable[[], float],
    then: Callable[[], float],
    **stream: Any,
) -> list[str]:
    """Streams struck twice: the attempts that did not end with exactly the terminals owed.

    One terminal once an interrupt got inside the stream's set-up; none if both landed
    before it (a loaded machine can delay the call past the timer): the call never began,
    as if its arguments had been refused. The callbacks are C methods (``list.append``,
    ``dict.__setitem__``), so no signal lands inside them: a missing terminal was never
    called.
    """
    wrong: list[str] = []
    with _alarms() as fired:
        for attempt in range(attempts):
            errors: list[object] = []
            dones: dict[str, object] = {}
            struck = _strike(
                fired,
                first(),
                then(),
                functools.partial(
                    Streaming.complete,
                    model,
                    REQ,
                    on_done=dones.__setitem__,
                    on_error=errors.append,
                    **stream,
                ),
            )
            owed = 1 if struck is None or reached_the_stream(struck) else 0
            if len(errors) + len(dones) != owed:
                wrong.append(f"attempt {attempt}: {errors} {dones}")
    return wrong


@_ON_THE_MAIN_THREAD
@_IGNORED_BY_PYTHON
def test_a_second_interrupt_while_the_first_is_handled_still_leaves_one_terminal(unraisables):
    """Ctrl-C pressed twice (here: two SIGALRMs 0.7 ms apart) still gives on_error exactly once.

    The handler already waits for the worker "even through a second interrupt"; a second
    one landing in ``delivery.interrupt()`` (the socket shutdown) skips the terminal.
    """
    import random

    body = [part for event in openai_sse(list("abc")) for part in (event, Pause(0.001))]
    rnd = random.Random(1)
    with StreamServer(default=Reply.sse(body)) as server:
        wrong = _one_terminal_each(
            _model(server.base_url), 300, lambda: rnd.uniform(0.001, 0.006), lambda: 0.0007
        )
    assert wrong == []


@_ON_THE_MAIN_THREAD
@_IGNORED_BY_PYTHON
def test_a_second_interrupt_microseconds_after_the_first_still_leaves_one_terminal(unraisables):
    """Two SIGALRMs 1-30 us apart, the first while the stream waits for its server.

    The second lands while the first is still climbing out of the call: on Python 3.10 a
    pending signal handler runs as an exception reaches a handler, before the handler's
    first instruction, and there it skipped the driver's ``except`` clause whole: no
    terminal (about 8 streams in 500 here), and the record that the thread was running the
    stream's callbacks stayed behind in a generator context manager, so that after 32 of
    them every later stream on the thread was refused. Each stream must end with exactly
    one terminal, leave nothing recorded in the context, and leave its long-lived cancel
    token with no subscription.
    """
    import random

    from blazen._stream import checks

    token = blazen.CancelToken()  # outlives every stream, as a worker's own token would
    body = [openai_sse(["a"])[0], Pause(5.0)]
    rnd = random.Random(3)
    with StreamServer(default=Reply.sse(body)) as server:
        wrong = _one_terminal_each(
            _model(server.base_url),
            600,
            lambda: rnd.uniform(0.004, 0.008),
            lambda: rnd.uniform(1e-6, 3e-5),
            cancel=token,
        )
    assert wrong == []
    assert checks._DELIVERING.get() == ()
    assert token._callbacks == []


@_ON_THE_MAIN_THREAD
@_IGNORED_BY_PYTHON
def test_a_second_interrupt_microseconds_after_the_first_still_stops_an_embedding(unraisables):
    """``model.embed`` over a server that never answers, hit by two SIGALRMs 1-30 us apart.

    On Python 3.10 the second could land at the entry of the call's ``except`` clause and
    skip the workers' stop: the call returned (its join is bounded) with its workers still
    waiting on their connections, for as long as the server held them.
    """
    import random

    import blazen._stream.embedding

    # Loaded before the storm: the embedding engine loads on first use, and an import
    # struck by two signals fails inside Python's import machinery (3.10 raised "TypeError:
    # expected a message argument"), whatever the module holds.
    rnd = random.Random(4)
    with _alarms() as fired, StreamServer(default=Reply(body=[Stall()], raw=True)) as server:
        model = _model(server.base_url)
        embed = functools.partial(model.embed, ["a", "b"], batch_size=1, concurrency=2, timeout=3.0)
        for _attempt in range(400):
            # A TimeoutError: both alarms landed where Python ignores them.
            with contextlib.suppress(blazen.TimeoutError):
                _strike(fired, rnd.uniform(0.003, 0.006), rnd.uniform(1e-6, 3e-5), embed)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(
            t.name == "blazen-embed" for t in threading.enumerate()
        ):
            time.sleep(0.02)
        left = [t for t in threading.enumerate() if t.name == "blazen-embed"]
    assert left == []


@_ON_THE_MAIN_THREAD
@_IGNORED_BY_PYTHON
def test_a_second_interrupt_microseconds_after_the_first_still_ends_an_agent_run_once(unraisables):
    """``Agent.run`` waiting on its model, hit by two SIGALRMs: exactly one of ``on_done`` /
    ``on_error`` for the run, as for one stream.

    Its ``except`` clause called ``on_error`` directly: a second interrupt anywhere in it
    (on Python 3.10 also at its entry) ended the run with no terminal. The second alarm
    comes up to 3 ms after the first: the first's ending climbs through the stream's own
    driver before the run's.
    """
    import random

    body = [openai_sse(["a"])[0], Pause(5.0)]
    rnd = random.Random(6)
    wrong: list[str] = []
    with _alarms() as fired, StreamServer(default=Reply.sse(body)) as server:
        agent = blazen.Agent(_model(server.base_url))
        for attempt in range(400):
            errors: list[object] = []
            dones: list[object] = []
            run = functools.partial(agent.run, "hi", on_done=dones.append, on_error=errors.append)
            struck = _strike(fired, rnd.uniform(0.004, 0.008), rnd.uniform(1e-6, 3e-3), run)
            owed = 1 if struck is None or reached_the_try(struck, blazen.Agent.run) else 0
            if len(errors) + len(dones) != owed:
                wrong.append(f"attempt {attempt}: {errors} {dones}")
    assert wrong == []
