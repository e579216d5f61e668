"""Gemini's ``CONTINUATION``: an answer cut at the per-request token limit goes on.

Gemini ends such an answer with ``finishReason: CONTINUATION`` and a ``continuationToken``;
the same request again with ``continuationToken`` goes on where it stopped (the
google-genai package does so by default). blazen continues it as it continues Claude's
``pause_turn``: one logical stream, one terminal, the text of both, usage summed, at most
``max_continuations`` continuations, else ``"paused"`` with the token kept on
``resp.message``. The fixtures are written from the google-genai package's types
(``Candidate.continuation_token``, ``GenerateContentConfig.continuation_token``).
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

import blazen
from blazen import Agent, Llm, Streaming
from blazen.testing import Recorder, Reply, StreamServer, split_bytes

from .conftest import fixture_bytes, model_for

genai = pytest.importorskip("google.genai")
types = pytest.importorskip("google.genai.types")

FIRST = "continuation_token.sse"
SECOND = "continuation_continued.sse"
TOKEN = "Q2hBSXhyUWVFZ3dJQUJBSWlvNnFvQU1ZQVE9PQ=="
ANSWER = (
    "Chapter one. The harbour was still at dawn, and the boats lay in rows."
    " Chapter two. By noon the fleet had gone."
)
PROMPT = "Write a long story about a harbour."


def reply(name: str, *, split: bool = False) -> Reply:
    blob = fixture_bytes("gemini", name)
    return Reply.sse(split_bytes(blob, range(1, len(blob))) if split else blob)


def request(**kw: Any) -> blazen.CompletionRequest:
    return Llm.completion_request([Llm.user(PROMPT)], model="gemini-3-pro-preview", **kw)


def run(server: StreamServer, model: blazen.ChatModel, *replies: Reply, **kw: Any) -> Any:
    server.add(*replies)
    rec = Recorder()
    resp = Streaming.complete(model, request(**kw), rec.handler)
    return rec, resp


@pytest.fixture
def model(server):
    return model_for("gemini", server, max_retries=0)


@pytest.mark.parametrize("split", [False, True], ids=["whole", "byte-by-byte"])
def test_a_continuation_goes_on_in_the_same_stream_with_one_done(server, model, split):
    """CONTINUATION, then the continued answer: one done "stop", all the text, in order."""
    rec, resp = run(server, model, reply(FIRST, split=split), reply(SECOND, split=split))
    assert rec.terminals == 1 and rec.done[0] == "stop"
    assert rec.text == resp.content == ANSWER
    assert resp.raw_finish_reason == "STOP" and resp.provider_items == ()
    assert len(server.requests) == 2


def test_usage_is_summed_over_the_requests(server, model):
    """Each request's last usageMetadata (its own running total), added."""
    _rec, resp = run(server, model, reply(FIRST), reply(SECOND))
    usage = resp.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (48, 30, 78)


def test_the_continuation_is_the_same_request_with_the_token(server, model):
    """The second body is the first, contents unchanged, with continuationToken beside."""
    run(server, model, reply(FIRST), reply(SECOND))
    first, second = (r.json() for r in server.requests)
    assert second == {**first, "continuationToken": TOKEN}
    assert [c["role"] for c in second["contents"]] == ["user"]


def test_past_the_cap_it_is_paused_and_appending_the_turn_continues_it(server):
    """max_continuations=0: "paused", the token on resp.message; sent last, it goes on."""
    model = model_for("gemini", server, max_retries=0, max_continuations=0)
    rec, paused = run(server, model, reply(FIRST))
    assert rec.done[0] == "paused" and paused.raw_finish_reason == "CONTINUATION"
    (item,) = paused.provider_items
    assert (item.provider, item.kind, item.data) == (
        "gemini",
        "continuation",
        {"continuationToken": TOKEN},
    )
    nxt = Llm.completion_request([Llm.user(PROMPT), paused.message])
    body = model.wire.body(nxt)
    assert body["continuationToken"] == TOKEN
    assert body["contents"] == [{"role": "user", "parts": [{"text": PROMPT}]}]
    # Earlier in a conversation the turn is history, and its token means nothing.
    later = Llm.completion_request([Llm.user(PROMPT), paused.message, Llm.user("Go on.")])
    assert "continuationToken" not in model.wire.body(later)


def test_a_turn_that_continues_forever_is_stopped_by_the_cap(server):
    """Every answer ends CONTINUATION: the model's cap ends it "paused", once."""
    model = model_for("gemini", server, max_retries=0, max_continuations=2)
    rec, resp = run(server, model, reply(FIRST), reply(FIRST), reply(FIRST))
    assert rec.terminals == 1 and rec.done[0] == "paused" and len(server.requests) == 3
    assert resp.usage.completion_tokens == 3 * 18


@pytest.mark.parametrize("status", [429, 500])
def test_a_continuation_refused_by_status_is_one_error_with_the_usage_so_far(server, status):
    """The second request fails: one error, never retried (text was delivered), usage kept."""
    model = model_for("gemini", server, max_retries=2)
    server.add(
        reply(FIRST), Reply.json({"error": {"code": status, "message": "no"}}, status=status)
    )
    rec = Recorder()
    Streaming.complete(model, request(), rec.handler)
    assert rec.terminals == 1 and rec.kinds[-1] == "error" and len(server.requests) == 2
    assert (
        rec.error.partial
        == "Chapter one. The harbour was still at dawn, and the boats lay in rows."
    )
    assert rec.error.usage.completion_tokens == 18 and not rec.error.usage.estimated


def _gemini_body(text: str, finish: str, tokens: int, token: str = "") -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"parts": [{"text": text}], "role": "model"},
        "finishReason": finish,
    }
    if token:
        candidate["continuationToken"] = token
    return {
        "candidates": [candidate],
        "usageMetadata": {
            "promptTokenCount": 24,
            "candidatesTokenCount": tokens,
            "totalTokenCount": 24 + tokens,
        },
    }


def test_a_non_streamed_continuation_joins_into_one_response(server, model):
    """model.complete(): the answers joined, usage added, no spent token left on the turn."""
    server.add(
        Reply.json(_gemini_body("Part one.", "CONTINUATION", 3, TOKEN)),
        Reply.json(_gemini_body(" Part two.", "STOP", 3)),
    )
    resp = model.complete(request())
    assert resp.content == "Part one. Part two." and resp.finish_reason == "stop"
    assert resp.usage.completion_tokens == 6 and resp.provider_items == ()
    assert server.requests[1].json()["continuationToken"] == TOKEN


# -- the official google-genai package on the same bytes ---------------------------------


def test_google_genai_continues_the_same_bytes_with_the_same_request_and_result(server, model):
    """The SDK's automatic continuation sends blazen's second body and reads the same."""
    with StreamServer([reply(FIRST), reply(SECOND)]) as sdk_server:
        client = genai.Client(
            api_key="k",
            http_options=types.HttpOptions(base_url=sdk_server.url, api_version="v1beta"),
        )
        try:
            chunks = list(
                client.models.generate_content_stream(model="gemini-3-pro-preview", contents=PROMPT)
            )
        finally:
            client.close()
        sdk_second = sdk_server.requests[1].json()
    _rec, resp = run(server, model, reply(FIRST), reply(SECOND))
    ours = server.requests[1].json()
    assert ours["continuationToken"] == sdk_second["continuationToken"] == TOKEN
    assert base64.b64decode(TOKEN)  # the bytes field travels as base64, sent back as it came
    assert ours["contents"] == sdk_second["contents"]
    assert resp.content == "".join(c.text or "" for c in chunks)
    finishes = [c.candidates[0].finish_reason for c in chunks if c.candidates[0].finish_reason]
    assert [f.value for f in finishes] == ["STOP"]  # the SDK hides the intermediate one too
    last = [c.usage_metadata for c in chunks if c.usage_metadata][-1]
    assert resp.usage.prompt_tokens == last.prompt_token_count
    assert resp.usage.completion_tokens == last.candidates_token_count


# -- agents ----------------------------------------------------------------------------


def _agent_run(agent: Agent, mode: str) -> blazen.AgentResult:
    if mode == "sync":
        return agent.run(PROMPT)
    return asyncio.run(agent.run_async(PROMPT))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_agent_turn_continues_inside_the_stream_by_default(server, mode):
    """The default max_continuations continues it in the stream: one turn of the run."""
    model = model_for("gemini", server, max_retries=0)
    server.add(reply(FIRST), reply(SECOND))
    result = _agent_run(Agent(model), mode)
    assert result.iterations == 1 and result.finish_reason == "stop"
    assert result.text == ANSWER and len(server.requests) == 2


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_agent_continues_a_paused_answer_with_its_next_turn(server, mode):
    """Continuing off in the stream: the run's next turn sends the token, not the turn."""
    model = model_for("gemini", server, max_retries=0, max_continuations=0)
    server.add(reply(FIRST), reply(SECOND))
    result = _agent_run(Agent(model), mode)
    assert result.iterations == 2 and result.finish_reason == "stop"
    first, second = (r.json() for r in server.requests)
    assert second == {**first, "continuationToken": TOKEN}
