"""The error tree and the one function that classifies provider failures."""

from __future__ import annotations

import email.utils
import time

import pytest

import blazen
from blazen.errors import error_from_provider, parse_retry_after, redact


@pytest.mark.parametrize(
    ("status", "error_type", "code", "message", "cls"),
    [
        (401, None, None, "bad key", blazen.AuthError),
        (403, "permission_error", None, "no", blazen.AuthError),
        (429, "rate_limit_error", None, "slow", blazen.RateLimitError),
        (529, "overloaded_error", None, "Overloaded", blazen.OverloadedError),
        (None, "overloaded_error", None, "Overloaded", blazen.OverloadedError),
        (
            400,
            "invalid_request_error",
            "context_length_exceeded",
            "too long",
            blazen.ContextLengthError,
        ),
        (
            400,
            "invalid_request_error",
            None,
            "prompt is too long: 210000 tokens > 200000 maximum",
            blazen.ContextLengthError,
        ),
        (400, None, "content_filter", "filtered", blazen.ContentPolicyError),
        (400, "invalid_request_error", None, "bad param", blazen.InvalidRequestError),
        (404, None, None, "no such model", blazen.InvalidRequestError),
        (500, "server_error", None, "oops", blazen.ProviderError),
        (None, None, None, "mystery", blazen.ProviderError),
    ],
)
def test_status_and_labels_map_to_one_class(status, error_type, code, message, cls):
    """Labels win over status, status over text; in-stream (status None) uses the same rules."""
    err = error_from_provider(
        provider="p", status=status, message=message, error_type=error_type, code=code
    )
    assert type(err) is cls
    assert err.provider == "p" and err.status == status


def test_quota_exhausted_429_is_not_retryable():
    """OpenAI's insufficient_quota 429 will not heal by waiting."""
    err = error_from_provider(
        provider="openai", status=429, message="quota", code="insufficient_quota"
    )
    assert isinstance(err, blazen.RateLimitError) and not err.retryable


def test_retryable_flags():
    """5xx, 429, 529 and unlabelled in-stream errors are retryable; 4xx are not."""

    def retryable(status, **kw):
        return error_from_provider(provider="p", status=status, message="m", **kw).retryable

    assert (
        retryable(500) and retryable(503) and retryable(429) and retryable(529) and retryable(None)
    )
    assert not retryable(400) and not retryable(401) and not retryable(404)


def test_body_is_capped_at_4_kib_and_redacted():
    """ProviderError.body keeps at most 4 KiB, with secrets removed."""
    err = error_from_provider(
        provider="p", status=500, message="m", body="sk-123 " + "x" * 10000, secrets=("sk-123",)
    )
    assert len(err.body) <= 4096 and "sk-123" not in err.body


def test_kinds_are_distinct_strings_usable_in_match():
    """Every class has its own kind string."""
    classes = [
        blazen.AuthError,
        blazen.RateLimitError,
        blazen.TimeoutError,
        blazen.ProviderError,
        blazen.OverloadedError,
        blazen.ContextLengthError,
        blazen.ContentPolicyError,
        blazen.ValidationError,
        blazen.ConnectionError,
        blazen.CancelledError,
        blazen.InternalError,
        blazen.CallbackError,
        blazen.UnsupportedError,
        blazen.InvalidRequestError,
    ]
    kinds = [c.kind for c in classes]
    assert len(set(kinds)) == len(kinds)
    assert all(issubclass(c, blazen.BlazenError) for c in classes)


def test_builtin_bases_let_callers_catch_what_they_already_catch():
    """TimeoutError and ConnectionError are also the builtins; ValidationError is a ValueError."""
    assert issubclass(blazen.TimeoutError, TimeoutError)
    assert issubclass(blazen.ConnectionError, ConnectionError)
    assert issubclass(blazen.ValidationError, ValueError)
    assert issubclass(blazen.InvalidRequestError, blazen.ValidationError)
    assert issubclass(blazen.CallbackError, blazen.InternalError)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"Retry-After": "9", "retry-after-ms": "100"}, 0.1),
        ({"Retry-After": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_parsing(headers, expected):
    """Seconds, milliseconds, and nonsense."""
    assert parse_retry_after(headers) == expected


def test_retry_after_as_http_date():
    """An HTTP date in Retry-After becomes seconds from now."""
    now = time.time()
    when = email.utils.formatdate(now + 30, usegmt=True)
    assert 28 <= parse_retry_after({"Retry-After": when}, now=now) <= 31


def test_redact_replaces_every_secret():
    assert redact("a sk-1 b sk-1 c sk-2", ("sk-1", "sk-2", "")) == "a *** b *** c ***"
