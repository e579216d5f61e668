"""Gemini's endings, told truly: a finish that is not last, grounding, safety, server tools.

Fixtures are written from the GenerateContentResponse reference and replayed over a real
socket, whole and one byte per write; the official ``google-genai`` package reads the same
bytes and sends the same request bodies.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import blazen
from blazen import Llm, Streaming
from blazen._kit.finish import FINISH_REASONS
from blazen.testing import Drop, Pause, Recorder, Reply, Stall, StreamServer, split_bytes

from .conftest import FIXTURES, fixture_bytes, model_for

genai = pytest.importorskip("google.genai")
types = pytest.importorskip("google.genai.types")

NEW_FIXTURES = [
    "code_execution_midstream_stop.sse",
    "grounding_google_search.sse",
    "prohibited_content_safety.sse",
    "parallel_calls_one_signature.sse",
    "recitation_citation.sse",
]


def request(**kw: Any) -> blazen.CompletionRequest:
    return Llm.completion_request([Llm.user("Sum 1 to 100.")], **kw)


@pytest.fixture
def model(server):
    return model_for("gemini", server, max_retries=0)


def run(server: StreamServer, model: blazen.ChatModel, *replies: Reply, **kw: Any) -> Any:
    server.add(*replies)
    rec = Recorder()
    resp = Streaming.complete(model, request(**kw), rec.handler)
    return rec, resp


def reply(name: str) -> Reply:
    return Reply.sse(fixture_bytes("gemini", name))


def _summary(resp: blazen.CompletionResponse) -> tuple[Any, ...]:
    calls = tuple((c.name, c.arguments_json) for c in resp.tool_calls)
    return (
        resp.content,
        calls,
        resp.finish_reason,
        resp.raw_finish_reason,
        resp.usage,
        resp.citations,
        resp.stop_details,
        resp.provider_items,
        len(resp.reasoning_parts),
    )


@pytest.mark.parametrize("name", NEW_FIXTURES)
def test_each_fixture_reads_the_same_whole_and_one_byte_per_write(server, model, name):
    """Every field of the response is the same whether the body comes whole or byte by byte."""
    blob = fixture_bytes("gemini", name)
    _rec, whole = run(server, model, Reply.sse(blob))
    rec, split = run(server, model, Reply.sse(split_bytes(blob, range(1, len(blob)))))
    assert rec.terminals == 1 and rec.kinds[-1] == "done"
    assert _summary(whole) == _summary(split)


def test_a_finish_reason_mid_stream_does_not_cut_the_answer(server, model):
    """STOP, then the code's result and the answer, then STOP: all of it, the last usage."""
    rec, resp = run(server, model, reply("code_execution_midstream_stop.sse"))
    assert resp.content == "Let me compute that with code.The sum of 1 to 100 is 5050."
    assert rec.done[0] == "stop" and resp.raw_finish_reason == "STOP"
    assert resp.usage.completion_tokens == 38
    assert rec.kinds.count("done") == 1 and rec.chunks[-1].is_final


def test_server_side_code_is_an_event_and_its_parts_go_back_verbatim(server, model):
    """executableCode runs, codeExecutionResult is done; the parts return on the next turn."""
    rec, resp = run(server, model, reply("code_execution_midstream_stop.sse"))
    events = [c.server_tool for c in rec.chunks if c.server_tool is not None]
    assert [(e.name, e.status) for e in events] == [
        ("code_execution", "running"),
        ("code_execution", "done"),
    ]
    assert resp.tool_calls == ()
    (item,) = resp.provider_items
    assert (item.provider, item.kind) == ("gemini", "parts")
    assert [sorted(p) for p in item.data] == [
        ["text"],
        ["executableCode"],
        ["codeExecutionResult"],
        ["text"],
    ]
    assert item.data[3]["text"] == "The sum of 1 to 100 is 5050."
    nxt = Llm.completion_request([Llm.user("Sum 1 to 100."), resp.message, Llm.user("And 200?")])
    body = model.wire.body(nxt)
    assert body["contents"][1] == {"role": "model", "parts": item.data}


def test_grounding_supports_become_citations_spanning_their_segment(server, model):
    """One Citation per supporting chunk: its url and title, the segment's text and span."""
    _rec, resp = run(server, model, reply("grounding_google_search.sse"))
    cites = resp.citations
    assert [(c.kind, c.source_index, c.title) for c in cites] == [
        ("grounding", 0, "visitlisboa.com"),
        ("grounding", 1, "wikipedia.org"),
        ("grounding", 1, "wikipedia.org"),
    ]
    # The segments are UTF-8 byte offsets: the curly apostrophe before them is 3 bytes.
    for c in cites:
        assert resp.content[c.text_start : c.text_end] == c.cited_text
    assert cites[0].url.startswith("https://vertexaisearch.cloud.google.com/")
    assert cites[0].raw["support"]["confidenceScores"] == [0.93, 0.71]


def test_a_safety_stop_tells_its_category_and_message(server, model):
    """PROHIBITED_CONTENT: content_filter, with the blocked rating and finishMessage."""
    rec, resp = run(server, model, reply("prohibited_content_safety.sse"))
    assert rec.done[0] == "content_filter"
    details = resp.stop_details
    assert details.category == "HARM_CATEGORY_DANGEROUS_CONTENT"
    assert details.explanation.startswith("The response was blocked")
    assert details.raw["finishReason"] == "PROHIBITED_CONTENT"
    assert len(details.raw["safetyRatings"]) == 2


def test_recitation_is_content_filter_with_its_citation_source(server, model):
    """RECITATION: content_filter, and the citation source spans the recited text."""
    rec, resp = run(server, model, reply("recitation_citation.sse"))
    assert rec.done[0] == "content_filter"
    (cite,) = resp.citations
    assert (cite.kind, cite.url) == ("citation", "https://www.gutenberg.org/ebooks/98")
    assert resp.content[cite.text_start : cite.text_end] == "It was the best of times,"


def _finish_body(raw: str) -> bytes:
    """Some text, then a payload whose candidate ends with finishReason ``raw``."""
    return (
        'data: {"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"}}]}\r\n\r\n'
        'data: {"candidates":[{"content":{"role":"model"},"finishReason":"' + raw + '"}],'
        '"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":1,"totalTokenCount":3}}'
        "\r\n\r\n"
    ).encode()


@pytest.mark.parametrize(("raw", "normal"), sorted(FINISH_REASONS["gemini"].items()))
@pytest.mark.parametrize("split", [False, True], ids=["whole", "byte-by-byte"])
def test_every_gemini_finish_reason_ends_as_the_table_says(server, model, raw, normal, split):
    """Each documented finishReason is done with its mapping, or a typed error, however cut."""
    body = _finish_body(raw)
    rec, resp = run(
        server, model, Reply.sse(split_bytes(body, range(1, len(body))) if split else body)
    )
    assert rec.terminals == 1
    if normal == "error":
        assert isinstance(rec.error, blazen.ProviderError) and rec.error.error_type == raw
        assert rec.error.partial == "Hi"
    else:
        assert rec.done[0] == normal and resp.raw_finish_reason == raw
        assert resp.content == "Hi" and len(server.requests) == 1


def test_the_table_has_every_finish_reason_google_genai_knows():
    """A value the official package's FinishReason lists and the table lacks fails here."""
    assert {r.value for r in types.FinishReason} <= set(FINISH_REASONS["gemini"])


@pytest.mark.parametrize("raw", sorted(FINISH_REASONS["gemini"]))
def test_google_genai_reads_each_finish_reason_as_blazen_keeps_it(server, model, raw):
    """The SDK reads the same body's last finish reason and text as blazen (or its error)."""
    if raw not in {r.value for r in types.FinishReason}:
        # An older google-genai (the newest on Python 3.10 lags) warns on a value it lacks.
        pytest.skip(f"the installed google-genai does not list {raw} yet")
    with StreamServer([Reply.sse(_finish_body(raw))]) as sdk_server:
        client = _genai_client(sdk_server.url)
        try:
            config = types.GenerateContentConfig(automatic_continuation=False)
            chunks = list(
                client.models.generate_content_stream(
                    model="gemini-2.5-pro", contents="hi", config=config
                )
            )
        finally:
            client.close()
    finishes = [c.candidates[0].finish_reason for c in chunks if c.candidates[0].finish_reason]
    rec, resp = run(server, model, Reply.sse(_finish_body(raw)))
    if FINISH_REASONS["gemini"][raw] == "error":
        assert rec.error.error_type == finishes[-1].value
    else:
        assert resp.raw_finish_reason == finishes[-1].value
        assert resp.content == "".join(c.text or "" for c in chunks)


def test_a_continuation_without_a_token_is_paused_never_stop(server, model):
    """CONTINUATION with no continuationToken cannot go on: "paused", one request."""
    body = (
        b'data: {"candidates":[{"content":{"parts":[{"text":"Part one"}],"role":"model"}}]}'
        b"\r\n\r\n"
        b'data: {"candidates":[{"content":{"role":"model"},"finishReason":"CONTINUATION"}]}'
        b"\r\n\r\n"
    )
    rec, resp = run(server, model, Reply.sse(body))
    assert rec.done[0] == "paused" and resp.raw_finish_reason == "CONTINUATION"
    assert resp.content == "Part one" and len(server.requests) == 1
    assert resp.provider_items == ()


def test_a_missing_thought_signature_is_not_retried(server):
    """MISSING_THOUGHT_SIGNATURE says the request lacks something: sending it again cannot help."""
    model = model_for("gemini", server, max_retries=2)
    body = (
        b'data: {"candidates":[{"content":{"role":"model"},'
        b'"finishReason":"MISSING_THOUGHT_SIGNATURE"}]}\r\n\r\n'
    )
    server.add(Reply.sse(body), Reply.sse(body), Reply.sse(body))
    rec = Recorder()
    Streaming.complete(model, request(), rec.handler)
    assert rec.error.error_type == "MISSING_THOUGHT_SIGNATURE" and not rec.error.retryable
    assert "thought signature" in rec.error.message and len(server.requests) == 1


def test_only_the_first_parallel_call_carries_the_signature_and_it_goes_back_there(server, model):
    """Gemini signs the first call of a parallel set: the next turn signs that part alone."""
    _rec, resp = run(server, model, reply("parallel_calls_one_signature.sse"))
    paris, london = resp.tool_calls
    signatures = [p for p in resp.reasoning_parts if p.kind == "signature"]
    assert [p.tool_call_id for p in signatures] == [paris.id]
    nxt = Llm.completion_request(
        [
            Llm.user("Weather in Paris and London?"),
            resp.message,
            Llm.tool_result(paris.id, {"temp": 18}),
            Llm.tool_result(london.id, {"temp": 14}),
        ]
    )
    parts = model.wire.body(nxt)["contents"][1]["parts"]
    calls = [p for p in parts if "functionCall" in p]
    assert [("thoughtSignature" in p) for p in calls] == [True, False]
    assert calls[0]["thoughtSignature"] == signatures[0].signature


# -- promise 11 with reading on: the rule and its attacks --------------------------------

TEXT_STOP = (
    b'data: {"candidates":[{"content":{"parts":[{"text":"Done."}],"role":"model"},'
    b'"finishReason":"STOP"}]}\r\n\r\n'
)
MORE = b'data: {"candidates":[{"content":{"parts":[{"text":" More."}],"role":"model"}}]}\r\n\r\n'
MORE_STOP = (
    b'data: {"candidates":[{"content":{"parts":[{"text":" End."}],"role":"model"},'
    b'"finishReason":"STOP"}]}\r\n\r\n'
)


def test_a_server_that_hangs_after_the_finish_reason_cannot_hold_the_call(server, model):
    """STOP, then silence with the connection open: done within about a second, closed."""
    began = time.monotonic()
    rec, resp = run(server, model, Reply.sse([TEXT_STOP, Stall()]))
    took = time.monotonic() - began
    assert rec.kinds[-1] == "done" and resp.content == "Done."
    assert took < 10  # about a second; generous under load
    assert server.wait_closed(timeout=5)


def test_keep_alives_after_the_finish_reason_do_not_extend_the_wait(server, model):
    """Comments every 0.3 s after STOP carry no content: the grace is not renewed."""
    pings = [b": keep-alive\r\n\r\n", Pause(0.3)] * 30  # 9 s of pings if they held it
    began = time.monotonic()
    rec, _resp = run(server, model, Reply.sse([TEXT_STOP, *pings, Stall()]))
    assert rec.kinds[-1] == "done"
    assert time.monotonic() - began < 7


def test_content_after_a_finish_reason_within_the_grace_is_part_of_the_answer(server, model):
    """STOP, a pause shorter than the grace, more text, STOP: the whole answer."""
    rec, resp = run(server, model, Reply.sse([TEXT_STOP, Pause(0.3), MORE, Pause(0.3), MORE_STOP]))
    assert resp.content == "Done. More. End."
    assert rec.kinds[-1] == "done" and rec.terminals == 1


def test_a_connection_lost_right_after_the_finish_reason_is_the_end(server, model):
    """STOP, then the connection drops with nothing after it: the answer ended at STOP."""
    rec, resp = run(server, model, Reply.sse([TEXT_STOP, Drop()], transfer="chunked"))
    assert rec.kinds[-1] == "done" and resp.content == "Done."


def test_a_connection_lost_after_content_followed_a_finish_reason_is_an_error(server, model):
    """STOP, more text, then the connection drops: the answer was cut, so an error."""
    rec, _resp = run(server, model, Reply.sse([TEXT_STOP, MORE, Pause(0.05), Drop()]))
    assert rec.terminals == 1 and rec.kinds[-1] == "error"
    assert isinstance(rec.error, blazen.ConnectionError)
    assert rec.error.partial == "Done. More."


def test_cancel_during_the_grace_is_a_cancel(server, model):
    """A cancel while reading on after STOP ends the stream cancelled, once."""
    token = blazen.CancelToken()
    server.add(Reply.sse([TEXT_STOP, Stall()]))
    rec = Recorder()

    def on_chunk(chunk: blazen.StreamChunk) -> None:
        rec.on_chunk(chunk)
        token.cancel()

    Streaming.complete(
        model,
        request(),
        on_chunk=on_chunk,
        on_done=rec.on_done,
        on_error=rec.on_error,
        cancel=token,
    )
    assert rec.terminals == 1
    assert isinstance(rec.error, blazen.CancelledError)


# -- request bodies ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("google_search", "googleSearch"),
        ("web_search", "googleSearch"),
        ("code_execution", "codeExecution"),
        ("url_context", "urlContext"),
        ("googleMaps", "googleMaps"),
    ],
)
def test_server_tools_go_as_their_tool_field_beside_function_declarations(name, field):
    """A short name (or the field itself) is its Tool field; function tools stay apart."""
    req = Llm.completion_request(
        [Llm.user("hi")], tools=[Llm.tool("lookup"), Llm.server_tool(name)]
    )
    tools = blazen.Providers.gemini(api_key="k").wire.body(req)["tools"]
    assert tools[0]["functionDeclarations"][0]["name"] == "lookup"
    assert tools[1] == {field: {}}


def test_an_unknown_server_tool_is_refused_before_sending():
    """Gemini has no web_fetch: UnsupportedError naming what it has."""
    req = Llm.completion_request([Llm.user("hi")], tools=[Llm.server_tool("web_fetch")])
    with pytest.raises(blazen.UnsupportedError, match="google_search"):
        blazen.Providers.gemini(api_key="k").wire.body(req)


def test_adaptive_budget_is_a_dynamic_thinking_budget():
    """reasoning_budget="adaptive" is thinkingBudget -1, the model's own choice."""
    req = Llm.completion_request([Llm.user("hi")], reasoning_budget="adaptive")
    gen = blazen.Providers.gemini(api_key="k").wire.body(req)["generationConfig"]
    assert gen["thinkingConfig"] == {"thinkingBudget": -1, "includeThoughts": True}


# -- google-genai on the same bytes and for the same requests ------------------------------


def _camel(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            head, *rest = key.split("_")
            out[head + "".join(w.title() for w in rest)] = _camel(item)
        return out
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


def _genai_client(url: str) -> Any:
    return genai.Client(
        api_key="k", http_options=types.HttpOptions(base_url=url, api_version="v1beta")
    )


def _genai_reads(name: str) -> list[Any]:
    with StreamServer([reply(name)]) as sdk_server:
        client = _genai_client(sdk_server.url)
        try:
            return list(
                client.models.generate_content_stream(model="gemini-2.5-pro", contents="hi")
            )
        finally:
            client.close()


@pytest.mark.parametrize("name", NEW_FIXTURES)
def test_google_genai_reads_the_same_text_calls_finish_and_usage(server, model, name):
    """The SDK's chunks, joined, hold blazen's text, calls, last finish reason and usage."""
    chunks = _genai_reads(name)
    _rec, resp = run(server, model, reply(name))
    parts = [p for c in chunks for p in (c.candidates[0].content.parts or ()) if c.candidates]
    text = "".join(p.text for p in parts if p.text is not None and not p.thought)
    assert resp.content == text
    sdk_calls = [(p.function_call.name, p.function_call.args) for p in parts if p.function_call]
    assert [(c.name, c.arguments()) for c in resp.tool_calls] == sdk_calls
    finishes = [c.candidates[0].finish_reason for c in chunks if c.candidates[0].finish_reason]
    assert resp.raw_finish_reason == finishes[-1].value
    last_usage = [c.usage_metadata for c in chunks if c.usage_metadata][-1]
    assert resp.usage.prompt_tokens == last_usage.prompt_token_count
    grounding = [
        c.candidates[0].grounding_metadata for c in chunks if c.candidates[0].grounding_metadata
    ]
    if grounding:
        supports = grounding[-1].grounding_supports
        assert len(resp.citations) == sum(len(s.grounding_chunk_indices) for s in supports)
    signed = [p for p in parts if p.thought_signature]
    ours = [p for p in resp.reasoning_parts if p.signature]
    assert len(ours) == len(signed)


def test_request_with_server_tools_and_a_dynamic_budget_matches_google_genai(server):
    """googleSearch, codeExecution and thinkingBudget -1 as the SDK sends them."""
    server.add(reply("grounding_google_search.sse"))
    client = _genai_client(server.url)
    try:
        list(
            client.models.generate_content_stream(
                model="gemini-2.5-pro",
                contents="Sum 1 to 100.",
                config=types.GenerateContentConfig(
                    tools=[
                        types.Tool(google_search=types.GoogleSearch()),
                        types.Tool(code_execution=types.ToolCodeExecution()),
                    ],
                    thinking_config=types.ThinkingConfig(thinking_budget=-1, include_thoughts=True),
                ),
            )
        )
    finally:
        client.close()
    # google-genai sends some nested fields in snake_case (thinking_budget), which the API's
    # proto3 JSON parser takes as well; the reference documents camelCase, as blazen sends.
    sdk = _camel(server.requests[0].json())
    req = Llm.completion_request(
        [Llm.user("Sum 1 to 100.")],
        model="gemini-2.5-pro",
        reasoning_budget="adaptive",
        tools=[Llm.server_tool("google_search"), Llm.server_tool("code_execution")],
    )
    ours = blazen.Providers.gemini(api_key="k").wire.body(req)
    assert ours["tools"] == sdk["tools"]
    assert ours["generationConfig"] == sdk["generationConfig"]
    assert ours["contents"] == sdk["contents"]


def test_the_next_turn_after_parallel_calls_matches_what_google_genai_sends(server, model):
    """The model turn goes back with the one signature on its first call, as the SDK sends."""
    blob = fixture_bytes("gemini", "parallel_calls_one_signature.sse")
    chunks = _genai_reads("parallel_calls_one_signature.sse")
    parts = [p for c in chunks for p in (c.candidates[0].content.parts or ())]
    calls = [p for p in parts if p.function_call]
    responses = [
        types.Part.from_function_response(name="get_weather", response={"temp": 18}),
        types.Part.from_function_response(name="get_weather", response={"temp": 14}),
    ]
    server.add(reply("grounding_google_search.sse"))
    client = _genai_client(server.url)
    try:
        list(
            client.models.generate_content_stream(
                model="gemini-2.5-pro",
                contents=[
                    types.Content(role="user", parts=[types.Part(text="Weather?")]),
                    types.Content(role="model", parts=calls),
                    types.Content(role="user", parts=responses),
                ],
            )
        )
    finally:
        client.close()
    sdk = server.requests[0].json()
    _rec, resp = run(server, model, Reply.sse(blob))
    paris, london = resp.tool_calls
    # Our turn keeps the thought text too; the SDK turn above sent the calls alone.
    mine = [
        p
        for p in model.wire.body(
            Llm.completion_request(
                [
                    Llm.user("Weather?"),
                    resp.message,
                    Llm.tool_result(paris.id, {"temp": 18}),
                    Llm.tool_result(london.id, {"temp": 14}),
                ]
            )
        )["contents"][1]["parts"]
        if "functionCall" in p
    ]
    assert mine == sdk["contents"][1]["parts"]
    assert json.dumps(sdk["contents"][2], sort_keys=True) == json.dumps(
        model.wire.body(
            Llm.completion_request(
                [
                    Llm.user("Weather?"),
                    resp.message,
                    Llm.tool_result(paris.id, {"temp": 18}),
                    Llm.tool_result(london.id, {"temp": 14}),
                ]
            )
        )["contents"][2],
        sort_keys=True,
    )


def test_the_documented_request_with_server_tools_and_a_dynamic_budget():
    """The request fixture (written from the Gemini API reference) is what blazen sends."""
    path = FIXTURES / "gemini" / "requests" / "server_tools_dynamic_thinking.json"
    req = Llm.completion_request(
        [Llm.user("Who won the euro 2024?")],
        reasoning_budget="adaptive",
        tools=[
            Llm.server_tool("google_search"),
            Llm.server_tool("url_context"),
            Llm.server_tool("code_execution"),
        ],
    )
    assert blazen.Providers.gemini(api_key="k").wire.body(req) == json.loads(path.read_text())


def test_a_blocked_prompt_says_why_in_the_error(server, model):
    """promptFeedback.blockReason with its message: a ContentPolicyError that says both."""
    body = (
        b'data: {"promptFeedback":{"blockReason":"PROHIBITED_CONTENT","blockReasonMessage":'
        b'"The prompt asks for prohibited content."},"usageMetadata":{"promptTokenCount":8,'
        b'"totalTokenCount":8}}\r\n\r\n'
    )
    rec, _resp = run(server, model, Reply.sse(body))
    assert isinstance(rec.error, blazen.ContentPolicyError)
    assert "PROHIBITED_CONTENT: The prompt asks for prohibited content." in rec.error.message
