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
  tool calls, so they are not reported as such; a chunk carries a
  :class:`~blazen.ServerToolEvent` when one starts and when its result block arrives, and
  the turn's content is kept verbatim to go back next turn (:mod:`.anthropic_fold`);
- ``citations_delta`` adds a citation to the text block it belongs to (collected on
  ``CompletionResponse.citations`` when the block ends);
- ``pause_turn`` ends a turn the server paused (a long server-tool loop): the worker may
  continue it in the same stream (:meth:`AnthropicWire.continuation`).

The request body is built by :mod:`.anthropic_request`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional

import attrs

from .._http import HttpRequest
from .._stream import StreamState, error_event, error_from_body, error_from_http, malformed
from .._types import (
    CompletionRequest,
    CompletionResponse,
    ReasoningPart,
    StreamChunk,
    server_tool_chunk,
)
from ..errors import ProviderError
from .anthropic_fold import Turn, citation, stop_details, thinking_part
from .anthropic_request import MIN_THINKING_BUDGET, WIRE, RequestBuilder
from .base import parse_json

__all__ = ["MIN_THINKING_BUDGET", "AnthropicWire"]

DEFAULT_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


def _turn(state: StreamState) -> Turn:
    turn = state.scratch.get("turn")
    if turn is None:
        turn = state.scratch["turn"] = Turn()
    return turn


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
        structured_output: str = "format",
    ) -> None:
        self.provider = provider
        self.model = model
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._builder = RequestBuilder(provider, model, default_max_tokens, structured_output)
        self._headers: dict[str, str] = {
            "Content-Type": "application/json",
            "anthropic-version": version,
        }
        if api_key:
            self._headers["x-api-key"] = api_key
        self._headers.update(headers)

    # -- request -----------------------------------------------------------------------

    def messages(self, req: CompletionRequest) -> list[dict[str, Any]]:
        """The ``messages`` array (see :class:`.anthropic_request.RequestBuilder`)."""
        return self._builder.messages(req)

    def body(self, req: CompletionRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``req``."""
        return self._builder.body(req, stream=stream)

    def build(self, req: CompletionRequest, *, stream: bool) -> HttpRequest:
        """The HTTP request for ``req``."""
        return HttpRequest.post_json(
            self._url, self._headers, self.body(req, stream=stream), sse=stream
        )

    def continuation(
        self, req: CompletionRequest, paused: CompletionResponse
    ) -> Optional[CompletionRequest]:
        """The request that continues ``paused`` (a ``pause_turn``), or None if it cannot be.

        https://platform.claude.com/docs/en/agents-and-tools/tool-use/server-tools: the
        same request with the paused assistant content appended, verbatim, as the last
        turn; the model goes on from there.
        """
        if paused.raw_finish_reason != "pause_turn" or not paused.provider_items:
            return None
        return attrs.evolve(req, messages=(*req.messages, paused.message))

    # -- stream ------------------------------------------------------------------------

    def fold(self, state: StreamState, event: str, data: str) -> Optional[StreamChunk]:
        """Fold one SSE event into ``state``."""
        if event == "error":
            raise error_event(self.provider, data)
        obj = parse_json(self.provider, data)
        kind = obj.get("type") or event
        if kind == "content_block_delta":
            return self._delta(state, obj, data)
        if kind == "content_block_start":
            return self._block_start(state, obj)
        if kind == "content_block_stop":
            return self._block_stop(state, obj)
        if kind == "message_start":
            message = obj.get("message") or {}
            state.model = message.get("model") or state.model
            # A continued turn is several messages: the first one's id names the answer.
            state.response_id = state.response_id or message.get("id")
            turn = _turn(state)
            turn.begin_message(message.get("usage") or {}, state.usage)
            state.usage = turn.total_usage()
            return None
        if kind == "message_delta":
            return self._message_delta(state, obj)
        if kind == "message_stop":
            state.finished = True
            turn = _turn(state)
            state.keep_items(turn.items(paused=state.raw_finish_reason == "pause_turn"))
            return None
        if kind == "error":
            raise error_from_body(self.provider, None, obj, raw=data)
        return None  # ping, and event types added after this was written

    def _message_delta(self, state: StreamState, obj: Mapping[str, Any]) -> Optional[StreamChunk]:
        delta = obj.get("delta") or {}
        stop = delta.get("stop_reason")
        if stop:
            state.raw_finish_reason = stop
        turn = _turn(state)
        # Counts here are cumulative totals: they replace, never add; a field left out
        # keeps its message_start value.
        turn.usage.update({k: v for k, v in (obj.get("usage") or {}).items() if v is not None})
        state.usage = turn.total_usage()
        turn.container(delta.get("container"))
        details = stop_details(delta.get("stop_details"))
        if details is not None:
            state.stop_details = details
        if stop == "refusal":
            return state.emit_refusal(self._refusal(delta))
        return None

    def _block_start(self, state: StreamState, obj: Mapping[str, Any]) -> Optional[StreamChunk]:
        index = obj["index"]
        start = obj.get("content_block") or {}
        turn = _turn(state)
        block = turn.open(index, start)
        btype = block.type
        if btype == "tool_use":
            state.tool_delta(index, start.get("id"), start.get("name"), None)
            given = start.get("input")
            if given:
                state.tool_delta(index, None, None, json.dumps(given))
            return state.emit(None, None)
        if btype == "text":
            text = start.get("text")
            if text and isinstance(text, str):
                turn.text_len += len(text)
            return state.emit(text, None)
        if btype == "thinking":
            return state.emit(None, start.get("thinking"))
        if btype == "redacted_thinking":
            data = start.get("data")
            if not isinstance(data, str) or not data:
                raise malformed(self.provider, "redacted_thinking has no data", json.dumps(obj))
            state.add_reasoning_part(ReasoningPart(kind="redacted", data=data, provider=WIRE))
            return None
        event = turn.server_event(block)
        if event is not None:
            return server_tool_chunk(event, state.tool_calls)
        return None

    def _delta(
        self, state: StreamState, obj: Mapping[str, Any], data: str
    ) -> Optional[StreamChunk]:
        delta = obj.get("delta") or {}
        dtype = delta.get("type")
        turn: Turn = state.scratch["turn"] if "turn" in state.scratch else _turn(state)
        block = turn.blocks.get(obj.get("index"))
        if dtype == "text_delta":
            text = delta.get("text")
            if text is not None and not isinstance(text, str):
                raise malformed(self.provider, "text_delta.text is not a string", data)
            if text and block is not None:
                block.parts.append(text)
                turn.text_len += len(text)
            return state.emit(text, None)
        if dtype == "thinking_delta":
            text = delta.get("thinking")
            chunk = state.emit(None, text)
            if text and block is not None:
                # emit() has checked it is text; the block keeps it for its signature.
                block.parts.append(text)
            return chunk
        if dtype == "signature_delta":
            # One opaque token per block, set (not appended), as the official SDKs do.
            if block is not None:
                signature = delta.get("signature")
                block.signature = signature if isinstance(signature, str) else None
            return None
        if dtype == "input_json_delta":
            fragment = delta.get("partial_json")
            if not fragment or block is None:
                return None
            if not isinstance(fragment, str):
                raise malformed(self.provider, "partial_json is not a string", data)
            block.parts.append(fragment)
            if block.type != "tool_use":
                return None  # a server tool's input: kept to go back, not the caller's to run
            state.tool_delta(obj["index"], None, None, fragment)
            return state.emit(None, None)
        if dtype == "citations_delta":
            cited = delta.get("citation")
            if not isinstance(cited, Mapping):
                raise malformed(self.provider, "citations_delta has no citation object", data)
            if block is not None:
                block.citations.append(cited)
            return None
        return None  # later additions

    def _block_stop(self, state: StreamState, obj: Mapping[str, Any]) -> Optional[StreamChunk]:
        index = obj.get("index")
        turn = _turn(state)
        block = turn.close(index)
        if block is None:
            return None
        btype = block.type
        if btype == "thinking":
            text = (block.start.get("thinking") or "") + "".join(block.parts)
            signature = block.signature or block.start.get("signature")
            state.add_reasoning_part(thinking_part(text, signature))
            return None
        if btype == "text":
            for cited in block.citations:
                state.add_citation(citation(cited, block.text_start, turn.text_len))
            return None
        if btype != "tool_use" or block.parts or block.start.get("input"):
            return None
        # A tool called without arguments streams no fragment: its input is {}.
        state.tool_delta(index, None, None, "{}")
        return state.emit(None, None)

    def _refusal(self, holder: Mapping[str, Any]) -> str:
        # A streaming classifier stopped the answer; stop_details explains why (since
        # 2025; https://docs.claude.com/en/docs/test-and-evaluate/strengthen-guardrails/
        # handle-streaming-refusals). Without it, a refusal still must not read as blank.
        details = holder.get("stop_details") or {}
        explanation = details.get("explanation") if isinstance(details, Mapping) else None
        if isinstance(explanation, str) and explanation:
            return explanation
        return f"{self.provider} stopped the answer with stop_reason 'refusal'"

    # -- whole responses and errors ----------------------------------------------------

    def parse_response(self, body: str) -> CompletionResponse:
        """The response of a non-streaming request, folded block by block as a stream is."""
        obj = parse_json(self.provider, body)
        if obj.get("type") == "error" or obj.get("error") is not None:
            raise error_from_body(self.provider, None, obj, raw=body)
        state = StreamState()
        state.model = obj.get("model")
        state.response_id = obj.get("id")
        turn = _turn(state)
        turn.begin_message(obj.get("usage") or {}, None)
        for i, block in enumerate(obj.get("content") or ()):
            self._block_start(state, {"index": i, "content_block": block})
            self._block_stop(state, {"index": i})
        state.usage = turn.total_usage()
        state.raw_finish_reason = obj.get("stop_reason")
        turn.container(obj.get("container"))
        state.stop_details = stop_details(obj.get("stop_details"))
        if state.raw_finish_reason == "refusal":
            state.emit_refusal(self._refusal(obj))
        state.keep_items(turn.items(paused=state.raw_finish_reason == "pause_turn"))
        state.finished = True
        return state.response()

    def error(self, status: int, headers: Mapping[str, str], body: str) -> ProviderError:
        """The error for a non-success HTTP response."""
        return error_from_http(self.provider, status, headers, body)
