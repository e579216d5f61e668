"""``RedisStreamSink``: every event of a stream appended to a Redis Stream, for any reader.

Each event is one entry ``XADD key * e <json>`` (the JSON of :mod:`.codec` plus ``n``, its
number from 0), so readers on any machine follow it with ``XREAD`` from the start or from
any entry id (:func:`.follow.follow`). Besides the events the stream holds an ``open``
entry (id ``0-1``, written when the sink is made) and ``beat`` entries, written while the
stream is silent so that readers can tell a slow model from a dead producer.

After the first entry every ``XADD`` is ``NOMKSTREAM``: if the key vanished (Redis
restarted without persistence, the key was deleted or expired) the sink fails instead of
starting a stream that would silently lack its beginning.

Every wait of the sink and the deadline that bounds it (one test each in
``tests/hostile/test_waits_are_bounded.py``):

| wait                                      | bounded by                                      |
|-------------------------------------------|-------------------------------------------------|
| the ``open`` entry, in the constructor    | ``write_timeout`` (``ConnectionError``)          |
| each event's XADD (+ EXPIRE), a callback  | ``write_timeout``: then the sink is broken and   |
|                                           | the stream aborts with ``CallbackError``         |
| a beat's XADD, on the beat thread         | ``write_timeout``: the beats stop, readers see   |
|                                           | ``producer_lost`` after their ``stale_after``    |
| a callback waiting for a beat's write     | the beat's ``write_timeout`` (the lock is held   |
|                                           | only around one bounded write)                   |
| the beat thread's sleep                   | ``beat / 2``; it ends at the terminal            |

Each Redis call runs on the sink's own :class:`~.bounded.Caller` thread, so neither a
client without ``socket_timeout`` nor redis-py's retries can stretch a write. The tests,
row by row: ``test_opening_a_sink_on_a_frozen_redis_fails_within_write_timeout``;
``test_a_sinks_write_to_a_frozen_redis_fails_within_write_timeout`` and
``test_a_stream_into_a_frozen_redis_ends_with_one_callback_error``;
``test_beats_into_a_frozen_redis_stop_within_write_timeout``;
``test_a_beat_stuck_on_a_frozen_redis_holds_a_callback_at_most_write_timeout``;
``test_the_beat_threads_sleep_ends_at_the_terminal``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from typing import Any, Optional

from .._codec import dumps, encode_chunk, encode_done, encode_error
from .._types import StreamChunk, TokenUsage
from ..errors import BlazenError, CallbackError, ConnectionError, ValidationError
from .bounded import Caller, Unanswered

__all__ = ["RedisStreamSink", "redis_errors"]

logger = logging.getLogger("blazen")

#: The id of the entry that opens every stream: XADD refuses it if the key holds a stream.
OPEN_ID = "0-1"


def redis_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a Redis client raises when the server cannot be used."""
    try:
        import redis
    except ImportError:  # pragma: no cover - a client object exists, so redis is there
        return (OSError,)
    return (redis.RedisError, OSError)


def _positive(name: str, value: Any, *, allow_none: bool = False) -> Optional[float]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        msg = f"{name} must be a positive number, got {value!r}"
        raise ValueError(msg)
    if math.isinf(value):
        msg = f"{name} must be finite, got {value!r}"
        raise ValueError(msg)
    return float(value)


class RedisStreamSink:
    """Append every event to the Redis Stream ``key`` through ``client`` (a ``redis.Redis``).

    - ``maxlen``: keep about this many entries (``XADD MAXLEN ~``); a reader that falls
      further behind gets an error from :func:`follow`, never a silent gap. None keeps all.
    - ``ttl``: the key expires this many seconds after the terminal (and, while the stream
      runs, at most this long after the producer was last heard of, so a dead producer's
      key goes away too).
    - ``beat``: while no event is written for this many seconds the sink writes a beat;
      a reader's ``stale_after`` must be longer. ``ttl`` must be at least ``4 * beat``:
      the key's expiry is renewed by writes, beats included, and a shorter ``ttl`` would
      let the key of a live but silent stream expire between two beats.
    - ``write_timeout``: the longest one write may take (10 s); a Redis that does not
      answer by then (frozen, unreachable) breaks the sink, whatever ``client`` was built
      with.

    The key must be new: a stream already there raises :class:`~blazen.ValidationError`
    (use one key per stream, e.g. the task id). A Redis that goes away mid-stream makes the
    sink raise, which aborts the stream with :class:`~blazen.CallbackError` (raised by the
    call even though the sink has an ``on_error``). ``write_timeout`` bounds every write
    whatever the client was built with (see the table of waits above). Example::

        r = redis.Redis(host="redis", socket_timeout=5)
        Streaming.complete(model, req, RedisStreamSink(r, f"chat:{task_id}"))
    """

    def __init__(
        self,
        client: Any,
        key: str,
        *,
        maxlen: Optional[int] = None,
        ttl: float = 3600,
        beat: float = 5.0,
        write_timeout: float = 10.0,
    ) -> None:
        if not callable(getattr(client, "xadd", None)):
            msg = f"client must be a redis.Redis, got {type(client).__name__}"
            raise TypeError(msg)
        if not isinstance(key, str) or not key:
            msg = f"key must be a non-empty str, got {key!r}"
            raise TypeError(msg)
        if maxlen is not None and (
            isinstance(maxlen, bool) or not isinstance(maxlen, int) or maxlen < 1
        ):
            msg = f"maxlen must be a positive int or None, got {maxlen!r}"
            raise ValueError(msg)
        self.client = client
        self.key = key
        self.maxlen = maxlen
        self.ttl = max(1, math.ceil(_positive("ttl", ttl) or 1))
        self.beat = _positive("beat", beat) or 5.0
        if self.ttl < 4 * self.beat:
            msg = (
                f"ttl={ttl!r} is shorter than 4 beats (beat={beat!r}): the key of a silent "
                "stream would expire between beats; give a longer ttl or a shorter beat"
            )
            raise ValueError(msg)
        self.write_timeout = _positive("write_timeout", write_timeout) or 10.0
        self._caller = Caller(f"blazen-redis-{key}")
        self._errors = redis_errors()
        # The beat thread and the callbacks write in turn: numbers stay in order.
        self._lock = threading.Lock()
        self._n = 0
        self._last_write = time.monotonic()
        self._expired_at = self._last_write
        #: Why the sink can no longer write (Redis went away), or None.
        self.broken: Optional[BaseException] = None
        self._ended = threading.Event()
        self._open()
        thread = threading.Thread(
            target=_beat_loop,
            args=(weakref.ref(self), self.beat, self._ended),
            name=f"blazen-beat-{key}",
            daemon=True,
        )
        thread.start()

    def __repr__(self) -> str:
        return f"RedisStreamSink(key={self.key!r}, maxlen={self.maxlen!r}, ttl={self.ttl!r})"

    def _call(self, fn: Any, *args: Any, **kw: Any) -> Any:
        """``fn(*args, **kw)`` on the sink's Caller thread, within ``write_timeout``."""
        try:
            return self._caller.call(self.write_timeout, lambda: fn(*args, **kw))
        except Unanswered:
            msg = f"Redis did not answer within write_timeout={self.write_timeout:g} s"
            raise TimeoutError(msg) from None

    def _open(self) -> None:
        import redis

        def write_open() -> Any:
            pipe = self.client.pipeline(transaction=True)
            pipe.xadd(self.key, {"e": '{"kind":"open"}'}, id=OPEN_ID)
            pipe.expire(self.key, self.ttl)
            return pipe.execute()

        try:
            self._call(write_open)
        except redis.ResponseError as exc:
            if "equal or smaller" not in str(exc):
                raise
            msg = (
                f"Redis key {self.key!r} already holds a stream: use a new key for each "
                "stream (e.g. the task id), or delete the old one first"
            )
            raise ValidationError(msg) from None
        except self._errors as exc:  # TimeoutError (no answer) is an OSError
            self._caller.close()
            msg = f"cannot open Redis stream {self.key!r}: {type(exc).__name__}: {exc}"
            raise ConnectionError(msg) from exc

    def _write(self, obj: dict[str, Any], *, beat: bool = False) -> None:
        with self._lock:
            if self.broken is not None:
                raise self._lost(self.broken)
            now = time.monotonic()
            if beat and now - self._last_write < self.beat * 0.9:
                return  # an event went out meanwhile: no beat needed
            if not beat:
                obj["n"] = self._n
            try:
                added = self._call(
                    self.client.xadd,
                    self.key,
                    {"e": dumps(obj)},
                    maxlen=self.maxlen,
                    nomkstream=True,
                )
                if added is not None and now - self._expired_at > self.ttl / 2:
                    self._call(self.client.expire, self.key, self.ttl)
                    self._expired_at = now
            except self._errors as exc:  # TimeoutError (no answer) is an OSError
                self.broken = exc
                raise self._lost(exc) from exc
            if added is None:
                self.broken = LookupError(f"the key {self.key!r} vanished")
                raise self._lost(self.broken)
            if not beat:
                self._n += 1
            self._last_write = now

    def _lost(self, why: BaseException) -> ConnectionError:
        self._ended.set()
        self._caller.close()
        return ConnectionError(
            f"the Redis stream {self.key!r} can no longer be written "
            f"({type(why).__name__}: {why}); its readers will see it end"
        )

    def _end(self, obj: dict[str, Any]) -> None:
        try:
            self._write(obj)
            try:
                self._call(self.client.expire, self.key, self.ttl)
            except self._errors as exc:  # TimeoutError (no answer) is an OSError
                raise self._lost(exc) from exc
        finally:
            self._ended.set()
            self._caller.close()

    def on_chunk(self, chunk: StreamChunk) -> None:
        """Append the chunk."""
        self._write(encode_chunk(chunk))

    def on_done(self, finish_reason: str, usage: Optional[TokenUsage]) -> None:
        """Append the done terminal; the key expires ``ttl`` seconds later."""
        try:
            self._end(encode_done(finish_reason, usage))
        except ConnectionError as exc:
            raise CallbackError(f"on_done could not write to Redis: {exc}") from exc

    def on_error(self, err: BlazenError) -> None:
        """Append the error terminal; re-raise ``err`` if it is this sink's own failure."""
        if self.broken is not None:
            self._ended.set()
            raise err  # Redis is gone: the producer must see the stream failed
        try:
            self._end(encode_error(err))
        except ConnectionError as exc:
            raise CallbackError(f"on_error could not write {err.kind} to Redis: {exc}") from exc


def _beat_loop(ref: weakref.ref[RedisStreamSink], every: float, ended: threading.Event) -> None:
    # Holds the sink weakly: a sink dropped without a terminal ends its thread too.
    while not ended.wait(every / 2):
        sink = ref()
        if sink is None or ended.is_set():
            return
        try:
            sink._write({"kind": "beat"}, beat=True)
        except ConnectionError:
            logger.warning("blazen: beats of Redis stream %r stopped: Redis went away", sink.key)
            return
        finally:
            del sink
