"""A paused turn (Anthropic ``pause_turn``) continues inside one logical stream.

The stream sends the paused content back itself and keeps delivering into the same
callbacks: one terminal, the text of every part, usage summed, at most
``max_continuations`` continuations, ``"paused"`` when it stops continuing.
"""

from __future__ import annotations

from typing import Any

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Recorder, Reply, StreamServer

from .conftest import fixture_bytes, model_for

PAUSE = "pause_turn_web_search.sse"
CONTINUED = "pause_turn_continued.sse"
QUESTION = "What happened in quantum computing in 2025?"


def reply(name: str) -> Reply:
    return Reply.sse(fixture_bytes("anthropic", name))


def request(**kw: Any) -> blazen.CompletionRequest:
    return Llm.completion_request(
        [Llm.user(QUESTION)], tools=[Llm.server_tool("web_search", max_uses=3)], **kw
    )


def run(server: StreamServer, model: blazen.ChatModel, *replies: Reply, **kw: Any) -> Any:
    server.add(*replies)
    rec = Recorder()
    resp = Streaming.complete(model, request(**kw), rec.handler)
    return rec, resp


@pytest.fixture
def model(server):
    return model_for("anthropic", server, max_retries=0)


def test_a_paused_turn_continues_in_the_same_stream_with_one_done(server, model):
    """pause_turn, then the continuation: one done "stop", the text of both, in order."""
    rec, resp = run(server, model, reply(PAUSE), reply(CONTINUED))
    assert rec.kinds.count("done") == 1 and rec.terminals == 1
    assert rec.done[0] == "stop" and resp.raw_finish_reason == "end_turn"
    assert resp.content == (
        "I'll search for recent breakthroughs."
        "IBM unveiled a 1,000-qubit processor in April. Error correction also crossed the "
        "threshold."
    )
    assert rec.text == resp.content
    assert [c.is_final for c in rec.chunks].count(True) == 1 and rec.chunks[-1].is_final
    assert len(server.requests) == 2


def test_usage_is_summed_over_the_continuations(server, model):
    """Each message's counts, added: the first's 2679 in and 120 out, the second's too."""
    rec, resp = run(server, model, reply(PAUSE), reply(CONTINUED))
    u = resp.usage
    assert (u.prompt_tokens, u.completion_tokens) == (2679 + 4120 + 2679, 120 + 85)
    assert u.cached_tokens == 2679
    assert rec.done[1] == u


def test_the_continuation_sends_the_paused_content_back_as_the_last_turn(server, model):
    """The second request is the first with the paused blocks, verbatim, as an assistant turn."""
    run(server, model, reply(PAUSE), reply(CONTINUED))
    first, second = (r.json() for r in server.requests)
    assert second["tools"] == first["tools"]
    assert second["messages"][0] == first["messages"][0]
    (turn,) = second["messages"][1:]
    assert turn["role"] == "assistant"
    assert [b["type"] for b in turn["content"]] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
    ]
    assert turn["content"][1]["input"] == {"query": "quantum computing breakthroughs 2025"}


def test_the_whole_turn_goes_back_on_the_next_turn_and_citations_are_kept(server, model):
    """resp.message holds every block of every message; the citation of the second is there."""
    _rec, resp = run(server, model, reply(PAUSE), reply(CONTINUED))
    (item,) = resp.provider_items
    assert [b["type"] for b in item.data] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "text",
        "text",
    ]
    (cite,) = resp.citations
    supported = resp.content[cite.text_start : cite.text_end]
    assert supported == "IBM unveiled a 1,000-qubit processor in April."
    assert resp.id == "msg_01PauseSearch7"


def test_each_continuation_sends_all_the_content_so_far_once(server):
    """A second pause: the third request holds the first two messages' blocks, none twice."""
    model = model_for("anthropic", server, max_retries=0)
    run(server, model, reply(PAUSE), reply(PAUSE), reply(CONTINUED))
    third = server.requests[2].json()
    (turn,) = third["messages"][1:]
    once = server.requests[1].json()["messages"][1]["content"]
    assert turn["content"] == once * 2


@pytest.mark.parametrize(
    ("model_cap", "request_cap", "requests"), [(2, None, 3), (5, 1, 2), (0, None, 1)]
)
def test_the_cap_ends_the_stream_paused(server, model_cap, request_cap, requests):
    """At max_continuations (the model's, lowered by the request's) done says "paused"."""
    model = model_for("anthropic", server, max_retries=0, max_continuations=model_cap)
    replies = [reply(PAUSE) for _ in range(4)]
    rec, resp = run(server, model, *replies, max_continuations=request_cap)
    assert rec.done[0] == "paused" and resp.raw_finish_reason == "pause_turn"
    assert len(server.requests) == requests
    assert resp.usage.completion_tokens == 120 * requests


def test_a_request_cannot_raise_the_models_cap(server):
    """A request's max_continuations above the model's still stops at the model's."""
    model = model_for("anthropic", server, max_retries=0, max_continuations=1)
    rec, _resp = run(server, model, *[reply(PAUSE) for _ in range(4)], max_continuations=3)
    assert rec.done[0] == "paused" and len(server.requests) == 2


PAUSED_BODY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-opus-4-8",
    "content": [
        {"type": "text", "text": "Searching. "},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": "x"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
    ],
    "stop_reason": "pause_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}
DONE_BODY = {
    "id": "msg_2",
    "type": "message",
    "role": "assistant",
    "model": "claude-opus-4-8",
    "content": [
        {
            "type": "text",
            "text": "Found it.",
            "citations": [
                {
                    "type": "web_search_result_location",
                    "cited_text": "it",
                    "url": "https://example.com",
                    "title": "Example",
                    "encrypted_index": "Eo8",
                }
            ],
        }
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 30, "output_tokens": 4},
}


def test_a_non_streamed_paused_turn_continues_and_joins_into_one_response(server, model):
    """model.complete(): the continuation's answer joined to the paused one, usage added."""
    server.add(Reply.json(PAUSED_BODY), Reply.json(DONE_BODY))
    resp = model.complete(request())
    assert resp.content == "Searching. Found it." and resp.finish_reason == "stop"
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (40, 9)
    assert resp.id == "msg_1"
    (cite,) = resp.citations
    assert resp.content[cite.text_start : cite.text_end] == "Found it."
    (item,) = resp.provider_items
    assert [b["type"] for b in item.data] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    second = server.requests[1].json()
    assert second["messages"][1]["content"] == PAUSED_BODY["content"]
    assert "stream" not in second


def test_a_non_streamed_paused_turn_past_the_cap_is_reported_paused(server):
    """With max_continuations=0 model.complete() reports "paused", the content verbatim."""
    model = model_for("anthropic", server, max_retries=0, max_continuations=0)
    server.add(Reply.json(PAUSED_BODY))
    resp = model.complete(request())
    assert resp.finish_reason == "paused" and len(server.requests) == 1
    assert resp.provider_items[0].data == PAUSED_BODY["content"]
