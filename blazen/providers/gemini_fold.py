"""One Gemini stream's fold: each ``GenerateContentResponse`` into its state. No I/O.

Beside the text, reasoning and calls: ``executableCode`` / ``codeExecutionResult`` parts
(code Gemini ran itself, https://ai.google.dev/gemini-api/docs/code-execution) are shown as
:class:`~blazen.ServerToolEvent` chunks and make the turn's parts be kept verbatim
(``ProviderItem("gemini", "parts")``); ``groundingMetadata`` (Google Search grounding,
https://ai.google.dev/gemini-api/docs/google-search) and ``citationMetadata`` become
:class:`~blazen.Citation` values; a safety stop's ``safetyRatings`` and ``finishMessage``
become :class:`~blazen.StopDetails`. google.rpc errors are read here too.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from .._kit import (
    StreamState,
    error_from_body,
    event_error_payload,
    first_str,
    malformed,
    parse_json,
)
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
from ..errors import ProviderError, error_from_provider, parse_retry_after

__all__ = [
    "CONTINUATION",
    "WIRE",
    "GeminiFold",
    "citations",
    "google_error",
    "safety_details",
    "usage_of",
]

#: What ReasoningPart.provider and ProviderItem.provider say of this wire's parts.
WIRE = "gemini"
#: The finish reason of an answer cut at the per-request token limit, unfinished: the same
#: request with the candidate's ``continuationToken`` goes on with it (the google-genai
#: package's ``FinishReason.CONTINUATION`` and ``GenerateContentConfig.continuation_token``).
CONTINUATION = "CONTINUATION"

# Finish reasons that report a failed answer rather than a finished one, and what went
# wrong: the model made a call it could not complete, or too many in a row (the API stopped
# it), or the answer was malformed; or the request lacked a thought signature it needed.
_FAILED_FINISH: Mapping[str, str] = {
    "MALFORMED_FUNCTION_CALL": "the model produced a function call it could not complete",
    "UNEXPECTED_TOOL_CALL": "the model produced a function call it could not complete",
    "TOO_MANY_TOOL_CALLS": "the model called tools too many times in a row",
    "MALFORMED_RESPONSE": "the answer was malformed",
    "MISSING_THOUGHT_SIGNATURE": (
        "the request lacks a thought signature of an earlier turn (send each assistant "
        "turn back as resp.message, which keeps them)"
    ),
}
# Sending the same request again cannot add what it lacks.
_NOT_RETRYABLE = frozenset({"MISSING_THOUGHT_SIGNATURE"})
# Finish reasons that stopped the answer for its content (safety, recitation...).
_FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "ESCALATION",
        "MODEL_ARMOR",
        "PUP_LIMITED_DISABLED",
    }
)
# Parts of server-side tools (code execution; Gemini 3's built-in tool calls).
_SERVER_PARTS = frozenset({"executableCode", "codeExecutionResult", "toolCall", "toolResponse"})


def usage_of(u: Mapping[str, Any]) -> TokenUsage:
    """blazen's usage from ``usageMetadata``."""
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


def _str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def _int(value: Any) -> Optional[int]:
    return value if type(value) is int else None


def server_event(part: Mapping[str, Any]) -> ServerToolEvent:
    """The event a server tool's part announces: code to run, or its result."""
    if "executableCode" in part or "codeExecutionResult" in part:
        running = "executableCode" in part
        inner = part.get("executableCode" if running else "codeExecutionResult") or {}
        name = "code_execution"
    else:
        running = "toolCall" in part
        inner = part.get("toolCall" if running else "toolResponse") or {}
        name = _str(inner.get("toolType")) or "tool"
    return ServerToolEvent(
        provider=WIRE,
        name=name,
        status="running" if running else "done",
        id=_str(inner.get("id")) if isinstance(inner, Mapping) else None,
        raw=part,
    )


def merged_parts(parts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The turn's parts as one response would hold them: streamed text runs joined.

    Plain text parts (and plain thought parts) that follow one another are one part;
    a part with a signature, a call or a server tool's code stays as it came.
    """
    out: list[dict[str, Any]] = []
    for part in parts:
        plain = set(part) <= {"text", "thought"} and isinstance(part.get("text"), str)
        last = out[-1] if out else None
        if (
            plain
            and last is not None
            and set(last) <= {"text", "thought"}
            and bool(last.get("thought")) == bool(part.get("thought"))
        ):
            last["text"] += part["text"]
        else:
            out.append(dict(part))
    return out


def _char_offsets(text: str) -> list[int]:
    # The character index of every UTF-8 byte offset, for Gemini's byte-based segments.
    offsets = []
    for i, ch in enumerate(text):
        offsets.extend([i] * len(ch.encode("utf-8")))
    offsets.append(len(text))
    return offsets


def citations(
    grounding: Optional[Mapping[str, Any]], sources: Optional[Mapping[str, Any]], text: str
) -> list[Citation]:
    """Citations from grounding supports (one per supporting chunk) and citation sources.

    Segment and source offsets are UTF-8 byte offsets into the answer's text
    (https://ai.google.dev/api/generate-content#Segment); they are turned into character
    offsets of ``CompletionResponse.content``.
    """
    out: list[Citation] = []
    offsets: Optional[list[int]] = None

    def chars(value: Any) -> Optional[int]:
        nonlocal offsets
        if type(value) is not int or value < 0:
            return None
        if offsets is None:
            offsets = _char_offsets(text)
        return offsets[min(value, len(offsets) - 1)]

    if grounding is not None:
        chunks = grounding.get("groundingChunks") or []
        for support in grounding.get("groundingSupports") or ():
            segment = support.get("segment") or {}
            start = chars(segment.get("startIndex", 0))
            end = chars(segment.get("endIndex"))
            for index in support.get("groundingChunkIndices") or ():
                chunk = chunks[index] if type(index) is int and 0 <= index < len(chunks) else {}
                source = (
                    chunk.get("web") or chunk.get("retrievedContext") or chunk.get("maps") or {}
                )
                out.append(
                    Citation(
                        provider=WIRE,
                        kind="grounding",
                        cited_text=_str(segment.get("text")),
                        url=_str(source.get("uri")),
                        title=_str(source.get("title")),
                        source_index=_int(index),
                        text_start=start,
                        text_end=end,
                        raw={"support": support, "chunk": chunk},
                    )
                )
    if sources is not None:
        for source in sources.get("citationSources") or ():
            out.append(
                Citation(
                    provider=WIRE,
                    kind="citation",
                    url=_str(source.get("uri")),
                    title=_str(source.get("title")),
                    text_start=chars(source.get("startIndex", 0)),
                    text_end=chars(source.get("endIndex")),
                    raw=source,
                )
            )
    return out


def safety_details(candidate: Mapping[str, Any], finish: Any) -> Optional[StopDetails]:
    """Why a candidate was stopped for its content: the blocked rating, the message."""
    if finish not in _FILTERED:
        return None
    ratings = candidate.get("safetyRatings") or []
    blocked = [r for r in ratings if isinstance(r, Mapping) and r.get("blocked")]
    category = _str(blocked[0].get("category")) if blocked else None
    message = _str(candidate.get("finishMessage"))
    raw = {"finishReason": finish, "finishMessage": message, "safetyRatings": ratings}
    return StopDetails(provider=WIRE, category=category or finish, explanation=message, raw=raw)


class GeminiFold:
    """One Gemini stream's fold: each ``GenerateContentResponse`` into its state."""

    __slots__ = (
        "call_ids",
        "grounding",
        "keep",
        "parts",
        "paused",
        "prior_usage",
        "provider",
        "sources",
        "state",
        "thought",
        "token",
    )

    def __init__(self, provider: str, state: StreamState) -> None:
        self.provider = provider
        self.state = state
        #: The call ids given so far: a repeated one is another call all the same.
        self.call_ids: set[str] = set()
        #: The thought text since the last signature, or None when no run is open.
        self.thought: Optional[list[str]] = None
        #: Every part of the turn as it came, to keep verbatim if it needs to be (see keep).
        self.parts: list[Mapping[str, Any]] = []
        #: A part blazen's fields cannot carry (a server tool's code or result) was seen.
        self.keep = False
        #: The latest groundingMetadata and citationMetadata (each payload repeats them whole).
        self.grounding: Optional[Mapping[str, Any]] = None
        self.sources: Optional[Mapping[str, Any]] = None
        #: The latest continuationToken (an answer Gemini stopped with CONTINUATION).
        self.token: Optional[str] = None
        #: This stream's answer stopped with CONTINUATION; a payload once the engine has
        #: sent the continuation (which clears the finish reason) begins the next request's.
        self.paused = False
        #: The usage of the requests before this one: each request's usageMetadata is its
        #: own running total, and a continued answer's usage is their sum.
        self.prior_usage: Optional[TokenUsage] = None
        state.on_response = self._at_end

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
        if self.paused and state.raw_finish_reason is None:
            # The continuation's first payload: the answer goes on in the same state.
            self.paused = False
            self.token = None
            self.prior_usage = state.usage
            state.on_response = self._at_end
        if state.model is None:
            state.response_id = obj.get("responseId")  # the same on every payload
        state.model = obj.get("modelVersion") or state.model
        usage = obj.get("usageMetadata")
        if usage:
            now = usage_of(usage)
            state.usage = now if self.prior_usage is None else self.prior_usage + now
        candidates = obj.get("candidates")
        if not candidates:
            feedback = obj.get("promptFeedback") or {}
            blocked = feedback.get("blockReason")
            if blocked:
                # blockReasonMessage says why in words, where Gemini gives one.
                why = feedback.get("blockReasonMessage")
                said = f": {why}" if isinstance(why, str) and why else ""
                raise error_from_provider(
                    provider=self.provider,
                    status=None,
                    message=f"the prompt was blocked ({blocked}{said}); no answer was generated",
                    error_type="prompt_blocked",
                    code=blocked,
                    body=raw,
                )
            return None
        # candidateCount > 1 is not supported by the callback API: follow the first.
        candidate = candidates[0]
        text: list[str] = []
        thought: list[str] = []
        event: Optional[ServerToolEvent] = None
        parts = (candidate.get("content") or {}).get("parts") or ()
        self.parts.extend(parts)
        for part in parts:
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
            elif _SERVER_PARTS.intersection(part):
                # Code the model ran on Google's side, and its result: not the caller's
                # tool calls, kept to go back as they came, shown to a UI as an event.
                self.keep = True
                event = server_event(part)
                if signature:
                    self._close_thought(None)
            elif signature:
                # A part that is only a signature signs the answer's text.
                self._close_thought(None)
                state.add_reasoning_part(
                    ReasoningPart(kind="signature", signature=signature, provider=WIRE)
                )
        grounding = candidate.get("groundingMetadata")
        if isinstance(grounding, Mapping):
            self.grounding = grounding
        sources = candidate.get("citationMetadata")
        if isinstance(sources, Mapping):
            self.sources = sources
        token = candidate.get("continuationToken")
        if isinstance(token, str) and token:
            self.token = token
        finish = candidate.get("finishReason")
        what = _FAILED_FINISH.get(finish) if isinstance(finish, str) else None
        if what is not None:
            # A failed answer: an error, never a quiet "stop".
            raise ProviderError(
                f"{self.provider} ended the answer with finishReason {finish}: {what}",
                provider=self.provider,
                error_type=finish,
                retryable=finish not in _NOT_RETRYABLE,
            )
        if finish:
            state.raw_finish_reason = finish
            self.paused = finish == CONTINUATION
            # Not always the last payload: with server-side code execution Gemini sends
            # STOP, then the code's result and the answer, then STOP again. The engine
            # reads on to the end of the body (read_on), never cutting the answer here.
            state.finished = True
            state.read_on = True
            details = safety_details(candidate, finish)
            if details is not None:
                state.stop_details = details
            if self.thought is not None:
                self._close_thought(None)
        chunk = state.emit("".join(text), "".join(thought))
        if event is None:
            return chunk
        if chunk is None:
            return server_tool_chunk(event, state.tool_calls)
        return StreamChunk(
            content_delta=chunk.content_delta,
            reasoning_delta=chunk.reasoning_delta,
            tool_calls=chunk.tool_calls,
            server_tool=event,
        )

    def _at_end(self) -> None:
        """Once per request, when the answer is assembled: its citations and, if needed,
        its parts and the token that continues it."""
        state = self.state
        text: Optional[str] = None
        if self.grounding is not None or self.sources is not None:
            text = state.text
            state.set_citations(citations(self.grounding, self.sources, text))
        items: list[ProviderItem] = []
        if self.keep:
            parts = merged_parts(self.parts)
            items.append(ProviderItem(provider=WIRE, kind="parts", data=parts))
        if state.raw_finish_reason == CONTINUATION and self.token is not None:
            data = {"continuationToken": self.token}
            items.append(ProviderItem(provider=WIRE, kind="continuation", data=data))
        state.keep_items(tuple(items))


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
