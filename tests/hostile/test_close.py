"""Closing means closed: every pooled socket ends when its model (or blazen) is shut down.

A long-lived worker calls ``blazen.shutdown()`` or ``model.close()`` and expects the
provider to see its connections end, even while it still holds errors (with their
tracebacks) from those models.
"""

from __future__ import annotations

import blazen
from blazen import Llm, Streaming
from blazen.testing import Recorder, Reply, StreamServer

from ..conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])
ERROR = Reply.json({"error": {"message": "try later"}}, status=500)


def _model(base_url: str) -> blazen.ChatModel:
    return blazen.Providers.openai_compat("test", base_url, api_key=KEY_FOR_TESTS, max_retries=0)


def test_shutdown_closes_pooled_sockets_while_errors_from_them_are_still_held():
    with StreamServer([], default=ERROR) as server:
        model = _model(server.base_url)
        kept = []
        for _ in range(3):
            rec = Recorder()
            Streaming.complete(model, REQ, rec.handler)
            kept.append(rec.error)  # tracebacks and all
        assert any(c.closed_at is None for c in server.connections)  # pooled, kept alive
        blazen.shutdown()
        assert server.wait_closed(2.0)
        assert all(c.closed_by == "client" for c in server.connections)
        assert all(isinstance(e, blazen.ProviderError) for e in kept)


def test_model_close_closes_its_pooled_sockets_and_the_model_still_works_after():
    with StreamServer([], default=ERROR) as server:
        model = _model(server.base_url)
        Streaming.complete(model, REQ, on_error=lambda e: None)
        model.close()
        assert server.wait_closed(2.0)
        rec = Recorder()
        Streaming.complete(model, REQ, rec.handler)  # reconnects
        assert isinstance(rec.error, blazen.ProviderError)
        assert len(server.connections) == 2
