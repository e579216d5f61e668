"""Anthropic's Messages API (``POST /v1/messages``). No I/O.

The stream is a sequence of named SSE events
(https://docs.anthropic.com/en/docs/build-with-claude/streaming):
``message_start`` (model, input usage), then per content block ``content_block_start`` /
``content_block_delta`` / ``content_block_stop``, then ``message_delta`` (stop reason and
*cumulative* usage) and ``message_stop``, the end signal. ``ping`` may come at any time,
and new event types may be added, so unknown events are ignored. An ``error`` event
carries the same body as an HTTP error and is classified the same way.

Quirks handled here:

- a ``tool_use`` block streams its input as ``input_json_delta`` fragments; a tool without
  arguments sends none (or one empty fragment), and its arguments are then ``{}``;
- ``thinking`` blocks stream ``thinking_delta`` (reasoning text) and one ``signature_delta``
  (an opaque token, not text: never shown as reasoning); ``redacted_thinking`` blocks come
  whole, encrypted. Both are kept as :class:`~blazen.ReasoningPart` values and sent back
  unchanged, first in the assistant turn, as a tool-use turn with thinking requires
  (https://docs.claude.com/en/docs/build-with-claude/extended-thinking);
- ``server_tool_use`` blocks (web search...) run on Anthropic's side: not the caller's
  tool calls, so they are not reported as such.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any, Optional, Union

from .._http import HttpRequest
from .._kit import (
    StreamState,
    error_event,
    error_from_body,
    error_from_http,
    malformed,
    parse_json,
)
from .._types import (
    Attachment,
    ChatMessage,
    CompletionRequest,
    CompletionResponse,
    DocumentPart,
    ReasoningPart,
    StreamChunk,
    TokenUsage,
)
from ..errors import ProviderError, UnsupportedError, ValidationError
from .base import call_arguments, image_source, reasoning_refused, system_text
from .capabilities import check_attachment

__all__ = ["AnthropicFold", "AnthropicWire"]

DEFAULT_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
#: The smallest ``thinking.budget_tokens`` the Messages API takes.
MIN_THINKING_BUDGET = 1024
# https://docs.anthropic.com/en/docs/build-with-claude/vision: the formats Claude reads.
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
# https://docs.claude.com/en/docs/build-with-claude/prompt-caching: a cache_control block
# caches the prompt up to and including itself; a request may hold at most four.
_MAX_BREAKPOINTS = 4
_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
#: What ReasoningPart.provider says of the parts this wire format makes.
WIRE = "anthropic"


def _reasoning_block(part: ReasoningPart) -> Optional[dict[str, Any]]:
    """The content block that sends ``part`` back, or None if Claude would not take it."""
    if part.provider != WIRE:
        return None  # another provider's signatures mean nothing here
    if part.kind == "redacted":
        return {"type": "redacted_thinking", "data": part.data}
    if part.kind == "thinking" and part.signature:
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    return None  # unsigned thinking cannot be verified, so Claude refuses it


def _thinking_part(text: str, signature: Any) -> ReasoningPart:
    return ReasoningPart(
        text=text,
        signature=signature if isinstance(signature, str) and signature else None,
        provider=WIRE,
    )


def _usage(u: Mapping[str, Any]) -> TokenUsage:
    # Anthropic's input_tokens leaves out cached tokens; blazen's prompt_tokens counts every
    # input token (as OpenAI's does), with the cache reads also in cached_tokens and the
    # writes in cache_write_tokens.
    fresh = u.get("input_tokens") or 0
    written = u.get("cache_creation_input_tokens") or 0
    read = u.get("cache_read_input_tokens") or 0
    out = u.get("output_tokens") or 0
    prompt = fresh + written + read
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=out,
        total_tokens=prompt + out,
        cached_tokens=read,
        cache_write_tokens=written,
    )


class AnthropicWire:
    """The Messages API wire format at ``{base_url}/v1/messages``."""

    framing = "sse"
    stream_content_types: tuple[str, ...] = ("text/event-stream",)

    def __init__(
        self,
        *,
        provider: str = "anthropic",
        base_url: str,
        api_key: str,
        model: str,
        headers: Mapping[str, str],
        version: str = DEFAULT_VERSION,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        self.provider = provider
        self.model = model
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._default_max_tokens = default_max_tokens
        self._headers: dict[str, str] = {
            "Content-Type": "application/json",
            "anthropic-version": version,
        }
        if api_key:
            self._headers["x-api-key"] = api_key
        self._headers.update(headers)

    # -- request -----------------------------------------------------------------------

    def _image(self, image: Any) -> dict[str, Any]:
        kind, media_type, value = image_source(self.provider, image)
        if kind == "url":
            return {"type": "image", "source": {"type": "url", "url": value}}
        if media_type not in _IMAGE_TYPES:
            raise UnsupportedError(
                f"{self.provider} accepts images of type {', '.join(sorted(_IMAGE_TYPES))}, "
                f"not {media_type!r}",
                provider=self.provider,
            )
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": value},
        }

    def _document(self, part: Attachment) -> dict[str, Any]:
        # Audio, and documents Claude cannot read, are refused here, before sending.
        check_attachment(self.provider, "anthropic", part)
        assert isinstance(part, DocumentPart)  # audio was refused above
        source: dict[str, Any]
        if part.url is not None:
            source = {"type": "url", "url": part.url}
        elif part.media_type == "text/plain":
            # Plain text goes as text (checked to be UTF-8 when the document was built).
            text = base64.b64decode(part.data or "").decode("utf-8")
            source = {"type": "text", "media_type": "text/plain", "data": text}
        else:
            source = {"type": "base64", "media_type": part.media_type, "data": part.data}
        block: dict[str, Any] = {"type": "document", "source": source}
        if part.filename:
            block["title"] = part.filename
        return block

    def _blocks(self, m: ChatMessage) -> tuple[str, list[dict[str, Any]]]:
        """The role and content blocks of one message, its breakpoint on the last."""
        role, blocks = self._plain_blocks(m)
        if m.cache:
            blocks[-1]["cache_control"] = {"type": "ephemeral"}
        return role, blocks

    def _plain_blocks(self, m: ChatMessage) -> tuple[str, list[dict[str, Any]]]:
        if m.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m.tool_call_id,
                "content": m.content or "",
            }
            if m.is_error:
                block["is_error"] = True
            return "user", [block]
        blocks: list[dict[str, Any]] = []
        for part in m.reasoning_parts:
            # Thinking comes first in the turn, as the model wrote it.
            reasoning = _reasoning_block(part)
            if reasoning is not None:
                blocks.append(reasoning)
        # Documents before the question, as Anthropic's PDF guide shows them (audio, which
        # would come after it, is refused by _document).
        blocks.extend(self._document(part) for part in m.attachments)
        if m.content:
            blocks.append({"type": "text", "text": m.content})
        blocks.extend(self._image(img) for img in m.images)
        blocks.extend(
            {
                "type": "tool_use",
                "id": c.id,
                "name": c.name,
                "input": call_arguments(self.provider, c),
            }
            for c in m.tool_calls
        )
        if not blocks:
            blocks.append({"type": "text", "text": m.content or ""})
        return m.role, blocks

    def messages(self, req: CompletionRequest) -> list[dict[str, Any]]:
        """The ``messages`` array: system messages lifted out, same-role turns merged."""
        out: list[dict[str, Any]] = []
        for m in req.messages:
            if m.role == "system":
                continue
            role, blocks = self._blocks(m)
            # Parallel tool results must arrive in one user turn, right after the calls.
            if out and out[-1]["role"] == role:
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": role, "content": blocks})
        for msg in out:
            content = msg["content"]
            # One plain text block goes as a string; a breakpoint needs the block form.
            only = content[0] if len(content) == 1 else None
            if only is not None and only["type"] == "text" and "cache_control" not in only:
                msg["content"] = only["text"]
        return out

    def system(self, req: CompletionRequest) -> Union[str, list[dict[str, Any]], None]:
        """The top-level ``system``: a string, or text blocks when one carries a breakpoint."""
        if not any(m.cache for m in req.messages if m.role == "system"):
            return system_text(req)
        blocks: list[dict[str, Any]] = []
        if req.system:
            blocks.append({"type": "text", "text": req.system})
        for m in req.messages:
            if m.role == "system" and m.content:
                block: dict[str, Any] = {"type": "text", "text": m.content}
                if m.cache:
                    block["cache_control"] = {"type": "ephemeral"}
                blocks.append(block)
        return blocks or None

    def _check_breakpoints(self, body: Mapping[str, Any]) -> None:
        system = body.get("system")
        blocks = list(system) if isinstance(system, list) else []
        for msg in body["messages"]:
            if isinstance(msg["content"], list):
                blocks.extend(msg["content"])
        count = sum(1 for b in blocks if "cache_control" in b)
        if count > _MAX_BREAKPOINTS:
            msg = (
                f"{self.provider} allows at most {_MAX_BREAKPOINTS} cache breakpoints in one "
                f"request, and this one has {count} (messages built with cache=True); keep "
                "cache=True on at most four, such as the system prompt and the latest turns"
            )
            raise ValidationError(msg, provider=self.provider)

    def body(self, req: CompletionRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``req``."""
        if req.response_format is not None:
            raise UnsupportedError(
                f"{self.provider} has no response_format; ask for JSON in the prompt instead",
                provider=self.provider,
            )
        thinking = self._thinking(req)
        # Required by the Messages API, unlike OpenAI's optional max_tokens.
        max_tokens = req.max_tokens or self._default_max_tokens
        if thinking is not None and max_tokens <= thinking["budget_tokens"]:
            # The thinking budget counts within max_tokens and must be below it: the answer
            # keeps the room it asked for on top of the budget.
            max_tokens += thinking["budget_tokens"]
        body: dict[str, Any] = {
            "model": req.model or self.model,
            "max_tokens": max_tokens,
            "messages": self.messages(req),
        }
        if thinking is not None:
            body["thinking"] = thinking
        system = self.system(req)
        if system:
            body["system"] = system
        if any(m.cache for m in req.messages):
            self._check_breakpoints(body)
        if req.temperature is not None:
            body["temperature"] = req.temperature
        if req.top_p is not None:
            body["top_p"] = req.top_p
        if req.stop:
            body["stop_sequences"] = list(req.stop)
        if req.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in req.tools
            ]
        if req.tool_choice is not None:
            body["tool_choice"] = _TOOL_CHOICE.get(
                req.tool_choice, {"type": "tool", "name": req.tool_choice}
            )
        if req.output is not None:
            self._forced_output(req, body)
        if stream:
            body["stream"] = True
        return body

    def _forced_output(self, req: CompletionRequest, body: dict[str, Any]) -> None:
        """Typed output as a tool the model must call: its input is the answer.

        https://docs.anthropic.com/en/docs/build-with-claude/tool-use (JSON output): a
        forced tool's ``input_schema`` shapes the answer. With the caller's own tools the
        model must call one of them or the answer's (``any``). Claude refuses a forced tool
        while thinking.
        """
        spec = req.output
        assert spec is not None
        if req.reasoning_budget is not None:
            raise UnsupportedError(
                f"{self.provider} cannot combine output= with reasoning_budget: typed output "
                "is a forced tool call, and Claude cannot be forced to call a tool while "
                "thinking; drop one of them",
                provider=self.provider,
            )
        description = spec.description or f"Give the answer as a {spec.name}."
        tool = {"name": spec.name, "description": description, "input_schema": spec.schema}
        if req.tools and req.tool_choice != "none":
            # With tools of its own the model must call one of them or give the answer:
            # "any" forces a tool call without choosing which.
            body["tools"].append(tool)
            body["tool_choice"] = {"type": "any"}
        else:
            body["tools"] = [tool]
            body["tool_choice"] = {"type": "tool", "name": spec.name}

    def _thinking(self, req: CompletionRequest) -> Optional[dict[str, Any]]:
        """``thinking`` for ``req``'s reasoning options; what Claude refuses is refused here.

        https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking: a budget of
        at least 1,024 tokens, below ``max_tokens``; no ``temperature``, no ``top_p`` below
        0.95 and no forced tool while thinking.
        """
        if req.reasoning_effort is not None:
            raise reasoning_refused(
                self.provider,
                "reasoning_effort",
                "Claude takes a thinking budget; pass reasoning_budget=<tokens> (at least "
                f"{MIN_THINKING_BUDGET}) instead",
            )
        budget = req.reasoning_budget
        if budget is None:
            return None
        if not isinstance(budget, int):
            raise reasoning_refused(self.provider, f"reasoning_budget={budget!r}", "not yet")
        if budget < MIN_THINKING_BUDGET:
            raise reasoning_refused(
                self.provider,
                f"reasoning_budget={budget}",
                f"Claude's smallest thinking budget is {MIN_THINKING_BUDGET} tokens",
            )
        if req.temperature is not None:
            raise reasoning_refused(
                self.provider,
                "temperature with a reasoning_budget",
                "Claude does not allow temperature while thinking; leave it unset",
            )
        if req.top_p is not None and req.top_p < 0.95:
            raise reasoning_refused(
                self.provider,
                f"top_p={req.top_p} with a reasoning_budget",
                "Claude allows only top_p from 0.95 to 1 while thinking",
            )
        if req.tool_choice not in (None, "auto", "none"):
            raise reasoning_refused(
                self.provider,
                f"tool_choice={req.tool_choice!r} with a reasoning_budget",
                "Claude cannot be forced to call a tool while thinking; use 'auto'",
            )
        return {"type": "enabled", "budget_tokens": budget}

    def build(self, req: CompletionRequest, *, stream: bool) -> HttpRequest:
        """The HTTP request for ``req``."""
        return HttpRequest.post_json(
            self._url, self._headers, self.body(req, stream=stream), sse=stream
        )

    # -- stream ------------------------------------------------------------------------

    def start(self, state: StreamState) -> AnthropicFold:
        """A fold for one stream into ``state``."""
        return AnthropicFold(self.provider, state)

    # -- whole responses and errors ----------------------------------------------------

    def parse_response(self, body: str) -> CompletionResponse:
        """The response of a non-streaming request."""
        obj = parse_json(self.provider, body)
        if obj.get("type") == "error" or obj.get("error") is not None:
            raise error_from_body(self.provider, None, obj, raw=body)
        state = StreamState()
        state.finished = True
        state.model = obj.get("model")
        state.response_id = obj.get("id")
        state.usage = _usage(obj.get("usage") or {})
        state.raw_finish_reason = obj.get("stop_reason")
        for i, block in enumerate(obj.get("content") or ()):
            btype = block.get("type")
            if btype == "text":
                state.emit(block.get("text"), None)
            elif btype == "thinking":
                text = block.get("thinking")
                state.emit(None, text)
                state.add_reasoning_part(_thinking_part(text or "", block.get("signature")))
            elif btype == "redacted_thinking":
                data = block.get("data")
                if not isinstance(data, str) or not data:
                    # As in a stream: dropped, the next turn would be refused without it.
                    raise malformed(self.provider, "redacted_thinking has no data", body)
                state.add_reasoning_part(ReasoningPart(kind="redacted", data=data, provider=WIRE))
            elif btype == "tool_use":
                state.tool_delta(i, block.get("id"), block.get("name"), json.dumps(block["input"]))
        if state.raw_finish_reason == "refusal":
            state.emit_refusal(_refusal(self.provider, obj))
        return state.response()

    def error(self, status: int, headers: Mapping[str, str], body: str) -> ProviderError:
        """The error for a non-success HTTP response."""
        return error_from_http(self.provider, status, headers, body)


def _refusal(provider: str, holder: Mapping[str, Any]) -> str:
    # A streaming classifier stopped the answer; stop_details explains why (since
    # 2025; https://docs.claude.com/en/docs/test-and-evaluate/strengthen-guardrails/
    # handle-streaming-refusals). Without it, a refusal still must not read as blank.
    details = holder.get("stop_details") or {}
    explanation = details.get("explanation") if isinstance(details, Mapping) else None
    if isinstance(explanation, str) and explanation:
        return explanation
    return f"{provider} stopped the answer with stop_reason 'refusal'"


class AnthropicFold:
    """One Messages stream's fold: named SSE events into its state, block by block."""

    __slots__ = ("blocks", "has_args", "provider", "signatures", "state", "thinking", "usage")

    def __init__(self, provider: str, state: StreamState) -> None:
        self.provider = provider
        self.state = state
        #: The usage fields so far: message_delta's cumulative counts replace message_start's.
        self.usage: dict[str, Any] = {}
        #: Each open content block's type, by index.
        self.blocks: dict[Any, Any] = {}
        #: The tool_use blocks that have streamed an argument fragment.
        self.has_args: set[Any] = set()
        #: Each thinking block's text so far, kept for the part its signature signs.
        self.thinking: dict[Any, list[str]] = {}
        #: Each thinking block's signature.
        self.signatures: dict[Any, Any] = {}

    def fold(self, event: str, data: str) -> Optional[StreamChunk]:
        """Fold one SSE event."""
        if event == "error":
            raise error_event(self.provider, data)
        obj = parse_json(self.provider, data)
        kind = obj.get("type") or event
        if kind == "content_block_delta":
            return self._delta(obj, data)
        if kind == "content_block_start":
            return self._block_start(obj)
        if kind == "content_block_stop":
            return self._block_stop(obj)
        state = self.state
        if kind == "message_start":
            message = obj.get("message") or {}
            state.model = message.get("model") or state.model
            state.response_id = message.get("id")
            self.usage = usage = dict(message.get("usage") or {})
            state.usage = _usage(usage)
            return None
        if kind == "message_delta":
            delta = obj.get("delta") or {}
            stop = delta.get("stop_reason")
            if stop:
                state.raw_finish_reason = stop
            # Counts here are cumulative totals: they replace, never add; a field left out
            # keeps its message_start value.
            usage = self.usage
            usage.update({k: v for k, v in (obj.get("usage") or {}).items() if v is not None})
            state.usage = _usage(usage)
            if stop == "refusal":
                return state.emit_refusal(_refusal(self.provider, delta))
            return None
        if kind == "message_stop":
            state.finished = True
            return None
        if kind == "error":
            raise error_from_body(self.provider, None, obj, raw=data)
        return None  # ping, and event types added after this was written

    def _block_start(self, obj: Mapping[str, Any]) -> Optional[StreamChunk]:
        state = self.state
        index = obj["index"]
        block = obj.get("content_block") or {}
        btype = block.get("type")
        self.blocks[index] = btype
        if btype == "tool_use":
            state.tool_delta(index, block.get("id"), block.get("name"), None)
            given = block.get("input")
            if given:
                state.tool_delta(index, None, None, json.dumps(given))
                self.has_args.add(index)
            return state.emit(None, None)
        if btype == "text":
            return state.emit(block.get("text"), None)
        if btype == "thinking":
            text = block.get("thinking")
            self.thinking[index] = [text] if text else []
            return state.emit(None, text)
        if btype == "redacted_thinking":
            data = block.get("data")
            if not isinstance(data, str) or not data:
                raise malformed(self.provider, "redacted_thinking has no data", json.dumps(obj))
            state.add_reasoning_part(ReasoningPart(kind="redacted", data=data, provider=WIRE))
        return None

    def _delta(self, obj: Mapping[str, Any], data: str) -> Optional[StreamChunk]:
        state = self.state
        delta = obj.get("delta") or {}
        dtype = delta.get("type")
        if dtype == "text_delta":
            text = delta.get("text")
            if text is not None and not isinstance(text, str):
                raise malformed(self.provider, "text_delta.text is not a string", data)
            return state.emit(text, None)
        if dtype == "thinking_delta":
            text = delta.get("thinking")
            chunk = state.emit(None, text)
            if text:
                # emit() has checked it is text; the block keeps it for its signature.
                self.thinking.setdefault(obj["index"], []).append(text)
            return chunk
        if dtype == "signature_delta":
            # One opaque token per block, set (not appended), as the official SDKs do.
            self.signatures[obj["index"]] = delta.get("signature")
            return None
        if dtype == "input_json_delta":
            index = obj["index"]
            if self.blocks.get(index) != "tool_use":
                return None  # a server tool's input: not the caller's to run
            fragment = delta.get("partial_json")
            if not fragment:
                return None
            state.tool_delta(index, None, None, fragment)
            self.has_args.add(index)
            return state.emit(None, None)
        return None  # citations_delta, and later additions

    def _block_stop(self, obj: Mapping[str, Any]) -> Optional[StreamChunk]:
        state = self.state
        index = obj.get("index")
        btype = self.blocks.get(index)
        if btype == "thinking":
            text = self.thinking.pop(index, ())
            signature = self.signatures.pop(index, None)
            state.add_reasoning_part(_thinking_part("".join(text), signature))
            return None
        if btype != "tool_use":
            return None
        if index in self.has_args:
            return None
        # A tool called without arguments streams no fragment: its input is {}.
        state.tool_delta(index, None, None, "{}")
        return state.emit(None, None)
