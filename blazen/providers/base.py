"""Helpers the wire formats share to build requests. No I/O here.

Reading payloads and errors is the provider kit's (:mod:`blazen._kit`).
"""

from __future__ import annotations

import mimetypes
import re
from typing import Any, Optional
from urllib.parse import urlsplit

from .._types import CompletionRequest, ImagePart, ToolCall
from ..errors import UnsupportedError, ValidationError

__all__ = [
    "call_arguments",
    "image_source",
    "reasoning_refused",
    "refuse_previous_response",
    "system_text",
    "tool_names",
]


# -- request helpers shared by the wire formats ------------------------------------------

_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?((?:;[^,;]*)*);base64,(.*)$", re.DOTALL)


def image_source(provider: str, image: ImagePart) -> tuple[str, str, str]:
    """``("url", media_type, url)`` or ``("base64", media_type, data)`` for an image.

    A ``data:`` URL is opened up into its media type and base64 payload, since several
    providers take base64 but not data URLs.
    """
    if image.data is not None:
        return "base64", image.media_type, image.data
    url = image.url or ""
    if url.startswith("data:"):
        match = _DATA_URL.match(url)
        if match is None:
            msg = f"{provider}: an image data: URL must be base64-encoded (data:<type>;base64,...)"
            raise UnsupportedError(msg, provider=provider)
        return "base64", match.group(1) or image.media_type, match.group(3)
    # An image given as a bare URL string carries the default media type; the URL's own
    # extension is the better guess for providers that want one (Gemini's fileData).
    guessed, _ = mimetypes.guess_type(urlsplit(url).path)
    if guessed and guessed.startswith("image/"):
        return "url", guessed, url
    return "url", image.media_type, url


def system_text(req: CompletionRequest) -> Optional[str]:
    """The request's system prompt and any system messages, joined (for top-level fields)."""
    parts = [req.system] if req.system else []
    parts += [m.content for m in req.messages if m.role == "system" and m.content]
    return "\n\n".join(parts) or None


def tool_names(req: CompletionRequest) -> dict[str, str]:
    """Tool-call id to function name, from the assistant turns of a conversation.

    Gemini and Ollama answer a tool result by function name, not by call id.
    """
    return {c.id: c.name for m in req.messages for c in m.tool_calls}


def call_arguments(provider: str, call: ToolCall) -> dict[str, Any]:
    """An earlier tool call's arguments as an object, for providers that want JSON, not text."""
    try:
        return call.arguments()
    except ValueError as exc:
        msg = (
            f"{provider} needs tool-call arguments as a JSON object, but call {call.id!r} "
            f"({call.name}) has {call.arguments_json[:200]!r}"
        )
        raise ValidationError(msg) from exc


def reasoning_refused(provider: str, knob: str, instead: str) -> UnsupportedError:
    """The error for a reasoning option ``provider`` has no field for (raised before sending)."""
    return UnsupportedError(f"{provider} cannot take {knob}: {instead}", provider=provider)


def check_effort(provider: str, req: CompletionRequest, documented: tuple[str, ...]) -> None:
    """Refuse a ``reasoning_effort`` level the wire's API reference does not list."""
    effort = req.reasoning_effort
    if effort is not None and effort not in documented:
        raise reasoning_refused(
            provider, f"reasoning_effort={effort!r}", f"it takes {', '.join(documented)}"
        )


def refuse_server_tools(provider: str, req: CompletionRequest, wire: str) -> None:
    """Refuse what a wire without provider-side tools or thinking display cannot send."""
    if req.server_tools:
        names = ", ".join(repr(t.name) for t in req.server_tools)
        msg = (
            f"{provider} ({wire}) has no provider-side tools, so it cannot take "
            f"Llm.server_tool({names}); use Anthropic, Gemini or the OpenAI Responses API, "
            "or a function tool of your own"
        )
        raise UnsupportedError(msg, provider=provider)
    if req.reasoning_display is not None:
        raise reasoning_refused(
            provider, f"reasoning_display={req.reasoning_display!r}", "leave it unset"
        )


def refuse_previous_response(provider: str, req: CompletionRequest) -> None:
    """Refuse ``previous_response_id`` on a wire that keeps no answers (before sending)."""
    if req.previous_response_id is not None:
        msg = (
            f"{provider} keeps no earlier answers to continue: previous_response_id is for the "
            "Responses API with store=True (api='responses'); send the whole conversation"
        )
        raise UnsupportedError(msg, provider=provider)
