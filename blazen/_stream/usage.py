"""Usage on every ending: the counts a response reports, named so that they can be priced.

The worker stamps each response, and its usage, with the provider and the model that answered
(the name the server gave, else the one asked for) where the response is assembled: that
is all ``usage.cost`` needs, and the price is looked up only if someone reads it.
"""

from __future__ import annotations

from typing import Optional

import attrs

from .._kit import StreamState
from .._types import (
    CompletionRequest,
    CompletionResponse,
    TokenUsage,
)

__all__ = ["CHARS_PER_TOKEN", "priced", "usage_so_far"]

#: How an estimate counts: about four characters of English a token, the rule of thumb
#: OpenAI's and Anthropic's docs give. An estimate, never a billed figure.
CHARS_PER_TOKEN = 4


def priced(
    response: CompletionResponse, provider: str, model: str, *, batch: bool = False
) -> CompletionResponse:
    """``response`` naming ``provider``, its usage priced as ``provider``'s model.

    ``batch`` prices it at the provider's batch rates (an answer of a provider batch).
    """
    usage = response.usage
    if usage is not None:
        usage = usage.priced_as(provider, response.model or model, batch=batch)
    return attrs.evolve(response, usage=usage, provider=provider)


def _tokens(chars: int) -> int:
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def _prompt_chars(req: CompletionRequest) -> int:
    chars = len(req.system or "")
    for message in req.messages:
        chars += len(message.content or "")
        for call in message.tool_calls:
            chars += len(call.name) + len(call.arguments_json)
    return chars


def usage_so_far(
    state: StreamState, req: CompletionRequest, provider: str, model: str, *, sent: bool
) -> Optional[TokenUsage]:
    """The usage an error or a cancel carries (``err.usage``).

    None when the request never reached the provider. Otherwise what the provider had
    reported (Anthropic's ``message_start`` and ``message_delta``, Gemini's
    ``usageMetadata`` on each chunk, an OpenAI-format usage chunk), marked ``partial``;
    where it had reported nothing, an estimate from the characters of the request and of
    the text and reasoning received (:data:`CHARS_PER_TOKEN`), marked ``estimated`` and
    ``partial``. Priced like a response's usage.
    """
    if not sent:
        return None
    reported = state.usage
    if reported is not None:
        usage = attrs.evolve(reported, partial=True)
    else:
        prompt = _tokens(_prompt_chars(req))
        received = _tokens(len(state.text) + len(state.reasoning))
        usage = TokenUsage(
            prompt_tokens=prompt,
            completion_tokens=received,
            total_tokens=prompt + received,
            partial=True,
            estimated=True,
        )
    return usage.priced_as(provider, model)
