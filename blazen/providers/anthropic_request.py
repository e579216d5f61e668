"""The Messages API request body (``POST /v1/messages``) for a blazen request. No I/O.

https://platform.claude.com/docs/en/api/messages: ``messages`` with the system prompt
lifted to the top-level ``system``, ``max_tokens`` always, ``thinking``, ``output_config``
(``effort`` and the typed answer's ``format``), and ``tools`` with function tools and
server tools side by side. What Claude is documented to refuse is refused here, before
sending; what one model refuses of what another takes comes back as the API's own 400.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Optional, Union

from .._types import (
    Attachment,
    ChatMessage,
    CompletionRequest,
    DocumentPart,
    ReasoningPart,
    ServerTool,
    ToolCall,
)
from ..errors import UnsupportedError, ValidationError
from .base import (
    call_arguments,
    check_effort,
    image_source,
    reasoning_refused,
    refuse_previous_response,
    system_text,
)
from .capabilities import check_attachment

__all__ = ["MIN_THINKING_BUDGET", "SERVER_TOOLS", "WIRE", "RequestBuilder"]

#: What ReasoningPart.provider and ProviderItem.provider say of this wire's parts.
WIRE = "anthropic"
#: The smallest ``thinking.budget_tokens`` the Messages API takes.
MIN_THINKING_BUDGET = 1024
# https://docs.anthropic.com/en/docs/build-with-claude/vision: the formats Claude reads.
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
# https://docs.claude.com/en/docs/build-with-claude/prompt-caching: a cache_control block
# caches the prompt up to and including itself; a request may hold at most four.
_MAX_BREAKPOINTS = 4
_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
# https://platform.claude.com/docs/en/build-with-claude/effort
_EFFORTS = ("low", "medium", "high", "xhigh", "max")

#: Short server-tool names and the newest type and tool name the API reference documents
#: (https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-reference).
SERVER_TOOLS: Mapping[str, tuple[str, str]] = {
    "web_search": ("web_search_20260318", "web_search"),
    "web_fetch": ("web_fetch_20260318", "web_fetch"),
    "code_execution": ("code_execution_20260521", "code_execution"),
    "tool_search_regex": ("tool_search_tool_regex_20251119", "tool_search_tool_regex"),
    "tool_search_bm25": ("tool_search_tool_bm25_20251119", "tool_search_tool_bm25"),
}


def _reasoning_block(part: ReasoningPart) -> Optional[dict[str, Any]]:
    """The content block that sends ``part`` back, or None if Claude would not take it."""
    if part.provider != WIRE:
        return None  # another provider's signatures mean nothing here
    if part.kind == "redacted":
        return {"type": "redacted_thinking", "data": part.data}
    if part.kind == "thinking" and part.signature:
        # Omitted thinking (display "omitted") has empty text and still its signature.
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    return None  # unsigned thinking cannot be verified, so Claude refuses it


def _verbatim(m: ChatMessage) -> Optional[list[dict[str, Any]]]:
    """The turn's content as Claude sent it, if it was kept (see ProviderItem)."""
    for item in m.provider_items:
        if item.provider == WIRE and item.kind == "content" and isinstance(item.data, list):
            return [dict(block) for block in item.data]
    return None


def _container(req: CompletionRequest) -> Optional[str]:
    """The code-execution container of the latest assistant turn that ran in one.

    https://platform.claude.com/docs/en/agents-and-tools/tool-use/code-execution-tool:
    files and state stay in the container, reused by passing its id on the next request.
    """
    for m in reversed(req.messages):
        for item in m.provider_items:
            if item.provider == WIRE and item.kind == "container":
                value = item.data.get("id") if isinstance(item.data, dict) else None
                if isinstance(value, str):
                    return value
    return None


class RequestBuilder:
    """Builds the JSON body; ``structured_output`` says how ``output=`` is asked for.

    ``"format"`` (the default) sends ``output_config.format`` (structured outputs, generally
    available: https://platform.claude.com/docs/en/build-with-claude/structured-outputs);
    ``"tool"`` sends a forced tool whose input is the answer, for servers without it.
    """

    def __init__(
        self, provider: str, model: str, default_max_tokens: int, structured_output: str
    ) -> None:
        if structured_output not in ("format", "tool"):
            msg = f"structured_output must be 'format' or 'tool', got {structured_output!r}"
            raise ValueError(msg)
        self.provider = provider
        self.model = model
        self.default_max_tokens = default_max_tokens
        self.structured_output = structured_output

    # -- content -----------------------------------------------------------------------

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
        if part.citations:
            block["citations"] = {"enabled": True}
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
        kept = _verbatim(m) if m.provider_items else None
        if kept:
            # Server tool blocks and cited text go back exactly as they came, or the API
            # refuses the turn (https://platform.claude.com/docs/en/agents-and-tools/
            # tool-use/server-tools).
            return m.role, kept
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
        blocks.extend(self._tool_use(c) for c in m.tool_calls)
        if not blocks:
            blocks.append({"type": "text", "text": m.content or ""})
        return m.role, blocks

    def _tool_use(self, call: ToolCall) -> dict[str, Any]:
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": call_arguments(self.provider, call),
        }
        if call.caller is not None:
            # A call made from code in the container goes back naming that run, or the
            # API cannot match its result to the code waiting for it
            # (https://platform.claude.com/docs/en/agents-and-tools/tool-use/programmatic-tool-calling).
            block["caller"] = call.caller
        return block

    def messages(self, req: CompletionRequest) -> list[dict[str, Any]]:
        """The ``messages`` array: system messages lifted out, same-role turns merged."""
        out: list[dict[str, Any]] = []
        for m in req.messages:
            if m.role == "system":
                continue
            role, blocks = self._blocks(m)
            # Parallel tool results must arrive in one user turn, right after the calls;
            # a continued paused turn is one assistant turn too.
            if out and out[-1]["role"] == role:
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": role, "content": blocks})
        for msg in out:
            content = msg["content"]
            # One plain text block goes as a string; a breakpoint needs the block form.
            only = content[0] if len(content) == 1 else None
            if (
                only is not None
                and only["type"] == "text"
                and "cache_control" not in only
                and not only.get("citations")
            ):
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

    # -- the body ----------------------------------------------------------------------

    def body(self, req: CompletionRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``req``."""
        refuse_previous_response(self.provider, req)
        if req.response_format is not None:
            raise UnsupportedError(
                f"{self.provider} has no response_format; pass output= (a typed answer) or "
                "ask for JSON in the prompt instead",
                provider=self.provider,
            )
        thinking = self._thinking(req)
        # Required by the Messages API, unlike OpenAI's optional max_tokens.
        max_tokens = req.max_tokens or self.default_max_tokens
        budget = thinking.get("budget_tokens") if thinking is not None else None
        if budget is not None and max_tokens <= budget:
            # The thinking budget counts within max_tokens and must be below it: the answer
            # keeps the room it asked for on top of the budget.
            max_tokens += budget
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
        tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in req.tools
        ]
        tools.extend(self._server_tool(t) for t in req.server_tools)
        if tools:
            body["tools"] = tools
        if req.tool_choice is not None:
            body["tool_choice"] = _TOOL_CHOICE.get(
                req.tool_choice, {"type": "tool", "name": req.tool_choice}
            )
        config: dict[str, Any] = {}
        check_effort(self.provider, req, _EFFORTS)
        if req.reasoning_effort is not None:
            config["effort"] = req.reasoning_effort
        if req.output is not None:
            if self.structured_output == "format":
                self._check_format(req)
                config["format"] = {"type": "json_schema", "schema": req.output.schema}
            else:
                self._forced_output(req, body)
        if config:
            body["output_config"] = config
        container = _container(req)
        if container is not None:
            body["container"] = container
        if stream:
            body["stream"] = True
        return body

    def _server_tool(self, tool: ServerTool) -> dict[str, Any]:
        """A server tool's definition: its type, its name, and its own options as given."""
        if tool.versioned:
            # An exact type such as web_search_20250305 names the tool before its date.
            kind, name = tool.name, tool.name.rsplit("_", 1)[0]
        elif tool.name in SERVER_TOOLS:
            kind, name = SERVER_TOOLS[tool.name]
        else:
            msg = (
                f"{self.provider} has no server tool {tool.name!r}; it has "
                f"{', '.join(sorted(SERVER_TOOLS))}, or pass an exact versioned type such "
                "as 'web_search_20250305'"
            )
            raise UnsupportedError(msg, provider=self.provider)
        return {**tool.config, "type": kind, "name": name}

    def _check_format(self, req: CompletionRequest) -> None:
        # https://platform.claude.com/docs/en/build-with-claude/structured-outputs: JSON
        # outputs cannot be combined with citations (the API answers 400).
        cited = any(
            isinstance(a, DocumentPart) and a.citations for m in req.messages for a in m.attachments
        )
        if cited:
            msg = (
                f"{self.provider} cannot combine output= (output_config.format) with a "
                "document asking for citations (Llm.document(..., citations=True)); drop one"
            )
            raise UnsupportedError(msg, provider=self.provider)

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
                f"{self.provider} cannot combine output= with reasoning_budget when typed "
                "output is a forced tool (structured_output='tool'): Claude cannot be forced "
                "to call a tool while thinking; use structured_output='format' (the "
                "default) or drop one of them",
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
            # tool_choice "none" hides the caller's function tools; server tools stay.
            kept = [t for t in body.get("tools", ()) if "type" in t]
            body["tools"] = [*kept, tool]
            body["tool_choice"] = {"type": "tool", "name": spec.name}

    def _thinking(self, req: CompletionRequest) -> Optional[dict[str, Any]]:
        """``thinking`` for ``req``'s reasoning options; what Claude refuses is refused here.

        https://platform.claude.com/docs/en/build-with-claude/extended-thinking: a budget
        of at least 1,024 tokens, below ``max_tokens``; ``adaptive`` lets the model decide
        (https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking);
        ``display: "omitted"`` returns the thinking without its text, the signature kept.
        No ``temperature``, no ``top_p`` below 0.95 and no forced tool while thinking.
        """
        budget = req.reasoning_budget
        if budget is None:
            if req.reasoning_display is not None:
                raise reasoning_refused(
                    self.provider,
                    f"reasoning_display={req.reasoning_display!r} without thinking",
                    "pass reasoning_budget=<tokens> or 'adaptive' with it",
                )
            return None
        thinking: dict[str, Any]
        if budget == "adaptive":
            thinking = {"type": "adaptive"}
        elif isinstance(budget, int):
            if budget < MIN_THINKING_BUDGET:
                raise reasoning_refused(
                    self.provider,
                    f"reasoning_budget={budget}",
                    f"Claude's smallest thinking budget is {MIN_THINKING_BUDGET} tokens",
                )
            thinking = {"type": "enabled", "budget_tokens": budget}
        else:
            raise reasoning_refused(
                self.provider, f"reasoning_budget={budget!r}", "pass tokens or 'adaptive'"
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
        if req.reasoning_display is not None:
            thinking["display"] = req.reasoning_display
        return thinking
