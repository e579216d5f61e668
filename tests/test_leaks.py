"""No leaks: after complete() returns by any path its thread is gone and its socket released."""

from __future__ import annotations

import os
import threading
import time

import pytest

import blazen
from blazen import Streaming
from blazen.testing import Drop, Pause, Recorder, Reply, Stall, StreamServer, openai_sse, sse_event

from .conftest import fixture_bytes, thread_count


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_300_streams_ending_every_way_leave_no_thread_or_socket_behind(req, monkeypatch):
    """Success, error, cancel, timeout, callback raise, truncation and drops, 100 times over."""
    monkeypatch.setattr("blazen._http.retry.BASE_DELAY", 0.001)
    text = fixture_bytes("openai", "text.sse")
    first = openai_sse(["x"])[:2]
    paths = [
        ("done", Reply.sse(text)),
        ("http_error", Reply.json({"error": {"message": "bad"}}, status=400)),
        ("in_stream_error", Reply.sse([first[1], sse_event({"error": {"message": "x"}})])),
        ("cancel", Reply.sse([*first, Stall()])),
        ("idle_timeout", Reply.sse([*first, Stall()])),
        ("total_timeout", Reply.sse([*first, Pause(0.02)] * 50)),
        ("callback_raise", Reply.sse([*first, Pause(0.5), *first])),
        ("truncated", Reply.sse(first, transfer="close")),
        ("dropped", Reply.sse([*first, b"data: {", Drop()])),
        ("keepalive_only", Reply.sse([b": ka\n\n", Pause(0.01)] * 100)),
    ]
    threads_before = thread_count()
    with StreamServer() as server:
        fds_before = open_fds()
        model = blazen.Providers.openai_compat(
            "test", server.base_url, idle_timeout=0.15, max_retries=0, max_connections=4
        )
        outcomes: dict[str, int] = {}
        for i in range(300):
            name, reply = paths[i % len(paths)]
            server.add(reply)
            rec = Recorder()
            kw: dict = {}
            if name == "cancel":
                token = blazen.CancelToken()
                kw["cancel"] = token
                kw["on_chunk"] = lambda c, t=token: t.cancel()
            elif name == "total_timeout":
                kw["timeout"] = 0.1
            elif name == "callback_raise":
                kw["on_chunk"] = lambda c: 1 / 0
            Streaming.complete(model, req, rec.handler, **kw)
            assert rec.terminals == 1, name
            outcomes[rec.kinds[-1]] = outcomes.get(rec.kinds[-1], 0) + 1
            # The stream's worker thread has ended by the time complete() returns.
            assert not [t for t in threading.enumerate() if t.name == "blazen-stream"], name
        assert outcomes == {"done": 30, "error": 270}
        # Only pooled keep-alive connections may remain, never more than the pool holds.
        time.sleep(0.1)
        assert server.open_connections() <= 4
        assert open_fds() <= fds_before + 4
        model.close()
        assert server.wait_closed(2.0)
        assert open_fds() <= fds_before
    deadline = time.monotonic() + 2
    while thread_count() > threads_before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert thread_count() == threads_before


def test_with_model_closes_its_pooled_connections_on_the_way_out(req):
    """``with model:`` (Kotlin's ``model.use``) closes the pooled sockets, by error or not."""
    with StreamServer() as server:
        fds_before = open_fds()
        with blazen.Providers.openai_compat("test", server.base_url) as model:
            server.add(Reply.sse(openai_sse(["Hi"])), Reply.sse(openai_sse(["Hi"])))
            assert Streaming.complete(model, req).content == "Hi"
            assert Streaming.complete(model, req).content == "Hi"
            # The keep-alive connection stays pooled while the model is in use.
            assert server.open_connections() == 1
        assert server.wait_closed(2.0)
        assert [c.closed_by for c in server.connections] == ["client"]
        assert open_fds() <= fds_before
        # The exception goes on out, and the connection is closed on the way.
        model = blazen.Providers.openai_compat("test", server.base_url)
        with pytest.raises(KeyError, match="inside"), model:
            server.add(Reply.sse(openai_sse(["Hi"])))
            Streaming.complete(model, req)
            raise KeyError("inside")
        assert server.wait_closed(2.0) and len(server.connections) == 2
        assert open_fds() <= fds_before
