"""The request algorithm runs without a thread: a test drives it and reads what it posts.

``Exchange.run`` is called here on the test's own thread with ``list.append`` as ``post``,
against a real local server; what it posts is what a worker thread would hand the caller.
"""

from __future__ import annotations

import blazen
from blazen import Llm
from blazen._http import Abort
from blazen._stream.events import PROGRESS, Chunks, Done, Failed
from blazen._stream.exchange import Exchange
from blazen.testing import Drop, Reply, StreamServer, openai_sse, sse_event

from .conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])


def _model(server: StreamServer, **options) -> blazen.ChatModel:
    return blazen.Providers.openai_compat(
        "test", server.url, api_key=KEY_FOR_TESTS, **{"max_retries": 0, **options}
    )


def _run(server: StreamServer, **options) -> list[object]:
    posted: list[object] = []
    Exchange(_model(server, **options), REQ, posted.append, Abort()).run()
    return posted


def test_one_read_of_several_events_is_posted_as_one_batch_with_the_final_chunk():
    """Every event of a stream in one write: one Chunks (the final chunk in it), then Done."""
    with StreamServer([Reply.sse([b"".join(openai_sse(["a", "b", "c"]))])]) as server:
        posted = _run(server)
    assert [type(p) for p in posted] == [Chunks, Done]
    chunks = posted[0].chunks
    assert [c.content_delta for c in chunks] == ["a", "b", "c", None]
    assert chunks[-1].is_final and posted[1].response.content == "abc"


def test_each_read_is_its_own_batch():
    """Events in three writes: at most one Chunks per read, none empty, all in order.

    (Two writes may still arrive in one read on a loaded machine: then they are one batch.)
    """
    from blazen.testing import Pause

    events = openai_sse(["a", "b"])
    body = [events[0] + events[1], Pause(0.05), events[2], Pause(0.05), *events[3:]]
    with StreamServer([Reply.sse(body)]) as server:
        posted = _run(server)
    batches = [[c.content_delta for c in p.chunks] for p in posted if isinstance(p, Chunks)]
    assert [d for b in batches for d in b] == ["a", "b", None]
    assert all(batches) and 1 <= len(batches) <= 3
    assert isinstance(posted[-1], Done)


def test_a_retry_before_any_chunk_posts_progress_then_the_answer():
    """A 500 first: PROGRESS, then the second attempt's chunks and Done."""
    replies = [
        Reply.json({"error": {"message": "busy"}}, status=500, headers={"retry-after-ms": "1"}),
        Reply.sse(openai_sse(["ok"])),
    ]
    with StreamServer(replies) as server:
        posted = _run(server, max_retries=1)
    assert posted[0] is PROGRESS and isinstance(posted[-1], Done)
    assert posted[-1].response.content == "ok"


def test_a_cut_stream_posts_its_chunks_then_one_failure_with_the_partial_text():
    """The body ends before [DONE]: the chunks read, then Failed(ConnectionError)."""
    body = [sse_event({"choices": [{"index": 0, "delta": {"content": "half"}}]}), Drop()]
    with StreamServer([Reply.sse(body)]) as server:
        posted = _run(server)
    assert [type(p) for p in posted] == [Chunks, Failed]
    err = posted[-1].error
    assert isinstance(err, blazen.ConnectionError) and err.partial == "half"


def test_an_aborted_exchange_posts_nothing():
    """Aborted before it ran (a task cancelled at once): nothing is sent, nothing posted."""
    with StreamServer([Reply.sse(openai_sse(["x"]))]) as server:
        posted: list[object] = []
        abort = Abort()
        abort.abort()
        Exchange(_model(server), REQ, posted.append, abort).run()
        assert posted == [] and server.requests == []
