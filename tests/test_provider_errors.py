"""HTTP errors from every provider land in the same classes, and keys never leak."""

from __future__ import annotations

import logging

import pytest

import blazen
from blazen.testing import Reply

from .conftest import NATIVE, PRESET_NAMES, json_reply, model_for, sse_reply, stream

CASES = [
    # provider, fixture, status, headers, class, error_type, retry_after
    ("openai", "http_401.json", 401, {}, blazen.AuthError, "invalid_request_error", None),
    ("openai", "http_429.json", 429, {"retry-after": "1"}, blazen.RateLimitError, "requests", 1.0),
    ("openai", "http_500.json", 500, {}, blazen.ProviderError, "server_error", None),
    ("anthropic", "http_401.json", 401, {}, blazen.AuthError, "authentication_error", None),
    (
        "anthropic",
        "http_429.json",
        429,
        {"retry-after": "12"},
        blazen.RateLimitError,
        "rate_limit_error",
        12.0,
    ),
    ("anthropic", "http_500.json", 500, {}, blazen.ProviderError, "api_error", None),
    ("anthropic", "http_529.json", 529, {}, blazen.OverloadedError, "overloaded_error", None),
    (
        "anthropic",
        "http_400_context.json",
        400,
        {},
        blazen.ContextLengthError,
        "invalid_request_error",
        None,
    ),
    ("gemini", "http_400_api_key.json", 400, {}, blazen.AuthError, "INVALID_ARGUMENT", None),
    ("gemini", "http_401.json", 401, {}, blazen.AuthError, "UNAUTHENTICATED", None),
    ("gemini", "http_403.json", 403, {}, blazen.AuthError, "PERMISSION_DENIED", None),
    ("gemini", "http_429.json", 429, {}, blazen.RateLimitError, "RESOURCE_EXHAUSTED", 34.0),
    ("gemini", "http_500.json", 500, {}, blazen.ProviderError, "INTERNAL", None),
    ("gemini", "http_503.json", 503, {}, blazen.OverloadedError, "UNAVAILABLE", None),
    ("ollama", "http_401.json", 401, {}, blazen.AuthError, None, None),
    ("ollama", "http_404.json", 404, {}, blazen.InvalidRequestError, None, None),
    ("ollama", "http_429.json", 429, {}, blazen.RateLimitError, None, None),
    ("ollama", "http_500.json", 500, {}, blazen.ProviderError, None, None),
    (
        "azure",
        "http_400_content_filter.json",
        400,
        {},
        blazen.ContentPolicyError,
        "content_filter",
        None,
    ),
]


@pytest.mark.parametrize(
    ("provider", "name", "status", "headers", "cls", "error_type", "retry_after"),
    CASES,
    ids=[f"{c[0]}-{c[1].removesuffix('.json')}" for c in CASES],
)
def test_http_error_bodies_map_to_the_same_classes(
    server, req, provider, name, status, headers, cls, error_type, retry_after
):
    """Each provider's real error body and status gives the class a user would match on."""
    model = model_for(provider, server, max_retries=0)
    rec, resp = stream(server, model, req, json_reply(provider, name, status, headers))
    assert resp is None and rec.kinds == ["error"]
    err = rec.error
    assert type(err) is cls
    assert (err.provider, err.status) == (provider, status)
    assert err.error_type == error_type
    assert err.retry_after == retry_after
    assert err.body and len(err.body) <= 4096
    assert f"HTTP {status}" in err.message


def test_anthropic_request_id_header_is_kept(server, req):
    """Anthropic's request-id header ends up on the error for support tickets."""
    model = model_for("anthropic", server, max_retries=0)
    reply = json_reply("anthropic", "http_529.json", 529, {"request-id": "req_011CSHoGHH3g"})
    rec, _ = stream(server, model, req, reply)
    assert rec.error.request_id == "req_011CSHoGHH3g"


def test_overloaded_529_is_retried_before_any_content(server, req, monkeypatch):
    """A 529 before the first chunk is retried, and the retry's stream is delivered."""
    monkeypatch.setattr("blazen._http.retry.BASE_DELAY", 0.001)
    model = model_for("anthropic", server, max_retries=1)
    rec, resp = stream(
        server,
        model,
        req,
        json_reply("anthropic", "http_529.json", 529),
        sse_reply("text.sse", "anthropic"),
    )
    assert rec.kinds[-1] == "done" and resp.content.startswith("Why did")
    assert len(server.requests) == 2


@pytest.mark.parametrize("provider", NATIVE + PRESET_NAMES)
def test_a_key_echoed_in_an_error_body_never_leaves_blazen(server, req, provider, caplog):
    """Reprs, messages, bodies and logs are scrubbed of the key, for every factory."""
    key = f"sk-{provider}-LEAKME-9f8e7d6c5b4a"
    model = model_for(provider, server, api_key=key, max_retries=1)
    body = {"error": {"message": f"Incorrect API key provided: {key}", "code": "invalid_api_key"}}
    retry = Reply.json(body, status=500, headers={"retry-after-ms": "0"})
    caplog.set_level(logging.DEBUG, logger="blazen")
    rec, _ = stream(server, model, req, retry, Reply.json(body, status=401))
    err = rec.error
    assert isinstance(err, blazen.AuthError)
    for text in (err.message, str(err), repr(err), err.body, repr(model), caplog.text):
        assert key not in text
    assert "***" in err.message
    assert key not in repr(model.wire.build(req, stream=True))
