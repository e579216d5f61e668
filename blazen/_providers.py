"""``blazen.Providers``: one factory per provider, all of the same shape."""

from __future__ import annotations

import os
from typing import Any, Optional
from urllib.parse import urlsplit

from ._model import ChatModel, ModelOptions
from .errors import AuthError
from .providers.openai import OpenAIWire

__all__ = ["Providers"]


def _resolve_key(provider: str, api_key: str, env_vars: tuple[str, ...], required: bool) -> str:
    if not isinstance(api_key, str):
        msg = f'api_key must be a string ("" reads {" or ".join(env_vars) or "nothing"})'
        raise TypeError(msg)
    if api_key:
        return api_key
    for var in env_vars:
        value = os.environ.get(var, "").strip()
        if value:
            return value
    if required:
        raise AuthError(
            f"no API key for {provider}: pass api_key= or set {' or '.join(env_vars)}",
            provider=provider,
        )
    return ""


def _check_url(provider: str, base_url: str) -> str:
    if not isinstance(base_url, str):
        msg = f"base_url for {provider} must be a string, got {type(base_url).__name__}"
        raise TypeError(msg)
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        msg = f"base_url for {provider} must be an http:// or https:// URL, got {base_url!r}"
        raise ValueError(msg)
    return base_url.rstrip("/")


def _pop_bool(options: dict[str, Any], name: str, default: bool) -> bool:
    value = options.pop(name, default)
    if not isinstance(value, bool):
        msg = f"{name} must be True or False, got {value!r}"
        raise TypeError(msg)
    return value


class Providers:
    """Factories for models: ``Providers.<name>(api_key="", model=None, base_url=None, **options)``.

    An empty ``api_key`` reads the provider's environment variable. Options are those of
    :class:`~blazen.ModelOptions` (``max_retries``, ``connect_timeout``, ``idle_timeout``,
    ``timeout``, ``headers``, ``verify``, ``max_connections``...).

    Example::

        model = Providers.openai(model="gpt-4o-mini")      # key from OPENAI_API_KEY
    """

    @staticmethod
    def openai(
        api_key: str = "",
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        **options: Any,
    ) -> ChatModel:
        """OpenAI's chat completions API (key: ``OPENAI_API_KEY``).

        Extra option: ``stream_usage`` (True) asks for usage in the stream.
        """
        return _openai_format(
            "openai",
            api_key=_resolve_key("openai", api_key, ("OPENAI_API_KEY",), required=True),
            model=model or "gpt-4o-mini",
            base_url=base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1",
            options=options,
        )

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
        servers that reject ``stream_options``.
        """
        if not isinstance(provider_name, str) or not provider_name:
            msg = "provider_name must be a non-empty string such as 'vllm'"
            raise ValueError(msg)
        env = provider_name.upper().replace("-", "_").replace(" ", "_") + "_API_KEY"
        return _openai_format(
            provider_name,
            api_key=_resolve_key(provider_name, api_key, (env,), required=False),
            model=model or "default",
            base_url=base_url,
            options=options,
        )


def _openai_format(
    provider: str, *, api_key: str, model: str, base_url: str, options: dict[str, Any]
) -> ChatModel:
    options = dict(options)
    stream_usage = _pop_bool(options, "stream_usage", True)
    opts = ModelOptions.from_kwargs(provider, options)
    url = _check_url(provider, base_url)
    wire = OpenAIWire(
        provider=provider,
        base_url=url,
        api_key=api_key,
        model=model,
        headers=opts.headers,
        stream_usage=stream_usage,
    )
    return ChatModel(wire=wire, model=model, base_url=url, options=opts, secrets=(api_key,))
