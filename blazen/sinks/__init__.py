"""Sink objects: where a stream's events go, in this process or across machines.

A sink is any object with one or more of ``on_chunk(chunk)``, ``on_done(finish_reason,
usage)`` and ``on_error(err)``, passed where a handler goes (``Streaming.complete(model,
req, sink)``, ``complete_async``, ``start``, ``agent.run(..., sink=sink)``). Here:

- :func:`tee` fans one stream out to several sinks, in order;
- :class:`QueueSink` puts ``(kind, args)`` on a queue: the hand-off to another thread;
- :class:`JsonlSink` writes a durable transcript, read back by :func:`read_jsonl`;
- :class:`RedisStreamSink` appends to a Redis Stream (extra ``blazen-stream[redis]``), which
  :func:`follow` reads from any process, resuming by event id, and :func:`sse_lines`
  serves to a browser as ``text/event-stream``.

Example (a Celery task and a web endpoint on another machine)::

    @app.task
    def chat(key, prompt):
        Streaming.complete(model, Llm.completion_request([Llm.user(prompt)]),
                           RedisStreamSink(redis.Redis(socket_timeout=5), key))

    for event_id, kind, args in follow(redis.Redis(), key, last_id=last_seen): ...
"""

from __future__ import annotations

from .._stream import Sink
from .codec import Event, HandlerCall
from .fanout import QueueSink, Tee, tee
from .follow import follow, sse_lines
from .jsonl import JsonlSink, read_jsonl
from .redis import RedisStreamSink

__all__ = [
    "Event",
    "HandlerCall",
    "JsonlSink",
    "QueueSink",
    "RedisStreamSink",
    "Sink",
    "Tee",
    "follow",
    "read_jsonl",
    "sse_lines",
    "tee",
]
