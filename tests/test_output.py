"""Typed output (``output=``): the strict schema each provider receives, and the answer read back."""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
from typing import Any, Literal, Optional, TypedDict

import attrs
import pytest

import blazen
from blazen import Llm, OutputValidationError, RefusalError, Streaming
from blazen._schema.output import output_spec
from blazen.testing import Recorder, Reply

from .conftest import model_for, ndjson_reply, sse_reply


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


@attrs.frozen
class Wind:
    speed_kmh: float
    direction: Literal["N", "E", "S", "W"]


@attrs.frozen
class Weather:
    """The weather in one city."""

    city: str
    temperature: float
    unit: Unit
    wind: Optional[Wind]
    tags: list[str]
    note: str = "none"


if sys.version_info >= (3, 11):
    from typing import NotRequired  # novermin (3.11+: its test is skipped before)

    class Item(TypedDict):
        name: str
        size: NotRequired[int]


class WindTD(TypedDict):
    speed_kmh: float
    direction: str


class WeatherTD(TypedDict):
    city: str
    temperature: float
    unit: Literal["celsius", "fahrenheit"]
    wind: Optional[WindTD]
    tags: list[str]
    note: Optional[str]


EXPECTED = Weather(
    city="Paris",
    temperature=18.5,
    unit=Unit.C,
    wind=Wind(speed_kmh=12.0, direction="W"),
    tags=["cloudy", "mild"],
)
ANSWER = (
    '{"city":"Paris","temperature":18.5,"unit":"celsius","wind":{"speed_kmh":12,'
    '"direction":"W"},"tags":["cloudy","mild"],"note":null}'
)

STRICT_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temperature": {"type": "number"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "wind": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "speed_kmh": {"type": "number"},
                        "direction": {"type": "string", "enum": ["N", "E", "S", "W"]},
                    },
                    "required": ["speed_kmh", "direction"],
                    "additionalProperties": False,
                },
                {"type": "null"},
            ]
        },
        "tags": {"type": "array", "items": {"type": "string"}},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["city", "temperature", "unit", "wind", "tags", "note"],
    "description": "The weather in one city.",
    "additionalProperties": False,
}


def request(output: Any = Weather, **kw: Any) -> blazen.CompletionRequest:
    return Llm.completion_request([Llm.user("Weather in Paris?")], output=output, **kw)


def sse(text: str) -> Reply:
    return Reply.sse(text.encode())


def openai_stream(content: list[str], finish: str = "stop") -> Reply:
    """An OpenAI stream whose deltas carry ``content``, ending with ``finish``."""
    frames = [{"choices": [{"index": 0, "delta": {"content": c}}]} for c in content]
    frames.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    body = "".join(f"data: {json.dumps(f)}\n\n" for f in frames) + "data: [DONE]\n\n"
    return sse(body)


# -- the schema ----------------------------------------------------------------------


def test_an_attrs_class_becomes_a_strict_schema_with_every_field_required():
    """Closed objects, all fields required, a defaulted field nullable, the docstring kept."""
    spec = output_spec(Weather)
    assert spec.name == "Weather"
    assert spec.schema == STRICT_SCHEMA
    assert spec.description == "The weather in one city."


def test_a_dataclass_and_a_typeddict_give_the_same_shape():
    """Dataclasses and TypedDicts (with a key that may be left out) are described alike."""

    @dataclasses.dataclass
    class Point:
        x: int
        y: int = 0

    class Box(TypedDict, total=False):
        label: str

    assert output_spec(Point).schema == {
        "type": "object",
        "properties": {
            "x": {"type": "integer"},
            "y": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    assert output_spec(Box).schema["properties"] == {
        "label": {"anyOf": [{"type": "string"}, {"type": "null"}]}
    }


@pytest.mark.parametrize(
    ("hint", "words"),
    [(dict[str, int], "free-form objects"), (Any, "Any"), (tuple[int, str], "fixed-length")],
)
def test_a_field_a_strict_schema_cannot_say_is_refused_when_the_request_is_built(hint, words):
    """dict keys, Any and fixed tuples raise TypeError naming the field, before any request."""
    Bad = attrs.make_class("Bad", {"field": attrs.field(type=hint)})
    with pytest.raises(TypeError, match=words) as info:
        request(Bad)
    assert "Bad.field" in str(info.value)


@pytest.mark.parametrize(
    "value",
    [int, str, "Weather", Weather(city="x", temperature=1, unit=Unit.C, wind=None, tags=[])],
)
def test_output_must_be_a_record_class(value):
    """A scalar type, a string or an instance is a TypeError that says what output= takes."""
    with pytest.raises(TypeError, match="attrs class, a dataclass or a TypedDict"):
        request(value)


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"tool_choice": "required", "tools": [Llm.tool("lookup")]}, "forces a tool"),
        ({"tool_choice": "lookup", "tools": [Llm.tool("lookup")]}, "forces a tool"),
        ({"tools": [Llm.tool("Weather")]}, "named 'Weather'"),
    ],
)
def test_output_with_a_conflicting_option_is_a_value_error(kw, words):
    """output= cannot share the answer's shape with response_format or a forced tool."""
    with pytest.raises(ValueError, match=words):
        request(**kw)


def test_output_with_tools_on_auto_is_allowed():
    """A model may still call tools before it answers in the schema (OpenAI, Gemini)."""
    req = request(tools=[Llm.tool("lookup")], tool_choice="auto")
    assert req.output is not None and req.tools[0].name == "lookup"


# -- what each provider receives -----------------------------------------------------


def test_openai_format_sends_a_strict_json_schema_response_format(server):
    """response_format is json_schema with name, schema and strict: true."""
    model = model_for("openai", server)
    body = model.wire.body(request(), stream=True)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Weather", "schema": STRICT_SCHEMA, "strict": True},
    }


def test_gemini_sends_the_schema_as_response_json_schema(server):
    """generationConfig asks for application/json shaped by responseJsonSchema."""
    model = model_for("gemini", server)
    body = model.wire.body(request(max_tokens=200))
    assert body["generationConfig"] == {
        "maxOutputTokens": 200,
        "responseMimeType": "application/json",
        "responseJsonSchema": STRICT_SCHEMA,
    }


def test_ollama_sends_the_schema_as_format(server):
    """Ollama's format takes the schema itself."""
    model = model_for("ollama", server)
    assert model.wire.body(request(), stream=True)["format"] == STRICT_SCHEMA


def test_anthropic_sends_the_schema_as_output_config_format(server):
    """By default output= is structured outputs: output_config.format with the JSON schema."""
    model = model_for("anthropic", server)
    body = model.wire.body(request(), stream=True)
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": STRICT_SCHEMA}}
    assert "tools" not in body and "tool_choice" not in body


def test_anthropic_output_format_goes_with_thinking(server):
    """output_config.format combines with thinking (the forced tool could not)."""
    model = model_for("anthropic", server)
    body = model.wire.body(request(reasoning_budget=2048), stream=True)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["output_config"]["format"]["schema"] == STRICT_SCHEMA


def test_anthropic_refuses_output_format_with_cited_documents_before_sending(server):
    """Structured outputs and citations cannot be combined: UnsupportedError, nothing sent."""
    model = model_for("anthropic", server, max_retries=0)
    doc = Llm.document(b"The sky is blue.", media_type="text/plain", citations=True)
    req = Llm.completion_request([Llm.user("Weather?", attachments=[doc])], output=Weather)
    with pytest.raises(blazen.UnsupportedError, match="citations"):
        Streaming.complete(model, req)
    assert server.requests == []


def test_anthropic_sends_a_forced_tool_whose_input_is_the_answer(server):
    """With structured_output="tool": one tool named after the class, and tool_choice forcing it."""
    model = model_for("anthropic", server, structured_output="tool")
    body = model.wire.body(request(), stream=True)
    assert body["tools"] == [
        {
            "name": "Weather",
            "description": "The weather in one city.",
            "input_schema": STRICT_SCHEMA,
        }
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "Weather"}


def test_anthropic_refuses_output_with_thinking_before_sending(server):
    """Claude refuses a forced tool while thinking: UnsupportedError, nothing sent."""
    model = model_for("anthropic", server, max_retries=0, structured_output="tool")
    with pytest.raises(blazen.UnsupportedError, match="reasoning_budget"):
        Streaming.complete(model, request(reasoning_budget=2048))
    assert server.requests == []


@pytest.mark.parametrize(
    ("choice", "names"), [("auto", ["lookup", "Weather"]), ("none", ["Weather"])]
)
def test_anthropic_offers_the_answer_tool_beside_the_callers_tools(server, choice, names):
    """With tools on auto the model must call one of them or the answer's (tool_choice any)."""
    model = model_for("anthropic", server, structured_output="tool")
    body = model.wire.body(request(tools=[Llm.tool("lookup")], tool_choice=choice), stream=True)
    assert [t["name"] for t in body["tools"]] == names
    forced = {"type": "tool", "name": "Weather"}
    assert body["tool_choice"] == ({"type": "any"} if choice == "auto" else forced)


# -- the answer read back ------------------------------------------------------------


def test_openai_stream_gives_a_validated_instance(server, model, complete):
    """Every form returns resp.output as the class; on_done sees finish and usage as always."""
    server.add(sse_reply("structured_output.sse"))
    rec = Recorder()
    resp = complete(model, request(), rec.handler)
    assert resp.output == EXPECTED
    assert resp.content == ANSWER == rec.text
    assert rec.kinds[-1] == "done" and rec.terminals == 1
    assert rec.done[0] == "stop" and rec.done[1].total_tokens == 119


def test_a_typeddict_answer_is_a_checked_dict(server, model):
    """A TypedDict output is the decoded dict, its values converted and checked."""

    server.add(sse_reply("structured_output.sse"))
    resp = Streaming.complete(model, request(WeatherTD))
    assert resp.output == {
        "city": "Paris",
        "temperature": 18.5,
        "unit": "celsius",
        "wind": {"speed_kmh": 12.0, "direction": "W"},
        "tags": ["cloudy", "mild"],
        "note": None,
    }


@pytest.mark.parametrize(
    ("provider", "reply"),
    [
        ("gemini", sse_reply("structured_output.sse", "gemini")),
        ("ollama", ndjson_reply("structured_output.ndjson")),
        ("anthropic", sse_reply("structured_output.sse", "anthropic")),
    ],
)
def test_every_provider_stream_gives_the_same_instance(server, provider, reply):
    """Gemini's text, Ollama's lines and Anthropic's forced tool all become one Weather."""
    model = model_for(provider, server, max_retries=0)
    server.add(reply)
    rec = Recorder()
    resp = Streaming.complete(model, request(), rec.handler)
    assert resp.output == EXPECTED
    assert json.loads(resp.content) == json.loads(ANSWER)
    assert resp.finish_reason == "stop" and resp.tool_calls == ()
    assert rec.kinds[-1] == "done" and rec.done[0] == "stop"


def test_anthropic_callbacks_see_the_forced_tool_input_as_it_streams(server):
    """input_json_delta fragments reach on_chunk as the tool call's growing arguments."""
    model = model_for("anthropic", server)
    server.add(sse_reply("structured_output.sse", "anthropic"))
    rec = Recorder()
    Streaming.complete(model, request(), rec.handler)
    growing = [c.tool_calls[0].arguments_json for c in rec.chunks if c.tool_calls]
    assert next(g for g in growing if g) == '{"city":"Par' and growing[-1] == ANSWER


def test_non_streamed_openai_and_anthropic_answers_are_validated(server):
    """model.complete() reads the message content (OpenAI) or tool input (Anthropic)."""
    openai_body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ANSWER, "refusal": None},
                "finish_reason": "stop",
            }
        ],
    }
    anthropic_body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Weather", "input": json.loads(ANSWER)}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 600, "output_tokens": 60},
    }
    server.add(Reply.json(openai_body), Reply.json(anthropic_body))
    assert model_for("openai", server).complete(request()).output == EXPECTED
    resp = model_for("anthropic", server).complete(request())
    assert resp.output == EXPECTED and resp.finish_reason == "stop" and resp.tool_calls == ()


# -- answers that are not the type ---------------------------------------------------


def _one_error(rec: Recorder) -> Any:
    assert rec.kinds[-1] == "error" and rec.terminals == 1
    assert not any(c.is_final for c in rec.chunks), "a final chunk went out before the error"
    return rec.error


@pytest.mark.parametrize(
    ("content", "finish", "words"),
    [
        (["Sure! It is sunny."], "stop", "not JSON"),
        (['{"city":"Paris","temperature":18.5,"unit":"celsius"}'], "stop", "wind: required"),
        ([ANSWER.replace("18.5", '"warm"')], "stop", "temperature: expected number"),
        ([ANSWER.replace('"celsius"', '"kelvin"')], "stop", "must be one of"),
        (['{"city":"Paris","tempera'], "length", "cut off by max_tokens"),
        ([], "stop", "no text"),
        (["[" * 50_000 + "]" * 50_000], "stop", "nested too deeply"),
    ],
)
def test_an_answer_that_is_not_the_type_is_the_one_error(server, model, content, finish, words):
    """Bad JSON, a missing field, a wrong type or a cut-off answer: OutputValidationError, raw kept."""
    server.add(openai_stream(content, finish))
    rec = Recorder()
    assert Streaming.complete(model, request(), rec.handler) is None
    err = _one_error(rec)
    assert type(err) is OutputValidationError and isinstance(err, blazen.ValidationError)
    assert words in str(err) and "err.raw" in str(err)
    assert err.raw == "".join(content) == rec.text == err.partial


@attrs.frozen
class Checked:
    n: int = attrs.field()

    @n.validator
    def _positive(self, _attribute: Any, value: int) -> None:
        if value < 0:
            raise RuntimeError("n must not be negative")


def test_a_class_validator_that_raises_anything_is_an_output_validation_error(server, model):
    """A validator raising RuntimeError still ends the stream with OutputValidationError."""
    server.add(openai_stream(['{"n": -1}']))
    rec = Recorder()
    Streaming.complete(model, request(Checked), rec.handler)
    err = _one_error(rec)
    assert type(err) is OutputValidationError and "must not be negative" in str(err)
    assert isinstance(err.__cause__, RuntimeError)


def test_a_key_echoed_in_the_answer_is_masked_in_raw(server, model):
    """The error's raw text passes through the model's key masking like every message."""
    server.add(openai_stream(['{"city": "sk-test-SECRET-0123456789"}']))
    with pytest.raises(OutputValidationError) as info:
        Streaming.complete(model, request())
    assert "SECRET" not in info.value.raw and "SECRET" not in repr(vars(info.value))


def test_without_a_handler_the_validation_error_raises(server, model, complete):
    """Every form raises the OutputValidationError when nobody handles errors."""
    server.add(openai_stream(["not json"]))
    with pytest.raises(OutputValidationError) as info:
        complete(model, request())
    assert info.value.raw == "not json"


def test_a_non_streamed_invalid_answer_raises_once(server, model):
    """model.complete() raises the same error, and does not retry the request."""
    body = {"choices": [{"index": 0, "message": {"content": "{}"}, "finish_reason": "stop"}]}
    server.add(Reply.json(body))
    with pytest.raises(OutputValidationError, match="city: required"):
        model.complete(request())
    assert len(server.requests) == 1


# -- refusals --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "refusal"),
    [
        ("refusal_plain.sse", "I can't help with that."),
        ("refusal_structured_output.sse", None),
        ("refusal_after_content.sse", " Sorry, I cannot continue."),
    ],
)
def test_a_refused_answer_raises_a_refusal_error_not_a_json_error(server, model, fixture, refusal):
    """OpenAI's delta.refusal (one delta, several, after content) is a RefusalError."""
    server.add(sse_reply(fixture))
    rec = Recorder()
    Streaming.complete(model, request(), rec.handler)
    err = _one_error(rec)
    assert isinstance(err, RefusalError) and isinstance(err, OutputValidationError)
    assert err.refusal and err.refusal in str(err)
    if refusal is not None:
        assert err.refusal == refusal
    assert "JSON" not in str(err)
    assert [c.refusal_delta for c in rec.chunks if c.refusal_delta]


def test_anthropic_refusal_stop_is_a_refusal_error(server):
    """stop_reason refusal with output= raises RefusalError carrying the explanation."""
    model = model_for("anthropic", server)
    server.add(sse_reply("refusal.sse", "anthropic"))
    with pytest.raises(RefusalError) as info:
        Streaming.complete(model, request())
    assert info.value.refusal == "This request was declined because it could enable cyber harm."


def test_a_non_streamed_refusal_is_a_refusal_error(server, model):
    """message.refusal of a whole response is the same RefusalError."""
    message = {"role": "assistant", "content": None, "refusal": "No."}
    server.add(Reply.json({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}))
    with pytest.raises(RefusalError, match=r"No\."):
        model.complete(request())


def test_a_turn_that_calls_tools_first_has_no_output_and_no_error(server, model):
    """With tools on auto, a tool-call turn ends done with output None (no answer yet)."""
    frames = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "lookup", "arguments": "{}"},
                            }
                        ]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    server.add(sse("".join(f"data: {json.dumps(f)}\n\n" for f in frames) + "data: [DONE]\n\n"))
    rec = Recorder()
    resp = Streaming.complete(model, request(tools=[Llm.tool("lookup")]), rec.handler)
    assert resp.output is None and resp.tool_calls[0].name == "lookup"
    assert rec.kinds[-1] == "done" and rec.done[0] == "tool_calls"


def test_requests_without_output_are_untouched(server, model):
    """Prose without output= is never parsed, and response.output stays None."""
    server.add(openai_stream(["plain prose"]))
    resp = Streaming.complete(model, Llm.completion_request([Llm.user("hi")]))
    assert resp.output is None and resp.content == "plain prose"


def test_the_errors_pickle_with_their_text():
    """raw and refusal survive pickling (a process pool hands errors back that way)."""
    import pickle

    err = pickle.loads(pickle.dumps(RefusalError("declined", refusal="no", raw="")))
    assert (err.refusal, err.raw, err.kind) == ("no", "", "refusal")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="NotRequired is in typing from 3.11")
def test_typeddict_not_required_keys_are_nullable_and_dropped_when_null(server, model):
    """A NotRequired key goes out as 'type or null'; a null answer leaves the key out."""
    assert output_spec(Item).schema["properties"]["size"] == {
        "anyOf": [{"type": "integer"}, {"type": "null"}]
    }
    server.add(openai_stream(['{"name":"a","size":null}']))
    assert Streaming.complete(model, request(Item)).output == {"name": "a"}


def test_a_request_built_directly_takes_the_class_too():
    """CompletionRequest(output=Weather) and __replace__ make the same spec as Llm does."""
    direct = blazen.CompletionRequest(messages=(Llm.user("hi"),), output=Weather)
    assert direct.output == output_spec(Weather)
    assert request(None).__replace__(output=Weather).output == direct.output
    with pytest.raises(TypeError, match="output= must be"):
        blazen.CompletionRequest(messages=(Llm.user("hi"),), output=int)


def test_a_gemini_safety_stop_is_a_refusal_error_not_a_json_error(server):
    """finishReason SAFETY (content_filter) with output= raises RefusalError, never a parse error."""
    model = model_for("gemini", server)
    server.add(sse_reply("safety_finish.sse", "gemini"))
    rec = Recorder()
    Streaming.complete(model, request(), rec.handler)
    err = _one_error(rec)
    assert isinstance(err, RefusalError) and "content filter" in str(err)


def test_structured_output_json_object_sends_the_schema_beside_json_object(server):
    """structured_output='json_object' asks for {"type": "json_object", "schema"} instead."""
    from blazen.testing import Reply, openai_sse

    @attrs.frozen
    class Word:
        word: str

    server.add(Reply.sse(openai_sse(['{"word": "sky"}'])))
    model = blazen.Providers.openai_compat(
        "llamacpp", server.base_url, structured_output="json_object"
    )
    resp = Streaming.complete(
        model, blazen.Llm.completion_request([blazen.Llm.user("a word")], output=Word)
    )
    sent = server.requests[0].json()["response_format"]
    assert (
        sent["type"] == "json_object" and sent["schema"]["properties"]["word"]["type"] == "string"
    )
    assert resp.output == Word("sky")
    with pytest.raises(ValueError, match="structured_output"):
        blazen.Providers.openai_compat("x", server.base_url, structured_output="grammar")
