"""``err.usage``: every error and cancel carries the usage reported (or estimated) so far.

Each wire's real fixture is cut after a few events and then dropped, stalled into the idle
limit, or cancelled from the chunk callback; the error's usage must be the last figures the
provider sent (Anthropic's ``message_start``, Gemini's ``usageMetadata`` on each chunk) with
``partial`` set, or, where it sent none yet (OpenAI's usage chunk comes last, Ollama's
counts come with ``done``), an estimate from the text with ``estimated`` set too.
"""

from __future__ import annotations

import socket
from typing import Any, Callable

import pytest

import blazen
from blazen import CancelToken, Llm, Providers, Streaming
from blazen.testing import Drop, Recorder, Reply, Stall, StreamServer

from .conftest import fixture_bytes, model_for

REQ = Llm.completion_request([Llm.user("Tell me a joke about a scarecrow, please.")])


def _sse_prefix(provider: str, events: int) -> bytes:
    raw = fixture_bytes(provider, "text.sse").replace(b"\r\n", b"\n")
    return b"\n\n".join(raw.split(b"\n\n")[:events]) + b"\n\n"


def _ndjson_prefix(lines: int) -> bytes:
    return b"".join(fixture_bytes("ollama", "text.ndjson").splitlines(True)[:lines])


def _reply(wire: str, end: Any) -> Reply:
    if wire == "ollama":
        return Reply(
            headers={"Content-Type": "application/x-ndjson"}, body=[_ndjson_prefix(3), end]
        )
    events = {"anthropic": 4, "gemini": 2, "openai": 3, "responses": 6}[wire]
    return Reply.sse([_sse_prefix(wire, events), end])


#: What each wire's usage must be after its cut: reported figures, or None for an estimate.
REPORTED: dict[str, Callable[[blazen.TokenUsage], bool] | None] = {
    "anthropic": lambda u: (u.prompt_tokens, u.completion_tokens) == (14, 1),
    "gemini": lambda u: (u.prompt_tokens, u.completion_tokens) == (9, 11),
    "openai": None,
    "ollama": None,
    # The Responses API reports usage only on response.completed.
    "responses": None,
}


def _check(wire: str, err: blazen.BlazenError) -> None:
    usage = err.usage
    assert usage is not None and usage.partial
    reported = REPORTED[wire]
    if reported is not None:
        assert reported(usage) and not usage.estimated, usage
    else:
        assert usage.estimated, usage
        # About four characters a token, of what was received and of what was asked.
        assert usage.completion_tokens == -(-len(err.partial) // 4) > 0
        assert usage.prompt_tokens == -(-len(REQ.messages[0].content) // 4)
    assert usage.provider == ("openai" if wire == "responses" else wire)


@pytest.mark.parametrize("wire", list(REPORTED))
def test_a_dropped_connection_carries_the_usage_so_far(wire):
    """Some chunks, then the connection closes: the ConnectionError's usage is partial."""
    with StreamServer([_reply(wire, Drop())]) as server:
        rec = Recorder()
        Streaming.complete(model_for(wire, server, max_retries=0), REQ, rec.handler)
    assert isinstance(rec.error, blazen.ConnectionError) and rec.error.partial
    _check(wire, rec.error)


@pytest.mark.parametrize("wire", list(REPORTED))
def test_the_idle_timeout_carries_the_usage_so_far(wire):
    """Some chunks, then silence past idle_timeout: the TimeoutError's usage is partial."""
    with StreamServer([_reply(wire, Stall())]) as server:
        rec = Recorder()
        model = model_for(wire, server, max_retries=0, idle_timeout=0.5)
        Streaming.complete(model, REQ, rec.handler)
    assert isinstance(rec.error, blazen.TimeoutError)
    _check(wire, rec.error)


@pytest.mark.parametrize("wire", list(REPORTED))
def test_a_cancel_carries_the_usage_so_far(wire):
    """Cancelled once the chunks have come: the CancelledError's usage is partial."""
    token = CancelToken()
    text: list[str] = []

    def on_chunk(chunk: blazen.StreamChunk) -> None:
        text.append(chunk.content_delta or "")
        if "".join(text):  # the first text has been shown
            token.cancel()

    with StreamServer([_reply(wire, Stall())]) as server:
        errors: list[blazen.BlazenError] = []
        model = model_for(wire, server, max_retries=0)
        Streaming.complete(model, REQ, on_chunk=on_chunk, on_error=errors.append, cancel=token)
    (err,) = errors
    assert isinstance(err, blazen.CancelledError)
    _check(wire, err)


def test_nothing_sent_means_no_usage():
    """A refused connection never reached the provider: ``err.usage`` is None."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = Providers.openai(api_key="k", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(blazen.ConnectionError) as info:
        Streaming.complete(model, REQ)
    assert info.value.usage is None


def test_done_keeps_the_providers_own_figures():
    """A stream that ends well: its usage is neither partial nor estimated."""
    with StreamServer([Reply.sse(fixture_bytes("anthropic", "text.sse"))]) as server:
        resp = Streaming.complete(model_for("anthropic", server), REQ)
    assert (resp.usage.completion_tokens, resp.usage.partial, resp.usage.estimated) == (
        17,
        False,
        False,
    )


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
def test_err_usage_travels_through_the_event_codec(wire: str, tmp_path) -> None:
    """A transcript's error event carries err.usage, read back with its counts and flags."""
    from blazen.sinks import JsonlSink, read_jsonl, tee

    path = tmp_path / "t.jsonl"
    with StreamServer([_reply(wire, Drop())]) as server:
        rec = Recorder()
        Streaming.complete(model_for(wire, server, max_retries=0), REQ, tee(JsonlSink(path), rec))
    sent = rec.error
    assert sent is not None and sent.usage is not None
    (kind, (err,)) = list(read_jsonl(path))[-1]
    assert kind == "error" and err.usage == sent.usage
    assert (err.usage.partial, err.usage.estimated) == (sent.usage.partial, sent.usage.estimated)
