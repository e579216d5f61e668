"""Values are frozen and reusable; builders reject bad input at construction."""

from __future__ import annotations

import attrs
import pytest

import blazen
from blazen import Llm


def test_values_are_frozen():
    """A built request cannot be changed, so sharing it is safe."""
    req = Llm.completion_request([Llm.user("hi")], max_tokens=5)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        req.max_tokens = 6  # type: ignore[misc]
    assert isinstance(req.messages, tuple)


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
