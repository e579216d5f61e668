"""A web page that streams an answer produced by a background job, through Redis.

The browser posts a prompt; the web process starts a background job (its own process, as
a Celery task would be) that streams the answer into a Redis Stream with
``RedisStreamSink``, and answers with the stream's id. The page's JavaScript reads
``/stream/<id>`` with ``EventSource``; the web process serves it with
``sse_lines(follow(...))``. Every event has an ``id:``, so a browser whose connection
drops (the web process restarted, a proxy timed out) reconnects by itself with
``Last-Event-ID`` and gets exactly what it missed. A job that dies mid-answer shows the
page a clear message within ``stale_after`` seconds (``producer_lost``).

    pip install 'blazen-stream[redis]'
    redis-server &                     # or point REDIS_URL at yours
    python examples/web_relay.py       # then open http://127.0.0.1:8000

Environment: REDIS_URL (redis://127.0.0.1:6379/0), BLAZEN_RELAY_PORT (8000),
BLAZEN_BASE_URL or OPENAI_API_KEY for the model (else a recorded demo stream),
BLAZEN_BEAT and BLAZEN_STALE_AFTER (seconds). The web side is a plain WSGI app: a Flask
or Django view returns the same ``sse_lines(follow(...))`` as its streaming body.
"""

from __future__ import annotations

import json
import os
import socketserver
import subprocess
import sys
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import redis

from blazen.sinks import follow, sse_lines

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
BEAT = float(os.environ.get("BLAZEN_BEAT", "5"))
STALE_AFTER = float(os.environ.get("BLAZEN_STALE_AFTER", "30"))

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>blazen relay</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 42rem; margin: 2rem auto; }
  #answer { white-space: pre-wrap; border: 1px solid #ccc; padding: 1rem; min-height: 4rem; }
  #status { color: #555; margin-top: .5rem; }
  #status.failed { color: #b00020; font-weight: bold; }
</style>
</head>
<body>
<h1>blazen relay</h1>
<form id="ask"><input id="prompt" size="40" value="Tell me a joke.">
<button>Ask</button></form>
<div id="answer" data-ids=""></div>
<div id="status">Ask something.</div>
<script>
const answer = document.getElementById("answer");
const statusLine = document.getElementById("status");
function say(text, failed) {
  statusLine.textContent = text;
  statusLine.className = failed ? "failed" : "";
}
document.getElementById("ask").addEventListener("submit", async (e) => {
  e.preventDefault();
  answer.textContent = "";
  answer.dataset.ids = "";
  say("Starting...");
  const body = new URLSearchParams({prompt: document.getElementById("prompt").value});
  const job = await (await fetch("/start", {method: "POST", body})).json();
  // EventSource reconnects by itself after a dropped connection, sending the last id.
  const source = new EventSource("/stream/" + job.id);
  source.addEventListener("open", () => say("Streaming..."));
  source.addEventListener("error", () => {
    if (source.readyState === EventSource.CONNECTING) say("Connection lost, resuming...");
  });
  source.addEventListener("chunk", (ev) => {
    answer.dataset.ids += ev.lastEventId + " ";
    answer.textContent += JSON.parse(ev.data).content || "";
  });
  source.addEventListener("done", (ev) => {
    source.close();  // a response that ends would otherwise be reconnected to
    say("Done (" + (JSON.parse(ev.data).finish_reason || "stop") + ").");
  });
  // The server's own "error" event carries data; the connection's error event has none.
  source.addEventListener("error", (ev) => {
    if (!ev.data) return;
    source.close();
    const err = JSON.parse(ev.data).error;
    say(err.kind === "producer_lost"
      ? "The worker went away before the answer was finished. Ask again."
      : "Failed: " + err.message, true);
  });
});
</script>
</body>
</html>
"""

Start = Callable[[str, list[tuple[str, str]]], Any]


def stream_key(job_id: str) -> str:
    return f"relay:{job_id}"


def start_job(prompt: str) -> tuple[str, int]:
    """Start the background job that answers ``prompt``; return its id and process id."""
    job_id = uuid.uuid4().hex
    # Its own session: the job outlives a restart of the web process, as a worker would.
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "produce", job_id, prompt],
        start_new_session=True,
    )
    return job_id, proc.pid


def produce(job_id: str, prompt: str) -> int:
    """The background job: stream the answer into the Redis Stream of ``job_id``."""
    from _demo import model_or_demo, paced

    from blazen import Llm, Streaming
    from blazen.sinks import RedisStreamSink
    from blazen.testing import Reply, openai_sse

    words = "Why did the scarecrow win an award? Because he was outstanding in his field."
    demo = Reply.sse(paced(openai_sse([w + " " for w in words.split()]), 0.1))
    model = model_or_demo(default=demo)
    r = redis.Redis.from_url(REDIS_URL, socket_timeout=10)
    req = Llm.completion_request([Llm.user(prompt)], max_tokens=512)
    sink = RedisStreamSink(r, stream_key(job_id), ttl=3600, beat=BEAT)
    return 0 if Streaming.complete(model, req, sink, timeout=300) is not None else 1


def app(environ: dict[str, Any], start_response: Start) -> Iterable[bytes]:
    """GET / the page; POST /start a job; GET /stream/<id> its events as SSE, resumable."""
    path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "GET")
    if method == "GET" and path == "/":
        start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
        return [PAGE.encode()]
    if method == "POST" and path == "/start":
        size = int(environ.get("CONTENT_LENGTH") or 0)
        form = parse_qs(environ["wsgi.input"].read(size).decode())
        job_id, pid = start_job(form.get("prompt", ["Hello"])[0])
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps({"id": job_id, "pid": pid}).encode()]
    if method == "GET" and path.startswith("/stream/"):
        r = redis.Redis.from_url(REDIS_URL, socket_timeout=10)
        last_id = environ.get("HTTP_LAST_EVENT_ID", "0")  # sent by a reconnecting browser
        events = follow(r, stream_key(path[len("/stream/") :]), last_id=last_id,
                        timeout=600, stale_after=STALE_AFTER)
        start_response(
            "200 OK", [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]
        )
        return sse_lines(events)
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"GET /, POST /start or GET /stream/<id>\n"]


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    """One thread per request: an open SSE response must not block the others."""

    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    """Request lines on stderr only with BLAZEN_RELAY_LOG=1."""

    def log_message(self, format: str, *args: Any) -> None:
        if os.environ.get("BLAZEN_RELAY_LOG") == "1":
            super().log_message(format, *args)


def serve(port: int) -> None:
    with make_server("127.0.0.1", port, app, server_class=ThreadingWSGIServer,
                     handler_class=QuietHandler) as httpd:
        print(f"serving on http://127.0.0.1:{httpd.server_port}", flush=True)
        httpd.serve_forever()


if __name__ == "__main__":
    if sys.argv[1:2] == ["produce"]:
        sys.exit(produce(sys.argv[2], sys.argv[3]))
    serve(int(os.environ.get("BLAZEN_RELAY_PORT", "8000")))
