"""What a completion's tokens cost, from the ``genai-prices`` table (the ``prices`` extra).

``genai-prices`` (https://github.com/pydantic/genai-prices) is a maintained table of
providers' prices with the arithmetic for cached, cache-write and reasoning tokens. Its
``Usage.input_tokens`` counts every input token, cache reads and writes included, as
blazen's ``prompt_tokens`` does, and its ``output_tokens`` the reasoning tokens too, as
OpenAI's and blazen's ``completion_tokens`` do. It is imported on the first price asked
for, never at ``import blazen``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Optional

__all__ = ["PRICE_PROVIDERS", "price"]

#: blazen's provider names where genai-prices names the provider otherwise.
PRICE_PROVIDERS = {"gemini": "google", "xai": "x-ai"}

_MISSING: list[bool] = []  # [True] once the import has failed: asked once per process


def _calc() -> Any:
    if _MISSING:
        return None
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        _MISSING.append(True)
        return None
    return Usage, calc_price


def price(
    provider: Optional[str],
    model: Optional[str],
    *,
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int = 0,
    cache_write_tokens: int = 0,
    reasoning_tokens: int = 0,
    batch: bool = False,
) -> Optional[Decimal]:
    """The cost in US dollars of these counts of ``model`` of ``provider`` (at its batch
    rates if ``batch``), or None (no package, unknown model or provider).

    The counts are ``TokenUsage``'s, passed as numbers: pricing sits below the values.
    """
    if provider is None or model is None:
        return None
    calc = _calc()
    if calc is None:
        return None
    make_usage, calc_price = calc
    counts: dict[str, int] = {
        "input_tokens": prompt_tokens,
        "output_tokens": completion_tokens,
    }
    if cached_tokens:
        counts["cache_read_tokens"] = cached_tokens
    if cache_write_tokens:
        counts["cache_write_tokens"] = cache_write_tokens
    if reasoning_tokens and reasoning_tokens <= completion_tokens:
        counts["output_reasoning_tokens"] = reasoning_tokens
    provider = PRICE_PROVIDERS.get(provider, provider)
    # Batch answers are billed at the table's batch rates ("processing": "batch"); a
    # version of the table without price contexts cannot price them: None, not a guess.
    extra = {"price_context": {"processing": "batch"}} if batch else {}
    try:
        result = calc_price(make_usage(**counts), model, provider_id=provider, **extra)
    except TypeError:
        return None
    except (LookupError, ValueError):
        # An unknown provider or model (LookupError), or counts the table cannot split
        # (ValueError: more cached tokens than input tokens): no price rather than a guess.
        return None
    total: Decimal = result.total_price
    return total
