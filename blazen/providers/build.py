"""What every ``Providers`` factory does: find the key, check the URL, read the options."""

from __future__ import annotations

import os
from typing import Any, Optional
from urllib.parse import urlsplit

from .._http import shown_url
from .._kit import WireFormat
from .._stream import ChatModel, ModelOptions
from ..errors import AuthError, UnsupportedError, ValidationError
from .embeddings import ANY_CONCURRENCY, OPENAI_BATCH, OpenAIEmbeddings
from .openai import OpenAIWire
from .registry import MAX_TOKENS_FIELDS, PROVIDERS

__all__ = [
    "check_url",
    "env_url",
    "openai_format",
    "pop_embedding_model",
    "pop_option",
    "preset",
    "resolve_key",
]

#: The OpenAI-format APIs a factory's ``api=`` picks.
_APIS = ("chat", "responses")
#: How ``output=`` is asked of an OpenAI-format server: OpenAI's ``json_schema`` response
#: format, or ``json_object`` with the schema beside it (llama-cpp-python's server, which
#: refuses ``json_schema``).
STRUCTURED_OUTPUTS = ("json_schema", "json_object")

#: What blazen itself writes in an OpenAI-format message: no reasoning_field may be one.
_MESSAGE_FIELDS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})


def resolve_key(provider: str, api_key: str, env_vars: tuple[str, ...], *, required: bool) -> str:
    """``api_key``, else the first of ``env_vars`` that is set; ``AuthError`` if required."""
    if not isinstance(api_key, str):
        msg = f'api_key must be a string ("" reads {" or ".join(env_vars) or "nothing"})'
        raise TypeError(msg)
    if api_key.strip():
        return _usable_key(provider, api_key, "api_key=")
    for var in env_vars:
        value = os.environ.get(var, "")
        if value.strip():
            return _usable_key(provider, value, var)
    if required:
        raise AuthError(
            f"no API key for {provider}: pass api_key= or set {' or '.join(env_vars)}",
            provider=provider,
        )
    return ""


def _usable_key(provider: str, key: str, source: str) -> str:
    """``key`` without surrounding whitespace (a file's newline, a pasted space).

    A key that still holds whitespace or a control character, or a character an HTTP
    header cannot carry, is refused by name of where it came from: never by its value.
    """
    key = key.strip()
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in key):
        msg = (
            f"the API key for {provider} from {source} contains whitespace or a control "
            "character inside it; check that it was copied whole and alone"
        )
        raise ValidationError(msg)
    # Checked without an except block, which would chain the encode error (and so the key).
    if not all(ord(ch) < 256 for ch in key):
        msg = (
            f"the API key for {provider} from {source} contains a character that cannot go "
            "into an HTTP header (only Latin-1 can); check that it was copied correctly"
        )
        raise ValidationError(msg)
    return key


def env_url(base_url: Optional[str], env_vars: tuple[str, ...]) -> Optional[str]:
    """``base_url``, else the first of ``env_vars`` that is set, else None."""
    if base_url is not None:
        return base_url
    return next((v for var in env_vars if (v := os.environ.get(var, "").strip())), None)


def check_url(provider: str, base_url: str) -> str:
    """``base_url`` without its trailing slash; ``ValidationError`` unless it is a usable
    http(s) URL (a ``ValueError`` too). A password in it is masked in the message."""
    if not isinstance(base_url, str):
        msg = f"base_url for {provider} must be a string, got {type(base_url).__name__}"
        raise TypeError(msg)
    what = None
    try:
        parts = urlsplit(base_url)
        _ = parts.port  # raises unless a number from 0 to 65535 (or none)
    except ValueError as exc:
        what = f"cannot be parsed ({exc})"
    else:
        if parts.scheme not in ("http", "https") or not parts.hostname:
            what = "is not an http:// or https:// URL with a host"
    if what is not None:
        # Raised outside the except block: the parser's error is not chained to it.
        msg = f"base_url for {provider} {what}: {shown_url(base_url)!r}"
        raise ValidationError(msg)
    return base_url.rstrip("/")


def pop_option(options: dict[str, Any], name: str, default: Any, kind: type) -> Any:
    """Remove a provider-specific option from ``options``, checking its type."""
    value = options.pop(name, default)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        msg = f"{name} must be {kind.__name__}, got {value!r}"
        raise TypeError(msg)
    return value


def openai_format(
    provider: str,
    *,
    api_key: str,
    model: str,
    base_url: str,
    options: dict[str, Any],
    stream_usage: bool = True,
    url: Optional[str] = None,
    auth_header: str = "Authorization",
    max_tokens_field: str = "max_tokens",
    reasoning_field: Optional[str] = None,
    reasoning_details: bool = False,
    responses_url: Optional[str] = None,
    embedding_model: Optional[str] = None,
    embeddings_url: Optional[str] = None,
) -> ChatModel:
    """A model that speaks OpenAI's chat-completions wire format, or with
    ``api="responses"`` its Responses API (at ``responses_url``, else
    ``{base_url}/responses``)."""
    options = dict(options)
    embedding_model = pop_embedding_model(options, embedding_model)
    embedding_batch = pop_option(options, "embedding_batch_size", OPENAI_BATCH, int)
    if not 1 <= embedding_batch <= OPENAI_BATCH:
        msg = f"embedding_batch_size must be from 1 to {OPENAI_BATCH}, got {embedding_batch}"
        raise ValueError(msg)
    embedding_concurrency = pop_option(options, "embedding_concurrency", ANY_CONCURRENCY, int)
    if embedding_concurrency < 1:
        msg = f"embedding_concurrency must be at least 1, got {embedding_concurrency}"
        raise ValueError(msg)
    limits = (embedding_batch, embedding_concurrency)
    api = pop_option(options, "api", "chat", str)
    if api not in _APIS:
        msg = f"api must be 'chat' (chat completions) or 'responses' (Responses API), not {api!r}"
        raise ValueError(msg)
    if api == "responses":
        wire, opts, base = _responses_wire(
            provider, api_key, model, base_url, options, responses_url, auth_header
        )
        embedder = _embedder(
            provider, base, api_key, auth_header, opts, embedding_model, embeddings_url, limits
        )
        return _model(wire, model, base, opts, api_key, embedder)
    stream_usage = pop_option(options, "stream_usage", stream_usage, bool)
    reasoning_details = pop_option(options, "reasoning_details", reasoning_details, bool)
    reasoning_field = options.pop("reasoning_field", reasoning_field)
    if reasoning_field is not None and (
        not isinstance(reasoning_field, str) or not reasoning_field
    ):
        msg = (
            "reasoning_field must be the name of the field the server wants reasoning text "
            f"back in (such as 'reasoning_content'), or None; got {reasoning_field!r}"
        )
        raise TypeError(msg)
    if reasoning_field in _MESSAGE_FIELDS:
        msg = (
            f"reasoning_field={reasoning_field!r} would overwrite that field of every assistant "
            "message; name the server's own reasoning field (such as 'reasoning_content')"
        )
        raise ValueError(msg)
    structured = pop_option(options, "structured_output", "json_schema", str)
    if structured not in STRUCTURED_OUTPUTS:
        msg = (
            f"structured_output must be one of {', '.join(STRUCTURED_OUTPUTS)}, "
            f"got {structured!r}"
        )
        raise ValueError(msg)
    max_tokens_field = pop_option(options, "max_tokens_field", max_tokens_field, str)
    if max_tokens_field not in MAX_TOKENS_FIELDS:
        msg = (
            f"max_tokens_field must be one of {', '.join(MAX_TOKENS_FIELDS)}, "
            f"got {max_tokens_field!r}"
        )
        raise ValueError(msg)
    opts = ModelOptions.from_kwargs(provider, options)
    base = check_url(provider, base_url)
    wire = OpenAIWire(
        provider=provider,
        base_url=base,
        api_key=api_key,
        model=model,
        headers=opts.headers,
        stream_usage=stream_usage,
        auth_header=auth_header,
        url=url,
        max_tokens_field=max_tokens_field,
        reasoning_field=reasoning_field,
        reasoning_details=reasoning_details,
        structured_output=structured,
    )
    embedder = _embedder(
        provider, base, api_key, auth_header, opts, embedding_model, embeddings_url, limits
    )
    return _model(wire, model, base, opts, api_key, embedder)


def _embedder(
    provider: str,
    base: str,
    api_key: str,
    auth_header: str,
    opts: ModelOptions,
    embedding_model: Optional[str],
    embeddings_url: Optional[str],
    limits: tuple[int, int],
) -> Optional[OpenAIEmbeddings]:
    """The OpenAI-format embeddings of a model, whichever API its completions speak."""
    if embedding_model is None:
        return None
    return OpenAIEmbeddings(
        provider=provider,
        url=embeddings_url or f"{base}/embeddings",
        model=embedding_model,
        auth=None
        if not api_key
        else (auth_header, api_key if auth_header != "Authorization" else f"Bearer {api_key}"),
        headers=opts.headers,
        # Mistral answers unknown fields with 422 (see the registry's stream_usage), and
        # names the width output_dimension (https://docs.mistral.ai/api/endpoint/embeddings).
        base64=provider != "mistral",
        dimensions_field="output_dimension" if provider == "mistral" else "dimensions",
        batch_size=limits[0],
        concurrency=limits[1],
    )


def _model(
    wire: WireFormat,
    model: str,
    base: str,
    opts: ModelOptions,
    api_key: str,
    embedder: Optional[OpenAIEmbeddings],
) -> ChatModel:
    chat = ChatModel(wire=wire, model=model, base_url=base, options=opts, secrets=(api_key,))
    if embedder is not None:
        chat.embedder = embedder
    return chat


def pop_embedding_model(options: dict[str, Any], default: Optional[str]) -> Optional[str]:
    """The ``embedding_model`` option (else ``default``), checked."""
    value = options.pop("embedding_model", default)
    if value is not None and (not isinstance(value, str) or not value):
        msg = f"embedding_model must be a non-empty string or None, got {value!r}"
        raise TypeError(msg)
    return value


def _responses_wire(
    provider: str,
    api_key: str,
    model: str,
    base_url: str,
    options: dict[str, Any],
    url: Optional[str],
    auth_header: str,
) -> tuple[WireFormat, ModelOptions, str]:
    """The wire of a Responses API model, its options and base URL; its own options are
    ``store`` and ``encrypted_reasoning`` (the chat wire's are read and left unused)."""
    from .responses import ResponsesWire  # loaded only by models that speak it

    for chat_only in (
        "stream_usage",
        "reasoning_details",
        "reasoning_field",
        "max_tokens_field",
        "structured_output",
    ):
        options.pop(chat_only, None)
    store = pop_option(options, "store", False, bool)
    encrypted = options.pop("encrypted_reasoning", None)
    if encrypted is not None and not isinstance(encrypted, bool):
        msg = f"encrypted_reasoning must be True, False or None (auto), got {encrypted!r}"
        raise TypeError(msg)
    opts = ModelOptions.from_kwargs(provider, options)
    base = check_url(provider, base_url)
    wire = ResponsesWire(
        provider=provider,
        url=url or base + "/responses",
        api_key=api_key,
        model=model,
        headers=opts.headers,
        auth_header=auth_header,
        store=store,
        encrypted_reasoning=encrypted,
    )
    return wire, opts, base


def preset(
    name: str, api_key: str, model: Optional[str], base_url: Optional[str], options: dict[str, Any]
) -> ChatModel:
    """A model for the OpenAI-format service ``name`` of the registry."""
    info = PROVIDERS[name]
    assert info.wire == "openai" and info.base_url is not None
    if options.get("api") == "responses" and not info.responses:
        msg = (
            f"{name} does not document OpenAI's Responses API; use api='chat' (the default), "
            "or Providers.openai_compat(..., api='responses') for a server that has it"
        )
        raise UnsupportedError(msg, provider=name)
    chosen_url = env_url(base_url, info.url_env)
    return openai_format(
        name,
        api_key=resolve_key(name, api_key, info.key_env, required=info.key_required),
        model=model or info.model,
        base_url=chosen_url or info.base_url,
        options=options,
        responses_url=info.responses_url if chosen_url is None else None,
        stream_usage=info.stream_usage,
        max_tokens_field=info.max_tokens_field,
        reasoning_field=info.reasoning_field,
        reasoning_details=info.reasoning_details,
        embedding_model=info.embedding_model,
    )
