"""The errors blazen reports, and the one function that classifies provider failures.

Every failure of a stream ends in exactly one of these, delivered to ``on_error`` (or
raised by ``Streaming.complete`` when there is no error handler)::

    BlazenError                      every error blazen reports; .kind, .message
    ├── ProviderError                the provider (or the server at base_url) said no
    │   ├── AuthError                missing, wrong or unauthorised key (401, 403)
    │   ├── RateLimitError           429; .retry_after in seconds, or None
    │   ├── OverloadedError          529, or an in-stream "overloaded_error"
    │   ├── ContextLengthError       the prompt does not fit the model's window
    │   ├── ContentPolicyError       refused by a content filter
    │   └── InvalidRequestError      400/404/422: the request itself is wrong (also ValidationError)
    ├── ValidationError              a value blazen was given cannot be used (also ValueError)
    │   └── OutputValidationError    a typed answer (output=) is not the type; .raw holds it
    │       └── RefusalError         the model declined to give the typed answer; .refusal
    ├── TimeoutError                 a time limit ran out (also the builtin TimeoutError)
    ├── ConnectionError              the connection failed or ended early (also the builtin)
    ├── CancelledError               a CancelToken or Ctrl-C ended a stream, agent or workflow run
    ├── UnsupportedError             the provider cannot do what the request asks
    ├── AgentError                   an agent run could not finish; .result holds it so far
    │   ├── MaxIterationsError       the model still called tools after max_iterations turns
    │   └── ToolError                a tool raised and the agent stops on tool errors
    ├── WorkflowError                a workflow run failed: a step raised (``__cause__``), an
    │                                event had no taker, or the run went quiet; .step, .event_type
    └── InternalError                a bug, or a callback that raised
        └── CallbackError            a callback raised; the original is ``__cause__``

An error that arrives inside a 200 stream is classified by :func:`error_from_provider`,
the same function that classifies an HTTP error status, so an in-stream
``overloaded_error`` is an :class:`OverloadedError` exactly as a 529 is.

Keys never appear in an error: messages and bodies pass through :func:`redact` with the
model's secrets before they are stored.
"""

from __future__ import annotations

import builtins
import email.utils
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Optional, Protocol

if TYPE_CHECKING:
    from decimal import Decimal

__all__ = [
    "AgentError",
    "AuthError",
    "BlazenError",
    "CallbackError",
    "CancelledError",
    "ConnectionError",
    "ContentPolicyError",
    "ContextLengthError",
    "InternalError",
    "InvalidRequestError",
    "MaxIterationsError",
    "OutputValidationError",
    "OverloadedError",
    "ProviderError",
    "RateLimitError",
    "RefusalError",
    "TimeoutError",
    "ToolError",
    "UnsupportedError",
    "Usage",
    "ValidationError",
    "WorkflowError",
    "error_from_provider",
    "parse_retry_after",
    "RedactedError",
    "redact",
    "safe_str",
]

#: Provider error bodies are kept for diagnosis, but never more than this many characters.
BODY_CAP = 4096


class Usage(Protocol):
    """What an error's ``usage`` is: a :class:`~blazen.TokenUsage`, read through its fields.

    The errors sit below the values and import nothing of blazen, so they name the usage
    they carry by its shape; the value itself is always a ``TokenUsage``.
    """

    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...
    @property
    def total_tokens(self) -> int: ...
    @property
    def cached_tokens(self) -> int: ...
    @property
    def cache_write_tokens(self) -> int: ...
    @property
    def reasoning_tokens(self) -> int: ...
    @property
    def partial(self) -> bool: ...
    @property
    def estimated(self) -> bool: ...
    @property
    def provider(self) -> Optional[str]: ...
    @property
    def model(self) -> Optional[str]: ...
    @property
    def batch(self) -> bool: ...
    @property
    def cost(self) -> Optional[Decimal]: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    # A sum or a repricing is a TokenUsage again (Any: this module cannot name it).
    def __add__(self, other: Any, /) -> Any: ...
    def priced_as(
        self, provider: Optional[str], model: Optional[str], *, batch: bool = False
    ) -> Any: ...


class BlazenError(Exception):
    """Base of every error blazen reports.

    ``kind`` is a short stable string for ``match``; ``partial`` holds the text that had
    already streamed when the error ended the stream (empty when none), so nothing is lost.
    """

    kind = "error"
    #: Whether the same request may succeed if sent again (used by the retry policy).
    retryable = False
    #: A fallback's failure: the error of each model it tried, in order (this one last).
    attempts: tuple[BlazenError, ...] = ()
    #: The tokens the stream had used when it ended this way (a ``TokenUsage`` marked
    #: ``partial``, and ``estimated`` where the provider had reported none), or None when
    #: the request never reached the provider.
    usage: Optional[Usage] = None

    def __init__(
        self,
        message: str,
        *,
        provider: Optional[str] = None,
        status: Optional[int] = None,
        request_id: Optional[str] = None,
        error_type: Optional[str] = None,
        body: Optional[str] = None,
        retryable: Optional[bool] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status = status
        self.request_id = request_id
        self.error_type = error_type
        self.body = body
        #: Seconds the server asked us to wait before trying again (Retry-After), or None.
        self.retry_after = retry_after
        self.partial = ""
        self.partial_reasoning = ""
        if retryable is not None:
            self.retryable = retryable

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        extra = "".join(
            f", {name}={value!r}"
            for name in ("provider", "status", "error_type", "request_id")
            if (value := getattr(self, name)) is not None
        )
        return f"{type(self).__name__}({self.message!r}{extra})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields would be lost by Exception's default pickling.
        return (_rebuild, (type(self), self.message, dict(self.__dict__)))


def _rebuild(cls: type[BlazenError], message: str, state: dict[str, Any]) -> BlazenError:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


class ProviderError(BlazenError):
    """The provider, or whatever answers at ``base_url``, reported a failure."""

    kind = "provider"


class AuthError(ProviderError):
    """The API key is missing, wrong, or not allowed to use this model."""

    kind = "auth"


class RateLimitError(ProviderError):
    """Too many requests; ``retry_after`` is the provider's requested wait in seconds."""

    kind = "rate_limit"
    retryable = True


class OverloadedError(ProviderError):
    """The provider is overloaded (HTTP 529, an in-stream ``overloaded_error``, OpenAI's
    ``server_is_overloaded``)."""

    kind = "overloaded"
    retryable = True


class ContextLengthError(ProviderError):
    """The prompt plus ``max_tokens`` does not fit the model's context window."""

    kind = "context_length"


class ContentPolicyError(ProviderError):
    """A content filter refused the prompt or the answer."""

    kind = "content_policy"


class ValidationError(BlazenError, ValueError):
    """A value handed to blazen cannot be used."""

    kind = "validation"


class OutputValidationError(ValidationError):
    """The answer to a request with ``output=`` is not a valid value of that type.

    ``raw`` is the text the model sent (possibly cut short); the message says what was
    wrong (not JSON, a missing field, a wrong type, truncated by ``max_tokens``).
    """

    kind = "output_validation"

    def __init__(self, message: str, *, raw: str = "", **kw: Any) -> None:
        super().__init__(message, **kw)
        self.raw = raw


class RefusalError(OutputValidationError):
    """The model declined to give the typed answer; ``refusal`` is its explanation."""

    kind = "refusal"

    def __init__(self, message: str, *, refusal: str = "", **kw: Any) -> None:
        super().__init__(message, **kw)
        self.refusal = refusal


class InvalidRequestError(ProviderError, ValidationError):
    """The provider rejected the request itself (HTTP 400, 404, 422)."""

    kind = "invalid_request"


class TimeoutError(BlazenError, builtins.TimeoutError):
    """A time limit ran out; the message names the limit and the seconds waited."""

    kind = "timeout"

    def __init__(self, message: str, *, limit: str = "", seconds: float = 0.0, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.limit = limit
        self.seconds = seconds


class ConnectionError(BlazenError, builtins.ConnectionError):
    """The connection could not be made, or it broke before the stream ended."""

    kind = "connection"


class CancelledError(BlazenError):
    """The stream was cancelled by a :class:`CancelToken` or by Ctrl-C."""

    kind = "cancelled"


class UnsupportedError(BlazenError):
    """The provider cannot do what the request asks (checked before anything is sent)."""

    kind = "unsupported"


class AgentError(BlazenError):
    """An agent run could not finish.

    ``result`` is the :class:`~blazen.AgentResult` of the run up to the failure (the whole
    conversation, usage and tool results so far), so a caller can inspect or resume it.
    """

    kind = "agent"

    def __init__(self, message: str, *, result: Any = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.result = result


class MaxIterationsError(AgentError):
    """The model still asked for tools after ``max_iterations`` turns; the run was stopped."""

    kind = "max_iterations"


class ToolError(AgentError):
    """A tool raised and the agent was built with ``stop_on_tool_error=True``.

    ``__cause__`` is the tool's exception; ``tool_name`` names the tool.
    """

    kind = "tool"

    def __init__(self, message: str, *, tool_name: str = "", **kw: Any) -> None:
        super().__init__(message, **kw)
        self.tool_name = tool_name


class WorkflowError(BlazenError):
    """A workflow run failed; ``step`` and ``event_type`` say where, when known.

    A step that raised is the ``__cause__``. Time limits and cancellation of a run are
    reported as :class:`TimeoutError` and :class:`CancelledError` instead.
    """

    kind = "workflow"

    def __init__(
        self,
        message: str,
        *,
        workflow: Optional[str] = None,
        step: Optional[str] = None,
        event_type: Optional[str] = None,
        **kw: Any,
    ) -> None:
        super().__init__(message, **kw)
        self.workflow = workflow
        self.step = step
        self.event_type = event_type


class InternalError(BlazenError):
    """Something inside blazen, or inside a callback, went wrong."""

    kind = "internal"


class CallbackError(InternalError):
    """A callback raised; the stream or run was aborted and ``__cause__`` is the exception."""

    kind = "callback"


class RedactedError(Exception):
    """Stands in, in an error's ``__cause__`` chain, for an exception that held a key.

    Its text is the original's class and message with the key masked; the original (and
    whatever it kept: a decoded document, a header value) is dropped.
    """

    @classmethod
    def standing_in_for(
        cls, exc: BaseException, redact_text: Callable[[str], str]
    ) -> RedactedError:
        """The stand-in for ``exc``, keeping its place in the chain."""
        name = f"{type(exc).__module__}.{type(exc).__qualname__}"
        new = cls(f"{name}: {redact_text(safe_str(exc))}")
        new.__cause__ = exc.__cause__
        new.__context__ = exc.__context__
        new.__suppress_context__ = exc.__suppress_context__
        return new


def safe_str(exc: BaseException) -> str:
    """``str(exc)``, or its class name when that is empty or raises.

    The text goes into the error the caller gets; an exception whose ``__str__`` fails (a
    half-built one, a library's bug, a caller's trick) must not stop that error existing.
    """
    try:
        return str(exc) or type(exc).__name__
    except Exception:
        return type(exc).__name__


def redact(text: str, secrets: Iterable[str]) -> str:
    """Return ``text`` with every secret replaced by ``***``."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, "***")
    return text


def _seconds(raw: Optional[str]) -> Optional[float]:
    """A finite number of at least 0 from a header value, or None."""
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def parse_retry_after(headers: Mapping[str, str], now: Optional[float] = None) -> Optional[float]:
    """Seconds the server asks us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be a number of seconds or an HTTP date (RFC 9110, 10.2.3);
    ``retry-after-ms`` is OpenAI's and Anthropic's finer-grained variant and wins. A value
    that is no such wait (infinite, ``1e400``, NaN, negative, not a number) is refused:
    None, as if the server had not asked, so no caller waits for ever on a server's word.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = _seconds(lowered.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000.0
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        float(raw)
    except ValueError:
        pass
    else:
        return _seconds(raw)
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


# Patterns are compiled on first use (the re module keeps them): import pays for none.
_CONTEXT_RE = (
    r"context[ _]length|context window|maximum context|too many tokens|prompt is too long"
    r"|input is too long|exceeds the (?:model's )?(?:maximum|context)"
)
_AUTH_TYPES = frozenset(
    {
        "authentication_error",
        "invalid_api_key",
        "permission_error",
        "unauthenticated",
        "permission_denied",
        "invalid_authentication",
        # Google answers a wrong key with 400 INVALID_ARGUMENT; the reason says what it is.
        "api_key_invalid",
    }
)
_RATE_TYPES = frozenset(
    {"rate_limit_error", "rate_limit_exceeded", "resource_exhausted", "tokens", "requests"}
)
# server_is_overloaded and slow_down: OpenAI's overload inside a stream (its own client, codex,
# reads them so: codex-rs/codex-api/src/sse/responses.rs).
_OVERLOAD_TYPES = frozenset(
    {
        "overloaded_error",
        "overloaded",
        "server_overloaded",
        "unavailable",
        "server_is_overloaded",
        "slow_down",
    }
)
_POLICY_TYPES = frozenset(
    {
        "content_filter",
        "content_policy_violation",
        "content_policy",
        "safety",
        "responsible_ai_policy_violation",
        # Gemini's promptFeedback.blockReason: the prompt was refused before any answer.
        "prompt_blocked",
    }
)
_INVALID_TYPES = frozenset(
    {
        "invalid_request_error",
        "invalid_argument",
        "not_found_error",
        "model_not_found",
        "failed_precondition",
    }
)
_CONTEXT_TYPES = frozenset(
    {"context_length_exceeded", "string_above_max_length", "request_too_large"}
)
# 429s that no amount of waiting fixes: the account is out of credit.
_NO_RETRY_RATE = frozenset({"insufficient_quota", "billing_hard_limit_reached"})
_RETRY_STATUS = frozenset({408, 500, 502, 503, 504})


def error_from_provider(
    *,
    provider: str,
    status: Optional[int],
    message: str,
    error_type: Optional[str] = None,
    code: Optional[str] = None,
    body: Optional[str] = None,
    request_id: Optional[str] = None,
    retry_after: Optional[float] = None,
    secrets: Iterable[str] = (),
) -> ProviderError:
    """Classify a provider failure, from an HTTP status or from inside a stream.

    ``status`` is None for an error event that arrived inside a 200 stream; ``error_type``
    and ``code`` are the provider's own labels (``"overloaded_error"``,
    ``"context_length_exceeded"``...). The most specific match wins: labels first, then
    the status, then the message text.
    """
    secrets = tuple(secrets)
    labels = {str(x).lower() for x in (error_type, code) if x}
    text = redact(message or "", secrets) or "no message"
    where = (
        f"{provider} returned HTTP {status}" if status is not None else f"{provider} stream error"
    )
    msg = f"{where}: {text}"
    capped = redact(body[:BODY_CAP], secrets) if body else None
    kw: dict[str, Any] = {
        "provider": provider,
        "status": status,
        "request_id": request_id,
        "error_type": error_type or code,
        "body": capped,
        "retry_after": retry_after,
    }
    cls: type[ProviderError]
    invalid = bool(labels & _INVALID_TYPES) or status in (400, 404, 413, 422)
    if labels & _CONTEXT_TYPES or (invalid and re.search(_CONTEXT_RE, text, re.IGNORECASE)):
        cls = ContextLengthError
    elif labels & _POLICY_TYPES:
        cls = ContentPolicyError
    elif labels & _NO_RETRY_RATE:
        return RateLimitError(
            msg + " (quota exhausted: waiting will not help; check the account's billing)",
            retryable=False,
            **{**kw, "retry_after": None},
        )
    elif labels & _OVERLOAD_TYPES or status == 529:
        cls = OverloadedError
    elif labels & _RATE_TYPES or status == 429:
        return RateLimitError(msg, **kw)
    elif labels & _AUTH_TYPES or status in (401, 403):
        cls = AuthError
    elif invalid:
        cls = InvalidRequestError
    else:
        cls = ProviderError
        # Server faults are worth another try, and so is an unlabelled error event inside a
        # stream (the SPEC retries in-stream errors that arrive before any content).
        kw["retryable"] = status is None or status in _RETRY_STATUS or status >= 500
    return cls(msg, **kw)
