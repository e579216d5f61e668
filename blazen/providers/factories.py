"""``blazen.Providers``: one factory per provider, all of the same shape."""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Optional

from .._kit import EmbeddingWire, WireFormat
from .._stream import ChatModel, Fallback, ModelOptions, Recipe, SwitchOn
from ..errors import ValidationError
from .build import (
    check_url,
    env_url,
    openai_format,
    pop_embedding_model,
    pop_option,
    preset,
    resolve_key,
)
from .embeddings import GeminiEmbeddings, OllamaEmbeddings
from .registry import PROVIDERS, ProviderInfo, compat_key_variable

# Each native wire format is imported by its own factory, on first use: a program that only
# talks to one provider does not pay for parsing the others' modules at `import blazen`.

__all__ = ["Providers"]

AZURE_API_VERSION = "2024-10-21"


def _row(name: str) -> ProviderInfo:
    return PROVIDERS[name]


def _native(
    name: str,
    api_key: str,
    model: Optional[str],
    base_url: Optional[str],
    options: dict[str, Any],
    make_wire: Callable[[str, str, str, ModelOptions], WireFormat],
    make_embedder: Optional[Callable[[str, str, str, ModelOptions], EmbeddingWire]] = None,
) -> ChatModel:
    """A model of a native wire format: key, URL and defaults from the registry's row."""
    info = _row(name)
    key = resolve_key(name, api_key, info.key_env, required=info.key_required)
    options = dict(options)
    embedding_model = pop_embedding_model(options, info.embedding_model)
    opts = ModelOptions.from_kwargs(name, options)
    base = check_url(name, env_url(base_url, info.url_env) or info.base_url or "")
    chosen = model or info.model
    wire = make_wire(base, key, chosen, opts)
    chat = ChatModel(wire=wire, model=chosen, base_url=base, options=opts, secrets=(key,))
    if make_embedder is not None and embedding_model is not None:
        chat.embedder = make_embedder(base, key, embedding_model, opts)
    return chat


class Providers:
    """Factories for models: ``Providers.<name>(api_key="", model=None, base_url=None, **options)``.

    An empty ``api_key`` reads the provider's environment variable. Options are those of
    :class:`~blazen.ModelOptions` (``max_retries``, ``connect_timeout``, ``idle_timeout``,
    ``timeout``, ``headers``, ``verify``, ``max_connections``...), plus a few named in each
    factory. Switching providers is changing this one line.

    Example::

        model = Providers.openai(model="gpt-4o-mini")      # key from OPENAI_API_KEY
        model = Providers.anthropic()                      # key from ANTHROPIC_API_KEY
        model = Providers.ollama(model="llama3.2")         # no key; localhost:11434
    """

    @staticmethod
    def openai(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """OpenAI's chat completions API (key: ``OPENAI_API_KEY``).

        Extra options: ``stream_usage`` (True) asks for usage in the stream;
        ``max_tokens_field`` (``"max_completion_tokens"``, which reasoning models require)
        may be ``"max_tokens"`` for a server at ``base_url`` that only knows that name.
        ``api="responses"`` speaks the Responses API instead (``store`` and
        ``encrypted_reasoning`` are then its options; see the providers docs).
        """
        return preset("openai", api_key, model, base_url, options)

    @staticmethod
    def openai_compat(
        provider_name: str,
        base_url: str,
        api_key: str = "",
        model: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """Any server that speaks OpenAI's chat completions (vLLM, llama.cpp, a proxy...).

        An empty ``api_key`` reads ``<PROVIDER_NAME>_API_KEY``; no key at all sends no
        ``Authorization`` header, as local servers expect. Set ``stream_usage=False`` for
        servers that reject ``stream_options``; ``api="responses"`` for a server that
        answers OpenAI's Responses API at ``{base_url}/responses``.
        """
        if not isinstance(provider_name, str) or not provider_name:
            msg = "provider_name must be a non-empty string such as 'vllm'"
            raise ValueError(msg)
        env = compat_key_variable(provider_name)
        return openai_format(
            provider_name,
            api_key=resolve_key(provider_name, api_key, (env,), required=False),
            model=model or _row("openai_compat").model,
            base_url=base_url,
            options=options,
            embedding_model=_row("openai_compat").embedding_model,
        )

    @staticmethod
    def azure(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """Azure OpenAI (key: ``AZURE_OPENAI_API_KEY``).

        ``model`` is the *deployment* name; ``base_url`` the resource endpoint
        (``https://<resource>.openai.azure.com``, else ``AZURE_OPENAI_ENDPOINT``). Extra
        options: ``api_version`` (else ``OPENAI_API_VERSION``, else ``2024-10-21``) and
        ``stream_usage``; ``api="responses"`` uses Azure's v1 Responses API
        (``{endpoint}/openai/v1/responses``, the deployment as the model).
        """
        info = _row("azure")
        key = resolve_key("azure", api_key, info.key_env, required=True)
        endpoint = env_url(base_url, info.url_env)
        if endpoint is None:
            msg = (
                "no endpoint for azure: pass base_url='https://<resource>.openai.azure.com' "
                "or set AZURE_OPENAI_ENDPOINT"
            )
            raise ValidationError(msg)
        options = dict(options)
        version = pop_option(
            options,
            "api_version",
            os.environ.get("OPENAI_API_VERSION", "").strip() or AZURE_API_VERSION,
            str,
        )
        deployment = model or info.model
        base = check_url("azure", endpoint)
        return openai_format(
            "azure",
            api_key=key,
            model=deployment,
            base_url=base,
            options=options,
            url=f"{base}/openai/deployments/{deployment}/chat/completions?api-version={version}",
            # The Responses API lives in Azure's v1 API, which takes no api-version.
            responses_url=f"{base}/openai/v1/responses",
            auth_header="api-key",
            max_tokens_field=info.max_tokens_field,
            embedding_model=info.embedding_model,
            # https://learn.microsoft.com/azure/ai-foundry/openai/reference: the embedding
            # deployment is in the path; "{model}" is the call's (or embedding_model=).
            embeddings_url=f"{base}/openai/deployments/{{model}}/embeddings?api-version={version}",
        )

    @staticmethod
    def anthropic(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """Anthropic's Messages API (key: ``ANTHROPIC_API_KEY``).

        Extra options: ``anthropic_version`` (``2023-06-01``), ``default_max_tokens``
        (4096), sent when the request has no ``max_tokens`` (the API requires one), and
        ``structured_output`` (``"format"``: ``output=`` goes as ``output_config.format``;
        ``"tool"``: as a forced tool, for servers without structured outputs).
        """
        from .anthropic import DEFAULT_MAX_TOKENS, DEFAULT_VERSION, AnthropicWire

        options = dict(options)
        version = pop_option(options, "anthropic_version", DEFAULT_VERSION, str)
        max_tokens = pop_option(options, "default_max_tokens", DEFAULT_MAX_TOKENS, int)
        structured = pop_option(options, "structured_output", "format", str)
        if structured not in ("format", "tool"):
            msg = f"structured_output must be 'format' or 'tool', got {structured!r}"
            raise ValueError(msg)
        if max_tokens < 1:
            msg = f"default_max_tokens must be at least 1, got {max_tokens}"
            raise ValueError(msg)
        return _native(
            "anthropic",
            api_key,
            model,
            base_url,
            options,
            lambda base, key, name, opts: AnthropicWire(
                base_url=base,
                api_key=key,
                model=name,
                headers=opts.headers,
                version=version,
                default_max_tokens=max_tokens,
                structured_output=structured,
            ),
        )

    @staticmethod
    def gemini(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """Google's Gemini API (key: ``GEMINI_API_KEY``, else ``GOOGLE_API_KEY``).

        The key travels in the ``x-goog-api-key`` header, never in the URL.
        """
        from .gemini import GeminiWire

        return _native(
            "gemini",
            api_key,
            model,
            base_url,
            options,
            lambda base, key, name, opts: GeminiWire(
                base_url=base, api_key=key, model=name, headers=opts.headers
            ),
            lambda base, key, name, opts: GeminiEmbeddings(
                base_url=base, api_key=key, model=name, headers=opts.headers
            ),
        )

    @staticmethod
    def ollama(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """A local Ollama server's native API (``http://localhost:11434``; no key needed).

        A key, if given, is sent as a bearer token (for a proxy in front of Ollama).
        """
        from .ollama import OllamaWire

        return _native(
            "ollama",
            api_key,
            model,
            base_url,
            options,
            lambda base, key, name, opts: OllamaWire(
                base_url=base, api_key=key, model=name, headers=opts.headers
            ),
            lambda base, key, name, opts: OllamaEmbeddings(
                base_url=base, api_key=key, model=name, headers=opts.headers
            ),
        )

    # A classmethod, not a factory of the registry: it builds nothing of its own.
    @classmethod
    def fallback(
        cls,
        primary: ChatModel,
        *others: ChatModel,
        on: Optional[SwitchOn] = None,
        timeout: Optional[float] = None,
    ) -> ChatModel:
        """A model that starts the same request on the next model when one fails first.

        It moves on only before the first chunk reaches a callback (a chunk shown twice
        would duplicate text), and only for the failures ``on`` names: by default rate
        limits, overloads, connection failures, connect and read timeouts, and 5xx
        answers, after that model's own retries (``max_retries=0`` on a member moves on at
        once). ``on`` may be error classes or a function of the error. ``timeout`` bounds
        the whole chain. ``resp.provider`` and ``resp.model`` say who answered; when every
        model fails, the one error names each attempt (``err.attempts``). Example::

            model = Providers.fallback(
                Providers.openai(max_retries=0), Providers.anthropic(), Providers.gemini()
            )
        """
        return Fallback((primary, *others), on=on, timeout=timeout)

    # -- OpenAI-compatible services: a row of the registry each ----------------------------

    @staticmethod
    def openrouter(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """OpenRouter (key: ``OPENROUTER_API_KEY``); ``reasoning`` deltas are reasoning."""
        return preset("openrouter", api_key, model, base_url, options)

    @staticmethod
    def groq(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """Groq (key: ``GROQ_API_KEY``)."""
        return preset("groq", api_key, model, base_url, options)

    @staticmethod
    def together(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """Together AI (key: ``TOGETHER_API_KEY``)."""
        return preset("together", api_key, model, base_url, options)

    @staticmethod
    def mistral(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """Mistral (key: ``MISTRAL_API_KEY``)."""
        return preset("mistral", api_key, model, base_url, options)

    @staticmethod
    def deepseek(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """DeepSeek (key: ``DEEPSEEK_API_KEY``); ``reasoning_content`` is reasoning."""
        return preset("deepseek", api_key, model, base_url, options)

    @staticmethod
    def fireworks(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """Fireworks AI (key: ``FIREWORKS_API_KEY``)."""
        return preset("fireworks", api_key, model, base_url, options)

    @staticmethod
    def perplexity(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """Perplexity (key: ``PERPLEXITY_API_KEY`` or ``PPLX_API_KEY``)."""
        return preset("perplexity", api_key, model, base_url, options)

    @staticmethod
    def xai(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """xAI's Grok (key: ``XAI_API_KEY``)."""
        return preset("xai", api_key, model, base_url, options)

    @staticmethod
    def cohere(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """Cohere's compatibility API (key: ``CO_API_KEY`` or ``COHERE_API_KEY``)."""
        return preset("cohere", api_key, model, base_url, options)

    @staticmethod
    def lm_studio(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """A local LM Studio server (``localhost:1234/v1``; key ``LM_STUDIO_API_KEY`` if any)."""
        return preset("lm_studio", api_key, model, base_url, options)

    @staticmethod
    def vllm(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """A vLLM server (``localhost:8000/v1``; key ``VLLM_API_KEY`` if started with one)."""
        return preset("vllm", api_key, model, base_url, options)

    @staticmethod
    def llamacpp(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """A llama.cpp ``llama-server`` (``localhost:8080/v1``; key ``LLAMA_API_KEY`` if set)."""
        return preset("llamacpp", api_key, model, base_url, options)


def _recording(name: str, factory: Callable[..., ChatModel]) -> Callable[..., ChatModel]:
    """``factory``, with the call that built each model kept on it so the model pickles."""

    @functools.wraps(factory)
    def make(*args: Any, **kwargs: Any) -> ChatModel:
        model = factory(*args, **kwargs)
        # The public attribute, not the wrapped function: pickle finds it by its name.
        model.recipe = Recipe(getattr(Providers, name), args, kwargs)
        return model

    return make


for _name, _value in list(vars(Providers).items()):
    if isinstance(_value, staticmethod):
        setattr(Providers, _name, staticmethod(_recording(_name, _value.__func__)))
del _name, _value
