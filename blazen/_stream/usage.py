"""Usage on every ending: the counts a response reports, named so that they can be priced.

The worker stamps each response, and its usage, with the provider and the model that answered
(the name the server gave, else the one asked for) where the response is assembled: that
is all ``usage.cost`` needs, and the price is looked up only if someone reads it.
"""

from __future__ import annotations

import attrs

from .._types import CompletionResponse

__all__ = ["priced"]


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
