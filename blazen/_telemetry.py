"""OpenTelemetry spans and metrics in the GenAI semantic conventions, at no cost without it.

blazen never imports OpenTelemetry. When the application has (``opentelemetry.trace`` is in
``sys.modules``) *and* set a tracer provider or meter provider of its own, every stream is
one span ``chat {model}`` (kind CLIENT), agent runs are ``invoke_agent`` spans with one
``execute_tool {name}`` child per tool call, workflow runs are ``invoke_workflow`` spans with
one ``step {name}`` child per step, and the ``gen_ai.client.token.usage`` and
``gen_ai.client.operation.duration`` histograms are recorded. The names are those of the
OpenTelemetry GenAI semantic conventions (``gen_ai.*`` attributes, ``error.type``,
``server.address``).

The cost without OpenTelemetry is one dictionary look-up at the start of a stream; a
stream's chunks never touch this module. ``BLAZEN_OTEL=0`` turns it off. Prompt and
completion text go on spans only with ``BLAZEN_OTEL_CAPTURE_CONTENT=1`` or
:func:`capture_otel_content`; keys never do (``server.address`` is the host alone, error
descriptions are the scrubbed blazen messages).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional
from urllib.parse import urlsplit

from ._types import ChatMessage, CompletionRequest, CompletionResponse
from ._version import __version__

__all__ = [
    "StreamSpan",
    "attach",
    "capture_otel_content",
    "current_context",
    "detach",
    "mark_error",
    "operation_span",
    "stream_span",
]

#: blazen's provider names as the conventions' ``gen_ai.provider.name`` well-known values.
PROVIDER_NAMES = {
    "gemini": "gcp.gemini",
    "azure": "azure.ai.openai",
    "mistral": "mistral_ai",
    "xai": "x_ai",
}

_SCOPE = "blazen"
logger = logging.getLogger("blazen")
_capture_override: Optional[bool] = None


def capture_otel_content(enabled: Optional[bool]) -> None:
    """Put prompt and completion text on spans: True, False, or None (the environment decides).

    The environment variable is ``BLAZEN_OTEL_CAPTURE_CONTENT=1``; by default no text goes
    on spans, only sizes, models and token counts.
    """
    global _capture_override
    _capture_override = enabled


def _capturing() -> bool:
    if _capture_override is not None:
        return _capture_override
    return os.environ.get("BLAZEN_OTEL_CAPTURE_CONTENT", "").strip().lower() in ("1", "true")


class _Instruments:
    """The tracer and histograms of one tracer/meter provider pair (one slot, not a cache)."""

    __slots__ = ("duration", "first_chunk", "meter_provider", "tokens", "tracer", "tracer_provider")

    def __init__(self, trace: Any, metrics: Any, tracer_provider: Any, meter_provider: Any):
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.tracer = (
            None
            if tracer_provider is None
            else trace.get_tracer(_SCOPE, __version__, tracer_provider=tracer_provider)
        )
        self.tokens = self.duration = self.first_chunk = None
        if meter_provider is not None:
            meter = metrics.get_meter(_SCOPE, __version__, meter_provider=meter_provider)
            self.tokens = meter.create_histogram(
                "gen_ai.client.token.usage",
                unit="{token}",
                description="Number of input and output tokens used.",
            )
            self.duration = meter.create_histogram(
                "gen_ai.client.operation.duration",
                unit="s",
                description="GenAI operation duration.",
            )
            self.first_chunk = meter.create_histogram(
                "gen_ai.client.operation.time_to_first_chunk",
                unit="s",
                description="Time to receive the first chunk in a streaming operation.",
            )


# The providers last seen and their instruments: replaced when the application changes
# providers, so it holds one entry however many streams run.
_last: Optional[_Instruments] = None


def _instruments() -> Optional[_Instruments]:
    """The tracer and meters to use, or None: OpenTelemetry absent, unset, or turned off."""
    global _last
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    if os.environ.get("BLAZEN_OTEL", "").strip().lower() in ("0", "false", "off"):
        return None
    tracer_provider = trace.get_tracer_provider()
    # The API's stand-ins until the application sets a provider: nothing would be recorded.
    if isinstance(tracer_provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        tracer_provider = None
    metrics = sys.modules.get("opentelemetry.metrics")
    meter_provider = None if metrics is None else metrics.get_meter_provider()
    if type(meter_provider).__name__ in ("_ProxyMeterProvider", "NoOpMeterProvider"):
        meter_provider = None
    if tracer_provider is None and meter_provider is None:
        return None
    last = _last
    if (
        last is None
        or last.tracer_provider is not tracer_provider
        or last.meter_provider is not meter_provider
    ):
        last = _last = _Instruments(trace, metrics, tracer_provider, meter_provider)
    return last


def _messages_json(messages: tuple[ChatMessage, ...]) -> str:
    out = []
    for m in messages:
        parts: list[dict[str, Any]] = []
        if m.content is not None:
            parts.append({"type": "text", "content": m.content})
        for call in m.tool_calls:
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.id,
                    "name": call.name,
                    "arguments": call.arguments_json,
                }
            )
        out.append({"role": m.role, "parts": parts})
    return json.dumps(out, ensure_ascii=False)


class StreamSpan:
    """One stream's span and measurements, from its start to its terminal.

    Created on the calling thread (so the span is a child of the span current there) and
    ended there; the worker thread never sees it.
    """

    __slots__ = ("_attrs", "_first", "_inst", "_retries", "_span", "_start")

    def __init__(
        self,
        inst: _Instruments,
        provider: str,
        base_url: str,
        model: str,
        req: CompletionRequest,
    ) -> None:
        self._inst = inst
        self._start = time.monotonic()
        self._first: Optional[float] = None
        self._retries = 0
        request_model = req.model or model
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER_NAMES.get(provider, provider),
            "gen_ai.request.model": request_model,
        }
        host = urlsplit(base_url).hostname  # the host alone: no user, password or path
        if host:
            attrs["server.address"] = host
        self._attrs = dict(attrs)  # the metrics' attributes: low cardinality
        self._span = None
        if inst.tracer is not None:
            span_attrs = dict(attrs)
            if req.max_tokens is not None:
                span_attrs["gen_ai.request.max_tokens"] = req.max_tokens
            if req.temperature is not None:
                span_attrs["gen_ai.request.temperature"] = req.temperature
            if _capturing():
                if req.system is not None:
                    span_attrs["gen_ai.system_instructions"] = json.dumps(
                        [{"type": "text", "content": req.system}], ensure_ascii=False
                    )
                span_attrs["gen_ai.input.messages"] = _messages_json(req.messages)
            from opentelemetry.trace import SpanKind

            self._span = inst.tracer.start_span(
                f"chat {request_model}", kind=SpanKind.CLIENT, attributes=span_attrs
            )

    def first_chunk(self) -> None:
        """The first chunk arrived: the time to it, as an event and an attribute."""
        try:
            self._first_chunk()
        except Exception:
            _broken()

    def _first_chunk(self) -> None:
        if self._first is not None:
            return
        self._first = seconds = time.monotonic() - self._start
        if self._span is not None:
            self._span.set_attribute("gen_ai.response.time_to_first_chunk", seconds)
            self._span.add_event(
                "gen_ai.first_chunk", {"gen_ai.response.time_to_first_chunk": seconds}
            )

    def retry(self) -> None:
        """A retry is starting: an event on the span."""
        try:
            self._retry()
        except Exception:
            _broken()

    def _retry(self) -> None:
        self._retries += 1
        if self._span is not None:
            self._span.add_event("blazen.retry", {"blazen.retry.attempt": self._retries + 1})

    def hop(self, provider: str, model: str, error: BaseException) -> None:
        """A fallback moved on from ``provider``'s ``model`` after ``error``: an event."""
        try:
            if self._span is not None:
                self._span.add_event(
                    "blazen.fallback",
                    {
                        "blazen.fallback.provider": PROVIDER_NAMES.get(provider, provider),
                        "blazen.fallback.model": model,
                        "error.type": type(error).__name__,
                    },
                )
        except Exception:
            _broken()

    def succeeded(self, response: CompletionResponse) -> None:
        """The stream ended with the provider's end signal: end the span, record the metrics."""
        try:
            self._succeeded(response)
        except Exception:
            _broken()

    def _succeeded(self, response: CompletionResponse) -> None:
        span = self._span
        attrs = self._attrs
        if response.model:
            attrs["gen_ai.response.model"] = response.model
        if span is not None:
            provider = response.provider
            if provider and self._attrs.get("gen_ai.provider.name") == "fallback":
                # A fallback's span names the provider that answered.
                span.set_attribute("gen_ai.provider.name", PROVIDER_NAMES.get(provider, provider))
            if response.model:
                span.set_attribute("gen_ai.response.model", response.model)
            if response.id:
                span.set_attribute("gen_ai.response.id", response.id)
            if response.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
            usage = response.usage
            if usage is not None:
                span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
                cost = usage.cost  # looked up only for a span that is recorded
                if cost is not None:
                    span.set_attribute("blazen.usage.cost_usd", float(cost))
            if _capturing():
                message = ChatMessage(
                    role="assistant", content=response.content, tool_calls=response.tool_calls
                )
                out = json.loads(_messages_json((message,)))
                out[0]["finish_reason"] = response.finish_reason
                span.set_attribute("gen_ai.output.messages", json.dumps(out, ensure_ascii=False))
        self._record(response)
        if span is not None:
            span.end()

    def failed(self, err: BaseException) -> None:
        """The stream failed or was cancelled: ``error.type``, the span's status set to error."""
        try:
            self._failed(err)
        except Exception:
            _broken()

    def _failed(self, err: BaseException) -> None:
        error_type = type(err).__name__
        self._attrs["error.type"] = error_type
        span = self._span
        mark_error(span, err)
        self._record(None)
        if span is not None:
            span.end()

    def _record(self, response: Optional[CompletionResponse]) -> None:
        inst = self._inst
        attrs = self._attrs
        if inst.duration is not None:
            inst.duration.record(time.monotonic() - self._start, attrs)
        if inst.first_chunk is not None and self._first is not None:
            inst.first_chunk.record(self._first, attrs)
        usage = None if response is None else response.usage
        if inst.tokens is not None and usage is not None:
            inst.tokens.record(usage.prompt_tokens, {**attrs, "gen_ai.token.type": "input"})
            inst.tokens.record(usage.completion_tokens, {**attrs, "gen_ai.token.type": "output"})


def stream_span(
    provider: str, base_url: str, model: str, req: CompletionRequest
) -> Optional[StreamSpan]:
    """A started stream span, or None when OpenTelemetry is not in use (the common case)."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    inst = _instruments()
    if inst is None:
        return None
    try:
        return StreamSpan(inst, provider, base_url, model, req)
    except Exception:
        _broken()
        return None


def _broken() -> None:
    # An exporter or SDK that raises must not change how a stream ends: say so, go on.
    logger.warning("OpenTelemetry raised; blazen goes on without this span", exc_info=True)


@contextmanager
def operation_span(name: str, attributes: dict[str, Any]) -> Iterator[Any]:
    """A span current for the ``with`` block (agent runs, tool calls, workflow runs and steps).

    Yields the span, or None when OpenTelemetry is not in use. An exception leaving the
    block sets ``error.type`` and the error status, and propagates.
    """
    inst = _instruments() if "opentelemetry.trace" in sys.modules else None
    if inst is None or inst.tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind, use_span

    try:
        span = inst.tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)
    except Exception:
        _broken()
        yield None
        return
    try:
        with use_span(span, record_exception=False, set_status_on_exception=False):
            try:
                yield span
            except BaseException as exc:
                # An internal wrapper carrying the run's error (``.error``) reports that error.
                inner = getattr(exc, "error", None)
                mark_error(span, inner if isinstance(inner, BaseException) else exc)
                raise
    finally:
        try:
            span.end()
        except Exception:
            _broken()


def mark_error(span: Any, err: BaseException) -> None:
    """Set ``error.type`` (the exception's class) and the error status on ``span`` (or None)."""
    if span is None:
        return
    try:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", type(err).__name__)
        span.set_status(Status(StatusCode.ERROR, str(getattr(err, "message", "")) or None))
    except Exception:
        _broken()


def current_context() -> Any:
    """The OpenTelemetry context of this thread (to carry to another), or None without it."""
    context = sys.modules.get("opentelemetry.context")
    return None if context is None else context.get_current()


def attach(ctx: Any) -> Any:
    """Make ``ctx`` (from :func:`current_context`) current on this thread; a token or None."""
    if ctx is None:
        return None
    from opentelemetry import context

    return context.attach(ctx)


def detach(token: Any) -> None:
    """Undo :func:`attach`."""
    if token is not None:
        from opentelemetry import context

        context.detach(token)
