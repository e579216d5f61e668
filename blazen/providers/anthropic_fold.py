"""The Messages API turn as it streams: content blocks, citations, server tools. No I/O.

One :class:`AnthropicFold` per stream keeps this wire's private state, typed: the open blocks by
index, the finished ones in order, the usage of each message. A continued paused turn
(``pause_turn``) is several messages in one stream: block indices start again at 0 in each,
usage adds up over them, and the content of all of them is one assistant turn.

What blazen's own fields cannot carry (a server tool's ``server_tool_use`` and result
blocks, a text block's ``citations``, block types added later) makes the whole turn's
content be kept verbatim as a :class:`~blazen.ProviderItem`, sent back so on the next turn
(https://platform.claude.com/docs/en/agents-and-tools/tool-use/server-tools).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional

from .._kit import StreamState, error_event, error_from_body, malformed, parse_json
from .._types import (
    Citation,
    ProviderItem,
    ReasoningPart,
    ServerToolEvent,
    StopDetails,
    StreamChunk,
    TokenUsage,
    server_tool_chunk,
)
from .anthropic_request import WIRE

__all__ = ["AnthropicFold", "Block", "Turn", "citation", "refusal_text", "stop_details", "usage_of"]

# Blocks blazen rebuilds whole from its own fields; any other type is kept verbatim.
_REBUILT = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})


def usage_of(u: Mapping[str, Any]) -> TokenUsage:
    """blazen's usage from Anthropic's counts.

    Anthropic's input_tokens leaves out cached tokens; blazen's prompt_tokens counts every
    input token (as OpenAI's does), with the cache reads also in cached_tokens and the
    writes in cache_write_tokens.
    """
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


def _int(value: Any) -> Optional[int]:
    return value if type(value) is int else None


def _str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def citation(raw: Mapping[str, Any], text_start: int, text_end: int) -> Citation:
    """One of a text block's ``citations`` (https://platform.claude.com/docs/en/
    build-with-claude/citations), spanning ``text_start:text_end`` of the answer."""
    kind = _str(raw.get("type")) or "citation"
    if kind == "char_location":
        start, end = raw.get("start_char_index"), raw.get("end_char_index")
    elif kind == "page_location":
        start, end = raw.get("start_page_number"), raw.get("end_page_number")
    else:
        start, end = raw.get("start_block_index"), raw.get("end_block_index")
    if kind == "search_result_location":
        index, url, title = raw.get("search_result_index"), raw.get("source"), raw.get("title")
    elif kind == "web_search_result_location":
        index, url, title = None, raw.get("url"), raw.get("title")
    else:
        index, url, title = raw.get("document_index"), None, raw.get("document_title")
    return Citation(
        provider=WIRE,
        kind=kind,
        cited_text=_str(raw.get("cited_text")),
        url=_str(url),
        title=_str(title),
        source_index=_int(index),
        source_start=_int(start),
        source_end=_int(end),
        text_start=text_start,
        text_end=text_end,
        file_id=_str(raw.get("file_id")),
        raw=raw,
    )


def stop_details(raw: Any) -> Optional[StopDetails]:
    """``stop_details`` of a refusal stop, or None when there is none."""
    if not isinstance(raw, Mapping):
        return None
    return StopDetails(
        provider=WIRE,
        category=_str(raw.get("category")),
        explanation=_str(raw.get("explanation")),
        raw=raw,
    )


class Block:
    """One content block while it streams."""

    __slots__ = ("citations", "parts", "signature", "start", "text_start", "type")

    def __init__(self, start: Mapping[str, Any], text_start: int) -> None:
        self.start = start
        self.type: Any = start.get("type")
        #: Text, thinking or input-JSON fragments, in order.
        self.parts: list[str] = []
        self.signature: Optional[str] = None
        self.citations: list[Mapping[str, Any]] = list(start.get("citations") or ())
        #: Where this block's text begins in the answer's text.
        self.text_start = text_start

    def verbatim(self) -> dict[str, Any]:
        """The block as the API would have sent it whole (its stream folded back)."""
        block = dict(self.start)
        if self.type == "text":
            block["text"] = (block.get("text") or "") + "".join(self.parts)
            if self.citations:
                block["citations"] = list(self.citations)
            else:
                block.pop("citations", None)
        elif self.type == "thinking":
            block["thinking"] = (block.get("thinking") or "") + "".join(self.parts)
            if self.signature is not None:
                block["signature"] = self.signature
        elif self.parts and self.type in ("tool_use", "server_tool_use"):
            joined = "".join(self.parts)
            block["input"] = json.loads(joined) if joined.strip() else {}
        return block


class Turn:
    """The content of one assistant turn as it streams, over every message of it."""

    __slots__ = (
        "_container",
        "blocks",
        "done",
        "keep",
        "messages",
        "open_text",
        "prior_usage",
        "server_names",
        "text_len",
        "usage",
    )

    def __init__(self) -> None:
        self.blocks: dict[Any, Block] = {}
        #: Finished blocks of every message so far, in order.
        self.done: list[Block] = []
        #: Whether the content must be kept verbatim (see the module docstring).
        self.keep = False
        #: Messages begun (more than one when a paused turn was continued).
        self.messages = 0
        #: Usage of the messages before the current one, summed.
        self.prior_usage: Optional[TokenUsage] = None
        #: The current message's cumulative counts.
        self.usage: dict[str, Any] = {}
        #: Server tool names by call id, to name the result that answers each.
        self.server_names: dict[str, str] = {}
        #: Characters of answer text in the blocks closed so far (citation spans).
        self.text_len = 0
        #: The open text block's fragments: appended to on the hot path, nothing else.
        self.open_text: Optional[list[str]] = None
        self._container: Optional[Mapping[str, Any]] = None

    def begin_message(self, usage: Mapping[str, Any], current: Optional[TokenUsage]) -> None:
        """A ``message_start``: a first message, or the continuation of a paused one."""
        if self.messages:
            self.prior_usage = current
            self.blocks = {}
        self.messages += 1
        self.usage = dict(usage)

    def total_usage(self) -> TokenUsage:
        """Usage of every message of the turn, summed."""
        now = usage_of(self.usage)
        return now if self.prior_usage is None else self.prior_usage + now

    def open(self, index: Any, start: Mapping[str, Any]) -> Block:
        """A ``content_block_start``."""
        block = Block(start, self.text_len)
        self.blocks[index] = block
        if block.type == "text":
            self.open_text = block.parts
        elif block.type not in _REBUILT:
            self.keep = True
        return block

    def close(self, index: Any) -> Optional[Block]:
        """A ``content_block_stop``: the block leaves the open ones, kept in order."""
        block = self.blocks.pop(index, None)
        if block is not None:
            self.done.append(block)
            if block.type == "text":
                self.open_text = None
                start = block.start.get("text")
                self.text_len += sum(map(len, block.parts)) + (
                    len(start) if isinstance(start, str) else 0
                )
            if block.citations:
                self.keep = True
        return block

    def container(self, value: Any) -> None:
        """The code-execution ``container`` the message ran in, to be reused next turn."""
        if isinstance(value, Mapping) and isinstance(value.get("id"), str):
            self._container = value

    def items(self, paused: bool) -> tuple[ProviderItem, ...]:
        """The verbatim content (and container) to keep, or ``()`` when none is needed."""
        items: list[ProviderItem] = []
        if paused:
            # A paused turn goes back as it came, and so does its continuation after it.
            self.keep = True
        if self.keep:
            # Blocks left open by a stream that ended anyway are kept as far as they came.
            blocks = [*self.done, *self.blocks.values()]
            content = [b.verbatim() for b in blocks]
            items.append(ProviderItem(provider=WIRE, kind="content", data=content))
        if self._container is not None:
            items.append(ProviderItem(provider=WIRE, kind="container", data=self._container))
        return tuple(items)

    def server_event(self, block: Block) -> Optional[ServerToolEvent]:
        """The event a server tool's call or result block announces, if it is one."""
        btype, start = block.type, block.start
        if btype == "server_tool_use" or btype == "mcp_tool_use":
            call_id = _str(start.get("id"))
            name = _str(start.get("name")) or btype
            if call_id:
                self.server_names[call_id] = name
            return ServerToolEvent(
                provider=WIRE, name=name, status="running", id=call_id, raw=start
            )
        call_id = _str(start.get("tool_use_id"))
        if isinstance(btype, str) and btype.endswith("_tool_result") and call_id:
            name = self.server_names.get(call_id) or btype
            return ServerToolEvent(provider=WIRE, name=name, status="done", id=call_id, raw=start)
        return None


def thinking_part(text: str, signature: Any) -> ReasoningPart:
    """A finished thinking block as the reasoning part that goes back."""
    return ReasoningPart(
        text=text,
        signature=signature if isinstance(signature, str) and signature else None,
        provider=WIRE,
    )


def refusal_text(provider: str, holder: Mapping[str, Any]) -> str:
    """The refusal's explanation, never blank.

    A streaming classifier stopped the answer; stop_details explains why (since 2025;
    https://docs.claude.com/en/docs/test-and-evaluate/strengthen-guardrails/
    handle-streaming-refusals).
    """
    details = holder.get("stop_details") or {}
    explanation = details.get("explanation") if isinstance(details, Mapping) else None
    if isinstance(explanation, str) and explanation:
        return explanation
    return f"{provider} stopped the answer with stop_reason 'refusal'"


class AnthropicFold(Turn):
    """One Messages stream's fold: named SSE events into its state, block by block."""

    __slots__ = ("provider", "state")

    def __init__(self, provider: str, state: StreamState) -> None:
        super().__init__()
        self.provider = provider
        self.state = state

    def fold(self, event: str, data: str) -> Optional[StreamChunk]:
        """Fold one SSE event."""
        state = self.state
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
        if kind == "message_start":
            return self._message_start(obj.get("message") or {})
        if kind == "message_delta":
            return self._message_delta(obj)
        if kind == "message_stop":
            state.finished = True
            turn = self
            state.keep_items(turn.items(paused=state.raw_finish_reason == "pause_turn"))
            return None
        if kind == "error":
            raise error_from_body(self.provider, None, obj, raw=data)
        return None  # ping, and event types added after this was written

    def _message_start(self, message: Mapping[str, Any]) -> Optional[StreamChunk]:
        """A ``message_start``: its id, model and usage, and whatever answer it carries.

        With programmatic tool calling the API sends a whole turn here (a ``tool_use``
        block with its ``caller``, ``stop_reason`` ``"tool_use"``, the ``container``) and
        then only ``message_stop``
        (https://platform.claude.com/docs/en/agents-and-tools/tool-use/programmatic-tool-calling):
        an answer in a start event is content, folded as if it had streamed.
        """
        state = self.state
        state.model = message.get("model") or state.model
        # A continued turn is several messages: the first one's id names the answer.
        state.response_id = state.response_id or message.get("id")
        self.begin_message(message.get("usage") or {}, state.usage)
        state.usage = self.total_usage()
        chunk = self._whole_blocks(message.get("content"))
        refused = self._stopped(message, message.get("stop_reason"))
        if refused is None or chunk is None:
            return refused or chunk
        return StreamChunk(
            content_delta=chunk.content_delta,
            reasoning_delta=chunk.reasoning_delta,
            tool_calls=refused.tool_calls,
            refusal_delta=refused.refusal_delta,
            server_tool=chunk.server_tool,
        )

    def _stopped(self, holder: Mapping[str, Any], stop: Any) -> Optional[StreamChunk]:
        """The stop reason, container and stop details a message or its delta carries."""
        state = self.state
        if stop:
            state.raw_finish_reason = stop
        self.container(holder.get("container"))
        details = stop_details(holder.get("stop_details"))
        if details is not None:
            state.stop_details = details
        if stop == "refusal":
            return state.emit_refusal(refusal_text(self.provider, holder))
        return None

    def _whole_blocks(self, blocks: Any) -> Optional[StreamChunk]:
        """Content blocks that came whole, each folded as if it had streamed: one chunk."""
        text: list[str] = []
        thought: list[str] = []
        event: Optional[ServerToolEvent] = None
        seen = False
        for i, block in enumerate(blocks or ()):
            for chunk in (
                self._block_start({"index": i, "content_block": block}),
                self._block_stop({"index": i}),
            ):
                if chunk is not None:
                    seen = True
                    text.append(chunk.content_delta or "")
                    thought.append(chunk.reasoning_delta or "")
                    event = chunk.server_tool or event
        if not seen:
            return None
        return StreamChunk(
            content_delta="".join(text) or None,
            reasoning_delta="".join(thought) or None,
            tool_calls=self.state.tool_calls,
            server_tool=event,
        )

    def _message_delta(self, obj: Mapping[str, Any]) -> Optional[StreamChunk]:
        state = self.state
        delta = obj.get("delta") or {}
        turn = self
        # Counts here are cumulative totals: they replace, never add; a field left out
        # keeps its message_start value.
        turn.usage.update({k: v for k, v in (obj.get("usage") or {}).items() if v is not None})
        state.usage = turn.total_usage()
        return self._stopped(delta, delta.get("stop_reason"))

    def _block_start(self, obj: Mapping[str, Any]) -> Optional[StreamChunk]:
        state = self.state
        index = obj["index"]
        start = obj.get("content_block") or {}
        turn = self
        block = turn.open(index, start)
        btype = block.type
        if btype == "tool_use":
            state.tool_delta(index, start.get("id"), start.get("name"), None)
            # Called from code in the code-execution container, not by the model directly.
            state.tool_caller(index, start.get("caller"))
            given = start.get("input")
            if given:
                state.tool_delta(index, None, None, json.dumps(given))
            return state.emit(None, None)
        if btype == "text":
            return state.emit(start.get("text"), None)
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

    def _delta(self, obj: Mapping[str, Any], data: str) -> Optional[StreamChunk]:
        state = self.state
        delta = obj.get("delta") or {}
        dtype = delta.get("type")
        if dtype == "text_delta":
            # The hot path: one append beside emit (Anthropic streams one block at a time).
            text = delta.get("text")
            if text is not None and not isinstance(text, str):
                raise malformed(self.provider, "text_delta.text is not a string", data)
            parts = self.open_text
            if text and parts is not None:
                parts.append(text)
            return state.emit(text, None)
        # Every delta but text names its block: one without an index is a malformed payload
        # (its KeyError), never reasoning or a signature pinned to no block.
        index = obj["index"]
        block = self.blocks.get(index)
        if dtype == "input_json_delta":
            # The tool-call hot path, second only to text.
            fragment = delta.get("partial_json")
            if not fragment or block is None:
                return None
            if not isinstance(fragment, str):
                raise malformed(self.provider, "partial_json is not a string", data)
            block.parts.append(fragment)
            if block.type != "tool_use":
                return None  # a server tool's input: kept to go back, not the caller's to run
            return state.argument_delta(index, fragment)
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
        if dtype == "citations_delta":
            cited = delta.get("citation")
            if not isinstance(cited, Mapping):
                raise malformed(self.provider, "citations_delta has no citation object", data)
            if block is not None:
                block.citations.append(cited)
            return None
        return None  # later additions

    def _block_stop(self, obj: Mapping[str, Any]) -> Optional[StreamChunk]:
        state = self.state
        index = obj.get("index")
        turn = self
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

    def whole(self, obj: Mapping[str, Any]) -> None:
        """Fold a whole (non-streamed) message: each block as if it had streamed."""
        state = self.state
        state.model = obj.get("model")
        state.response_id = obj.get("id")
        self.begin_message(obj.get("usage") or {}, None)
        self._whole_blocks(obj.get("content"))
        state.usage = self.total_usage()
        self._stopped(obj, obj.get("stop_reason"))
        state.keep_items(self.items(paused=state.raw_finish_reason == "pause_turn"))
        state.finished = True
