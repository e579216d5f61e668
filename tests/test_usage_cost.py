"""``usage.cost``: priced by the provider's and the model's names from genai-prices, or None."""

from __future__ import annotations

from decimal import Decimal

import pytest

import blazen
from blazen import Llm, Providers, Streaming, TokenUsage
from blazen.sinks.codec import decode, encode_done
from blazen.testing import Reply, StreamServer
from blazen.testing.wire import openai_sse

genai_prices = pytest.importorskip("genai_prices")


def _table_price(model: str, provider: str, **counts: int) -> Decimal:
    """The oracle: genai-prices itself, asked directly."""
    result = genai_prices.calc_price(genai_prices.Usage(**counts), model, provider_id=provider)
    return result.total_price


def test_a_known_model_is_priced_with_cached_tokens_at_their_rate():
    """gpt-4o-mini: 600 fresh and 400 cached input tokens, 100 out, as the table prices them."""
    usage = TokenUsage(prompt_tokens=1000, completion_tokens=100, cached_tokens=400)
    cost = usage.priced_as("openai", "gpt-4o-mini").cost
    assert isinstance(cost, Decimal)
    assert cost == _table_price(
        "gpt-4o-mini", "openai", input_tokens=1000, cache_read_tokens=400, output_tokens=100
    )
    # Cached tokens are cheaper than fresh ones: the split matters.
    uncached = TokenUsage(prompt_tokens=1000, completion_tokens=100).priced_as("openai", "gpt-4o-mini")
    assert cost < uncached.cost


def test_anthropic_cache_writes_are_priced_as_writes():
    """Claude's cache writes cost more than plain input: they are passed as writes."""
    plain = TokenUsage(prompt_tokens=1000, completion_tokens=10).priced_as("anthropic", "claude-sonnet-4-6")
    writes = TokenUsage(prompt_tokens=1000, completion_tokens=10, cache_write_tokens=800).priced_as(
        "anthropic", "claude-sonnet-4-6"
    )
    assert writes.cost > plain.cost


def test_gemini_is_priced_under_googles_name():
    """blazen's provider "gemini" is genai-prices' "google"."""
    usage = TokenUsage(prompt_tokens=1000, completion_tokens=100).priced_as("gemini", "gemini-2.5-flash")
    assert usage.cost == _table_price("gemini-2.5-flash", "google", input_tokens=1000, output_tokens=100)


@pytest.mark.parametrize(
    ("provider", "model"),
    [("openai", "no-such-model-xyz"), ("llamacpp", "default"), ("ollama", "llama3.2"), (None, None)],
)
def test_an_unknown_model_or_provider_costs_none_never_a_guess(provider, model):
    """A local server, an unknown name, or no names at all: None."""
    assert TokenUsage(prompt_tokens=5).priced_as(provider, model).cost is None


def test_counts_the_table_cannot_split_cost_none():
    """More cached tokens than input tokens (a server's mistake): None, not an exception."""
    usage = TokenUsage(prompt_tokens=5, cached_tokens=50).priced_as("openai", "gpt-4o-mini")
    assert usage.cost is None


def test_a_stream_through_a_test_server_is_priced_as_the_model_that_answered():
    """The names, not the URL: an OpenAI model on a local server is still priced."""
    body = openai_sse(["Hi"], usage={"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}, model="gpt-4o-mini")
    with StreamServer([Reply.sse(body), Reply.json({"id": "x", "model": "gpt-4o-mini", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}})]) as server:
        model = Providers.openai(api_key="k", base_url=server.base_url, model="gpt-4o-mini")
        seen = []
        resp = Streaming.complete(model, Llm.completion_request([Llm.user("hi")]), on_done=lambda r, u: seen.append(u))
        non_streamed = model.complete(Llm.completion_request([Llm.user("hi")]))
    expected = _table_price("gpt-4o-mini", "openai", input_tokens=20, output_tokens=5)
    assert resp.usage.cost == seen[0].cost == non_streamed.usage.cost == expected
    assert (resp.usage.provider, resp.usage.model) == ("openai", "gpt-4o-mini")
    assert not resp.usage.partial and not resp.usage.estimated


def test_an_embeddings_usage_is_priced_as_the_embedding_model_that_answered():
    """text-embedding-3-small's 9 tokens at the table's price; a local model's: None."""
    import json

    from .conftest import FIXTURES

    body = json.loads((FIXTURES / "openai" / "embeddings" / "base64.json").read_text())
    local = json.loads((FIXTURES / "ollama" / "embeddings" / "embed.json").read_text())
    with StreamServer([Reply.json(body), Reply.json(local)]) as server:
        resp = Providers.openai(api_key="k", base_url=server.base_url).embed(["a", "b", "c"])
        ollama = Providers.ollama(base_url=server.url).embed(["a", "b", "c"])
    assert (resp.usage.provider, resp.usage.model) == ("openai", "text-embedding-3-small")
    assert resp.usage.cost == _table_price("text-embedding-3-small", "openai", input_tokens=9)
    assert ollama.usage.provider == "ollama" and ollama.usage.cost is None


def test_adding_usages_keeps_the_price_only_when_both_are_the_same_model():
    """An agent's total over one model is priced; over two models it cannot be."""
    a = TokenUsage(prompt_tokens=10, completion_tokens=1).priced_as("openai", "gpt-4o-mini")
    b = TokenUsage(prompt_tokens=20, completion_tokens=2).priced_as("openai", "gpt-4o-mini")
    c = TokenUsage(prompt_tokens=20, completion_tokens=2).priced_as("anthropic", "claude-sonnet-4-6")
    assert (a + b).cost == _table_price("gpt-4o-mini", "openai", input_tokens=30, output_tokens=3)
    assert (a + c).cost is None and (a + c).prompt_tokens == 30


def test_the_flags_and_names_do_not_change_equality_but_survive_the_codec():
    """Equal counts compare equal whatever they are priced as; a sink's JSON keeps it all."""
    usage = TokenUsage(prompt_tokens=3, partial=True).priced_as("openai", "gpt-4o-mini")
    assert usage == TokenUsage(prompt_tokens=3, partial=True).priced_as("groq", "x")
    assert usage != TokenUsage(prompt_tokens=3)
    assert repr(usage) == (
        "TokenUsage(prompt_tokens=3, completion_tokens=0, total_tokens=0, cached_tokens=0, "
        "cache_write_tokens=0, reasoning_tokens=0, partial=True)"
    )
    kind, (_, back) = decode(encode_done("stop", usage))
    assert kind == "done" and back == usage and back.model == "gpt-4o-mini" and back.partial


def test_without_the_package_the_cost_is_none(monkeypatch):
    """genai-prices missing (an ImportError): None, and nothing raises."""
    import blazen._pricing as pricing

    monkeypatch.setattr(pricing, "_MISSING", [True])
    assert TokenUsage(prompt_tokens=5).priced_as("openai", "gpt-4o-mini").cost is None
    assert blazen.TokenUsage is TokenUsage


def test_a_batch_report_sums_the_cost_of_its_items(tmp_path):
    """Three priced answers: the report's cost is their sum, and its line shows it."""
    body = openai_sse(["Hi"], usage={"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}, model="gpt-4o-mini")
    with StreamServer(default=Reply.sse(body)) as server:
        model = Providers.openai(api_key="k", base_url=server.base_url, model="gpt-4o-mini")
        report = blazen.batch.run(model, [Llm.completion_request([Llm.user("hi")])] * 3, concurrency=2)
    assert report.cost == 3 * _table_price("gpt-4o-mini", "openai", input_tokens=20, output_tokens=5)
    assert "$" in str(report)


def test_the_stats_line_shows_the_cost():
    """``blazen chat --stats``: the answer's cost after its tokens."""
    from blazen.cli.session import Stats

    line = Stats().line(TokenUsage(prompt_tokens=1000, completion_tokens=100).priced_as("openai", "gpt-4o-mini"))
    assert line.startswith("1000 tokens in, 100 out; $0.000210")


def test_the_hot_path_copy_of_a_usage_is_priced_as():
    """priced_usage (slot by slot) builds exactly what priced_as (attrs.evolve) builds."""
    import attrs

    from blazen._types import priced_usage

    usage = TokenUsage(prompt_tokens=7, completion_tokens=3, total_tokens=10, cached_tokens=2, cache_write_tokens=1, reasoning_tokens=1, partial=True)
    fast, slow = priced_usage(usage, "openai", "gpt-4o-mini"), usage.priced_as("openai", "gpt-4o-mini")
    assert attrs.asdict(fast) == attrs.asdict(slow) and fast.cost == slow.cost
