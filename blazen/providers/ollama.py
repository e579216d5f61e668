"""Ollama's native chat API (``POST /api/chat``), streamed as newline-delimited JSON. No I/O.

Each line is one object (https://github.com/ollama/ollama/blob/main/docs/api.md#generate-a-chat-completion):
``{"message": {"content", "thinking", "tool_calls"}, "done": false}``, and a last line with
``"done": true`` carrying ``done_reason``, ``prompt_eval_count`` and ``eval_count``. That
last line is the end signal. Quirks handled here:

- tool calls arrive whole, with arguments as a JSON *object* (not text) and, in older
  versions, with no id: blazen gives each one an id;
- an error is a line ``{"error": "text"}``, mid-stream or as the body of an HTTP error;
- images are base64 only: an image URL cannot be sent, which is an
  :class:`~blazen.UnsupportedError` raised before anything is sent.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, Optional, Union

from .._http import HttpRequest
from .._kit import StreamState, error_from_body, error_from_http, malformed, parse_json
from .._types import CompletionRequest, CompletionResponse, StreamChunk, TokenUsage
from ..errors import ProviderError, UnsupportedError
from .base import (
    call_arguments,
    check_effort,
    image_source,
    reasoning_refused,
    refuse_previous_response,
    refuse_server_tools,
    tool_names,
)
from .capabilities import check_attachment

__all__ = ["OllamaFold", "OllamaWire"]


class OllamaWire:
    """Ollama's ``/api/chat`` wire format."""

    framing = "ndjson"
    # Ollama says application/x-ndjson; some proxies in front of it relabel the body.
    stream_content_types: tuple[str, ...] = ("application/x-ndjson", "application/json")

    def __init__(
        self,
        *,
        provider: str = "ollama",
        base_url: str,
        api_key: str,
        model: str,
        headers: Mapping[str, str],
    ) -> None:
        self.provider = provider
        self.model = model
        self._url = base_url.rstrip("/") + "/api/chat"
        self._headers: dict[str, str] = {"Content-Type": "application/json"}
        if api_key:
            # Ollama itself needs no key; a proxy in front of it, or ollama.com, may.
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._headers.update(headers)

    # -- request -----------------------------------------------------------------------

    def _unsupported(self, what: str) -> UnsupportedError:
        return UnsupportedError(f"{self.provider} cannot take {what}", provider=self.provider)

    def messages(self, req: CompletionRequest) -> list[dict[str, Any]]:
        """The ``messages`` array, in Ollama's shape."""
        names = tool_names(req)
        out: list[dict[str, Any]] = []
        if req.system:
            out.append({"role": "system", "content": req.system})
        for m in req.messages:
            for part in m.attachments:
                check_attachment(self.provider, "ollama", part)  # documents, audio: refused
            msg: dict[str, Any] = {"role": m.role, "content": m.content or ""}
            if m.images:
                images = []
                for img in m.images:
                    kind, _, value = image_source(self.provider, img)
                    if kind == "url":
                        raise self._unsupported(
                            "images by URL (only base64 data): download the image and pass "
                            "Llm.image(data=..., media_type=...)"
                        )
                    images.append(value)
                msg["images"] = images
            if m.tool_calls:
                msg["tool_calls"] = [
                    {"function": {"name": c.name, "arguments": call_arguments(self.provider, c)}}
                    for c in m.tool_calls
                ]
            thinking = "".join(
                p.text for p in m.reasoning_parts if p.provider is None and p.kind == "thinking"
            )
            if thinking:
                # The message's own field (https://docs.ollama.com/api/chat): thinking models'
                # templates replay it with the tool calls it led to.
                msg["thinking"] = thinking
            if m.role == "tool":
                name = names.get(m.tool_call_id or "")
                if name:
                    msg["tool_name"] = name
            out.append(msg)
        return out

    def body(self, req: CompletionRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``req``."""
        refuse_previous_response(self.provider, req)
        body: dict[str, Any] = {
            "model": req.model or self.model,
            "messages": self.messages(req),
            "stream": stream,
        }
        think = self._think(req)
        if think is not None:
            body["think"] = think
        choice = req.tool_choice
        if choice not in (None, "auto", "none"):
            raise self._unsupported(
                f"tool_choice={choice!r}: Ollama has no way to force a tool call"
            )
        if req.tools and choice != "none":
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
        options: dict[str, Any] = {}
        if req.max_tokens is not None:
            options["num_predict"] = req.max_tokens
        if req.temperature is not None:
            options["temperature"] = req.temperature
        if req.top_p is not None:
            options["top_p"] = req.top_p
        if req.stop:
            options["stop"] = list(req.stop)
        if options:
            body["options"] = options
        fmt = req.response_format
        if req.output is not None:
            # https://docs.ollama.com/capabilities/structured-outputs: a schema as format.
            body["format"] = req.output.schema
        elif fmt is not None:
            kind = fmt.get("type")
            if kind == "json_object":
                body["format"] = "json"
            elif kind == "json_schema":
                body["format"] = (fmt.get("json_schema") or {}).get("schema") or "json"
            elif kind != "text":
                raise self._unsupported(f"response_format of type {kind!r}")
        return body

    def _think(self, req: CompletionRequest) -> Union[bool, str, None]:
        """``think`` for ``req``'s reasoning effort: the level for gpt-oss, else ``true``.

        https://docs.ollama.com/capabilities/thinking: most thinking models take a boolean;
        gpt-oss takes ``"low"``, ``"medium"`` or ``"high"`` and ignores a boolean.
        """
        refuse_server_tools(self.provider, req, "/api/chat")
        check_effort(self.provider, req, ("low", "medium", "high"))
        if req.reasoning_budget is not None:
            raise reasoning_refused(
                self.provider,
                "reasoning_budget (a token budget)",
                "Ollama's think takes no budget; pass reasoning_effort='low', 'medium' or "
                "'high' instead",
            )
        effort = req.reasoning_effort
        if effort is None:
            return None
        name = (req.model or self.model).rsplit("/", 1)[-1]
        return effort if name.startswith("gpt-oss") else True

    def build(self, req: CompletionRequest, *, stream: bool) -> HttpRequest:
        """The HTTP request for ``req``."""
        return HttpRequest.post_json(self._url, self._headers, self.body(req, stream=stream))

    # -- stream ------------------------------------------------------------------------

    def start(self, state: StreamState) -> OllamaFold:
        """A fold for one stream into ``state``."""
        return OllamaFold(self.provider, state)

    # -- whole responses and errors ----------------------------------------------------

    def parse_response(self, body: str) -> CompletionResponse:
        """The response of a non-streaming request (one object with ``done: true``)."""
        state = StreamState()
        OllamaFold(self.provider, state).fold("", body)
        state.finished = True
        return state.response()

    def error(self, status: int, headers: Mapping[str, str], body: str) -> ProviderError:
        """The error for a non-success HTTP response."""
        return error_from_http(self.provider, status, headers, body)


class OllamaFold:
    """One ``/api/chat`` stream's fold: each NDJSON line into its state (nothing kept between)."""

    __slots__ = ("provider", "state")

    def __init__(self, provider: str, state: StreamState) -> None:
        self.provider = provider
        self.state = state

    def fold(self, event: str, data: str) -> Optional[StreamChunk]:
        """Fold one NDJSON line."""
        state = self.state
        obj = parse_json(self.provider, data)
        if obj.get("error") is not None:
            raise error_from_body(self.provider, None, obj, raw=data)
        state.model = obj.get("model") or state.model
        message = obj.get("message") or {}
        content = message.get("content")
        thinking = message.get("thinking")
        if content is not None and not isinstance(content, str):
            raise malformed(self.provider, "message.content is not a string", data)
        for call in message.get("tool_calls") or ():
            fn = call.get("function") or {}
            args = fn.get("arguments")
            if not isinstance(args, str):
                args = json.dumps(args if args is not None else {})
            call_id = call.get("id") or f"call_{uuid.uuid4().hex[:24]}"
            state.tool_delta(None, call_id, fn.get("name"), args)
        if obj.get("done"):
            state.raw_finish_reason = obj.get("done_reason") or state.raw_finish_reason
            if "prompt_eval_count" in obj or "eval_count" in obj:
                prompt = obj.get("prompt_eval_count") or 0
                completion = obj.get("eval_count") or 0
                state.usage = TokenUsage(
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    total_tokens=prompt + completion,
                )
            state.finished = True
        return state.emit(content, thinking if isinstance(thinking, str) else None)
