"""Google's Gemini API: ``models/{model}:streamGenerateContent?alt=sse``. No I/O.

Each SSE payload is a whole ``GenerateContentResponse``
(https://ai.google.dev/api/generate-content#v1beta.GenerateContentResponse) holding the
*new* parts of the first candidate. Quirks handled here:

- there is no end sentinel: the stream ends at EOF after a candidate carries
  ``finishReason`` (an EOF before it is a truncation). A finishReason is not always last
  (server-side code execution sends STOP, then the code's result and the answer, then
  STOP), so the fold asks the engine to read on (``StreamState.read_on``): at most a
  second after a finish reason; content after it puts the answer back mid-stream until
  the next one (docs/streaming.md, "Retries");
- server tools (``googleSearch``, ``codeExecution``...), grounding, citation and safety
  metadata are read by :mod:`.gemini_fold`;
- function calls arrive whole, one ``functionCall`` part each, with no id: blazen gives
  each one an id, and answers tool results by function name;
- ``thought: true`` parts are reasoning; a part may carry a ``thoughtSignature`` (on a
  function call above all, Gemini 2.5 and 3), which must come back on the same part next
  turn (https://ai.google.dev/gemini-api/docs/thought-signatures): kept as
  :class:`~blazen.ReasoningPart` values and sent back where they came;
- an answer cut at the per-request token limit ends ``CONTINUATION`` with a
  ``continuationToken``: a paused turn, continued in the same stream as Anthropic's
  ``pause_turn`` is (:meth:`GeminiWire.continuation`);
- a refused prompt has no candidates but
  ``promptFeedback.blockReason``, which is a :class:`~blazen.ContentPolicyError`;
- errors use google.rpc's shape (``{"error": {"code", "status", "details"}}``), sometimes
  wrapped in a list; ``RetryInfo.retryDelay`` in a 429 is honoured like ``Retry-After``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional
from urllib.parse import quote

import attrs

from .._http import HttpRequest
from .._kit import StreamState, error_payload, parse_json
from .._types import (
    Attachment,
    AudioPart,
    ChatMessage,
    CompletionRequest,
    CompletionResponse,
    ReasoningPart,
    ServerTool,
)
from ..errors import ProviderError, UnsupportedError, ValidationError
from .base import (
    call_arguments,
    check_effort,
    image_source,
    reasoning_refused,
    refuse_previous_response,
    system_text,
    tool_names,
)
from .capabilities import check_attachment
from .gemini_fold import CONTINUATION, WIRE, GeminiFold, google_error

__all__ = ["GeminiFold", "GeminiWire", "google_error"]

_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}
#: Short server-tool names and the ``Tool`` field each one is (web_search is Google Search,
#: as on the other wires).
SERVER_TOOLS: Mapping[str, str] = {
    "google_search": "googleSearch",
    "web_search": "googleSearch",
    "code_execution": "codeExecution",
    "url_context": "urlContext",
    "google_maps": "googleMaps",
    "file_search": "fileSearch",
    "enterprise_web_search": "enterpriseWebSearch",
}


def _verbatim(m: ChatMessage) -> Optional[list[dict[str, Any]]]:
    """The model turn's parts as Gemini sent them, if they were kept (see ProviderItem)."""
    for item in m.provider_items:
        if item.provider == WIRE and item.kind == "parts" and isinstance(item.data, list):
            return [dict(part) for part in item.data]
    return None


def _continuation_token(m: ChatMessage) -> Optional[str]:
    """The token of an assistant turn Gemini stopped with CONTINUATION, if it has one."""
    if m.role != "assistant":
        return None
    for item in m.provider_items:
        if item.provider == WIRE and item.kind == "continuation" and isinstance(item.data, dict):
            token = item.data.get("continuationToken")
            if isinstance(token, str) and token:
                return token
    return None


def _result_object(content: Optional[str]) -> dict[str, Any]:
    # functionResponse.response must be a JSON object (a protobuf Struct).
    try:
        value = json.loads(content or "")
    except ValueError:
        value = content or ""
    return value if isinstance(value, dict) else {"result": value}


def _signatures(m: ChatMessage) -> tuple[list[ReasoningPart], Optional[str], dict[str, str]]:
    """An assistant turn's Gemini reasoning: signed thought parts, the text's signature,
    and each function call's signature by call id."""
    thoughts: list[ReasoningPart] = []
    text_signature: Optional[str] = None
    calls: dict[str, str] = {}
    for part in m.reasoning_parts:
        if part.provider != WIRE or not part.signature:
            # Another provider's, or unsigned thought text, which Gemini reads nothing from.
            continue
        if part.kind == "thinking":
            thoughts.append(part)
        elif part.tool_call_id is not None:
            calls[part.tool_call_id] = part.signature
        else:
            text_signature = part.signature
    return thoughts, text_signature, calls


class GeminiWire:
    """The Gemini API wire format under ``{base_url}/models/``."""

    framing = "sse"
    stream_content_types: tuple[str, ...] = ("text/event-stream",)

    def __init__(
        self,
        *,
        provider: str = "gemini",
        base_url: str,
        api_key: str,
        model: str,
        headers: Mapping[str, str],
    ) -> None:
        self.provider = provider
        self.model = model
        self._base = base_url.rstrip("/")
        self._headers: dict[str, str] = {"Content-Type": "application/json"}
        if api_key:
            # A header, never ?key=: URLs end up in logs, proxies and error messages.
            self._headers["x-goog-api-key"] = api_key
        self._headers.update(headers)

    # -- request -----------------------------------------------------------------------

    def url(self, model: str, *, stream: bool) -> str:
        """The endpoint for ``model``."""
        name = quote(model.removeprefix("models/"))
        if stream:
            return f"{self._base}/models/{name}:streamGenerateContent?alt=sse"
        return f"{self._base}/models/{name}:generateContent"

    def _image(self, image: Any) -> dict[str, Any]:
        kind, media_type, value = image_source(self.provider, image)
        if kind == "url":
            return {"fileData": {"mimeType": media_type, "fileUri": value}}
        return {"inlineData": {"mimeType": media_type, "data": value}}

    def _attachment(self, part: Attachment) -> dict[str, Any]:
        check_attachment(self.provider, "gemini", part)
        if isinstance(part, AudioPart):
            return {"inlineData": {"mimeType": part.media_type, "data": part.data}}
        if part.url is not None:
            return {"fileData": {"mimeType": part.media_type, "fileUri": part.url}}
        return {"inlineData": {"mimeType": part.media_type, "data": part.data}}

    def contents(self, req: CompletionRequest) -> list[dict[str, Any]]:
        """The ``contents`` array: roles ``user`` and ``model``, same-role turns merged."""
        names = tool_names(req)
        out: list[dict[str, Any]] = []
        for m in req.messages:
            if m.role == "system":
                continue
            parts: list[dict[str, Any]] = []
            role = "model" if m.role == "assistant" else "user"
            if m.role == "tool":
                name = names.get(m.tool_call_id or "")
                if name is None:
                    msg = (
                        f"{self.provider}: the tool result for call {m.tool_call_id!r} has no "
                        "matching assistant tool call earlier in the conversation (Gemini "
                        "answers calls by function name)"
                    )
                    raise ValidationError(msg)
                # A failed call's explanation goes under "error", as the API documents.
                result = {"error": m.content or ""} if m.is_error else _result_object(m.content)
                parts.append({"functionResponse": {"name": name, "response": result}})
            elif m.role == "assistant" and _verbatim(m) is not None:
                # Server-side code and its result go back as they came, signatures on them.
                parts.extend(_verbatim(m) or ())
            elif m.reasoning_parts:
                parts.extend(self._signed_parts(m))
            else:
                # Documents before the prompt and sound after it, as Gemini's guides show.
                sound = [a for a in m.attachments if isinstance(a, AudioPart)]
                docs = [a for a in m.attachments if not isinstance(a, AudioPart)]
                parts.extend(self._attachment(a) for a in docs)
                if m.content:
                    parts.append({"text": m.content})
                parts.extend(self._image(img) for img in m.images)
                parts.extend(self._attachment(a) for a in sound)
                parts.extend(
                    {"functionCall": {"name": c.name, "args": call_arguments(self.provider, c)}}
                    for c in m.tool_calls
                )
                if not parts:
                    parts.append({"text": ""})
            # All responses to one turn's calls must come back together, in one turn.
            if out and out[-1]["role"] == role:
                out[-1]["parts"].extend(parts)
            else:
                out.append({"role": role, "parts": parts})
        return out

    def _signed_parts(self, m: ChatMessage) -> list[dict[str, Any]]:
        """An assistant turn with its signatures back on the parts that carried them."""
        thoughts, text_signature, call_signatures = _signatures(m)
        parts: list[dict[str, Any]] = [
            {"text": t.text, "thought": True, "thoughtSignature": t.signature} for t in thoughts
        ]
        if m.content or text_signature:
            text: dict[str, Any] = {"text": m.content or ""}
            if text_signature:
                text["thoughtSignature"] = text_signature
            parts.append(text)
        parts.extend(self._image(img) for img in m.images)
        for c in m.tool_calls:
            call: dict[str, Any] = {
                "functionCall": {"name": c.name, "args": call_arguments(self.provider, c)}
            }
            signature = call_signatures.get(c.id)
            if signature:
                call["thoughtSignature"] = signature
            parts.append(call)
        return parts or [{"text": ""}]

    def body(self, req: CompletionRequest) -> dict[str, Any]:
        """The JSON body for ``req``.

        A request whose last turn is an answer Gemini stopped with ``CONTINUATION`` goes on
        with it: that turn stays out of ``contents`` and its token goes as
        ``continuationToken``, the rest of the request as it was.
        """
        refuse_previous_response(self.provider, req)
        token = _continuation_token(req.messages[-1]) if req.messages else None
        if token is not None:
            req = attrs.evolve(req, messages=req.messages[:-1])
        body: dict[str, Any] = {"contents": self.contents(req)}
        system = system_text(req)
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        tools: list[dict[str, Any]] = []
        if req.tools:
            # parametersJsonSchema takes the full JSON Schema other providers take;
            # the older "parameters" rejects common keys such as additionalProperties.
            tools.append(
                {
                    "functionDeclarations": [
                        {
                            "name": t.name,
                            "description": t.description,
                            "parametersJsonSchema": t.parameters,
                        }
                        for t in req.tools
                    ]
                }
            )
        tools.extend(self._server_tool(t) for t in req.server_tools)
        if tools:
            body["tools"] = tools
        if req.tool_choice is not None:
            mode = _MODES.get(req.tool_choice)
            config: dict[str, Any] = {"mode": mode or "ANY"}
            if mode is None:
                config["allowedFunctionNames"] = [req.tool_choice]
            body["toolConfig"] = {"functionCallingConfig": config}
        gen: dict[str, Any] = {}
        if req.max_tokens is not None:
            gen["maxOutputTokens"] = req.max_tokens
        if req.temperature is not None:
            gen["temperature"] = req.temperature
        if req.top_p is not None:
            gen["topP"] = req.top_p
        if req.stop:
            gen["stopSequences"] = list(req.stop)
        fmt = req.response_format
        if req.output is not None:
            # responseJsonSchema takes JSON Schema as other providers do (anyOf, null,
            # additionalProperties); the older responseSchema is an OpenAPI subset.
            gen["responseMimeType"] = "application/json"
            gen["responseJsonSchema"] = req.output.schema
        elif fmt is not None and fmt.get("type") in ("json_object", "json_schema"):
            gen["responseMimeType"] = "application/json"
            schema = (fmt.get("json_schema") or {}).get("schema")
            if schema is not None:
                gen["responseJsonSchema"] = schema
        thinking = self._thinking(req)
        if thinking is not None:
            gen["thinkingConfig"] = thinking
        if gen:
            body["generationConfig"] = gen
        if token is not None:
            body["continuationToken"] = token
        return body

    def continuation(
        self, req: CompletionRequest, paused: CompletionResponse
    ) -> Optional[CompletionRequest]:
        """The request that continues an answer stopped with ``CONTINUATION``, or None.

        The same request again with the candidate's ``continuationToken`` (carried by the
        paused turn appended last, see :meth:`body`); Gemini goes on where it stopped.
        """
        if paused.raw_finish_reason != CONTINUATION:
            return None
        message = paused.message
        if _continuation_token(message) is None:
            return None  # no token came with it: nothing to continue from
        return attrs.evolve(req, messages=(*req.messages, message))

    def _server_tool(self, tool: ServerTool) -> dict[str, Any]:
        """A built-in tool: its ``Tool`` field, its options inside as given.

        https://ai.google.dev/api/caching#Tool: ``googleSearch``, ``codeExecution``,
        ``urlContext``, ``googleMaps``, ``fileSearch``... A short name maps to its field; a
        field name itself (``"googleSearch"``) is taken as given.
        """
        field = SERVER_TOOLS.get(tool.name)
        if field is None and tool.name in SERVER_TOOLS.values():
            field = tool.name
        if field is None:
            msg = (
                f"{self.provider} has no server tool {tool.name!r}; it has "
                f"{', '.join(sorted(SERVER_TOOLS))}"
            )
            raise UnsupportedError(msg, provider=self.provider)
        return {field: dict(tool.config)}

    def _thinking(self, req: CompletionRequest) -> Optional[dict[str, Any]]:
        """``thinkingConfig`` for ``req``'s reasoning options, with the thoughts shown.

        A budget is ``thinkingBudget`` (Gemini 2.5 and later); an effort is
        ``thinkingLevel`` (Gemini 3). Gemini refuses both in one request.
        """
        # https://ai.google.dev/gemini-api/docs/thinking: the levels Gemini 3 documents.
        check_effort(self.provider, req, ("minimal", "low", "medium", "high"))
        effort, budget = req.reasoning_effort, req.reasoning_budget
        if effort is not None and budget is not None:
            raise reasoning_refused(
                self.provider,
                "both reasoning_effort and reasoning_budget",
                "Gemini takes a thinkingLevel or a thinkingBudget, not both; pass one",
            )
        if budget == "adaptive":
            # -1 is Gemini's dynamic budget: the model decides how long to think.
            return {"thinkingBudget": -1, "includeThoughts": True}
        if budget is not None:
            return {"thinkingBudget": budget, "includeThoughts": True}
        if effort is not None:
            return {"thinkingLevel": effort, "includeThoughts": True}
        return None

    def build(self, req: CompletionRequest, *, stream: bool) -> HttpRequest:
        """The HTTP request for ``req``."""
        url = self.url(req.model or self.model, stream=stream)
        return HttpRequest.post_json(url, self._headers, self.body(req), sse=stream)

    # -- stream ------------------------------------------------------------------------

    def start(self, state: StreamState) -> GeminiFold:
        """A fold for one stream into ``state``."""
        return GeminiFold(self.provider, state)

    # -- whole responses and errors ----------------------------------------------------

    def parse_response(self, body: str) -> CompletionResponse:
        """The response of a non-streaming request, folded through the same state."""
        obj = parse_json(self.provider, body)
        state = StreamState()
        GeminiFold(self.provider, state).apply(obj, body)
        state.finished = True
        return state.response()

    def error(self, status: int, headers: Mapping[str, str], body: str) -> ProviderError:
        """The error for a non-success HTTP response."""
        return google_error(self.provider, status, error_payload(body), headers=headers, raw=body)
