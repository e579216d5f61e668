"""A Celery task streams an answer into Redis; a web endpoint serves it as SSE, with resume.

The LLM call runs in a Celery worker (any machine); the browser talks to a web process
(any other machine). The task writes every event to a Redis Stream with RedisStreamSink;
the endpoint follows that stream and serves it as ``text/event-stream``, so a browser's
``EventSource`` that reconnects sends ``Last-Event-ID`` and gets exactly what it missed.
If the worker dies mid-answer, the page gets an ``error`` event (``producer_lost``) within
``stale_after`` seconds instead of spinning for ever.

    pip install 'blazen-stream[redis]' 'celery[redis]'
    redis-server &                                   # or point REDIS_URL at yours
    cd examples
    celery -A celery_relay worker --pool=prefork --concurrency=4 &
    python celery_relay.py web                       # http://127.0.0.1:8000
    curl -X POST 'http://127.0.0.1:8000/chat?prompt=Tell+me+a+joke'   # -> {"key": "..."}
    curl -N http://127.0.0.1:8000/chat/KEY                            # the SSE stream

    python celery_relay.py ask "Tell me a joke"      # enqueue, follow, print (no web)

Environment: REDIS_URL (redis://127.0.0.1:6379/0), BLAZEN_BASE_URL or OPENAI_API_KEY for
the model (else a recorded demo stream), BLAZEN_BEAT and BLAZEN_STALE_AFTER (seconds).
The WSGI app below is what a Flask or Django view would return: ``sse_lines(follow(...))``.
In the page, close the ``EventSource`` on its ``done`` or ``error`` event: a browser
reconnects by itself to a response that ends, and a stream that has ended sends nothing.
"""

from __future__ import annotations

import json
import os
import socketserver
import sys
import uuid
from collections.abc import Iterable
from typing import Any, Callable
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIServer, make_server

import redis
from _demo import model_or_demo, paced
from celery import Celery

from blazen import Llm, Streaming
from blazen.sinks import RedisStreamSink, follow, sse_lines
from blazen.testing import Reply, openai_sse

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
BEAT = float(os.environ.get("BLAZEN_BEAT", "5"))
STALE_AFTER = float(os.environ.get("BLAZEN_STALE_AFTER", "30"))

app = Celery("celery_relay", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(
    task_track_started=True,  # the STARTED state names the worker process (pid)
    worker_prefetch_multiplier=1,  # a long stream does not hold other tasks back
    broker_connection_retry_on_startup=True,
)

# Made once when the worker imports this module, before the pool forks: blazen and
# redis-py both notice the fork and open fresh connections in each child process.
model = model_or_demo(default=Reply.sse(paced(openai_sse(["Relayed ", "through ", "Redis."]))))
r = redis.Redis.from_url(REDIS_URL, socket_timeout=10)


def stream_key(key: str) -> str:
    return f"chat:{key}"


@app.task(name="celery_relay.relay")
def relay(key: str, prompt: str) -> str:
    """Stream the answer to ``prompt`` into the Redis Stream of ``key``."""
    req = Llm.completion_request([Llm.user(prompt)], max_tokens=512)
    sink = RedisStreamSink(r, stream_key(key), ttl=3600, beat=BEAT)
    resp = Streaming.complete(model, req, sink, timeout=300)
    return "done" if resp is not None else "error"


# -- the web side: a WSGI app (Flask/Django views look the same) ---------------------------

Start = Callable[[str, list[tuple[str, str]]], Any]


def web(environ: dict[str, Any], start_response: Start) -> Iterable[bytes]:
    """POST /chat?prompt=... enqueues a task; GET /chat/<key> serves its events as SSE."""
    path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "GET")
    if method == "POST" and path == "/chat":
        prompt = parse_qs(environ.get("QUERY_STRING", "")).get("prompt", ["Hello"])[0]
        key = uuid.uuid4().hex
        relay.delay(key, prompt)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps({"key": key}).encode()]
    if method == "GET" and path.startswith("/chat/"):
        last_id = environ.get("HTTP_LAST_EVENT_ID", "0")  # sent by a reconnecting browser
        events = follow(r, stream_key(path[len("/chat/") :]), last_id=last_id,
                        timeout=600, stale_after=STALE_AFTER)
        start_response(
            "200 OK", [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]
        )
        return sse_lines(events)
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"POST /chat?prompt=... or GET /chat/<key>\n"]


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    """One thread per request: an open SSE response must not block the others."""

    daemon_threads = True


def serve(port: int = 8000) -> None:
    with make_server("127.0.0.1", port, web, server_class=ThreadingWSGIServer) as httpd:
        print(f"serving on http://127.0.0.1:{httpd.server_port}", flush=True)
        httpd.serve_forever()


def ask(prompt: str) -> int:
    """Enqueue one task and print its answer as it streams, from this process."""
    key = uuid.uuid4().hex
    relay.delay(key, prompt)
    for _event_id, kind, args in follow(r, stream_key(key), timeout=600, stale_after=STALE_AFTER):
        if kind == "chunk":
            print(args[0].content_delta or "", end="", flush=True)
        elif kind == "done":
            print(f"\n[done: {args[0]}]")
        else:
            print(f"\n[error: {args[0].kind}: {args[0]}]")
            return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["web"]:
        serve(int(sys.argv[2]) if len(sys.argv) > 2 else 8000)
    elif sys.argv[1:2] == ["ask"]:
        sys.exit(ask(" ".join(sys.argv[2:]) or "Hello"))
    else:
        print(__doc__)
