"""Pull style, every event in one loop: ``chunks.events()`` yields chunk, done and error values.

Each test runs the same story through ``Streaming.stream`` (``for``) and
``Streaming.stream_async`` (``async for``) against a real socket: whatever the server does
and whatever the loop does (cancel, ``break`` and resume, leave), the values are the
chunks in order and then exactly one done or error, never a value after it.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any, Callable, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import blazen
from blazen import ChunkEvent, DoneEvent, ErrorEvent, Llm, Streaming
from blazen.testing import Drop, Pause, Reply, Stall, StreamServer, openai_sse

from .conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])
USAGE = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
FORMS = ["sync", "async"]


def _model(server: StreamServer, **kw: Any) -> blazen.ChatModel:
    return blazen.Providers.openai(
        api_key=KEY_FOR_TESTS, base_url=server.base_url, max_retries=0, **kw
    )


def _worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "blazen-stream"]


def _wait_closed(server: StreamServer, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if server.connections and all(c.closed_at is not None for c in server.connections):
            return True
        time.sleep(0.01)
    return False


def _no_worker_left(timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while _worker_threads() and time.monotonic() < end:
        time.sleep(0.01)
    return not _worker_threads()


#: What the loop body does with each event: return True to break out of the loop.
Body = Callable[[int, Any], bool]


def pull_events(
    form: str,
    model: blazen.ChatModel,
    body: Optional[Body] = None,
    *,
    rounds: int = 1,
    cancel: Optional[blazen.CancelToken] = None,
    timeout: Optional[float] = None,
) -> tuple[list[Any], Any]:
    """Every event the loop saw over ``rounds`` loops of ``events()`` in one block, and the
    stream object (``response`` on it)."""
    seen: list[Any] = []
    body = body or (lambda i, e: False)

    def loop(events: Any) -> None:
        for event in events:
            seen.append(event)
            if body(len(seen), event):
                break

    if form == "sync":
        with Streaming.stream(model, REQ, cancel=cancel, timeout=timeout) as chunks:
            for _ in range(rounds):
                loop(chunks.events())
        return seen, chunks

    async def main() -> Any:
        async with Streaming.stream_async(model, REQ, cancel=cancel, timeout=timeout) as chunks:
            for _ in range(rounds):
                async for event in chunks.events():
                    seen.append(event)
                    if body(len(seen), event):
                        break
        return chunks

    return seen, asyncio.run(main())


def _kinds(events: list[Any]) -> list[str]:
    return [e.kind for e in events]


def _terminals(events: list[Any]) -> int:
    return sum(isinstance(e, (DoneEvent, ErrorEvent)) for e in events)


@pytest.mark.parametrize("form", FORMS)
def test_every_chunk_then_one_done_with_reason_usage_and_response(form, server):
    """A whole stream: the chunks in order, then one done carrying reason, usage and response."""
    server.add(Reply.sse(openai_sse(["Hel", "lo"], usage=USAGE)))
    events, chunks = pull_events(form, _model(server))
    assert _kinds(events) == ["chunk"] * (len(events) - 1) + ["done"]
    text = "".join(e.chunk.content_delta or "" for e in events if isinstance(e, ChunkEvent))
    done = events[-1]
    assert text == "Hello" and events[-2].chunk.is_final
    assert done.finish_reason == "stop" and done.usage.total_tokens == 3
    assert done.response.content == "Hello" and chunks.response is done.response


@pytest.mark.parametrize("form", FORMS)
def test_a_refused_request_is_one_error_value_not_a_raise(form, server):
    """A 401 before any chunk: the loop sees exactly one error value, and nothing raises."""
    server.add(Reply.json({"error": {"message": "bad key"}}, status=401))
    events, chunks = pull_events(form, _model(server))
    assert _kinds(events) == ["error"]
    assert isinstance(events[0].error, blazen.AuthError) and chunks.response is None
    assert KEY_FOR_TESTS not in str(events[0].error)


@pytest.mark.parametrize("form", FORMS)
def test_a_stream_cut_mid_way_is_its_chunks_then_one_error(form, server):
    """The server drops the connection after two chunks: those chunks, then one error."""
    parts = openai_sse(["a", "b", "c"])
    server.add(Reply.sse([*parts[:3], Drop()]))
    events, _ = pull_events(form, _model(server))
    assert _kinds(events)[-1] == "error" and _terminals(events) == 1
    assert isinstance(events[-1].error, blazen.ConnectionError)
    assert events[-1].error.partial == "ab"


@pytest.mark.parametrize("form", FORMS)
def test_a_cancel_mid_stream_ends_in_one_cancelled_error_and_no_chunk_after_it(form, server):
    """Cancelling from the loop body: no chunk after the cancel, one CancelledError, socket closed."""
    parts = openai_sse(["a", "b", "c"])
    server.add(Reply.sse([*parts[:3], Pause(60), *parts[3:]]))
    token = blazen.CancelToken()
    cancelled_at: list[int] = []

    def body(i: int, event: Any) -> bool:
        if isinstance(event, ChunkEvent) and not cancelled_at:
            token.cancel("enough")
            cancelled_at.append(i)
        return False

    events, _ = pull_events(form, _model(server), body, cancel=token)
    assert _kinds(events) == ["chunk", "error"], _kinds(events)
    assert isinstance(events[-1].error, blazen.CancelledError)
    assert "enough" in str(events[-1].error)
    assert _wait_closed(server) and _no_worker_left()


@pytest.mark.parametrize("form", FORMS)
def test_the_total_timeout_is_one_timeout_error_value(form, server):
    """A server that stalls after one chunk: the chunk, then one TimeoutError naming the limit."""
    parts = openai_sse(["a", "b"])
    server.add(Reply.sse([*parts[:2], Stall()]))
    events, _ = pull_events(form, _model(server), timeout=0.5)
    assert _kinds(events) == ["chunk", "error"]
    assert isinstance(events[-1].error, blazen.TimeoutError)
    assert events[-1].error.limit == "total"
    assert _wait_closed(server)


@pytest.mark.parametrize("form", FORMS)
def test_break_then_loop_again_resumes_where_it_left_and_ends_once(form, server):
    """``break`` leaves the stream running until the block ends: a second loop gets the rest."""
    server.add(Reply.sse(openai_sse(list("abcd"))))
    events, chunks = pull_events(form, _model(server), lambda i, e: i == 2, rounds=2)
    text = "".join(e.chunk.content_delta or "" for e in events if isinstance(e, ChunkEvent))
    assert text == "abcd" and _kinds(events)[-1] == "done" and _terminals(events) == 1
    assert chunks.response.content == "abcd"


@pytest.mark.parametrize("form", FORMS)
def test_break_then_leaving_the_block_cancels_and_closes_the_socket(form, server):
    """Leaving the block after ``break``: no more values, the socket closed, no worker left."""
    parts = openai_sse(["a", "b", "c"])
    server.add(Reply.sse([*parts[:2], Pause(60), *parts[2:]]))
    events, chunks = pull_events(form, _model(server), lambda i, e: True)
    assert _kinds(events) == ["chunk"] and chunks.response is None
    assert _wait_closed(server) and _no_worker_left()


@pytest.mark.parametrize("form", FORMS)
def test_after_the_terminal_another_loop_yields_nothing(form, server):
    """The terminal is said once: a second loop over a finished stream is empty."""
    server.add(Reply.sse(openai_sse(["x"])))
    events, _ = pull_events(form, _model(server), rounds=3)
    assert _kinds(events)[-1] == "done" and _terminals(events) == 1


@pytest.mark.parametrize("form", FORMS)
def test_chunks_and_events_share_one_stream(form, server):
    """A chunk loop broken off, then an events loop: the rest of the chunks, then done."""
    server.add(Reply.sse(openai_sse(list("abc"))))
    model = _model(server)
    if form == "sync":
        with Streaming.stream(model, REQ) as chunks:
            first = next(iter(chunks))
            rest = list(chunks.events())
    else:

        async def main() -> tuple[Any, list[Any]]:
            async with Streaming.stream_async(model, REQ) as chunks:
                first = await chunks.__aiter__().__anext__()
                return first, [e async for e in chunks.events()]

        first, rest = asyncio.run(main())
    text = (first.content_delta or "") + "".join(
        e.chunk.content_delta or "" for e in rest if isinstance(e, ChunkEvent)
    )
    assert text == "abc" and _kinds(rest)[-1] == "done" and _terminals(rest) == 1


MATCH = """
def kind_of(event):
    match event:
        case ChunkEvent(c):
            return ("chunk", c)
        case DoneEvent(reason, usage, response):
            return ("done", reason, usage, response)
        case ErrorEvent(e):
            return ("error", e)
"""


def test_event_values_match_by_pattern_and_name_their_kind():
    """The three values are frozen, match positionally, and say their kind as a handler would."""
    chunk = blazen.StreamChunk(content_delta="a")
    err = blazen.AuthError("no")
    resp = blazen.CompletionResponse(content="a", finish_reason="stop")
    events = [ChunkEvent(chunk), DoneEvent("stop", None, resp), ErrorEvent(err)]
    assert [e.kind for e in events] == ["chunk", "done", "error"]
    assert [type(e).__match_args__ for e in events] == [
        ("chunk",),
        ("finish_reason", "usage", "response"),
        ("error",),
    ]
    if sys.version_info >= (3, 10):  # the match statement itself
        scope = {"ChunkEvent": ChunkEvent, "DoneEvent": DoneEvent, "ErrorEvent": ErrorEvent}
        exec(MATCH, scope)
        assert [scope["kind_of"](e) for e in events] == [
            ("chunk", chunk),
            ("done", "stop", None, resp),
            ("error", err),
        ]
    for event in events:
        with pytest.raises(AttributeError):
            event.kind = "other"  # type: ignore[misc]
        with pytest.raises(AttributeError):
            event.__dict__  # noqa: B018 - slotted
    assert events == [ChunkEvent(chunk), DoneEvent("stop", None, resp), ErrorEvent(err)]


# -- any server, any loop -------------------------------------------------------------

ENDINGS = ["done", "drop", "error_event", "stall_then_cancel", "status_500"]


def _reply(n: int, ending: str) -> Reply:
    parts = openai_sse([f"t{i}" for i in range(n)])
    head, tail = parts[: n + 1], parts[n + 1 :]
    if ending == "done":
        return Reply.sse(parts)
    if ending == "drop":
        return Reply.sse([*head, Drop()])
    if ending == "error_event":
        return Reply.sse([*head, b'data: {"error": {"message": "boom", "type": "server_error"}}\n\n'])
    if ending == "stall_then_cancel":
        return Reply.sse([*head, Stall(), *tail])
    return Reply.json({"error": {"message": "down"}}, status=500)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    form=st.sampled_from(FORMS),
    n=st.integers(0, 4),
    ending=st.sampled_from(ENDINGS),
    break_at=st.one_of(st.none(), st.integers(1, 6)),
)
def test_any_ending_and_any_break_give_chunks_then_exactly_one_terminal(form, n, ending, break_at):
    """Whatever the server does and wherever the loop breaks and resumes: the chunks, then one
    terminal, never a value after it, and no worker left behind."""
    token = blazen.CancelToken()
    with StreamServer() as server:
        server.add(_reply(n, ending))
        if ending == "stall_then_cancel":
            threading.Timer(0.3, token.cancel).start()

        def body(i: int, event: Any) -> bool:
            return break_at is not None and i == break_at

        events, chunks = pull_events(form, _model(server), body, rounds=2, cancel=token)
    kinds = _kinds(events)
    assert _terminals(events) == 1 and kinds[-1] in ("done", "error"), kinds
    assert set(kinds[:-1]) <= {"chunk"}
    if kinds[-1] == "done":
        assert ending == "done" and chunks.response is events[-1].response
    else:
        assert ending != "done" and chunks.response is None
    assert _no_worker_left()
