"""Presets of ``Providers.openai_compat`` for the services that speak OpenAI's wire format.

Each preset is a base URL, the key's usual environment variables and a default model;
everything else (retries, timeouts, headers, reasoning deltas, OpenRouter's comment lines
and ``finish_reason: "error"``) is the OpenAI wire's. ``Providers`` inherits these.
"""

from __future__ import annotations

from typing import Any, Optional

from ._factory import openai_format, resolve_key
from ._frozen import Frozen
from ._model import ChatModel

__all__ = ["PRESETS", "CompatPresets", "Preset"]


class Preset(Frozen):
    """Where an OpenAI-compatible service lives and how it is reached."""

    __slots__ = ("base_url", "env", "key_required", "model", "stream_usage")

    base_url: str
    env: tuple[str, ...]
    model: str
    #: Local servers run without a key; hosted services fail early without one.
    key_required: bool
    #: Whether the service accepts ``stream_options`` (some reject unknown fields with 422).
    stream_usage: bool

    def __init__(
        self,
        *,
        base_url: str,
        env: tuple[str, ...],
        model: str,
        key_required: bool = True,
        stream_usage: bool = True,
    ) -> None:
        self._fill(locals())


PRESETS: dict[str, Preset] = {
    "openrouter": Preset(
        base_url="https://openrouter.ai/api/v1",
        env=("OPENROUTER_API_KEY",),
        model="openai/gpt-4o-mini",
    ),
    "groq": Preset(
        base_url="https://api.groq.com/openai/v1",
        env=("GROQ_API_KEY",),
        model="llama-3.3-70b-versatile",
    ),
    "together": Preset(
        base_url="https://api.together.xyz/v1",
        env=("TOGETHER_API_KEY",),
        model="meta-llama/Llama-3.3-70B-Instruct-Turbo",
    ),
    # Mistral validates strictly: stream_options is a 422 "extra_forbidden"; it reports
    # usage in the last chunk anyway.
    "mistral": Preset(
        base_url="https://api.mistral.ai/v1",
        env=("MISTRAL_API_KEY",),
        model="mistral-small-latest",
        stream_usage=False,
    ),
    "deepseek": Preset(
        base_url="https://api.deepseek.com/v1", env=("DEEPSEEK_API_KEY",), model="deepseek-chat"
    ),
    "fireworks": Preset(
        base_url="https://api.fireworks.ai/inference/v1",
        env=("FIREWORKS_API_KEY",),
        model="accounts/fireworks/models/llama-v3p3-70b-instruct",
    ),
    # Perplexity sends usage on its chunks unasked.
    "perplexity": Preset(
        base_url="https://api.perplexity.ai",
        env=("PERPLEXITY_API_KEY", "PPLX_API_KEY"),
        model="sonar",
        stream_usage=False,
    ),
    "xai": Preset(base_url="https://api.x.ai/v1", env=("XAI_API_KEY",), model="grok-3-mini"),
    # https://docs.cohere.com/docs/compatibility-api; it rejects stream_options.
    "cohere": Preset(
        base_url="https://api.cohere.ai/compatibility/v1",
        env=("CO_API_KEY", "COHERE_API_KEY"),
        model="command-a-03-2025",
        stream_usage=False,
    ),
    # Local servers: the model is whatever the server has loaded; pass model= to choose.
    "lm_studio": Preset(
        base_url="http://localhost:1234/v1",
        env=("LM_STUDIO_API_KEY",),
        model="default",
        key_required=False,
    ),
    "vllm": Preset(
        base_url="http://localhost:8000/v1",
        env=("VLLM_API_KEY",),
        model="default",
        key_required=False,
    ),
    # llama-server reads its own key from LLAMA_API_KEY; a client may share it.
    "llamacpp": Preset(
        base_url="http://localhost:8080/v1",
        env=("LLAMA_API_KEY",),
        model="default",
        key_required=False,
    ),
}


def preset(
    name: str, api_key: str, model: Optional[str], base_url: Optional[str], options: dict[str, Any]
) -> ChatModel:
    """A model for the preset ``name``."""
    p = PRESETS[name]
    return openai_format(
        name,
        api_key=resolve_key(name, api_key, p.env, required=p.key_required),
        model=model or p.model,
        base_url=base_url or p.base_url,
        options=options,
        stream_usage=p.stream_usage,
    )


class CompatPresets:
    """``Providers.<service>(api_key="", model=None, base_url=None, **options)`` presets."""

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
        """A local LM Studio server (``http://localhost:1234/v1``; no key needed)."""
        return preset("lm_studio", api_key, model, base_url, options)

    @staticmethod
    def vllm(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """A vLLM server (``http://localhost:8000/v1``; key only if started with one)."""
        return preset("vllm", api_key, model, base_url, options)

    @staticmethod
    def llamacpp(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """A llama.cpp ``llama-server`` (``http://localhost:8080/v1``; key only if set)."""
        return preset("llamacpp", api_key, model, base_url, options)
