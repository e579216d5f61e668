"""Claude's endings, told truly: pause_turn, server tools, citations, stop details, effort.

Fixtures are written from the Messages API references (streaming, server tools, citations,
adaptive thinking) and replayed over a real socket, whole and one byte per write; the
official ``anthropic`` package reads the same bytes and sends the same request bodies.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

import anthropic
import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Recorder, Reply, StreamServer, split_bytes

from .conftest import FIXTURES, fixture_bytes, model_for, sse_reply

NEW_FIXTURES = [
    "pause_turn_web_search.sse",
    "pause_turn_continued.sse",
    "citations_documents.sse",
    "adaptive_thinking_omitted.sse",
    "context_window_exceeded.sse",
    "code_execution_container.sse",
    "refusal.sse",
    "output_format_thinking.sse",
]
QUESTION = "What happened in quantum computing in 2025?"


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
    return model_for("anthropic", server, max_retries=0, max_continuations=0)


def _summary(resp: blazen.CompletionResponse) -> tuple[Any, ...]:
    return (
        resp.content,
        resp.reasoning,
        resp.tool_calls,
        resp.finish_reason,
        resp.raw_finish_reason,
        resp.usage,
        resp.citations,
        resp.stop_details,
        resp.provider_items,
        resp.reasoning_parts,
    )


@pytest.mark.parametrize("name", NEW_FIXTURES)
def test_each_fixture_reads_the_same_whole_and_one_byte_per_write(server, model, name):
    """Every field of the response is the same whether the body comes whole or byte by byte."""
    blob = fixture_bytes("anthropic", name)
    _rec, whole = run(server, model, Reply.sse(blob))
    rec, split = run(server, model, Reply.sse(split_bytes(blob, range(1, len(blob)))))
    assert rec.terminals == 1 and rec.kinds[-1] == "done"
    assert _summary(whole) == _summary(split)


def test_a_paused_turn_with_continuing_off_is_paused_never_stop(server, model):
    """pause_turn with max_continuations=0: done("paused"), the raw word kept."""
    rec, resp = run(server, model, sse_reply("pause_turn_web_search.sse", "anthropic"))
    assert rec.done[0] == "paused"
    assert (resp.finish_reason, resp.raw_finish_reason) == ("paused", "pause_turn")
    assert resp.content == "I'll search for recent breakthroughs."


def test_server_tool_blocks_are_kept_verbatim_and_are_not_the_callers_tool_calls(server, model):
    """server_tool_use (its input folded) and the result block land on provider_items whole."""
    _rec, resp = run(server, model, sse_reply("pause_turn_web_search.sse", "anthropic"))
    assert resp.tool_calls == ()
    (item,) = resp.provider_items
    assert (item.provider, item.kind) == ("anthropic", "content")
    text, call, result = item.data
    assert text == {"type": "text", "text": "I'll search for recent breakthroughs."}
    assert call == {
        "type": "server_tool_use",
        "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
        "name": "web_search",
        "input": {"query": "quantum computing breakthroughs 2025"},
    }
    assert result["type"] == "web_search_tool_result" and len(result["content"]) == 2


def test_chunks_tell_a_ui_that_a_server_tool_runs_then_finishes(server, model):
    """One chunk says running when server_tool_use starts, one says done at its result."""
    rec, _resp = run(server, model, sse_reply("pause_turn_web_search.sse", "anthropic"))
    events = [c.server_tool for c in rec.chunks if c.server_tool is not None]
    assert [(e.name, e.status, e.id) for e in events] == [
        ("web_search", "running", "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE"),
        ("web_search", "done", "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE"),
    ]
    assert all(c.tool_calls == () for c in rec.chunks)


def test_web_search_citations_are_typed_and_span_the_text_they_support(server, model):
    """citations_delta becomes a Citation with url, title, cited text and its answer span."""
    _rec, resp = run(server, model, sse_reply("pause_turn_continued.sse", "anthropic"))
    (cite,) = resp.citations
    assert (cite.provider, cite.kind, cite.url) == (
        "anthropic",
        "web_search_result_location",
        "https://example.com/ibm-2025",
    )
    assert cite.cited_text == "IBM unveiled a 1,000-qubit processor in April 2025."
    supported = resp.content[cite.text_start : cite.text_end]
    assert supported == "IBM unveiled a 1,000-qubit processor in April."
    assert cite.raw["encrypted_index"].startswith("Eo8B")
    # A cited text block goes back with its citations, so the whole turn is kept.
    (item,) = resp.provider_items
    assert item.data[0]["citations"] == [cite.raw]


def test_document_citations_carry_their_location_kind_and_range(server, model):
    """char_location and page_location: document index, title, range and answer span."""
    _rec, resp = run(server, model, sse_reply("citations_documents.sse", "anthropic"))
    chars, pages = resp.citations
    assert (chars.kind, chars.source_index, chars.title) == ("char_location", 0, "My Document")
    assert (chars.source_start, chars.source_end) == (0, 20)
    assert resp.content[chars.text_start : chars.text_end] == "the grass is green"
    assert (pages.kind, pages.source_start, pages.source_end) == ("page_location", 2, 3)
    assert resp.content[pages.text_start : pages.text_end] == "the sky is blue"


def test_refusal_stop_details_are_typed_with_the_raw_object(server, model):
    """stop_details of a refusal: category and explanation, the object kept."""
    _rec, resp = run(server, model, sse_reply("refusal.sse", "anthropic"))
    details = resp.stop_details
    assert (details.provider, details.category) == ("anthropic", "cyber")
    assert details.explanation == "This request was declined because it could enable cyber harm."
    assert details.raw["type"] == "refusal"


def test_model_context_window_exceeded_is_length(server, model):
    """The context-window stop is "length", the raw reason kept."""
    rec, resp = run(server, model, sse_reply("context_window_exceeded.sse", "anthropic"))
    assert rec.done[0] == "length" and resp.raw_finish_reason == "model_context_window_exceeded"


def test_omitted_thinking_keeps_its_signature_and_sends_it_back(server, model):
    """display omitted: no reasoning text, yet the signed empty thinking block goes back."""
    _rec, resp = run(server, model, sse_reply("adaptive_thinking_omitted.sse", "anthropic"))
    assert resp.reasoning is None
    (part,) = resp.reasoning_parts
    assert part.text == "" and part.signature.startswith("EqQB")
    nxt = Llm.completion_request(
        [Llm.user(QUESTION), resp.message, Llm.tool_result("toolu_01AdaptLookup5", "42")]
    )
    body = model.wire.body(nxt, stream=True)
    assert body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "",
        "signature": part.signature,
    }


def test_code_execution_container_is_reused_on_the_next_turn(server, model):
    """The container of a code-execution turn goes back as the next request's container."""
    _rec, resp = run(server, model, sse_reply("code_execution_container.sse", "anthropic"))
    assert resp.content == "2**10 is 1024."
    kinds = [i.kind for i in resp.provider_items]
    assert kinds == ["content", "container"]
    nxt = Llm.completion_request([Llm.user("Run it"), resp.message, Llm.user("And 2**20?")])
    body = model.wire.body(nxt, stream=True)
    assert body["container"] == "container_011CPR5CNjB747bTd36fQLFk"
    sent = body["messages"][1]["content"]
    assert [b["type"] for b in sent] == ["server_tool_use", "code_execution_tool_result", "text"]


def test_provider_items_go_back_only_to_their_own_wire(server, model):
    """Another wire sends the turn's text and ignores Claude's verbatim blocks."""
    _rec, resp = run(server, model, sse_reply("pause_turn_web_search.sse", "anthropic"))
    nxt = Llm.completion_request([Llm.user(QUESTION), resp.message, Llm.user("Go on")])
    openai_body = blazen.Providers.openai(api_key="k").wire.body(nxt, stream=True)
    assert openai_body["messages"][1] == {
        "role": "assistant",
        "content": "I'll search for recent breakthroughs.",
    }
    gemini_body = blazen.Providers.gemini(api_key="k").wire.body(nxt)
    assert gemini_body["contents"][1]["parts"] == [
        {"text": "I'll search for recent breakthroughs."}
    ]


# -- request bodies ----------------------------------------------------------------------


@pytest.mark.parametrize("effort", ["low", "medium", "high", "xhigh", "max"])
def test_reasoning_effort_is_output_config_effort(effort):
    """reasoning_effort goes as output_config.effort, every documented level."""
    body = blazen.Providers.anthropic(api_key="k").wire.body(
        Llm.completion_request([Llm.user("hi")], reasoning_effort=effort), stream=True
    )
    assert body["output_config"] == {"effort": effort}
    assert "thinking" not in body


def test_adaptive_thinking_with_omitted_display():
    """reasoning_budget="adaptive" is thinking adaptive; display omitted rides on it."""
    req = Llm.completion_request(
        [Llm.user("hi")], reasoning_budget="adaptive", reasoning_display="omitted"
    )
    body = blazen.Providers.anthropic(api_key="k").wire.body(req, stream=True)
    assert body["thinking"] == {"type": "adaptive", "display": "omitted"}
    assert body["max_tokens"] == 4096


@pytest.mark.parametrize(
    ("name", "config", "sent"),
    [
        ("web_search", {"max_uses": 3}, {"type": "web_search_20260318", "name": "web_search"}),
        ("web_fetch", {}, {"type": "web_fetch_20260318", "name": "web_fetch"}),
        ("code_execution", {}, {"type": "code_execution_20260521", "name": "code_execution"}),
        (
            "tool_search_regex",
            {},
            {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
        ),
        ("web_search_20250305", {}, {"type": "web_search_20250305", "name": "web_search"}),
    ],
)
def test_server_tools_go_as_their_documented_type_beside_function_tools(name, config, sent):
    """A short name is the newest documented type; an exact versioned type goes as given."""
    req = Llm.completion_request(
        [Llm.user("hi")], tools=[Llm.tool("lookup"), Llm.server_tool(name, **config)]
    )
    body = blazen.Providers.anthropic(api_key="k").wire.body(req, stream=True)
    function, server_tool = body["tools"]
    assert function["name"] == "lookup"
    assert server_tool == {**config, **sent}


def test_an_unknown_server_tool_is_refused_before_sending():
    """A short name Anthropic has no tool for names the ones it has."""
    req = Llm.completion_request([Llm.user("hi")], tools=[Llm.server_tool("google_search")])
    with pytest.raises(blazen.UnsupportedError, match="web_search"):
        blazen.Providers.anthropic(api_key="k").wire.body(req, stream=True)


# -- the official SDK on the same bytes and for the same requests ---------------------------


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


@pytest.mark.parametrize("name", NEW_FIXTURES)
def test_the_anthropic_sdk_folds_the_same_content_blocks_and_usage(server, model, name):
    """The SDK's final message holds the blocks blazen keeps (or rebuilds) and the same usage."""
    blob = fixture_bytes("anthropic", name)
    with (
        StreamServer([Reply.sse(blob)]) as sdk_server,
        anthropic.Anthropic(api_key="k", base_url=sdk_server.url, max_retries=0) as client,
        client.messages.stream(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        ) as s,
    ):
        final = s.get_final_message()
    _rec, resp = run(server, model, Reply.sse(blob))
    sdk_blocks = [_drop_none(b.model_dump(mode="json")) for b in final.content]
    text = "".join(b["text"] for b in sdk_blocks if b["type"] == "text")
    assert resp.content == text
    assert resp.raw_finish_reason == final.stop_reason
    assert resp.usage.completion_tokens == final.usage.output_tokens
    if resp.provider_items and resp.provider_items[0].kind == "content":
        assert _drop_none(resp.provider_items[0].data) == sdk_blocks
    sdk_cites = [c for b in final.content if b.type == "text" for c in (b.citations or ())]
    assert [c.raw for c in resp.citations] == [
        _drop_none(c.model_dump(mode="json")) for c in sdk_cites
    ]


def test_request_body_with_effort_adaptive_thinking_and_server_tools_matches_the_sdk():
    """output_config.effort, adaptive thinking and a web search tool as the SDK sends them."""
    tool = {"type": "web_search_20260318", "name": "web_search", "max_uses": 3}
    with (
        StreamServer([sse_reply("text.sse", "anthropic")]) as server,
        anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0) as client,
    ):
        for _ in client.messages.create(
            model="claude-x",
            max_tokens=2000,
            messages=[{"role": "user", "content": QUESTION}],
            thinking={"type": "adaptive", "display": "omitted"},  # type: ignore[typeddict-item]
            output_config={"effort": "high"},
            tools=[tool],  # type: ignore[list-item]
            stream=True,
        ):
            pass
        sdk = server.requests[0].json()
    req = Llm.completion_request(
        [Llm.user(QUESTION)],
        model="claude-x",
        max_tokens=2000,
        reasoning_budget="adaptive",
        reasoning_display="omitted",
        reasoning_effort="high",
        tools=[Llm.server_tool("web_search", max_uses=3)],
    )
    ours = blazen.Providers.anthropic(api_key="k").wire.body(req, stream=True)
    assert json.dumps(ours, sort_keys=True) == json.dumps(sdk, sort_keys=True)


class City(TypedDict):
    """A city."""

    city: str


def test_output_format_request_matches_the_sdk():
    """output= goes as output_config.format: the SDK sends the same body for that schema."""
    req = Llm.completion_request(
        [Llm.user(QUESTION)], model="claude-x", max_tokens=500, output=City
    )
    ours = blazen.Providers.anthropic(api_key="k").wire.body(req, stream=True)
    fmt = ours["output_config"]["format"]
    assert fmt["type"] == "json_schema" and fmt["schema"]["required"] == ["city"]
    with (
        StreamServer([sse_reply("text.sse", "anthropic")]) as server,
        anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0) as client,
    ):
        for _ in client.messages.create(
            model="claude-x",
            max_tokens=500,
            messages=[{"role": "user", "content": QUESTION}],
            output_config={"format": fmt},
            stream=True,
        ):
            pass
        sdk = server.requests[0].json()
    assert json.dumps(ours, sort_keys=True) == json.dumps(sdk, sort_keys=True)


def test_the_next_turn_after_server_tools_is_the_body_the_sdk_sends(server, model):
    """Appending resp.message sends the assistant content as the SDK's documented loop does."""
    blob = fixture_bytes("anthropic", "pause_turn_web_search.sse")
    tool = {"type": "web_search_20260318", "name": "web_search", "max_uses": 3}
    with (
        StreamServer([Reply.sse(blob), sse_reply("text.sse", "anthropic")]) as sdk_server,
        anthropic.Anthropic(api_key="k", base_url=sdk_server.url, max_retries=0) as client,
    ):
        first = [{"role": "user", "content": QUESTION}]
        with client.messages.stream(
            model="claude-x",
            max_tokens=1000,
            messages=first,
            tools=[tool],  # type: ignore[list-item]
        ) as s:
            paused = s.get_final_message()
        with client.messages.stream(
            model="claude-x",
            max_tokens=1000,
            messages=[*first, {"role": "assistant", "content": paused.content}],  # type: ignore[list-item]
            tools=[tool],  # type: ignore[list-item]
        ) as s:
            s.get_final_message()
        sdk = sdk_server.requests[1].json()
    _rec, resp = run(server, model, Reply.sse(blob))
    req = Llm.completion_request(
        [Llm.user(QUESTION), resp.message],
        model="claude-x",
        max_tokens=1000,
        tools=[Llm.server_tool("web_search", max_uses=3)],
    )
    ours = model.wire.body(req, stream=True)
    assert _drop_none(ours) == _drop_none(sdk)


def test_the_documented_request_with_effort_format_adaptive_thinking_and_server_tools():
    """The request fixture (written from the Messages API reference) is what blazen sends."""
    path = FIXTURES / "anthropic" / "requests" / "output_config_adaptive_server_tools.json"
    expected = json.loads(path.read_text())
    req = Llm.completion_request(
        [Llm.user("Which city hosts the 2026 expo? Answer as JSON.")],
        model="claude-opus-4-8",
        max_tokens=16000,
        reasoning_budget="adaptive",
        reasoning_display="omitted",
        reasoning_effort="high",
        output=City,
        tools=[
            Llm.server_tool("web_search", max_uses=5, allowed_domains=["example.com"]),
            Llm.server_tool("code_execution"),
        ],
    )
    ours = blazen.Providers.anthropic(api_key="k").wire.body(req, stream=True)
    assert ours == expected


@pytest.mark.parametrize(
    ("provider", "kwargs", "body"),
    [
        (
            "anthropic",
            {"reasoning_effort": "max"},
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "output_config.effort: 'max' is not supported by this model",
                },
            },
        ),
        (
            "anthropic",
            {"reasoning_budget": "adaptive"},
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "thinking.type: adaptive thinking is not supported by this model",
                },
            },
        ),
        (
            "gemini",
            {"reasoning_budget": "adaptive"},
            {
                "error": {
                    "code": 400,
                    "message": "Thinking budget -1 is not supported for this model.",
                    "status": "INVALID_ARGUMENT",
                }
            },
        ),
    ],
)
def test_what_one_model_refuses_is_the_apis_own_400_typed_and_not_retried(
    server, provider, kwargs, body
):
    """blazen sends what the API documents; a model that refuses it answers 400, given as is."""
    model = model_for(provider, server, max_retries=2)
    server.add(Reply.json(body, status=400))
    rec = Recorder()
    Streaming.complete(model, Llm.completion_request([Llm.user("hi")], **kwargs), rec.handler)
    assert isinstance(rec.error, blazen.InvalidRequestError) and rec.error.status == 400
    assert body["error"]["message"] in rec.error.message
    assert len(server.requests) == 1
