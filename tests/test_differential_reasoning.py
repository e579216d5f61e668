"""Differential tests: the request bodies the official SDKs send for reasoning, beside blazen's.

The same inputs go to a real local server once through the official ``openai`` or
``anthropic`` package and once through blazen; the JSON bodies recorded must agree field by
field.
"""

from __future__ import annotations

import anthropic
import openai
import pytest

from blazen import Llm
from blazen.testing import StreamServer

from .conftest import blazen_request_body, text_reply

TEXT = "Think, then answer: is 97 prime?"


@pytest.mark.parametrize("effort", ["none", "minimal", "low", "medium", "high", "xhigh", "max"])
def test_openai_reasoning_request_matches_the_openai_sdk(effort):
    """max_completion_tokens and reasoning_effort go out as the openai SDK sends them."""
    with (
        StreamServer([text_reply("openai")]) as server,
        openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0) as client,
    ):
        for _ in client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": TEXT}],
            max_completion_tokens=300,
            reasoning_effort=effort,
            stream=True,
            stream_options={"include_usage": True},
        ):
            pass
        sdk = server.requests[0].json()
    ours = blazen_request_body(
        "openai",
        Llm.completion_request([Llm.user(TEXT)], max_tokens=300, reasoning_effort=effort),
    )
    assert ours == sdk
    assert sdk["max_completion_tokens"] == 300 and sdk["reasoning_effort"] == effort


def test_anthropic_thinking_request_matches_the_anthropic_sdk():
    """thinking with budget_tokens, below max_tokens, goes out as the anthropic SDK sends it."""
    with (
        StreamServer([text_reply("anthropic")]) as server,
        anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0) as client,
    ):
        for _ in client.messages.create(
            model="claude-x",
            max_tokens=8000,
            thinking={"type": "enabled", "budget_tokens": 2048},
            messages=[{"role": "user", "content": TEXT}],
            stream=True,
        ):
            pass
        sdk = server.requests[0].json()
    ours = blazen_request_body(
        "anthropic",
        Llm.completion_request(
            [Llm.user(TEXT)], max_tokens=8000, reasoning_budget=2048, model="claude-x"
        ),
    )
    assert ours == sdk
    assert sdk["thinking"] == {"type": "enabled", "budget_tokens": 2048}
