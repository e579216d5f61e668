"""Reasoning on the wire: max_completion_tokens for OpenAI, and reasoning effort and budgets.

Each request goes to a real local server, which records the JSON body sent.
"""

from __future__ import annotations

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.providers import PROVIDERS
from blazen.testing import Recorder

from .conftest import NATIVE, PRESET_NAMES, model_for, ndjson_reply, sse_reply, stream

OPENAI_WIRE = tuple(n for n in NATIVE + PRESET_NAMES if PROVIDERS[n].wire == "openai")


def reply_for(name):
    if name == "ollama":
        return ndjson_reply("text.ndjson")
    wire = PROVIDERS[name].wire
    return sse_reply("text.sse", wire if wire != "openai" else "openai")


def sent_body(server, name, req, **options):
    model = model_for(name, server, **options)
    rec, _ = stream(server, model, req, reply_for(name))
    assert rec.error is None, rec.error
    return server.requests[-1].json()


def refused(server, name, req, **options):
    model = model_for(name, server, **options)
    rec = Recorder()
    Streaming.complete(model, req, rec.handler)
    assert server.requests == []
    assert isinstance(rec.error, blazen.UnsupportedError), rec.error
    assert rec.error.provider == name
    return str(rec.error)


# -- max_tokens on OpenAI's wire ---------------------------------------------------------


@pytest.mark.parametrize("name", OPENAI_WIRE)
def test_openai_and_azure_send_max_completion_tokens_and_compatible_servers_max_tokens(
    server, name
):
    """OpenAI and Azure get max_completion_tokens (reasoning models refuse max_tokens); the rest max_tokens."""
    body = sent_body(server, name, Llm.completion_request([Llm.user("hi")], max_tokens=300))
    field = "max_completion_tokens" if name in ("openai", "azure") else "max_tokens"
    other = "max_tokens" if field == "max_completion_tokens" else "max_completion_tokens"
    assert body[field] == 300
    assert other not in body
    assert PROVIDERS[name].max_tokens_field == field


def test_openai_compat_sends_max_tokens_and_the_field_can_be_chosen(server):
    """openai_compat sends max_tokens; the max_tokens_field option picks either name, and only those."""
    req = Llm.completion_request([Llm.user("hi")], max_tokens=7)
    compat = blazen.Providers.openai_compat("proxy", server.base_url, api_key="k")
    stream(server, compat, req, sse_reply("text.sse"))
    assert server.requests[-1].json()["max_tokens"] == 7
    body = sent_body(server, "openai", req, max_tokens_field="max_tokens")
    assert body["max_tokens"] == 7 and "max_completion_tokens" not in body
    with pytest.raises(ValueError, match="max_tokens_field must be one of"):
        model_for("openai", server, max_tokens_field="maxTokens")


def test_the_provider_table_says_which_field_each_openai_format_provider_sends():
    """The provider table shows max_completion_tokens for openai and azure, max_tokens for presets."""
    from blazen.providers.registry import markdown_table

    lines = markdown_table().splitlines()
    column = [c.strip() for c in lines[0].split("|")].index("`max_tokens` sent as")
    rows = {r[1]: r[column] for r in ([c.strip() for c in x.split("|")] for x in lines[2:])}
    assert rows["`openai`"] == "`max_completion_tokens`"
    assert rows["`azure`"] == "`max_completion_tokens`"
    assert rows["`groq`"] == "`max_tokens`"


# -- reasoning options: validation -------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"reasoning_effort": "extreme"}, ValueError, "reasoning_effort must be one of"),
        ({"reasoning_effort": "HIGH"}, ValueError, "reasoning_effort must be one of"),
        ({"reasoning_effort": 2}, ValueError, "reasoning_effort must be one of"),
        ({"reasoning_budget": 0}, ValueError, "reasoning_budget must be at least 1"),
        ({"reasoning_budget": -5}, ValueError, "reasoning_budget must be at least 1"),
        ({"reasoning_budget": 1.5}, TypeError, "reasoning_budget must be an int"),
        ({"reasoning_budget": True}, TypeError, "reasoning_budget must be an int"),
    ],
)
def test_bad_reasoning_options_are_refused_when_the_request_is_built(kwargs, error, match):
    """An unknown effort or a budget that is not a positive int raises as the request is built."""
    with pytest.raises(error, match=match):
        Llm.completion_request([Llm.user("hi")], **kwargs)


def test_reasoning_options_are_kept_on_the_request():
    """The request holds the effort and budget it was given."""
    req = Llm.completion_request([Llm.user("hi")], reasoning_effort="low", reasoning_budget=2048)
    assert (req.reasoning_effort, req.reasoning_budget) == ("low", 2048)
    plain = Llm.completion_request([Llm.user("hi")])
    assert (plain.reasoning_effort, plain.reasoning_budget) == (None, None)


# -- reasoning options: each provider ----------------------------------------------------


@pytest.mark.parametrize("effort", ["low", "medium", "high"])
@pytest.mark.parametrize("name", ["openai", "azure", "groq", "openrouter"])
def test_reasoning_effort_goes_to_openai_format_servers_as_reasoning_effort(server, name, effort):
    """reasoning_effort is sent as OpenAI's reasoning_effort."""
    body = sent_body(
        server, name, Llm.completion_request([Llm.user("hi")], reasoning_effort=effort)
    )
    assert body["reasoning_effort"] == effort


@pytest.mark.parametrize("name", ["openai", "azure", "deepseek"])
def test_a_reasoning_budget_is_unsupported_on_the_openai_format(server, name):
    """OpenAI's format has no token budget: UnsupportedError, nothing sent, effort suggested."""
    req = Llm.completion_request([Llm.user("hi")], reasoning_budget=2048)
    assert "reasoning_effort" in refused(server, name, req)


def test_no_reasoning_option_sends_no_reasoning_field(server):
    """Without reasoning options no provider gets a reasoning field."""
    req = Llm.completion_request([Llm.user("hi")])
    assert "reasoning_effort" not in sent_body(server, "openai", req)
    assert "thinking" not in sent_body(server, "anthropic", req)
    assert "thinkingConfig" not in sent_body(server, "gemini", req).get("generationConfig", {})
    assert "think" not in sent_body(server, "ollama", req)


def test_anthropic_budget_is_thinking_enabled_below_max_tokens(server):
    """A budget below max_tokens is sent as thinking: enabled with budget_tokens; max_tokens unchanged."""
    req = Llm.completion_request([Llm.user("hi")], reasoning_budget=2048, max_tokens=8000)
    body = sent_body(server, "anthropic", req)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 8000


@pytest.mark.parametrize(
    ("max_tokens", "budget", "sent"),
    [(1000, 4000, 5000), (4000, 4000, 8000), (None, 10000, 14096), (None, 1024, 4096)],
)
def test_anthropic_max_tokens_grows_past_the_budget_keeping_the_answers_room(
    server, max_tokens, budget, sent
):
    """max_tokens at or below the budget grows by the budget (the default 4096 when unset)."""
    req = Llm.completion_request([Llm.user("hi")], reasoning_budget=budget, max_tokens=max_tokens)
    body = sent_body(server, "anthropic", req)
    assert body["max_tokens"] == sent
    assert body["thinking"]["budget_tokens"] == budget < body["max_tokens"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"reasoning_effort": "minimal"}, "reasoning_effort"),
        ({"reasoning_display": "omitted"}, "reasoning_display"),
        ({"reasoning_budget": 1023}, "1024"),
        ({"reasoning_budget": 2048, "temperature": 0.5}, "temperature"),
        ({"reasoning_budget": 2048, "top_p": 0.5}, "top_p"),
        ({"reasoning_budget": 2048, "tool_choice": "required"}, "tool_choice"),
        ({"reasoning_budget": 2048, "tool_choice": "t"}, "tool_choice"),
    ],
)
def test_what_claude_refuses_with_thinking_is_unsupported_before_sending(server, kwargs, match):
    """An undocumented effort, display without thinking, a budget under 1024, temperature,
    low top_p or a forced tool: UnsupportedError."""
    req = Llm.completion_request([Llm.user("hi")], tools=[Llm.tool("t")], **kwargs)
    assert match in refused(server, "anthropic", req)


def test_anthropic_thinking_allows_top_p_from_095_and_auto_tools(server):
    """top_p of 0.95 and tool_choice auto go out beside thinking."""
    req = Llm.completion_request(
        [Llm.user("hi")],
        reasoning_budget=2048,
        top_p=0.95,
        tools=[Llm.tool("t")],
        tool_choice="auto",
    )
    body = sent_body(server, "anthropic", req)
    assert body["thinking"]["budget_tokens"] == 2048
    assert body["top_p"] == 0.95 and body["tool_choice"] == {"type": "auto"}


def test_gemini_budget_is_thinking_budget_with_thoughts_included(server):
    """A budget is generationConfig.thinkingConfig.thinkingBudget with includeThoughts true."""
    req = Llm.completion_request([Llm.user("hi")], reasoning_budget=512, max_tokens=100)
    gen = sent_body(server, "gemini", req)["generationConfig"]
    assert gen == {
        "maxOutputTokens": 100,
        "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": True},
    }


@pytest.mark.parametrize("effort", ["low", "medium", "high"])
def test_gemini_effort_is_thinking_level_with_thoughts_included(server, effort):
    """An effort is generationConfig.thinkingConfig.thinkingLevel with includeThoughts true."""
    req = Llm.completion_request([Llm.user("hi")], reasoning_effort=effort)
    gen = sent_body(server, "gemini", req)["generationConfig"]
    assert gen == {"thinkingConfig": {"thinkingLevel": effort, "includeThoughts": True}}


def test_gemini_refuses_an_effort_and_a_budget_together(server):
    """Gemini takes a level or a budget, not both: UnsupportedError before sending."""
    req = Llm.completion_request([Llm.user("hi")], reasoning_effort="low", reasoning_budget=1024)
    assert "not both" in refused(server, "gemini", req)


@pytest.mark.parametrize(
    ("model", "effort", "think"),
    [
        ("qwen3", "high", True),
        ("deepseek-r1:8b", "low", True),
        ("gpt-oss:20b", "low", "low"),
        ("gpt-oss", "high", "high"),
        ("library/gpt-oss:120b", "medium", "medium"),
    ],
)
def test_ollama_effort_is_think_the_level_for_gpt_oss_else_true(server, model, effort, think):
    """Ollama's think is the level for gpt-oss (which ignores a boolean) and true for others."""
    req = Llm.completion_request([Llm.user("hi")], reasoning_effort=effort, model=model)
    assert sent_body(server, "ollama", req)["think"] == think


def test_ollama_refuses_a_budget(server):
    """Ollama's think takes no token budget: UnsupportedError before sending."""
    req = Llm.completion_request([Llm.user("hi")], reasoning_budget=2048)
    assert "reasoning_effort" in refused(server, "ollama", req)
