"""Google's Gemini API: ``models/{model}:streamGenerateContent?alt=sse``. No I/O.

Each SSE payload is a whole ``GenerateContentResponse``
(https://ai.google.dev/api/generate-content#v1beta.GenerateContentResponse) holding the
*new* parts of the first candidate. Quirks handled here:

- there is no end sentinel: the stream ends at EOF after a candidate carries
  ``finishReason``, so that is the end signal (an EOF before it is a truncation);
- function calls arrive whole, one ``functionCall`` part each, with no id: blazen gives
  each one an id, and answers tool results by function name;
- ``thought: true`` parts are reasoning; a part may carry a ``thoughtSignature`` (on a
  function call above all, Gemini 2.5 and 3), which must come back on the same part next
  turn (https://ai.google.dev/gemini-api/docs/thought-signatures): kept as
  :class:`~blazen.ReasoningPart` values and sent back where they came;
- a refused prompt has no candidates but
  ``promptFeedback.blockReason``, which is a :class:`~blazen.ContentPolicyError`;
- errors use google.rpc's shape (``{"error": {"code", "status", "details"}}``), sometimes
  wrapped in a list; ``RetryInfo.retryDelay`` in a 429 is honoured like ``Retry-After``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from typing import Any, Optional
from urllib.parse import quote

from .._http import HttpRequest
from .._kit import (
    StreamState,
    error_from_body,
    error_payload,
    event_error_payload,
    first_str,
    malformed,
    parse_json,
)
from .._types import (
    Attachment,
    AudioPart,
    ChatMessage,
    CompletionRequest,
    CompletionResponse,
    ReasoningPart,
    StreamChunk,
    TokenUsage,
)
from ..errors import ProviderError, ValidationError, error_from_provider, parse_retry_after
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

__all__ = ["GeminiFold", "GeminiWire", "google_error"]

_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}


def _usage(u: Mapping[str, Any]) -> TokenUsage:
    prompt = u.get("promptTokenCount") or 0
    thoughts = u.get("thoughtsTokenCount") or 0
    # candidatesTokenCount leaves the thinking out; OpenAI's completion_tokens counts it.
    completion = (u.get("candidatesTokenCount") or 0) + thoughts
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=u.get("totalTokenCount") or prompt + completion,
        # Implicit (and explicit cachedContents) cache reads, already inside promptTokenCount;
        # Gemini reports no writes (https://ai.google.dev/gemini-api/docs/caching).
        cached_tokens=u.get("cachedContentTokenCount") or 0,
        reasoning_tokens=thoughts,
    )


def _result_object(content: Optional[str]) -> dict[str, Any]:
    # functionResponse.response must be a JSON object (a protobuf Struct).
    try:
        value = json.loads(content or "")
    except ValueError:
        value = content or ""
    return value if isinstance(value, dict) else {"result": value}


#: What ReasoningPart.provider says of the parts this wire format makes.
WIRE = "gemini"


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


# Finish reasons that report a failed answer rather than a finished one.
_FAILED_FINISH = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})


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
        """The JSON body for ``req``."""
        refuse_previous_response(self.provider, req)
        body: dict[str, Any] = {"contents": self.contents(req)}
        system = system_text(req)
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        if req.tools:
            # parametersJsonSchema takes the full JSON Schema other providers take;
            # the older "parameters" rejects common keys such as additionalProperties.
            body["tools"] = [
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
            ]
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
        return body

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
        return google_error(
            self.provider, status, error_payload(body), headers=headers, raw=body
        )


class GeminiFold:
    """One Gemini stream's fold: each ``GenerateContentResponse`` into its state."""

    __slots__ = ("call_ids", "provider", "state", "thought")

    def __init__(self, provider: str, state: StreamState) -> None:
        self.provider = provider
        self.state = state
        #: The call ids given so far: a repeated one is another call all the same.
        self.call_ids: set[str] = set()
        #: The thought text since the last signature, or None when no run is open.
        self.thought: Optional[list[str]] = None

    def fold(self, event: str, data: str) -> Optional[StreamChunk]:
        """Fold one ``GenerateContentResponse``."""
        if event == "error":
            raise google_error(self.provider, None, event_error_payload(data), raw=data)
        return self.apply(parse_json(self.provider, data), data)

    def _close_thought(self, signature: Optional[str]) -> None:
        # A run of thought text ends at the part that signs it (or at the end of the answer).
        run, self.thought = self.thought, None
        if run is not None or signature:
            text = "".join(run or ())
            self.state.add_reasoning_part(
                ReasoningPart(text=text, signature=signature, provider=WIRE)
            )

    def apply(self, obj: Mapping[str, Any], raw: str) -> Optional[StreamChunk]:
        """Fold one decoded response (a streamed payload, or a whole non-streamed body)."""
        state = self.state
        if obj.get("error") is not None:
            raise google_error(self.provider, None, obj, raw=raw)
        if state.model is None:
            state.response_id = obj.get("responseId")  # the same on every payload
        state.model = obj.get("modelVersion") or state.model
        usage = obj.get("usageMetadata")
        if usage:
            state.usage = _usage(usage)
        candidates = obj.get("candidates")
        if not candidates:
            blocked = (obj.get("promptFeedback") or {}).get("blockReason")
            if blocked:
                raise error_from_provider(
                    provider=self.provider,
                    status=None,
                    message=f"the prompt was blocked ({blocked}); no answer was generated",
                    error_type="prompt_blocked",
                    code=blocked,
                    body=raw,
                )
            return None
        # candidateCount > 1 is not supported by the callback API: follow the first.
        candidate = candidates[0]
        text: list[str] = []
        thought: list[str] = []
        for part in (candidate.get("content") or {}).get("parts") or ():
            signature = part.get("thoughtSignature")
            if signature is not None and (type(signature) is not str or not signature):
                raise malformed(self.provider, "part.thoughtSignature is not a string", raw)
            if "functionCall" in part:
                call = part["functionCall"]
                args = call.get("args")
                call_id = call.get("id")
                ids = self.call_ids
                if not call_id or call_id in ids:
                    # Each functionCall part is a whole call: one that repeats an id is
                    # another call all the same (merged, its arguments would be two objects).
                    call_id = f"call_{uuid.uuid4().hex[:24]}"
                ids.add(call_id)
                state.tool_delta(None, call_id, call.get("name"), json.dumps(args or {}))
                if signature:
                    self._close_thought(None)
                    state.add_reasoning_part(
                        ReasoningPart(
                            kind="signature",
                            signature=signature,
                            tool_call_id=call_id,
                            provider=WIRE,
                        )
                    )
            elif part.get("thought"):
                value = part.get("text", "")
                if type(value) is not str:
                    raise malformed(self.provider, "part.text is not a string", raw)
                thought.append(value)
                if value:
                    if self.thought is None:
                        self.thought = []
                    self.thought.append(value)
                if signature:
                    self._close_thought(signature)
            elif isinstance(part.get("text"), str):
                text.append(part["text"])
                if signature:
                    self._close_thought(None)
                    state.add_reasoning_part(
                        ReasoningPart(kind="signature", signature=signature, provider=WIRE)
                    )
            elif "text" in part:
                raise malformed(self.provider, "part.text is not a string", raw)
            elif signature:
                # A part that is only a signature signs the answer's text.
                self._close_thought(None)
                state.add_reasoning_part(
                    ReasoningPart(kind="signature", signature=signature, provider=WIRE)
                )
        finish = candidate.get("finishReason")
        if finish in _FAILED_FINISH:
            # The model failed to produce a valid call: an error, never a quiet "stop".
            raise ProviderError(
                f"{self.provider} ended the answer with finishReason {finish}: the model "
                "produced a function call it could not complete",
                provider=self.provider,
                error_type=finish,
                retryable=True,
            )
        if finish:
            state.raw_finish_reason = finish
            state.finished = True
            if self.thought is not None:
                self._close_thought(None)
        return state.emit("".join(text), "".join(thought))


def google_error(
    provider: str,
    status: Optional[int],
    payload: Any,
    *,
    headers: Optional[Mapping[str, str]] = None,
    raw: str = "",
) -> ProviderError:
    """A google.rpc error (``{"error": {"code", "message", "status", "details"}}``) classified.

    https://cloud.google.com/apis/design/errors: ``status`` is a label
    (``RESOURCE_EXHAUSTED``) and becomes the error type; an ``ErrorInfo`` detail's reason
    (``API_KEY_INVALID``) the code; a ``RetryInfo`` detail's delay counts as
    ``Retry-After`` when no header says one.
    """
    err = payload.get("error", payload) if isinstance(payload, dict) else None
    error_type: Optional[str] = None
    reason: Optional[str] = None
    retry_after = parse_retry_after(headers) if headers else None
    if isinstance(err, dict):
        # An error "type" (a proxy's own error in front of Google) still comes first.
        label = err.get("status") if isinstance(err.get("status"), str) else None
        error_type = first_str(err.get("type"), label)
        if isinstance(err.get("details"), list):
            reason, delay = _google_details(err["details"])
            if retry_after is None:
                retry_after = delay
    return error_from_body(
        provider,
        status,
        payload,
        headers=headers,
        raw=raw,
        error_type=error_type,
        code=reason,
        retry_after=retry_after,
    )


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _google_details(details: list[Any]) -> tuple[Optional[str], Optional[float]]:
    """The ErrorInfo reason and the RetryInfo delay of a google.rpc error, if present.

    https://cloud.google.com/apis/design/errors#error_details: a 429 carries
    ``{"@type": ".../google.rpc.RetryInfo", "retryDelay": "34s"}``, a wrong key
    ``{"@type": ".../google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}``.
    """
    reason: Optional[str] = None
    delay: Optional[float] = None
    for item in details:
        if not isinstance(item, dict):
            continue
        kind = str(item.get("@type", ""))
        if kind.endswith("google.rpc.ErrorInfo") and isinstance(item.get("reason"), str):
            reason = item["reason"]
        elif kind.endswith("google.rpc.RetryInfo") and isinstance(item.get("retryDelay"), str):
            match = _DURATION.match(item["retryDelay"])
            if match:
                delay = float(match.group(1))
    return reason, delay
