"""``follow``: read a :class:`.RedisStreamSink`'s stream from any process; ``sse_lines``."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Iterator
from typing import Any, Optional

from .._codec import decode, dumps, encode, encode_error, loads
from ..errors import BlazenError, ConnectionError, TimeoutError, ValidationError
from .bounded import Caller, Unanswered
from .redis import redis_errors

__all__ = ["follow", "sse_lines"]

# Every wait of follow() and the deadline that bounds it (tests/hostile/test_waits_are_bounded.py
# has one test per row):
#
# | wait                                  | bounded by                                        |
# |---------------------------------------|---------------------------------------------------|
# | XRANGE/EXISTS for ``last_id``          | ``timeout``; else ``stale_after`` (redis_lost)     |
# | XREAD BLOCK (a live or silent stream) | ``timeout``; else ``stale_after`` + REPLY_SLACK    |
# | a Redis that answers nothing (frozen) | the same: each call runs on a Caller thread        |
# | a Redis that raises (down, refused)   | ``stale_after`` of retries (redis_lost); timeout  |
# | EXISTS after a stale stream           | as XREAD                                          |
# | a stream not started yet (no key)     | ``timeout`` only: its producer may be queued      |
#
# The client's own socket_timeout and retries never lengthen these: a call that outlives
# its deadline is given up (bounded.Caller), whatever the client was built with. The tests,
# row by row: test_follow_resuming_from_an_id_is_bounded_on_a_frozen_redis;
# test_follow_timeout_bounds_the_wait_on_a_frozen_redis and
# test_follow_stale_after_bounds_the_wait_on_a_frozen_redis (rows 2, 3 and 5); in
# tests/sinks/test_redis.py (row 4)
# test_redis_killed_mid_stream_fails_the_producer_and_its_reader_without_a_hang and
# test_resuming_against_an_unreachable_redis_is_a_clear_error, and (row 6)
# test_follow_times_out_on_a_stream_that_never_starts.

#: The longest single blocking read: a reader notices its own deadline this often.
MAX_BLOCK = 5.0
#: Seconds past its BLOCK time that an XREAD's answer may take before Redis counts as mute.
REPLY_SLACK = 1.0

_LAST_ID = re.compile(r"\A[0-9]{1,20}(?:-[0-9]{1,20})?\Z")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _entries(reply: Any) -> list[tuple[Any, Any]]:
    """The entries of one XREAD reply for one key, RESP2 (a list) or RESP3 (a dict)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        (entries,) = reply.values()
        return list(entries[0] if entries and isinstance(entries[0], list) else entries)
    return list(reply[0][1])


def _payload(fields: Any) -> dict[str, Any]:
    raw = fields.get(b"e", fields.get("e")) if isinstance(fields, dict) else None
    if raw is None:
        return {"kind": "foreign"}
    try:
        obj = loads(raw)
    except ValidationError:
        return {"kind": "foreign"}  # another writer's entry: not ours to read
    return obj if isinstance(obj, dict) else {"kind": "foreign"}


def _error(kind: str, message: str) -> ConnectionError:
    err = ConnectionError(message)
    err.kind = kind
    return err


def _lost(key: str, expected: Any, got: Any) -> ConnectionError:
    return _error(
        "events_lost",
        f"events {expected} to {got} of Redis stream {key!r} are no longer there (trimmed "
        "by maxlen, or the stream was recreated); read it again from last_id='0', or give "
        "the sink a larger maxlen",
    )


def follow(
    client: Any,
    key: str,
    *,
    last_id: Any = "0",
    timeout: Optional[float] = None,
    stale_after: float = 30.0,
) -> Iterator[tuple[str, str, tuple[Any, ...]]]:
    """Yield ``(event_id, kind, args)`` of the stream at ``key``, in order, to its terminal.

    ``kind`` and ``args`` are the block handler's (see :func:`read_jsonl`); the generator
    ends right after the one ``"done"`` or ``"error"``. ``last_id`` resumes after an id
    already seen (the SSE ``Last-Event-ID``): exactly the events after it follow. A stream
    that does not exist yet is waited for (its producer may still be queued).

    Ends with :class:`~blazen.ConnectionError` when the producer is gone: kind
    ``producer_lost`` if the stream has had no event nor beat for ``stale_after`` seconds;
    ``events_lost`` if events this reader needs were trimmed (``maxlen``) or the stream
    was recreated; ``stream_lost`` if the key vanished mid-stream (expired, deleted, a
    Redis restart without persistence); ``redis_lost`` if Redis cannot be reached for
    ``stale_after`` seconds, or does not answer at all (frozen) for that long.
    ``timeout`` bounds the whole wait (:class:`~blazen.TimeoutError`), and both bound it
    whatever the client was built with (its ``socket_timeout`` and retries). A
    ``last_id`` that is not a stream id raises :class:`~blazen.ValidationError`. Example::

        for event_id, kind, args in follow(r, f"chat:{task_id}", last_id=last_seen):
            if kind == "chunk":
                print(args[0].content_delta or "", end="")
    """
    if not isinstance(stale_after, (int, float)) or isinstance(stale_after, bool) or not (
        0 < stale_after < math.inf
    ):
        msg = f"stale_after must be a positive number of seconds, got {stale_after!r}"
        raise ValueError(msg)
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
    ):
        msg = f"timeout must be a positive number of seconds or None, got {timeout!r}"
        raise ValueError(msg)
    last = _text(last_id)
    if not _LAST_ID.match(last):
        # Often a browser's Last-Event-ID: input from outside, so a typed blazen error.
        msg = (
            f"last_id must be a Redis stream id such as '0' or '1700000000000-0' (an id "
            f"follow() yielded), got {last[:64]!r}"
        )
        raise ValidationError(msg)
    return _follow(client, key, last, timeout, float(stale_after))


class _Clock:
    """The deadlines of one follow(): its ``timeout``, and Redis answering at all."""

    def __init__(self, key: str, timeout: Optional[float], stale_after: float) -> None:
        self.key = key
        self.timeout = timeout
        self.stale_after = stale_after
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.caller = Caller(f"blazen-follow-{key}")

    def expired(self) -> TimeoutError:
        msg = f"follow({self.key!r}) waited {self.timeout} s without reaching the stream's end"
        return TimeoutError(msg, limit="timeout", seconds=float(self.timeout or 0))

    def call(self, mute_after: float, fn: Any, *args: Any, **kw: Any) -> Any:
        """``fn(*args, **kw)``, given up at the deadline or ``mute_after`` s from now."""
        now = time.monotonic()
        limit = mute_after if self.deadline is None else min(mute_after, self.deadline - now)
        try:
            return self.caller.call(limit, lambda: fn(*args, **kw))
        except Unanswered:
            if self.deadline is not None and time.monotonic() >= self.deadline - 0.01:
                raise self.expired() from None
            msg = (
                f"cannot read Redis stream {self.key!r}: Redis did not answer for "
                f"{mute_after:.3g} s (frozen, or the network drops packets)"
            )
            raise _error("redis_lost", msg) from None


def _follow(
    client: Any, key: str, last: str, timeout: Optional[float], stale_after: float
) -> Iterator[tuple[str, str, tuple[Any, ...]]]:
    clock = _Clock(key, timeout, stale_after)
    try:
        yield from _read(client, key, last, clock)
    finally:
        clock.caller.close()


def _read(
    client: Any, key: str, last: str, clock: _Clock
) -> Iterator[tuple[str, str, tuple[Any, ...]]]:
    errors = redis_errors()
    stale_after = clock.stale_after
    # A BLOCK longer than the client's socket_timeout would time the client out itself.
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    socket_timeout = kwargs.get("socket_timeout") if isinstance(kwargs, dict) else None
    expected = 0
    existed = False
    if last not in ("0", "0-0"):
        try:
            found = clock.call(stale_after, client.xrange, key, last, last)
            exists = bool(found) or clock.call(stale_after, client.exists, key)
        except BlazenError:
            raise  # blazen's TimeoutError is an OSError too: not Redis's to report
        except errors as exc:
            msg = f"cannot read Redis stream {key!r}: {type(exc).__name__}: {exc}"
            raise _error("redis_lost", msg) from exc
        if not found:
            if exists:
                msg = (
                    f"event {last} is no longer in Redis stream {key!r} (trimmed by maxlen, "
                    "or not an id of this stream): read it again from last_id='0', or give "
                    "the sink a larger maxlen"
                )
                raise _error("events_lost", msg)
            msg = (
                f"Redis stream {key!r} no longer exists (it expired after its ttl, or was "
                f"deleted), so the events after {last} cannot be read"
            )
            raise _error("stream_lost", msg)
        existed = True
        obj = _payload(found[0][1])
        if obj.get("kind") in ("done", "error"):
            return
        expected = obj["n"] + 1 if isinstance(obj.get("n"), int) else 0
    heard = time.monotonic()  # when the producer was last heard of (an entry, or a beat)
    while True:
        now = time.monotonic()
        if clock.deadline is not None and now >= clock.deadline:
            raise clock.expired()
        wait = min(MAX_BLOCK, max(0.001, heard + stale_after - now))
        if clock.deadline is not None:
            wait = min(wait, clock.deadline - now)
        if socket_timeout:
            wait = min(wait, socket_timeout / 2)
        block = max(1, int(wait * 1000))
        try:
            # Mute when no answer comes by the end of the block, plus the time a reply takes.
            mute = max(heard + stale_after - now, block / 1000) + REPLY_SLACK
            reply = clock.call(mute, client.xread, {key: last}, count=512, block=block)
        except BlazenError:
            raise
        except errors as exc:
            if time.monotonic() - heard >= stale_after:
                msg = (
                    f"cannot read Redis stream {key!r}: Redis unreachable for "
                    f"{stale_after} s ({type(exc).__name__}: {exc})"
                )
                raise _error("redis_lost", msg) from exc
            time.sleep(min(0.2, stale_after / 10))
            continue
        entries = _entries(reply)
        if entries:
            existed = True
            heard = time.monotonic()
        for raw_id, fields in entries:
            last = _text(raw_id)
            obj = _payload(fields)
            kind = obj.get("kind")
            if kind not in ("chunk", "done", "error"):
                continue  # open, beat
            if obj.get("n") != expected:
                raise _lost(key, expected, obj.get("n"))
            expected += 1
            yield (last, *decode(obj))
            if kind != "chunk":
                return
        if entries:
            continue
        if time.monotonic() - heard < stale_after:
            continue
        try:
            exists = clock.call(stale_after, client.exists, key)
        except BlazenError:
            raise
        except errors:
            continue  # the read above reports Redis itself
        if exists:
            msg = (
                f"the producer of Redis stream {key!r} is gone: no event nor beat for "
                f"{stale_after} s (its process died, or lost Redis)"
            )
            raise _error("producer_lost", msg)
        if existed:
            msg = (
                f"Redis stream {key!r} vanished mid-stream (deleted, expired, or Redis "
                "restarted without persistence)"
            )
            raise _error("stream_lost", msg)
        heard = time.monotonic()  # not started yet: keep waiting (bounded by timeout)


def sse_lines(events: Iterable[tuple[str, str, tuple[Any, ...]]]) -> Iterator[bytes]:
    """``text/event-stream`` bytes for followed events: one SSE event each, ``id:`` set.

    ``event:`` is the kind and ``data:`` its JSON (see :mod:`blazen.sinks.codec`), so a
    browser's ``EventSource`` resumes by itself with ``Last-Event-ID``. If following fails
    (``producer_lost``), the failure is sent as a last ``error`` event without an id.
    Example (Flask)::

        @app.get("/chat/<task_id>")
        def chat(task_id):
            last = request.headers.get("Last-Event-ID", "0")
            return Response(sse_lines(follow(r, f"chat:{task_id}", last_id=last)),
                            mimetype="text/event-stream")
    """
    try:
        for event_id, kind, args in events:
            data = dumps(encode(kind, args))
            yield f"id: {event_id}\nevent: {kind}\ndata: {data}\n\n".encode()
    except BlazenError as err:
        data = dumps(encode_error(err))
        yield f"event: error\ndata: {data}\n\n".encode()
