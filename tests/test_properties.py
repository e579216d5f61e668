"""Properties over real sockets: TCP write boundaries never change the result, and a
connection cut at any byte always ends in exactly one terminal event."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import blazen
from blazen import Streaming
from blazen.testing import Drop, Recorder, Reply, StreamServer, split_bytes

from .conftest import fixture_bytes

FIXTURES = [
    "text.sse",
    "parallel_tool_calls.sse",
    "utf8.sse",
    "crlf.sse",
    "keepalive_comments.sse",
    "refusal_after_content.sse",
    "three_choices_tool_calls.sse",
]
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def shared_server():
    with StreamServer() as srv:
        yield srv


def outcome(rec: Recorder, resp):
    calls = [(c.id, c.name, c.arguments_json) for c in (resp.tool_calls if resp else ())]
    return (
        rec.kinds[-1],
        rec.text,
        calls,
        resp.finish_reason if resp else None,
        resp.usage if resp else None,
        [c.refusal_delta for c in rec.chunks],
    )


@pytest.mark.parametrize("name", FIXTURES)
@SETTINGS
@given(data=st.data())
def test_random_tcp_splits_give_the_identical_result(shared_server, req, name, data):
    """However the bytes are cut into writes, the callbacks and the response are the same."""
    blob = fixture_bytes("openai", name)
    cuts = data.draw(st.lists(st.integers(1, len(blob) - 1), max_size=12))
    model = blazen.Providers.openai_compat("test", shared_server.base_url)
    shared_server.add(Reply.sse(blob))
    whole_rec = Recorder()
    whole = Streaming.complete(model, req, whole_rec.handler)
    shared_server.add(Reply.sse(split_bytes(blob, cuts)))
    split_rec = Recorder()
    split = Streaming.complete(model, req, split_rec.handler)
    assert outcome(split_rec, split) == outcome(whole_rec, whole)
    assert whole_rec.kinds[-1] == "done"


@pytest.mark.parametrize("transfer", ["chunked", "close"])
@SETTINGS
@given(data=st.data())
def test_a_connection_cut_at_any_byte_ends_in_exactly_one_terminal(
    shared_server, req, transfer, data
):
    """Cut anywhere before the end: chunks, then exactly one error (never a done, never two)."""
    blob = fixture_bytes("openai", "parallel_tool_calls.sse")
    cut = data.draw(st.integers(0, len(blob) - len(b"data: [DONE]\n\n")))
    model = blazen.Providers.openai_compat("test", shared_server.base_url, max_retries=0)
    shared_server.add(Reply.sse([blob[:cut], Drop()] if cut else [Drop()], transfer=transfer))
    rec = Recorder()
    Streaming.complete(model, req, rec.handler)
    assert rec.terminals == 1
    assert rec.kinds[-1] == "error" and set(rec.kinds[:-1]) <= {"chunk"}
    assert isinstance(rec.error, (blazen.ConnectionError, blazen.ProviderError))
