"""The request half of OpenAI's Responses API (``POST /v1/responses``): a
``CompletionRequest`` as its JSON body. No I/O.

https://platform.openai.com/docs/api-reference/responses/create. What differs from chat
completions:

- the conversation is ``input``, a list of items: messages, ``function_call`` and
  ``function_call_output`` items, and the model's earlier ``reasoning`` items, sent back
  exactly as they came (their ``encrypted_content`` carries the reasoning of a stateless
  turn, https://platform.openai.com/docs/guides/reasoning#keeping-reasoning-items-in-context);
- the system prompt is ``instructions``; a system message later in the conversation becomes
  a ``developer`` message where it stood, so that order is kept;
- tools are flat (``{"type": "function", "name", "parameters", "strict"}``); ``strict``
  defaults to true on this API, so it is sent false, as chat completions mean it;
- ``max_output_tokens``, ``reasoning: {effort, summary}``, typed output as ``text.format``;
- attachments are ``input_image`` and ``input_file`` (base64 or by URL) parts; audio is
  not an input of this API (refused before sending).
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Iterator
from typing import Any, Optional

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
from .base import check_effort, reasoning_refused
from .capabilities import check_attachment

__all__ = ["WIRE", "input_items", "request_body", "server_tool"]

#: What ReasoningPart.provider says of the items this wire keeps to send back.
WIRE = "openai-responses"
#: The name the capability table knows this wire by.
CAPABILITIES = "responses"
# https://platform.openai.com/docs/api-reference/responses/create#reasoning-effort
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
# https://platform.openai.com/docs/guides/tools: the built-in tools by the short names
# Llm.server_tool takes (the Anthropic-style "code_execution" is OpenAI's code interpreter),
# and the tool types OpenAI documents, sent as given.
_SERVER_TOOLS = {
    "web_search": "web_search",
    "file_search": "file_search",
    "code_execution": "code_interpreter",
    "code_interpreter": "code_interpreter",
    "image_generation": "image_generation",
    "mcp": "mcp",
    "shell": "shell",
}
_DOCUMENTED_TYPES = frozenset(
    {
        *_SERVER_TOOLS.values(),
        "web_search_preview",
        "web_search_2025_08_26",
        "local_shell",
        "computer_use_preview",
        "apply_patch",
    }
)


def _item(part: ReasoningPart) -> Any:
    try:
        return json.loads(part.data or "")
    except ValueError as exc:
        msg = (
            f"a ReasoningPart of {WIRE} carries its output item as JSON text in data; this "
            f"one is not JSON ({exc}): send back resp.message as it came"
        )
        raise ValidationError(msg, provider=WIRE) from exc


def _attachment(provider: str, part: Attachment) -> dict[str, Any]:
    # Audio, and documents this API cannot read, are refused here, before sending.
    check_attachment(provider, CAPABILITIES, part)
    assert isinstance(part, DocumentPart)  # audio was refused above
    if part.url is not None:
        return {"type": "input_file", "file_url": part.url}
    # file_data needs a filename beside it; bytes given without one get a neutral name.
    name = part.filename or "document" + (mimetypes.guess_extension(part.media_type) or "")
    return {"type": "input_file", "filename": name, "file_data": part.as_data_url()}


def _user(provider: str, m: ChatMessage) -> dict[str, Any]:
    if not (m.images or m.attachments):
        return {"role": "user", "content": m.content or ""}
    # Documents before the question, as OpenAI's file-input guide shows them.
    parts = [_attachment(provider, p) for p in m.attachments]
    if m.content:
        parts.append({"type": "input_text", "text": m.content})
    parts.extend(
        {"type": "input_image", "image_url": img.as_data_url(), "detail": "auto"}
        for img in m.images
    )
    return {"role": "user", "content": parts}


def _call(call: ToolCall, rider: Optional[ReasoningPart]) -> Any:
    if rider is not None:
        # A custom tool's call goes back as the item it came as (its input is free text).
        return _item(rider)
    return {
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments_json or "{}",
    }


def _sent_back(part: ReasoningPart, store: bool) -> Optional[Any]:
    """The item ``part`` keeps, or None when it must not go back."""
    if part.kind == "signature":
        return None  # it rides on its tool call (see _call)
    item = _item(part)
    # A reasoning item without its encrypted content names an item only a server that
    # stored it knows: sent statelessly it is a 404 ("Items are not persisted when store
    # is set to false"), so it goes back only with store=True.
    stored_only = isinstance(item, dict) and item.get("type") == "reasoning"
    if stored_only and not store and not item.get("encrypted_content"):
        return None
    return item


def _assistant(m: ChatMessage, store: bool) -> Iterator[Any]:
    """The items of one assistant turn, in the order the model wrote them.

    A reasoning item precedes what it led to: the parts naming a tool call go right before
    that call, the others before the text (see :mod:`.responses` for how they are kept).
    """
    own = [p for p in m.reasoning_parts if p.provider == WIRE]
    riders = {p.tool_call_id: p for p in own if p.kind == "signature" and p.tool_call_id}
    for part in own:
        item = None if part.tool_call_id is not None else _sent_back(part, store)
        if item is not None:
            yield item
    if m.content:
        yield {"role": "assistant", "content": m.content}
    for call in m.tool_calls:
        for part in own:
            item = _sent_back(part, store) if part.tool_call_id == call.id else None
            if item is not None:
                yield item
        yield _call(call, riders.get(call.id))


def server_tool(provider: str, tool: ServerTool) -> dict[str, Any]:
    """The ``tools`` entry of a built-in tool OpenAI runs itself."""
    kind = _SERVER_TOOLS.get(tool.name) or (tool.name if tool.name in _DOCUMENTED_TYPES else None)
    if kind is None:
        msg = (
            f"{provider}'s Responses API has no built-in tool {tool.name!r}; it has "
            f"{', '.join(sorted(_SERVER_TOOLS))} (or a documented type such as "
            "'web_search_preview')"
        )
        raise UnsupportedError(msg, provider=provider)
    entry: dict[str, Any] = {"type": kind, **tool.config}
    if kind == "code_interpreter":
        # The interpreter needs a container; "auto" makes one per request.
        entry.setdefault("container", {"type": "auto"})
    return entry


def _verbatim(m: ChatMessage, store: bool) -> Optional[list[Any]]:
    """A turn kept whole (built-in tool items, cited text): its output items, in order.

    Calls are taken from the turn's ``tool_calls`` (the agent may have renamed an id that
    repeated); everything else goes back as it came.
    """
    kept = next((i for i in m.provider_items if i.provider == WIRE and i.kind == "output"), None)
    if kept is None or not isinstance(kept.data, list):
        return None
    calls = iter(m.tool_calls)
    out: list[Any] = []
    for item in kept.data:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in ("function_call", "custom_tool_call"):
            call = next(calls, None)
            if call is None:
                continue
            field = "arguments" if kind == "function_call" else "input"
            item = {**item, "call_id": call.id, "name": call.name, field: call.arguments_json}
        elif kind == "reasoning" and not store and not item.get("encrypted_content"):
            continue  # see _sent_back
        out.append(item)
    return out


def input_items(
    provider: str, req: CompletionRequest, *, store: bool = False
) -> tuple[list[Any], Optional[str]]:
    """The ``input`` items and the ``instructions`` for ``req``.

    System messages before the first other message join ``req.system`` as the
    instructions; a later one becomes a ``developer`` message in its place.
    """
    head = [req.system] if req.system else []
    items: list[Any] = []
    custom: set[str] = set()
    for m in req.messages:
        if m.role == "system":
            if items:
                items.append({"role": "developer", "content": m.content or ""})
            elif m.content:
                head.append(m.content)
        elif m.role == "user":
            items.append(_user(provider, m))
        elif m.role == "assistant":
            verbatim = _verbatim(m, store)
            if verbatim is not None:
                custom.update(
                    i["call_id"]
                    for i in verbatim
                    if isinstance(i, dict) and i.get("type") == "custom_tool_call"
                )
                items.extend(verbatim)
                continue
            custom.update(
                p.tool_call_id
                for p in m.reasoning_parts
                if p.provider == WIRE and p.kind == "signature" and p.tool_call_id
            )
            items.extend(_assistant(m, store))
        else:
            kind = "custom_tool_call_output" if m.tool_call_id in custom else "function_call_output"
            items.append({"type": kind, "call_id": m.tool_call_id, "output": m.content or ""})
    return items, "\n\n".join(head) or None


def _text_format(req: CompletionRequest) -> Optional[dict[str, Any]]:
    fmt = req.response_format
    if fmt is not None:
        # A chat-shaped response_format, flattened: {"type": "json_schema", "json_schema":
        # {name, schema, strict}} is {"type": "json_schema", name, schema, strict} here.
        if fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), dict):
            return {"type": "json_schema", **fmt["json_schema"]}
        return dict(fmt)
    if req.output is not None:
        spec = req.output
        return {"type": "json_schema", "name": spec.name, "schema": spec.schema, "strict": True}
    return None


def request_body(
    provider: str,
    req: CompletionRequest,
    *,
    model: str,
    stream: bool,
    store: bool,
    encrypted_reasoning: bool,
) -> dict[str, Any]:
    """The JSON body for ``req``; what the API has no field for is refused here."""
    if req.reasoning_budget is not None:
        raise reasoning_refused(
            provider,
            "reasoning_budget (a token budget)",
            "the Responses API takes reasoning_effort='low', 'medium' or 'high' instead",
        )
    # https://platform.openai.com/docs/api-reference/responses/create#reasoning-effort
    check_effort(provider, req, _EFFORTS)
    if req.reasoning_display is not None:
        raise reasoning_refused(
            provider,
            f"reasoning_display={req.reasoning_display!r}",
            "the Responses API streams summaries of its reasoning, never the raw thinking",
        )
    if req.stop:
        msg = (
            f"{provider}'s Responses API has no stop sequences; drop stop=, or use "
            "api='chat' (chat completions take them)"
        )
        raise UnsupportedError(msg, provider=provider)
    items, instructions = input_items(provider, req, store=store)
    body: dict[str, Any] = {"model": req.model or model, "input": items}
    if instructions is not None:
        body["instructions"] = instructions
    if req.max_tokens is not None:
        body["max_output_tokens"] = req.max_tokens
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.top_p is not None:
        body["top_p"] = req.top_p
    if req.reasoning_effort is not None:
        # summary "auto": reasoning summaries stream only when asked for.
        body["reasoning"] = {"effort": req.reasoning_effort}
        if req.reasoning_effort != "none":  # no reasoning, nothing to summarise
            body["reasoning"]["summary"] = "auto"
    tools = [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
            "strict": False,
        }
        for t in req.tools
    ]
    tools += [server_tool(provider, t) for t in req.server_tools]
    if tools:
        body["tools"] = tools
    if req.tool_choice is not None:
        body["tool_choice"] = (
            req.tool_choice
            if req.tool_choice in ("auto", "none", "required")
            else {"type": "function", "name": req.tool_choice}
        )
    fmt = _text_format(req)
    if fmt is not None:
        body["text"] = {"format": fmt}
    if req.previous_response_id is not None:
        body["previous_response_id"] = req.previous_response_id
    body["store"] = store
    if encrypted_reasoning:
        body["include"] = ["reasoning.encrypted_content"]
    if stream:
        body["stream"] = True
    return body
