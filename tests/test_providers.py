"""The Providers factories: one shape, defaults, keys from the environment, presets, Azure."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import blazen
from blazen import Llm
from blazen.providers import PROVIDERS
from blazen.providers.registry import markdown_table

from .conftest import NATIVE, PRESET_NAMES, model_for, ndjson_reply, sse_reply, stream

KEY_VARS = {
    "openai": "OPENAI_API_KEY",
    "azure": "AZURE_OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    **{name: PROVIDERS[name].key_env[0] for name in PRESET_NAMES},
}
DEFAULTS = {
    "openai": ("gpt-4o-mini", "https://api.openai.com/v1"),
    "anthropic": ("claude-sonnet-4-6", "https://api.anthropic.com"),
    "gemini": ("gemini-2.5-flash", "https://generativelanguage.googleapis.com/v1beta"),
    "ollama": ("llama3.2", "http://localhost:11434"),
    "openrouter": ("openai/gpt-4o-mini", "https://openrouter.ai/api/v1"),
    "groq": ("llama-3.3-70b-versatile", "https://api.groq.com/openai/v1"),
    "together": ("meta-llama/Llama-3.3-70B-Instruct-Turbo", "https://api.together.xyz/v1"),
    "mistral": ("mistral-small-latest", "https://api.mistral.ai/v1"),
    "deepseek": ("deepseek-chat", "https://api.deepseek.com/v1"),
    "fireworks": (
        "accounts/fireworks/models/llama-v3p3-70b-instruct",
        "https://api.fireworks.ai/inference/v1",
    ),
    "perplexity": ("sonar", "https://api.perplexity.ai"),
    "xai": ("grok-3-mini", "https://api.x.ai/v1"),
    "cohere": ("command-a-03-2025", "https://api.cohere.ai/compatibility/v1"),
    "lm_studio": ("default", "http://localhost:1234/v1"),
    "vllm": ("default", "http://localhost:8000/v1"),
    "llamacpp": ("default", "http://localhost:8080/v1"),
}


@pytest.mark.parametrize("name", NATIVE + PRESET_NAMES)
def test_every_factory_has_the_same_shape(name):
    """Providers.<name>(api_key="", model=None, base_url=None, **options) for every provider."""
    params = inspect.signature(getattr(blazen.Providers, name)).parameters
    assert [(p.name, p.default) for p in list(params.values())[:3]] == [
        ("api_key", ""),
        ("model", None),
        ("base_url", None),
    ]
    assert list(params.values())[-1].kind is inspect.Parameter.VAR_KEYWORD


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_defaults_for_model_and_base_url(name, monkeypatch):
    """Each factory has a default model and base URL."""
    monkeypatch.setenv(KEY_VARS.get(name, "UNUSED_KEY"), "k")
    model = getattr(blazen.Providers, name)()
    assert (model.model, model.base_url) == DEFAULTS[name]
    assert model.provider == name


@pytest.mark.parametrize("name", sorted(KEY_VARS))
def test_empty_key_reads_the_environment_and_missing_key_names_the_variable(name, monkeypatch):
    """An empty key reads the usual variable; hosted services without one raise AuthError."""
    factory = getattr(blazen.Providers, name)
    var = KEY_VARS[name]
    extra = {"base_url": "https://example.invalid"} if name == "azure" else {}
    if name not in PRESET_NAMES or PROVIDERS[name].key_required:
        with pytest.raises(blazen.AuthError, match=var):
            factory(**extra)
    monkeypatch.setenv(var, "from-env-SECRET")
    model = factory(**extra)
    assert model.redact("key from-env-SECRET") == "key ***"
    assert "from-env-SECRET" not in repr(model)


def test_extra_header_values_never_show_in_a_repr():
    """Headers often carry a credential (a gateway key): the options name them, never show them."""
    model = blazen.Providers.openai_compat(
        "gw", "http://gw.invalid/v1", headers={"X-Gateway-Key": "gw-SECRET-123"}
    )
    shown = repr(model.options)
    assert "gw-SECRET-123" not in shown and "gw-SECRET-123" not in repr(model)
    assert "headers={'X-Gateway-Key': '***'}" in shown
    assert model.options.headers == {"X-Gateway-Key": "gw-SECRET-123"}


@pytest.mark.parametrize(
    ("name", "var"),
    [
        ("gemini", "GOOGLE_API_KEY"),
        ("cohere", "COHERE_API_KEY"),
        ("perplexity", "PPLX_API_KEY"),
    ],
)
def test_second_key_variable_is_a_fallback(name, var, monkeypatch):
    """GOOGLE_API_KEY, COHERE_API_KEY and PPLX_API_KEY are read when the first is unset."""
    monkeypatch.setenv(var, "second-SECRET")
    assert getattr(blazen.Providers, name)().redact("second-SECRET") == "***"


@pytest.mark.parametrize("name", NATIVE + PRESET_NAMES)
def test_every_factory_takes_the_common_options_and_names_unknown_ones(name, server):
    """max_retries, timeouts and headers work everywhere; a typo is a TypeError naming it."""
    model = model_for(name, server, max_retries=5, idle_timeout=7.0, headers={"X-Team": "a"})
    assert (model.options.max_retries, model.options.idle_timeout) == (5, 7.0)
    assert (
        model.wire.build(Llm.completion_request([Llm.user("x")]), stream=True).headers["X-Team"]
        == "a"
    )
    with pytest.raises(TypeError, match="max_retrys"):
        model_for(name, server, max_retrys=1)


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_presets_speak_openai_with_their_key_as_bearer(server, req, name):
    """A preset sends an OpenAI chat-completions request with its key as a bearer token."""
    model = model_for(name, server, api_key="preset-SECRET")
    rec, _resp = stream(server, model, req, sse_reply("text.sse"))
    assert rec.kinds[-1] == "done"
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.header("Authorization") == "Bearer preset-SECRET"
    body = sent.json()
    assert body["model"] == PROVIDERS[name].model
    # Services that reject unknown fields are not sent stream_options.
    assert ("stream_options" in body) is PROVIDERS[name].stream_usage


@pytest.mark.parametrize("name", ["lm_studio", "vllm", "llamacpp"])
def test_local_presets_need_no_key_and_send_no_authorization(server, req, name):
    """Local servers run without a key: none is required and none is sent."""
    model = getattr(blazen.Providers, name)(base_url=server.base_url)
    stream(server, model, req, sse_reply("text.sse"))
    assert server.requests[0].header("Authorization") is None


def test_openrouter_comments_and_reasoning_deltas(server, req):
    """OpenRouter's ': OPENROUTER PROCESSING' lines are skipped; reasoning is reasoning."""
    model = model_for("openrouter", server)
    rec, resp = stream(server, model, req, sse_reply("reasoning.sse", "openrouter"))
    assert [c.reasoning_delta for c in rec.chunks[:2]] == ["The user asks 2+2.", " That is 4."]
    assert (resp.reasoning, resp.content) == ("The user asks 2+2. That is 4.", "4")
    assert (resp.usage.total_tokens, resp.usage.reasoning_tokens) == (52, 30)


def test_openrouter_finish_reason_error_is_an_error_never_a_stop(server, req):
    """finish_reason "error" ends the stream with a ProviderError and the partial text."""
    model = model_for("openrouter", server)
    rec, resp = stream(server, model, req, sse_reply("finish_error.sse", "openrouter"))
    assert resp is None and rec.kinds == ["chunk", "chunk", "error"]
    assert rec.error.error_type == "finish_reason_error"
    assert rec.error.partial == "Once upon a time"


def test_groq_usage_under_x_groq_is_read(server, req):
    """Groq's x_groq.usage on the last chunk becomes the usage."""
    model = model_for("groq", server)
    _rec, resp = stream(server, model, req, sse_reply("x_groq_usage.sse", "groq"))
    assert resp.content == "Hello there"
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (40, 3)


# -- Azure -------------------------------------------------------------------------------


def test_azure_url_has_deployment_and_api_version_and_key_in_api_key_header(server, req):
    """{base_url}/openai/deployments/{model}/chat/completions?api-version=..., api-key header."""
    model = blazen.Providers.azure(api_key="az-SECRET", model="my-gpt4o", base_url=server.url)
    stream(server, model, req, sse_reply("text.sse"))
    sent = server.requests[0]
    assert sent.path == "/openai/deployments/my-gpt4o/chat/completions?api-version=2024-10-21"
    assert sent.header("api-key") == "az-SECRET"
    assert sent.header("Authorization") is None
    assert sent.json()["stream_options"] == {"include_usage": True}


def test_azure_endpoint_and_version_come_from_options_or_environment(server, monkeypatch):
    """AZURE_OPENAI_ENDPOINT fills base_url; api_version= overrides OPENAI_API_VERSION."""
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "k")
    with pytest.raises(blazen.ValidationError, match="AZURE_OPENAI_ENDPOINT"):
        blazen.Providers.azure()
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com/")
    monkeypatch.setenv("OPENAI_API_VERSION", "2025-01-01-preview")
    model = blazen.Providers.azure(model="dep")
    url = model.wire.build(Llm.completion_request([Llm.user("x")]), stream=True).url
    assert url == (
        "https://res.openai.azure.com/openai/deployments/dep/chat/completions"
        "?api-version=2025-01-01-preview"
    )
    model = blazen.Providers.azure(model="dep", api_version="2024-06-01")
    assert model.wire.build(Llm.completion_request([Llm.user("x")]), stream=True).url.endswith(
        "api-version=2024-06-01"
    )


def test_azure_prompt_filter_chunk_and_content_filter_finish(server, req):
    """prompt_filter_results is skipped; a content-filter finish is done("content_filter")."""
    model = model_for("azure", server)
    rec, resp = stream(server, model, req, sse_reply("content_filter_finish.sse", "azure"))
    assert resp.content == "The fight began when"
    assert rec.done[0] == "content_filter" and resp.raw_finish_reason == "content_filter"
    assert resp.usage.total_tokens == 22


def test_anthropic_options_are_checked(server):
    """anthropic_version and default_max_tokens are typed options."""
    model = model_for("anthropic", server, anthropic_version="2023-01-01", default_max_tokens=99)
    http = model.wire.build(Llm.completion_request([Llm.user("x")]), stream=True)
    assert http.headers["anthropic-version"] == "2023-01-01"
    assert b'"max_tokens": 99' in http.body
    with pytest.raises(TypeError, match="default_max_tokens"):
        model_for("anthropic", server, default_max_tokens="many")


def test_openai_request_shape_with_system_images_tools_and_a_tool_round_trip(server):
    """The OpenAI wire (and so every preset and Azure) sends the full tool-use conversation."""
    from .test_anthropic import tool_turn_request

    model = model_for("openai", server)
    stream(server, model, tool_turn_request(), sse_reply("text.sse"))
    sent = server.requests[0]
    assert sent.header("Authorization") == "Bearer openai-key-SECRET-0123456789"
    assert sent.json() == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in these pictures, and the weather?"},
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "toolu_01A",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_01A", "content": '{"temp_c": 18}'},
            {"role": "user", "content": "Thanks!"},
        ],
        "max_completion_tokens": 300,
        "temperature": 0.5,
        "stop": ["END"],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": {
                        "type": "object",
                        "properties": {"location": {"type": "string"}},
                    },
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_the_registry_the_factories_and_the_docs_agree():
    """One table: every registry row has its factory, every factory a row, the docs' provider page shows it."""
    factories = {
        name
        for name, member in vars(blazen.Providers).items()
        if isinstance(member, staticmethod) and not name.startswith("_")
    }
    assert factories == set(PROVIDERS)
    readme = (Path(__file__).parent.parent / "docs" / "providers.md").read_text()
    assert markdown_table() in readme
    for info in PROVIDERS.values():
        doc = getattr(blazen.Providers, info.name).__doc__ or ""
        for var in info.key_env[:1]:
            assert var in doc, (info.name, var)


def test_message_names_reach_the_openai_wire_and_no_other(server):
    """OpenAI-format wires send ``name`` on system, user and assistant messages; others omit it."""
    req = Llm.completion_request(
        [
            Llm.system("You are terse.", name="rules"),
            Llm.user("Hi", name="ada"),
            Llm.assistant("Hello, Ada.", name="bot"),
            Llm.user("Again", images=["https://example.com/a.png"], name="ada"),
            Llm.user("No name"),
        ]
    )
    for name in ("openai", "azure", "groq"):
        model = model_for(name, server)
        stream(server, model, req, sse_reply("text.sse"))
        sent = server.requests[-1].json()["messages"]
        assert [m.get("name") for m in sent] == ["rules", "ada", "bot", "ada", None], name
        assert sent[3]["content"][0] == {"type": "text", "text": "Again"}
    replies = {
        "anthropic": sse_reply("text.sse", "anthropic"),
        "gemini": sse_reply("text.sse", "gemini"),
        "ollama": ndjson_reply("text.ndjson"),
    }
    for name, reply in replies.items():
        stream(server, model_for(name, server), req, reply)
        assert '"name"' not in server.requests[-1].body.decode(), name
