"""OpenAI chat completions, and every server that speaks the same wire format. No I/O.

Quirks handled here (each seen from real servers):

- the first chunk carries only ``role``; Azure sends a first chunk with empty ``choices``
  (``prompt_filter_results``); the usage chunk has ``choices: []``;
- tool-call deltas are keyed by ``index``, but some servers omit it, and llama.cpp repeats
  ``id`` and ``name`` on every delta (``id``/``name`` are therefore set once, never joined);
- reasoning arrives as ``reasoning_content`` (DeepSeek, vLLM) or ``reasoning`` (OpenRouter);
- Groq puts the usage under ``x_groq.usage``;
- a model declining (mostly under structured output) streams ``delta.refusal``, not
  ``content``, and still ends ``finish_reason: "stop"``;
- a server may stream several choices, interleaved by ``index``: only choice 0 is followed;
- an error can arrive inside a 200 stream as ``{"error": {...}}``, and OpenRouter reports a
  mid-stream failure as ``finish_reason: "error"``.
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Mapping
from typing import Any, Optional

from .._http import HttpRequest
from .._kit import (
    StreamState,
    error_event,
    error_from_body,
    error_from_http,
    malformed,
    parse_json,
)
from .._schema.output import OutputSpec
from .._types import (
    Attachment,
    AudioPart,
    CompletionRequest,
    CompletionResponse,
    StreamChunk,
    TokenUsage,
    VideoPart,
)
from ..errors import ProviderError
from .base import check_effort, reasoning_refused, refuse_previous_response, refuse_server_tools
from .capabilities import check_attachment
from .reasoning_details import Details, sent_back

__all__ = ["DetailsFold", "OpenAIFold", "OpenAIWire", "openai_messages"]


def _attachment(provider: str, part: Attachment) -> dict[str, Any]:
    # A document by URL or of a type other than PDF is refused here, before sending.
    check_attachment(provider, "openai", part)
    if isinstance(part, AudioPart):
        return {"type": "input_audio", "input_audio": {"data": part.data, "format": part.format}}
    if isinstance(part, VideoPart):  # presets that take it (OpenRouter, vLLM) only
        return {"type": "video_url", "video_url": {"url": part.as_data_url()}}
    # file_data needs a filename beside it; bytes given without one get a neutral name.
    name = part.filename or "document" + (mimetypes.guess_extension(part.media_type) or "")
    return {"type": "file", "file": {"filename": name, "file_data": part.as_data_url()}}


def _is_audio(part: Attachment) -> bool:
    # Sound and video go after the text: OpenAI's audio guide and OpenRouter's video guide.
    return isinstance(part, (AudioPart, VideoPart))


def openai_messages(
    req: CompletionRequest,
    provider: str = "openai",
    reasoning_field: Optional[str] = None,
    reasoning_details: bool = False,
) -> list[dict[str, Any]]:
    """The ``messages`` array for a request, in OpenAI's shape.

    A message's ``name`` goes out as its ``name`` field on system, user and assistant
    messages; tool messages have none in OpenAI's API (their call id names them).
    Documents come before the message's text, audio after it and its images. An
    assistant turn's plain reasoning text goes back as ``reasoning_field`` when the server
    wants it (DeepSeek's ``reasoning_content``), and OpenRouter's entries as its
    ``reasoning_details``; no other wire's signed parts are sent.
    """
    out: list[dict[str, Any]] = []
    if req.system:
        out.append({"role": "system", "content": req.system})
    for m in req.messages:
        if m.role == "user" and (m.images or m.attachments):
            # Documents before the question and sound after it, as OpenAI's guides show them.
            parts = [_attachment(provider, p) for p in m.attachments if not _is_audio(p)]
            if m.content:
                parts.append({"type": "text", "text": m.content})
            parts.extend(
                {"type": "image_url", "image_url": {"url": img.as_data_url()}} for img in m.images
            )
            parts.extend(_attachment(provider, p) for p in m.attachments if _is_audio(p))
            out.append({"role": "user", "content": parts})
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments_json or "{}"},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        elif m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content or ""})
        else:
            out.append({"role": m.role, "content": m.content or ""})
        if m.name is not None and m.role != "tool":
            out[-1]["name"] = m.name  # each branch above appended this message
        if reasoning_field is not None and m.reasoning_parts:
            text = "".join(
                p.text for p in m.reasoning_parts if p.provider is None and p.kind == "thinking"
            )
            if text:
                out[-1][reasoning_field] = text
        if reasoning_details and m.reasoning_parts:
            details = sent_back(m)
            if details:
                out[-1]["reasoning_details"] = details
    return out


def _json_schema_format(spec: OutputSpec, kind: str = "json_schema") -> dict[str, Any]:
    # https://platform.openai.com/docs/guides/structured-outputs: strict makes the server
    # hold the answer to the schema (output_spec made it strict-compatible). The class's
    # docstring stays inside the schema, where the openai SDK's .parse() puts it too.
    if kind == "json_object":
        # llama-cpp-python's server takes only text or json_object, with the schema as a
        # grammar beside it (its ResponseFormat: {"type": "json_object", "schema": ...}).
        return {"type": "json_object", "schema": spec.schema}
    schema = {"name": spec.name, "schema": spec.schema, "strict": True}
    return {"type": "json_schema", "json_schema": schema}


def _usage(u: Mapping[str, Any]) -> TokenUsage:
    prompt = u.get("prompt_tokens") or 0
    completion = u.get("completion_tokens") or 0
    pdet = u.get("prompt_tokens_details") or {}
    cdet = u.get("completion_tokens_details") or {}
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=u.get("total_tokens") or prompt + completion,
        # OpenAI caches long prefixes by itself and reports only the reads
        # (https://platform.openai.com/docs/guides/prompt-caching); writes are free, unsaid.
        # DeepSeek names its cache reads prompt_cache_hit_tokens (its context-caching guide).
        cached_tokens=pdet.get("cached_tokens") or u.get("prompt_cache_hit_tokens") or 0,
        reasoning_tokens=cdet.get("reasoning_tokens") or 0,
    )


class OpenAIWire:
    """The OpenAI chat-completions wire format at ``{base_url}/chat/completions``."""

    framing = "sse"
    stream_content_types: tuple[str, ...] = ("text/event-stream",)

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        api_key: str,
        model: str,
        headers: Mapping[str, str],
        stream_usage: bool = True,
        auth_header: str = "Authorization",
        url: Optional[str] = None,
        max_tokens_field: str = "max_tokens",
        reasoning_field: Optional[str] = None,
        reasoning_details: bool = False,
        structured_output: str = "json_schema",
    ) -> None:
        self.provider = provider
        self._structured = structured_output
        self._reasoning_field = reasoning_field
        self._reasoning_details = reasoning_details
        # OpenAI's reasoning models refuse max_tokens; older compatible servers only know it.
        self._max_tokens_field = max_tokens_field
        self.model = model
        self._url = url or base_url.rstrip("/") + "/chat/completions"
        self._stream_usage = stream_usage
        self._headers: dict[str, str] = {"Content-Type": "application/json"}
        if api_key:
            self._headers[auth_header] = (
                f"Bearer {api_key}" if auth_header == "Authorization" else api_key
            )
        self._headers.update(headers)

    def body(self, req: CompletionRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``req``."""
        refuse_server_tools(self.provider, req, "chat completions")
        # https://platform.openai.com/docs/api-reference/chat/create#reasoning_effort (and
        # the openai package's ReasoningEffort): not every model takes every level.
        check_effort(
            self.provider, req, ("none", "minimal", "low", "medium", "high", "xhigh", "max")
        )
        if req.reasoning_budget is not None:
            raise reasoning_refused(
                self.provider,
                "reasoning_budget (a token budget)",
                "the OpenAI format takes reasoning_effort='low', 'medium' or 'high' instead",
            )
        refuse_previous_response(self.provider, req)
        messages = openai_messages(
            req, self.provider, self._reasoning_field, self._reasoning_details
        )
        body: dict[str, Any] = {"model": req.model or self.model, "messages": messages}
        if req.max_tokens is not None:
            body[self._max_tokens_field] = req.max_tokens
        if req.reasoning_effort is not None:
            body["reasoning_effort"] = req.reasoning_effort
        if req.temperature is not None:
            body["temperature"] = req.temperature
        if req.top_p is not None:
            body["top_p"] = req.top_p
        if req.stop:
            body["stop"] = list(req.stop)
        if req.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in req.tools
            ]
        if req.tool_choice is not None:
            body["tool_choice"] = (
                req.tool_choice
                if req.tool_choice in ("auto", "none", "required")
                else {"type": "function", "function": {"name": req.tool_choice}}
            )
        if req.response_format is not None:
            body["response_format"] = req.response_format
        elif req.output is not None:
            body["response_format"] = _json_schema_format(req.output, self._structured)
        if stream:
            body["stream"] = True
            if self._stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body

    def build(self, req: CompletionRequest, *, stream: bool) -> HttpRequest:
        """The HTTP request for ``req``."""
        return HttpRequest.post_json(
            self._url, self._headers, self.body(req, stream=stream), sse=stream
        )

    def start(self, state: StreamState) -> OpenAIFold:
        """A fold for one stream into ``state``."""
        if self._reasoning_details:
            # Only OpenRouter streams pay for reading reasoning_details.
            return DetailsFold(self.provider, state)
        return OpenAIFold(self.provider, state)

    def parse_response(self, body: str) -> CompletionResponse:
        """The response of a non-streaming request, folded through the same state."""
        obj = parse_json(self.provider, body)
        if obj.get("error") is not None:
            raise error_from_body(self.provider, None, obj, raw=body)
        state = StreamState()
        state.finished = True
        state.model = obj.get("model")
        state.response_id = obj.get("id")
        if obj.get("usage"):
            state.usage = _usage(obj["usage"])
        choices = obj.get("choices") or []
        if not choices:
            raise malformed(self.provider, "no choices", body)
        message = choices[0].get("message") or {}
        for i, tc in enumerate(message.get("tool_calls") or ()):
            fn = tc.get("function") or {}
            args = fn.get("arguments")
            if args is not None and not isinstance(args, str):
                args = json.dumps(args)
            state.tool_delta(i, tc.get("id"), fn.get("name"), args)
        state.raw_finish_reason = choices[0].get("finish_reason")
        if self._reasoning_details:
            details = Details()
            details.add(message.get("reasoning_details"))
            details.flush(state)
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        state.emit_refusal(
            message.get("refusal"),
            message.get("content"),
            reasoning if isinstance(reasoning, str) else None,
        )
        return state.response()

    def error(self, status: int, headers: Mapping[str, str], body: str) -> ProviderError:
        """The error for a non-success HTTP response."""
        return error_from_http(self.provider, status, headers, body)


class OpenAIFold:
    """One chat-completions stream's fold: each ``data:`` payload into its state."""

    __slots__ = ("provider", "skipped", "state")

    def __init__(self, provider: str, state: StreamState) -> None:
        self.provider = provider
        self.state = state
        #: The index of a choice that came while choice 0 never did, kept for the end: a
        #: stream that never says choice 0 is no empty answer.
        self.skipped: Optional[Any] = None

    def fold(self, event: str, data: str) -> Optional[StreamChunk]:
        """Fold one ``data:`` payload."""
        state = self.state
        # Every payload but the last is a JSON object: only look closer at those that are not.
        if not data.startswith("{") and data.strip() == "[DONE]":
            if self.skipped is not None and not state.has_content and not state.raw_finish_reason:
                raise _no_choice_zero(self.provider, self.skipped)
            state.finished = True
            return None
        if event == "error":
            raise error_event(self.provider, data)
        obj = parse_json(self.provider, data)
        if obj.get("error") is not None:
            raise error_from_body(self.provider, None, obj, raw=data)
        model = obj.get("model")
        if model:
            if state.model is None:
                state.response_id = obj.get("id")  # the same on every chunk: read it once
            state.model = model
        usage = obj.get("usage")
        if not usage and "x_groq" in obj:
            # Groq reports usage under x_groq on the last chunk.
            usage = (obj["x_groq"] or {}).get("usage")
        if usage:
            state.usage = _usage(usage)
        choices = obj.get("choices")
        if not choices:
            return None
        choice = choices[0]
        # Only choice 0 is followed (a request cannot ask for more): a server streaming
        # several (n > 1, or unasked) interleaves their payloads, and each choice numbers
        # its own tool calls from 0, so the others are skipped whole.
        if len(choices) > 1 or choice.get("index"):
            choice = next((c for c in choices if not c.get("index")), None)
            if choice is None:
                if self.skipped is None:
                    self.skipped = choices[0].get("index")
                return None
        delta = choice.get("delta") or {}
        content = delta.get("content")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if content is not None and not isinstance(content, str):
            raise malformed(self.provider, "delta.content is not a string", data)
        if reasoning is not None and not isinstance(reasoning, str):
            reasoning = None
        calls = delta.get("tool_calls")
        if calls:
            for tc in calls:
                fn = tc.get("function") or {}
                args = fn.get("arguments")
                if args is not None and not isinstance(args, str):
                    # A few servers send the arguments as an object rather than as text.
                    args = json.dumps(args)
                state.tool_delta(tc.get("index"), tc.get("id"), fn.get("name"), args)
        finish = choice.get("finish_reason")
        if finish:
            if finish == "error":
                raise ProviderError(
                    f"{self.provider} ended the stream with finish_reason 'error'"
                    " (the upstream model failed mid-answer)",
                    provider=self.provider,
                    error_type="finish_reason_error",
                    retryable=True,
                )
            state.raw_finish_reason = finish
        # A refusal (structured output declined) comes as its own field, content null.
        refusal = delta.get("refusal")
        if refusal:
            return state.emit_refusal(refusal, content, reasoning)
        return state.emit(content, reasoning)


class DetailsFold(OpenAIFold):
    """:class:`OpenAIFold`, keeping OpenRouter's ``reasoning_details`` pieces as well."""

    __slots__ = ("details",)

    def __init__(self, provider: str, state: StreamState) -> None:
        super().__init__(provider, state)
        self.details = Details()

    def fold(self, event: str, data: str) -> Optional[StreamChunk]:
        """Fold one ``data:`` payload and the reasoning entries it carries."""
        chunk = OpenAIFold.fold(self, event, data)
        state = self.state
        if "reasoning_details" in data:
            # fold() has parsed it already: valid JSON, an object, choice 0 first or alone.
            for choice in json.loads(data).get("choices") or ():
                if not choice.get("index"):
                    self.details.add((choice.get("delta") or {}).get("reasoning_details"))
                    break
        if (state.finished or state.raw_finish_reason) and self.details.pending:
            self.details.flush(state)
        return chunk


def _no_choice_zero(provider: str, index: Any) -> ProviderError:
    return ProviderError(
        f"{provider} streamed its answer as choice {index!r} and never as choice 0, "
        "the one blazen follows (a request asks for one answer): nothing of it was read",
        provider=provider,
        error_type="malformed_payload",
    )
