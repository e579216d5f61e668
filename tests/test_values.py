"""Values are frozen and reusable; builders reject bad input at construction."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys

import pytest

import blazen
from blazen import Llm


def test_values_are_frozen():
    """A built request cannot be changed, so sharing it is safe."""
    req = Llm.completion_request([Llm.user("hi")], max_tokens=5)
    with pytest.raises(AttributeError, match="CompletionRequest is immutable"):
        req.max_tokens = 6  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del req.messages  # type: ignore[misc]
    with pytest.raises(AttributeError):
        req.other = 1  # type: ignore[attr-defined]
    assert isinstance(req.messages, tuple)


def _values() -> list[object]:
    call = blazen.ToolCall("c1", "lookup", '{"q": "x"}')
    return [
        Llm.completion_request(
            [Llm.system("be brief"), Llm.user("hi", images=["https://e.com/a.png"])],
            max_tokens=5,
            temperature=0.5,
            stop=["END"],
        ),
        Llm.assistant("ok", [call]),
        call,
        blazen.StreamChunk(content_delta="a", tool_calls=(call,), is_final=True),
        blazen.TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3),
        blazen.CompletionResponse(content="x", finish_reason="stop", usage=blazen.TokenUsage()),
        blazen.ModelOptions(max_retries=1, headers={"X-A": "b"}),
        blazen.Event.create("custom", {"n": 1}),
    ]


@pytest.mark.parametrize("value", _values(), ids=lambda v: type(v).__name__)
def test_values_compare_copy_and_pickle_by_their_fields(value):
    """Equal when every field is equal; copies and pickles come back equal and still frozen."""
    for again in (copy.copy(value), copy.deepcopy(value), pickle.loads(pickle.dumps(value))):
        assert again == value and type(again) is type(value)
        assert repr(again) == repr(value)
        with pytest.raises(AttributeError):
            again.x = 1  # type: ignore[attr-defined]
    assert value != object() and (value == object()) is False
    assert repr(value).startswith(type(value).__name__ + "(")


def test_values_hash_by_fields_unless_they_hold_a_dict():
    a = Llm.completion_request([Llm.user("hi")], max_tokens=5)
    b = Llm.completion_request([Llm.user("hi")], max_tokens=5)
    c = Llm.completion_request([Llm.user("hi")], max_tokens=6)
    assert a == b and hash(a) == hash(b) and a != c and len({a, b, c}) == 2
    with pytest.raises(TypeError, match="unhashable"):
        hash(Llm.completion_request([Llm.user("hi")], response_format={"type": "json_object"}))


def test_repr_shows_fields_in_order_and_aliases():
    usage = blazen.TokenUsage(prompt_tokens=1)
    assert repr(usage) == (
        "TokenUsage(prompt_tokens=1, completion_tokens=0, total_tokens=0, "
        "cached_tokens=0, cache_write_tokens=0, reasoning_tokens=0)"
    )
    assert repr(blazen.ToolCall("c", "f", "{}")) == (
        "ToolCall(id='c', name='f', arguments_json='{}')"
    )


def test_replace_builds_a_validated_changed_copy():
    """``copy.replace`` (3.13+) or ``__replace__``: a new value, checked like any other."""
    req = Llm.completion_request([Llm.user("hi")], max_tokens=5)
    hotter = req.__replace__(temperature=0.9)
    assert hotter.temperature == 0.9 and hotter.max_tokens == 5 and req.temperature is None
    call = blazen.ToolCall("c", "f", "{}").__replace__(arguments_json='{"a": 1}')
    assert call.arguments() == {"a": 1} and call.id == "c"
    with pytest.raises(TypeError, match="no field"):
        req.__replace__(temprature=0.9)
    with pytest.raises(ValueError, match="role"):
        Llm.user("x").__replace__(role="robot")
    if sys.version_info >= (3, 13):
        assert copy.replace(req, max_tokens=9).max_tokens == 9  # type: ignore[attr-defined]  # novermin


def test_values_match_positionally_where_they_are_built_positionally():
    """``case ToolCall(id, name, args)`` works as it did (``match`` needs 3.10 to write)."""
    assert blazen.ToolCall.__match_args__ == ("id", "name", "arguments_json")
    assert blazen.Event.__match_args__ == ("event_type", "data_json")
    assert blazen.CompletionRequest.__dict__.get("__match_args__", ()) == ()


def test_importing_blazen_leaves_what_streaming_does_not_need_unloaded():
    """asyncio, the agent, the workflow engine and the native wire formats load on first use."""
    lazy = {
        "asyncio",
        "blazen.agent",
        "blazen._stream.aio",
        "blazen._stream.handle",
        "blazen.providers.anthropic",
        "blazen.providers.gemini",
        "blazen.providers",
        "blazen.providers.ollama",
        "blazen.workflow.run",
        "blazen.workflow.context",
        "uuid",
    }
    code = f"import sys, blazen; print(sorted({lazy!r} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_tool_call_arguments_parse_and_empty_means_empty_object():
    assert blazen.ToolCall("c1", "f", '{"a": 1}').arguments() == {"a": 1}
    assert blazen.ToolCall("c1", "f", "").arguments() == {}
    with pytest.raises(ValueError, match="not a JSON object"):
        blazen.ToolCall("c1", "f", "[1]").arguments()
    assert blazen.ToolCall("c", "f", "{}") == blazen.ToolCall(id="c", name="f", arguments_json="{}")


def test_token_usage_aliases():
    u = blazen.TokenUsage(prompt_tokens=3, completion_tokens=4, total_tokens=7)
    assert (u.input_tokens, u.output_tokens) == (3, 4)


def test_user_message_with_images_by_url_and_base64():
    m = Llm.user(
        "look",
        images=[
            "https://example.com/a.png",
            Llm.image(data="iVBORw0KGgo=", media_type="image/png"),
        ],
    )
    assert [i.as_data_url() for i in m.images] == [
        "https://example.com/a.png",
        "data:image/png;base64,iVBORw0KGgo=",
    ]


def test_assistant_and_tool_result_messages():
    call = blazen.ToolCall("call_1", "get_weather", '{"city": "Oslo"}')
    a = Llm.assistant(tool_calls=[call])
    r = Llm.tool_result("call_1", {"temp": 3})
    assert a.tool_calls == (call,) and r.content == '{"temp": 3}' and r.tool_call_id == "call_1"


def test_tool_parameters_are_copied_so_later_mutation_cannot_leak_in():
    params = {"type": "object", "properties": {"q": {"type": "string"}}}
    t = Llm.tool("search", "Search", params)
    params["properties"]["q"]["type"] = "integer"
    assert t.parameters["properties"]["q"]["type"] == "string"


@pytest.mark.parametrize(
    ("call", "exc"),
    [
        (lambda: Llm.completion_request("hi"), TypeError),
        (lambda: Llm.completion_request(["hi"]), TypeError),
        (lambda: Llm.completion_request([]), ValueError),
        (lambda: Llm.completion_request([Llm.user("x")], max_tokens=0), ValueError),
        (lambda: Llm.completion_request([Llm.user("x")], max_tokens="5"), TypeError),
        (lambda: Llm.completion_request([Llm.user("x")], temperature=3), ValueError),
        (lambda: Llm.completion_request([Llm.user("x")], top_p=-0.1), ValueError),
        (lambda: Llm.completion_request([Llm.user("x")], stop=[""]), ValueError),
        (lambda: Llm.completion_request([Llm.user("x")], tool_choice="nope"), ValueError),
        (lambda: Llm.completion_request([Llm.user("x")], tools=[{"name": "f"}]), TypeError),
        (lambda: Llm.completion_request([Llm.user("x")], response_format="json"), TypeError),
        (lambda: Llm.user("x", images=["not a url"]), ValueError),
        (lambda: Llm.image(), ValueError),
        (lambda: Llm.assistant(), ValueError),
        (lambda: Llm.tool_result("", "x"), ValueError),
        (lambda: Llm.tool("", "d"), ValueError),
        (lambda: Llm.tool("f", "d", {"bad": object()}), TypeError),
        (lambda: blazen.ChatMessage(role="robot", content="x"), ValueError),
        (lambda: blazen.Providers.openai(api_key="k", base_url="ftp://x"), ValueError),
        (lambda: blazen.Providers.openai(api_key="k", max_retries=-1), ValueError),
        (lambda: blazen.Providers.openai(api_key="k", idle_timeout=0), ValueError),
        (lambda: blazen.Providers.openai(api_key="k", bogus_option=1), TypeError),
    ],
)
def test_invalid_values_fail_at_construction(call, exc):
    """A clear ValueError/TypeError when the value is built, never later on the wire."""
    with pytest.raises(exc):
        call()


def test_tool_choice_may_name_a_tool():
    t = Llm.tool("f", "d")
    req = Llm.completion_request([Llm.user("x")], tools=[t], tool_choice="f")
    assert req.tool_choice == "f"


def test_model_repr_never_shows_the_key():
    m = blazen.Providers.openai(api_key="sk-very-secret")
    assert "sk-very-secret" not in repr(m) and "openai" in repr(m)


def test_messages_carry_an_optional_name_as_the_kotlin_seed_does():
    """``ChatMessage.name`` defaults to None; ``Llm.user/system/assistant(..., name=)`` set it."""
    assert Llm.user("hi").name is None and blazen.ChatMessage(role="user", content="x").name is None
    assert Llm.user("hi", name="ada").name == "ada"
    assert Llm.system("be brief", name="rules").name == "rules"
    assert Llm.assistant("ok", name="bot_1").name == "bot_1"
    kotlin = blazen.ChatMessage(role="user", content="Tell me a joke.", name=None)
    assert kotlin == Llm.user("Tell me a joke.") and kotlin != Llm.user("Tell me a joke.", name="a")
    assert pickle.loads(pickle.dumps(Llm.user("hi", name="ada"))).name == "ada"
    with pytest.raises(TypeError, match="message name must be a string"):
        Llm.user("hi", name=7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="message name must be non-empty, without whitespace"):
        Llm.user("hi", name="Ada Lovelace")
    with pytest.raises(ValueError, match="message name"):
        blazen.ChatMessage(role="user", content="x", name="")
