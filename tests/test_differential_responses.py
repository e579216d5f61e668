"""Differential tests of the Responses API wire against the official ``openai`` SDK.

The same fixture bytes go over a real socket once to the SDK's own stream helper
(``client.responses.stream``, or the raw events of ``create(stream=True)``) and once to
blazen: text, refusals, reasoning, calls, usage, ids and endings must agree. Request bodies
are captured by the test server from ``client.responses.create`` and from blazen for the
same inputs, and compared field by field. Where the SDK is wrong, the test is named after
its bug and pins down both behaviours.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import openai
import pytest

import blazen
from blazen import Llm, ToolCall
from blazen.testing import Reply, StreamServer

from .conftest import fixture_bytes
from .test_responses import replay

REPLY = "text.sse"
_OWN = ("message", "reasoning", "function_call", "custom_tool_call")


def _reply(name: str) -> Reply:
    return Reply.sse(fixture_bytes("responses", name))


def sdk_final(name: str) -> Any:
    """The SDK's final response, accumulated by its own stream helper."""
    with (
        StreamServer([_reply(name)]) as server,
        openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0) as client,
        client.responses.stream(model="m", input="hi") as stream,
    ):
        for _ in stream:
            pass
        return stream.get_final_response()


def sdk_events(name: str) -> list[Any]:
    """The typed events the SDK yields for ``create(stream=True)``."""
    with (
        StreamServer([_reply(name)]) as server,
        openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0) as client,
    ):
        return list(client.responses.create(model="m", input="hi", stream=True))


@pytest.mark.parametrize(
    "name",
    [
        "text.sse",
        "reasoning_tool_call.sse",
        "reasoning_text_answer.sse",
        "reasoning_text.sse",
        "parallel_tool_calls.sse",
        "custom_tool_call.sse",
        "refusal.sse",
        "web_search_citations.sse",
        "built_in_tools.sse",
        "unknown_events.sse",
        "items_without_deltas.sse",
        "terminal_only.sse",
        "other_events.sse",
    ],
)
def test_the_openai_sdk_and_blazen_agree(name):
    """Same text, refusal, reasoning, calls, usage, id and status as the SDK's final response."""
    final = sdk_final(name)
    _, resp = replay(name)
    assert resp.content == final.output_text
    refusals = [
        p.refusal
        for o in final.output
        if o.type == "message"
        for p in o.content
        if p.type == "refusal"
    ]
    assert resp.refusal == ("".join(refusals) or None)
    calls = [
        (o.call_id, o.name, o.arguments if o.type == "function_call" else o.input)
        for o in final.output
        if o.type in ("function_call", "custom_tool_call")
    ]
    assert [(c.id, c.name, c.arguments_json) for c in resp.tool_calls] == calls
    reasoning = [
        "\n\n".join(s.text for s in (o.summary or o.content or ()))
        for o in final.output
        if o.type == "reasoning"
    ]
    assert (resp.reasoning or "") == "\n\n".join(reasoning)
    kept = [json.loads(p.data) for p in resp.reasoning_parts if p.kind != "signature"]
    sdk_kept = [o.to_dict() for o in final.output if o.type == "reasoning"]
    assert kept == sdk_kept
    built_in = [o for o in final.output if o.type not in _OWN]
    if built_in:
        (whole,) = resp.provider_items
        done = [e.item.to_dict() for e in sdk_events(name) if e.type == "response.output_item.done"]
        assert whole.data == done
    else:
        assert resp.provider_items == ()
    citations = [
        a.to_dict()
        for o in final.output
        if o.type == "message"
        for p in o.content
        if p.type == "output_text"
        for a in p.annotations
    ]
    assert [c.raw for c in resp.citations] == citations
    assert [k["id"] for k in kept] == [k["id"] for k in sdk_kept]
    assert [k.get("encrypted_content") for k in kept] == [
        k.get("encrypted_content") for k in sdk_kept
    ]
    u = final.usage
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.usage.total_tokens) == (
        u.input_tokens,
        u.output_tokens,
        u.total_tokens,
    )
    assert resp.usage.cached_tokens == u.input_tokens_details.cached_tokens
    assert resp.usage.reasoning_tokens == u.output_tokens_details.reasoning_tokens
    assert (resp.id, resp.model, resp.raw_finish_reason) == (final.id, final.model, final.status)


@pytest.mark.parametrize("name", ["incomplete_length.sse", "incomplete_content_filter.sse"])
def test_an_incomplete_response_reads_as_the_sdk_events_say(name):
    """The SDK's response.incomplete event and blazen agree on the text, reason and usage."""
    events = sdk_events(name)
    last = events[-1]
    assert last.type == "response.incomplete"
    _, resp = replay(name)
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert resp.content == text
    assert resp.raw_finish_reason == last.response.incomplete_details.reason
    assert resp.usage.total_tokens == last.response.usage.total_tokens


def test_openai_sdk_bug_its_stream_helper_has_no_final_response_for_an_incomplete_one():
    """The SDK's helper wants response.completed; an incomplete answer raises there, blazen ends length."""
    with pytest.raises(RuntimeError, match=r"response\.completed"):
        sdk_final("incomplete_length.sse")
    rec, resp = replay("incomplete_length.sse")
    assert rec.done[0] == "length" and resp.content == "The answer is forty"


def test_openai_sdk_bug_its_stream_helper_crashes_on_an_error_event_before_created():
    """An error event first (as the reference allows) is a RuntimeError in the SDK; blazen types it."""
    with pytest.raises(RuntimeError, match=r"response\.created"):
        sdk_final("error_before_content.sse")
    rec, _ = replay("error_before_content.sse")
    assert isinstance(rec.error, blazen.RateLimitError)


def test_the_sdk_raw_events_carry_the_same_error_blazen_types():
    """create(stream=True) yields the error event; blazen's error has its code and message."""
    (event,) = sdk_events("error_before_content.sse")
    assert event.type == "error" and event.code == "rate_limit_exceeded"
    rec, _ = replay("error_before_content.sse")
    assert event.message in rec.error.message and rec.error.error_type == event.code


# -- request bodies ----------------------------------------------------------------------

PDF = b"%PDF-1.4\n% blazen differential document\n" + bytes(range(256))
IMAGE = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(32)).decode()
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def sdk_body(reply: str = REPLY, **kwargs: Any) -> dict[str, Any]:
    """The JSON body ``client.responses.create(..., stream=True)`` sends."""
    with (
        StreamServer([_reply(reply)]) as server,
        openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0) as client,
    ):
        for _ in client.responses.create(stream=True, **kwargs):
            pass
        body: dict[str, Any] = server.requests[0].json()
        return body


def blazen_body(
    req: blazen.CompletionRequest, reply: str = REPLY, **options: Any
) -> dict[str, Any]:
    """The JSON body blazen sends for ``req`` on the Responses wire."""
    with StreamServer([_reply(reply)]) as server:
        model = blazen.Providers.openai(
            api_key="k", base_url=server.base_url, api="responses", max_retries=0, **options
        )
        errors: list[Any] = []
        blazen.Streaming.complete(model, req, on_error=errors.append)
        assert errors == []
        assert server.requests[0].path == "/v1/responses"
        body: dict[str, Any] = server.requests[0].json()
        return body


def field_by_field(ours: dict[str, Any], sdk: dict[str, Any]) -> None:
    assert sorted(ours) == sorted(sdk)
    for key in sdk:
        assert ours[key] == sdk[key], key


def test_messages_and_instructions_match_the_sdk():
    """System prompt as instructions, a later system message as developer, the turns as items."""
    sdk = sdk_body(
        model="gpt-4o-mini",
        instructions="You are terse.",
        input=[
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "developer", "content": "Answer in French now."},
            {"role": "user", "content": "And now?"},
        ],
        store=False,
    )
    req = Llm.completion_request(
        [
            Llm.system("You are terse."),
            Llm.user("Hi"),
            Llm.assistant("Hello."),
            Llm.system("Answer in French now."),
            Llm.user("And now?"),
        ],
        model="gpt-4o-mini",
    )
    field_by_field(blazen_body(req), sdk)


def test_tools_tool_choice_and_limits_match_the_sdk():
    """Flat function tools (strict false, as chat means them), a forced choice, the limits."""
    tool = Llm.tool("get_weather", "Weather for a city.", SCHEMA)
    sdk = sdk_body(
        model="gpt-4o-mini",
        input=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[
            {
                "type": "function",
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": SCHEMA,
                "strict": False,
            }
        ],
        tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=300,
        temperature=0.2,
        top_p=0.9,
        store=False,
    )
    req = Llm.completion_request(
        [Llm.user("Weather in Paris?")],
        model="gpt-4o-mini",
        tools=[tool],
        tool_choice="get_weather",
        max_tokens=300,
        temperature=0.2,
        top_p=0.9,
    )
    field_by_field(blazen_body(req), sdk)


@pytest.mark.parametrize("effort", ["low", "medium", "high", "xhigh", "max"])
def test_reasoning_matches_the_sdk_with_the_encrypted_items_asked_for(effort):
    """reasoning_effort is reasoning.effort with summaries; stateless, so encrypted items come back."""
    sdk = sdk_body(
        model="gpt-5",
        input=[{"role": "user", "content": "Is 97 prime?"}],
        reasoning={"effort": effort, "summary": "auto"},
        store=False,
        include=["reasoning.encrypted_content"],
    )
    req = Llm.completion_request([Llm.user("Is 97 prime?")], model="gpt-5", reasoning_effort=effort)
    field_by_field(blazen_body(req), sdk)


def test_typed_output_matches_the_sdk_text_format():
    """output= goes as text.format json_schema, strict, as the SDK sends it."""
    import attrs

    @attrs.frozen
    class Weather:
        city: str

    req = Llm.completion_request([Llm.user("Paris?")], model="gpt-4o-mini", output=Weather)
    spec = req.output
    assert spec is not None
    sdk = sdk_body(
        "structured_output.sse",
        model="gpt-4o-mini",
        input=[{"role": "user", "content": "Paris?"}],
        text={
            "format": {
                "type": "json_schema",
                "name": spec.name,
                "schema": spec.schema,
                "strict": True,
            }
        },
        store=False,
    )
    field_by_field(blazen_body(req, "structured_output.sse"), sdk)
    _, resp = replay("structured_output.sse", req=req)
    assert resp.output == Weather(city="Paris")


def test_attachments_match_the_sdk_input_parts(tmp_path):
    """A PDF (bytes and URL) and an image go as input_file and input_image parts."""
    path = tmp_path / "paper.pdf"
    path.write_bytes(PDF)
    data_url = "data:application/pdf;base64," + base64.b64encode(PDF).decode()
    sdk = sdk_body(
        model="gpt-4o-mini",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_file", "filename": "paper.pdf", "file_data": data_url},
                    {"type": "input_file", "file_url": "https://example.com/a.pdf"},
                    {"type": "input_text", "text": "Compare them with the picture."},
                    {
                        "type": "input_image",
                        "image_url": f"data:image/png;base64,{IMAGE}",
                        "detail": "auto",
                    },
                ],
            }
        ],
        store=False,
    )
    msg = Llm.user(
        "Compare them with the picture.",
        images=[Llm.image(data=IMAGE, media_type="image/png")],
        attachments=[Llm.document(path), Llm.document("https://example.com/a.pdf")],
    )
    field_by_field(blazen_body(Llm.completion_request([msg], model="gpt-4o-mini")), sdk)


def test_a_second_turn_sends_the_reasoning_item_the_call_and_its_output_as_the_sdk_would():
    """The first turn's reasoning item (byte for byte), its function_call and the output."""
    _, first = replay("reasoning_tool_call.sse")
    (part,) = first.reasoning_parts
    item = json.loads(part.data)
    call = first.tool_calls[0]
    sdk = sdk_body(
        model="gpt-5",
        input=[
            {"role": "user", "content": "Weather in Paris?"},
            item,
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments_json,
            },
            {"type": "function_call_output", "call_id": call.id, "output": "18C"},
        ],
        reasoning={"effort": "low", "summary": "auto"},
        store=False,
        include=["reasoning.encrypted_content"],
    )
    req = Llm.completion_request(
        [Llm.user("Weather in Paris?"), first.message, Llm.tool_result(call.id, "18C")],
        model="gpt-5",
        reasoning_effort="low",
    )
    ours = blazen_body(req)
    field_by_field(ours, sdk)
    assert json.dumps(ours["input"][1]) == part.data  # the item exactly as it came


def test_a_call_given_by_hand_goes_as_a_function_call_item():
    """A tool call built by the caller (no reasoning) is a function_call item and its output."""
    turn = Llm.assistant(None, tool_calls=[ToolCall("call_1", "add", '{"a":1}')])
    sdk = sdk_body(
        model="gpt-4o-mini",
        input=[
            {"role": "user", "content": "1+?"},
            {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": '{"a":1}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "2"},
        ],
        store=False,
    )
    req = Llm.completion_request(
        [Llm.user("1+?"), turn, Llm.tool_result("call_1", "2")], model="gpt-4o-mini"
    )
    field_by_field(blazen_body(req), sdk)


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("failed_midstream.sse", blazen.ProviderError),
        ("failed_rate_limit.sse", blazen.RateLimitError),
        ("error_context_length.sse", blazen.ContextLengthError),
        ("error_after_content.sse", blazen.OverloadedError),
    ],
)
def test_a_failed_response_or_error_event_reads_as_the_sdk_says(name, error):
    """The SDK's last event (response.failed or error), or the APIError it raises for an
    error event nested under "error", and blazen's typed error agree on text and cause."""
    events: list[Any] = []
    with (
        StreamServer([_reply(name)]) as server,
        openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0) as client,
    ):
        try:
            for event in client.responses.create(model="m", input="hi", stream=True):
                events.append(event)
            raised = None
        except openai.APIError as exc:
            raised = exc
    rec, _ = replay(name)
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert rec.text == text and isinstance(rec.error, error)
    if raised is not None:
        assert raised.message in rec.error.message
        assert isinstance(raised.body, dict) and raised.body["code"] in rec.error.body
    elif events[-1].type == "response.failed":
        failed = events[-1].response.error
        assert failed.message in rec.error.message and failed.code in rec.error.body
    else:
        assert events[-1].type == "error"
        assert events[-1].message in rec.error.message and events[-1].code in rec.error.body
