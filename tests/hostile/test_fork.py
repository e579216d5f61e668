"""Processes never share a socket: after a fork, parent and child each use their own.

Celery's prefork pool, gunicorn and ``multiprocessing`` fork a process that has already
streamed: its model holds a pooled keep-alive connection. Two processes writing requests on
one connection interleave them; the child must start with an empty pool instead.
"""

from __future__ import annotations

import multiprocessing
import os

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Reply, StreamServer, openai_sse

from ..conftest import KEY_FOR_TESTS

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"),
    # The loopback server runs in threads of this process; forking it is what is tested.
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]

REQ = Llm.completion_request([Llm.user("hi")])
_MODEL: blazen.ChatModel | None = None


def _model(server: StreamServer) -> blazen.ChatModel:
    return blazen.Providers.openai_compat(
        "test", server.base_url, api_key=KEY_FOR_TESTS, max_retries=0
    )


def test_a_forked_child_opens_its_own_connection_and_the_parent_keeps_its_own():
    with StreamServer([], default=Reply.sse(openai_sse(["hi"]))) as server:
        model = _model(server)
        assert Streaming.complete(model, REQ).content == "hi"  # a pooled connection now
        pid = os.fork()
        if pid == 0:  # the child: exit without running the parent's clean-up
            try:
                resp = Streaming.complete(model, REQ, timeout=10)
                os._exit(0 if resp is not None and resp.content == "hi" else 1)
            except BaseException:
                os._exit(2)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert Streaming.complete(model, REQ, timeout=10).content == "hi"
        assert len(server.requests) == 3
        # The parent's two requests shared its connection; the child's came on its own.
        assert sorted(c.requests for c in server.connections) == [1, 2]


def _stream_in_worker(_: int) -> str:
    assert _MODEL is not None
    resp = Streaming.complete(_MODEL, REQ, timeout=10)
    return resp.content if resp is not None else ""


def test_multiprocessing_fork_workers_each_use_their_own_connections():
    global _MODEL
    with StreamServer([], default=Reply.sse(openai_sse(["hi"]))) as server:
        _MODEL = _model(server)
        try:
            assert Streaming.complete(_MODEL, REQ).content == "hi"
            with multiprocessing.get_context("fork").Pool(2) as pool:
                assert pool.map(_stream_in_worker, range(6)) == ["hi"] * 6
            assert Streaming.complete(_MODEL, REQ).content == "hi"
        finally:
            _MODEL = None
        # The parent's first connection carried the parent's two requests and no other.
        first = min(server.connections, key=lambda c: c.opened_at)
        assert first.requests == 2
        assert sum(c.requests for c in server.connections) == 8
