"""The one table of providers: their wire format, where they live, and their key variables.

``Providers``' factories, the command line (``--provider`` names, which key in the
environment picks a provider) and the provider table of the docs (``docs/providers.md``) all
read :data:`PROVIDERS`; a test fails when that table and this one disagree. Adding an
OpenAI-compatible service is adding one row here and a one-line factory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

import attrs

from .._types import immutable
from .capabilities import table_cells

__all__ = [
    "MAX_TOKENS_FIELDS",
    "PROVIDERS",
    "ProviderInfo",
    "compat_key_variable",
    "key_variables",
    "markdown_table",
]


#: The names OpenAI-format servers take for ``max_tokens``: the old one, and the one OpenAI's
#: reasoning models (o-series, gpt-5) require.
MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")


@immutable
@attrs.frozen(kw_only=True)
class ProviderInfo:
    """One provider: how it is reached and where its key comes from."""

    #: The factory's name on ``Providers`` and the CLI's ``--provider`` value.
    name: str
    #: The wire format it speaks: ``openai``, ``anthropic``, ``gemini`` or ``ollama``.
    wire: str
    #: Where it lives when no ``base_url`` is given (None: the caller must say).
    base_url: Optional[str]
    #: Environment variables read for a key, in order, when ``api_key`` is ``""``.
    key_env: tuple[str, ...]
    #: The model used when none is given.
    model: str
    #: Hosted services fail early without a key; local servers run without one.
    key_required: bool = True
    #: Environment variables read for ``base_url`` when none is given.
    url_env: tuple[str, ...] = ()
    #: Whether the service accepts ``stream_options`` (some reject unknown fields with 422).
    stream_usage: bool = True
    #: Whether a key in the environment is enough for the CLI to pick it on its own.
    auto: bool = True
    #: What the docs' provider table says of the wire.
    summary: str = "chat completions"
    #: The field an OpenAI-format request's ``max_tokens`` is sent as (option
    #: ``max_tokens_field`` overrides it): ``max_completion_tokens`` for OpenAI itself,
    #: whose reasoning models refuse ``max_tokens``; ``max_tokens`` for servers that only
    #: know the older name.
    max_tokens_field: str = "max_tokens"
    #: The field an OpenAI-format server wants an assistant turn's reasoning text back in
    #: (option ``reasoning_field`` overrides it), or None: most never read it, and some
    #: refuse unknown fields. DeepSeek's thinking mode refuses a tool-call turn without its
    #: ``reasoning_content`` (https://api-docs.deepseek.com/guides/thinking_mode).
    reasoning_field: Optional[str] = None
    #: Whether the server sends ``reasoning_details`` (OpenRouter): kept, and sent back.
    reasoning_details: bool = False
    #: Whether the server answers OpenAI's Responses API (``api="responses"``), as its
    #: current documentation says (each row below links it).
    responses: bool = False
    #: Where it answers the Responses API when that is not ``{base_url}/responses`` (used
    #: when no ``base_url`` is given).
    responses_url: Optional[str] = None
    #: The embedding model ``model.embed()`` uses when none is named (option
    #: ``embedding_model`` overrides it), or None where the service has no embedding
    #: endpoint (``embed`` then raises UnsupportedError unless the option names a model).
    embedding_model: Optional[str] = None


def _compat(
    name: str,
    base_url: str,
    key_env: tuple[str, ...],
    model: str,
    *,
    local: bool = False,
    stream_usage: bool = True,
    reasoning_field: Optional[str] = None,
    reasoning_details: bool = False,
    responses: bool = False,
    responses_url: Optional[str] = None,
    embedding_model: Optional[str] = None,
) -> ProviderInfo:
    return ProviderInfo(
        name=name,
        wire="openai",
        base_url=base_url,
        key_env=key_env,
        model=model,
        key_required=not local,
        stream_usage=stream_usage,
        reasoning_field=reasoning_field,
        reasoning_details=reasoning_details,
        responses=responses,
        responses_url=responses_url,
        embedding_model=embedding_model if not local else "default",
        auto=not local,
        summary="chat completions on localhost" if local else "chat completions",
    )


_ROWS = (
    ProviderInfo(
        name="openai",
        wire="openai",
        base_url="https://api.openai.com/v1",
        url_env=("OPENAI_BASE_URL",),
        key_env=("OPENAI_API_KEY",),
        model="gpt-4o-mini",
        max_tokens_field="max_completion_tokens",
        responses=True,
        embedding_model="text-embedding-3-small",
    ),
    ProviderInfo(
        name="anthropic",
        wire="anthropic",
        base_url="https://api.anthropic.com",
        url_env=("ANTHROPIC_BASE_URL",),
        key_env=("ANTHROPIC_API_KEY",),
        model="claude-sonnet-4-6",
        summary="Messages API",
    ),
    ProviderInfo(
        name="gemini",
        wire="gemini",
        base_url="https://generativelanguage.googleapis.com/v1beta",
        key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        model="gemini-2.5-flash",
        embedding_model="gemini-embedding-001",
        summary="`streamGenerateContent?alt=sse`, key in `x-goog-api-key`",
    ),
    ProviderInfo(
        name="ollama",
        wire="ollama",
        base_url="http://localhost:11434",
        key_env=(),
        model="llama3.2",
        embedding_model="embeddinggemma",
        key_required=False,
        auto=False,
        summary="native `/api/chat` NDJSON",
    ),
    # The deployment is the model; the endpoint is the resource's, with nothing to default to.
    ProviderInfo(
        name="azure",
        wire="openai",
        base_url=None,
        url_env=("AZURE_OPENAI_ENDPOINT",),
        key_env=("AZURE_OPENAI_API_KEY",),
        model="gpt-4o-mini",
        auto=False,
        summary="chat completions of a deployment (`model=` deployment, `api_version=`)",
        max_tokens_field="max_completion_tokens",
        # https://learn.microsoft.com/azure/ai-foundry/openai/how-to/responses: the v1 API,
        # {endpoint}/openai/v1/responses, the deployment as the body's model.
        responses=True,
        # A deployment of an embedding model, named like the model by default.
        embedding_model="text-embedding-3-small",
    ),
    # Any server that speaks OpenAI's wire: its key variable is derived from provider_name.
    ProviderInfo(
        name="openai_compat",
        wire="openai",
        base_url=None,
        key_env=(),
        model="default",
        key_required=False,
        auto=False,
        summary="chat completions at any `base_url`",
        responses=True,
        embedding_model="default",
    ),
    _compat(
        "openrouter",
        "https://openrouter.ai/api/v1",
        ("OPENROUTER_API_KEY",),
        "openai/gpt-4o-mini",
        reasoning_details=True,
        # https://openrouter.ai/docs/api-reference/responses-api/overview (beta, stateless).
        responses=True,
    ),
    # https://console.groq.com/docs/responses-api (beta).
    _compat(
        "groq",
        "https://api.groq.com/openai/v1",
        ("GROQ_API_KEY",),
        "llama-3.3-70b-versatile",
        responses=True,
    ),
    _compat(
        "together",
        "https://api.together.xyz/v1",
        ("TOGETHER_API_KEY",),
        "meta-llama/Llama-3.3-70B-Instruct-Turbo",
        # https://docs.together.ai/docs/inference/responses (beta; no stored responses).
        responses=True,
        embedding_model="BAAI/bge-base-en-v1.5",
    ),
    # Mistral validates strictly: stream_options is a 422 "extra_forbidden"; it reports usage
    # in the last chunk anyway.
    _compat(
        "mistral",
        "https://api.mistral.ai/v1",
        ("MISTRAL_API_KEY",),
        "mistral-small-latest",
        stream_usage=False,
        # https://docs.mistral.ai/inference/conversations: stateless Responses API.
        responses=True,
        embedding_model="mistral-embed",
    ),
    _compat(
        "deepseek",
        "https://api.deepseek.com/v1",
        ("DEEPSEEK_API_KEY",),
        "deepseek-chat",
        reasoning_field="reasoning_content",
        # https://api-docs.deepseek.com/guides/responses_api: at the bare host, not /v1.
        responses=True,
        responses_url="https://api.deepseek.com/responses",
    ),
    _compat(
        "fireworks",
        "https://api.fireworks.ai/inference/v1",
        ("FIREWORKS_API_KEY",),
        "accounts/fireworks/models/llama-v3p3-70b-instruct",
        # https://docs.fireworks.ai/guides/response-api
        responses=True,
        embedding_model="nomic-ai/nomic-embed-text-v1.5",
    ),
    # Perplexity sends usage on its chunks unasked.
    _compat(
        "perplexity",
        "https://api.perplexity.ai",
        ("PERPLEXITY_API_KEY", "PPLX_API_KEY"),
        "sonar",
        stream_usage=False,
        # https://docs.perplexity.ai/docs/agent-api/openai-compatibility: its Agent API, also
        # at /v1/responses.
        responses=True,
        responses_url="https://api.perplexity.ai/v1/responses",
    ),
    # https://docs.x.ai/docs/guides/chat: xAI's preferred API.
    _compat("xai", "https://api.x.ai/v1", ("XAI_API_KEY",), "grok-3-mini", responses=True),
    # https://docs.cohere.com/docs/compatibility-api; it rejects stream_options.
    _compat(
        "cohere",
        "https://api.cohere.ai/compatibility/v1",
        ("CO_API_KEY", "COHERE_API_KEY"),
        "command-a-03-2025",
        stream_usage=False,
        embedding_model="embed-v4.0",
    ),
    # Local servers: the model is whatever the server has loaded; pass model= to choose.
    # All three serve /v1/responses: LM Studio since 0.3.29
    # (https://lmstudio.ai/docs/developer/openai-compat), vLLM
    # (https://docs.vllm.ai/en/stable/serving/openai_compatible_server/), llama-server
    # (tools/server/README.md, "POST /v1/responses", translated to chat completions).
    _compat(
        "lm_studio",
        "http://localhost:1234/v1",
        ("LM_STUDIO_API_KEY",),
        "default",
        local=True,
        responses=True,
    ),
    _compat(
        "vllm", "http://localhost:8000/v1", ("VLLM_API_KEY",), "default", local=True, responses=True
    ),
    # llama-server reads its own key from LLAMA_API_KEY; a client may share it.
    _compat(
        "llamacpp",
        "http://localhost:8080/v1",
        ("LLAMA_API_KEY",),
        "default",
        local=True,
        responses=True,
    ),
)

#: Every provider by name, in the order the CLI tries their keys.
PROVIDERS: dict[str, ProviderInfo] = {row.name: row for row in _ROWS}


def compat_key_variable(provider_name: str) -> str:
    """The key variable of ``Providers.openai_compat(provider_name, ...)``: ``<NAME>_API_KEY``."""
    return provider_name.upper().replace("-", "_").replace(" ", "_") + "_API_KEY"


def key_variables() -> Iterator[tuple[str, ProviderInfo]]:
    """Each key variable that lets the CLI pick a provider, with that provider, in order."""
    for info in PROVIDERS.values():
        if info.auto:
            for var in info.key_env:
                yield var, info


_NATIVE_MAX_TOKENS = {
    "anthropic": "`max_tokens` (always; default 4096)",
    "gemini": "`generationConfig.maxOutputTokens`",
    "ollama": "`options.num_predict`",
}


def markdown_table() -> str:
    """The docs' provider table of providers, one row each, from this registry.

    The capability columns come from :data:`blazen.providers.capabilities.WIRES`, the
    table the wire formats check requests against.
    """
    rows = [
        "| factory | wire | default `base_url` | key variables | default model "
        "| `max_tokens` sent as | Responses API | reasoning | documents | audio | video "
        "| caching "
        "| typed output |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for info in PROVIDERS.values():
        keys = ", ".join(f"`{v}`" for v in info.key_env)
        if info.name == "openai_compat":
            keys = "`<PROVIDER_NAME>_API_KEY`, optional"
        elif not keys:
            keys = "none"
        elif not info.key_required:
            keys += ", optional"
        url = f"`{info.base_url}`" if info.base_url else "pass `base_url=`"
        if info.url_env:
            url += " or " + ", ".join(f"`{v}`" for v in info.url_env)
        sent_as = _NATIVE_MAX_TOKENS.get(info.wire) or f"`{info.max_tokens_field}`"
        responses = '`api="responses"`' if info.responses else "no"
        rows.append(
            f"| `{info.name}` | {info.wire}: {info.summary} | {url} | {keys} | `{info.model}` "
            f"| {sent_as} | {responses} "
            f"| {' | '.join(table_cells(info.wire, info.name))} |"
        )
    return "\n".join(rows) + "\n"
