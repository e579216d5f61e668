"""OpenAI's Responses API (``POST /v1/responses``), the stream half: its events folded into
the stream state, its failures read. No I/O. The request is built in
:mod:`.responses_input`, and :mod:`.responses` binds both into the wire format.

The stream is a sequence of typed SSE events
(https://platform.openai.com/docs/api-reference/responses-streaming), each
``{"type": ..., "sequence_number": ...}``; it has no ``[DONE]``: it ends with
``response.completed``, ``response.incomplete`` or ``response.failed``, whose ``response``
holds the id, the usage and how it ended. What it says, and where it goes:

- ``response.output_text.delta`` is text, ``response.refusal.delta`` a refusal (the answer
  then ends ``content_filter``), ``response.reasoning_summary_text.delta`` and
  ``response.reasoning_text.delta`` reasoning (parts of a summary joined by a blank line);
- an output item (``response.output_item.added`` / ``.done``) is numbered by
  ``output_index``; a ``function_call`` item carries ``call_id`` and ``name``, its
  arguments stream as ``response.function_call_arguments.delta`` for that index, so
  parallel calls never mix (litellm keyed them otherwise: their #21331); a
  ``custom_tool_call`` streams its free-text input as ``response.custom_tool_call_input.delta``;
- a ``reasoning`` item is kept whole, as ``response.output_item.done`` gives it (its
  ``encrypted_content`` is complete only there), to be sent back on the next turn: one
  :class:`~blazen.ReasoningPart` whose ``data`` is the item's JSON, its ``tool_call_id``
  the call it led to (so the next request keeps the order);
- items of tools that run on OpenAI's side (``web_search_call``, ``file_search_call``,
  ``code_interpreter_call``, ``mcp_call``...) are never the caller's tool calls; they are
  kept whole the same way (``kind="redacted"``), to go back with the turn;
- a top-level ``error`` event (flat ``code``/``message``, or nested under ``error`` as some
  servers send it) and ``response.failed`` are the typed error for their code;
- every other event (``response.created``'s id and model aside) is ignored, and so is any
  type added after this was written.

A server that skips the deltas and sends only the finished items (some compatible servers
do) is read from ``response.output_item.done`` instead.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any, Optional

from .._kit import (
    StreamState,
    error_event,
    error_from_body,
    malformed,
    parse_json,
)
from .._types import (
    Citation,
    CompletionResponse,
    ProviderItem,
    ReasoningPart,
    ServerToolEvent,
    StopDetails,
    StreamChunk,
    TokenUsage,
    server_tool_chunk,
    stream_chunk,
)
from ..errors import ProviderError
from .responses_input import WIRE

__all__ = ["ResponsesFold"]

# https://platform.openai.com/docs/api-reference/responses/object (error.code): what each
# code of a failed response is, as the labels blazen's error classes know.
_FAILED_AS = {
    "rate_limit_exceeded": "rate_limit_exceeded",
    "server_error": None,  # an unlabelled stream error: retried before any content
    "vector_store_timeout": None,
    "invalid_prompt": "content_policy_violation",  # flagged against the usage policies
    "bio_policy": "content_policy_violation",
    "image_content_policy_violation": "content_policy_violation",
    # An agentic action blocked as unintended (its "misalignment" says why): a policy block.
    "misalignment_policy_violation": "content_policy_violation",
    # The project's data residency does not allow this request: sending it again won't help.
    "data_residency_mismatch": "invalid_request_error",
    "context_length_exceeded": "context_length_exceeded",
}
# Item types that are the model's own answer; any other item is a tool run on OpenAI's side.
_OWN = frozenset({"message", "reasoning", "function_call", "custom_tool_call"})
_CALLS = frozenset({"function_call", "custom_tool_call"})
_ARGUMENTS_DONE = frozenset(
    {"response.function_call_arguments.done", "response.custom_tool_call_input.done"}
)


def _usage(u: Mapping[str, Any]) -> TokenUsage:
    prompt = u.get("input_tokens") or 0
    completion = u.get("output_tokens") or 0
    idet = u.get("input_tokens_details") or {}
    odet = u.get("output_tokens_details") or {}
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=u.get("total_tokens") or prompt + completion,
        cached_tokens=idet.get("cached_tokens") or 0,
        cache_write_tokens=idet.get("cache_write_tokens") or 0,
        reasoning_tokens=odet.get("reasoning_tokens") or 0,
    )


def _failed(provider: str, response: Mapping[str, Any], raw: str) -> ProviderError:
    err = response.get("error") or {}
    code = err.get("code") if isinstance(err, Mapping) else None
    message = err.get("message") if isinstance(err, Mapping) else None
    label: Optional[str]
    if code in _FAILED_AS:
        label = _FAILED_AS[code]
    elif isinstance(code, str) and ("image" in code or code.startswith("invalid")):
        label = "invalid_request_error"  # the request's own inputs: sending again won't help
    else:
        label = None
    detail = {"message": message or f"the response failed ({code or 'no code given'})"}
    payload = {"error": {**detail, "type": label, "code": code}}
    return error_from_body(provider, None, payload, raw=raw)


def _error_event(provider: str, obj: Mapping[str, Any], raw: str) -> ProviderError:
    # OpenAI's reference documents the fields at the top; Azure and some proxies nest them
    # under "error" as an HTTP error body does. Either way, each field from where it is.
    nested = obj.get("error") if isinstance(obj.get("error"), Mapping) else {}
    assert isinstance(nested, Mapping)
    fields = {
        name: nested.get(name) if nested.get(name) is not None else obj.get(name)
        for name in ("message", "code", "param")
    }
    fields["type"] = nested.get("type")
    return error_from_body(provider, None, {"error": fields}, raw=raw)


class ResponsesFold:
    """One stream's reading of Responses events; what it keeps between them, typed."""

    __slots__ = (
        "_annotated",
        "_finished",
        "_given",
        "_ids",
        "_kinds",
        "_output",
        "_part_start",
        "_pending",
        "_provider",
        "_reasoning_at",
        "_streamed",
        "_whole",
        "state",
    )

    def __init__(self, provider: str, state: StreamState) -> None:
        self._provider = provider
        self.state = state
        #: Each output item's type, by output_index, and its index by item id.
        self._kinds: dict[int, str] = {}
        self._ids: dict[str, int] = {}
        #: The output items whose content streamed as deltas (the rest are read when done).
        self._streamed: set[int] = set()
        #: Reasoning items finished but not yet placed: they go before the next call.
        self._pending: list[tuple[str, str, str]] = []
        #: Where the reasoning text stands: (output_index, part), for the separator.
        self._reasoning_at: Optional[tuple[int, int]] = None
        #: Every finished output item, in order: the turn kept whole when it must be.
        self._output: list[Any] = []
        #: Whether the turn must go back whole (a built-in tool ran, the text cites).
        self._whole = False
        #: Where the current text part starts in the answer's text (annotation offsets).
        self._part_start = 0
        #: Whether annotations came as their own events (else they are read when done).
        self._annotated = False
        #: Output items as a start event gave them (``response.created`` / ``in_progress``
        #: output, ``output_item.added``), by index: read at the end unless finished.
        self._given: dict[int, Mapping[str, Any]] = {}
        #: The output items a ``response.output_item.done`` finished.
        self._finished: set[int] = set()

    # -- the events ------------------------------------------------------------------

    def fold(self, event: str, data: str) -> Optional[StreamChunk]:
        """Fold one event into the state; the chunk to deliver, if any."""
        if event == "error" and not data.startswith("{"):
            raise error_event(self._provider, data)  # a proxy's error in plain text
        obj = parse_json(self._provider, data)
        kind = obj.get("type") or event
        state = self.state
        if kind == "response.output_text.delta":
            self._streamed.add(obj.get("output_index"))  # type: ignore[arg-type]
            return state.emit(obj.get("delta"), None)
        if kind == "response.function_call_arguments.delta" or (
            kind == "response.custom_tool_call_input.delta"
        ):
            index = obj.get("output_index")
            if index is None:  # a server that names the item only by its id
                index = self._ids.get(obj.get("item_id"))  # type: ignore[arg-type]
            return self._arguments(index, obj.get("delta"))
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            part = obj.get("summary_index", obj.get("content_index")) or 0
            return self._reasoning(obj.get("output_index"), part, obj.get("delta"))
        if kind == "response.output_item.added":
            return self._item_added(obj.get("output_index"), obj.get("item") or {})
        if kind == "response.output_item.done":
            return self._item_done(obj.get("output_index"), obj.get("item") or {})
        if kind == "response.refusal.delta":
            self._streamed.add(obj.get("output_index"))  # type: ignore[arg-type]
            return state.emit_refusal(obj.get("delta"))
        if kind in _ARGUMENTS_DONE:
            index = obj.get("output_index")
            if index not in self._streamed:
                whole = obj.get("arguments", obj.get("input"))
                return self._arguments(index, whole) if whole else None
            return None
        if kind in ("response.completed", "response.incomplete"):
            return self._ended(obj.get("response") or {}, kind)
        if kind == "response.content_part.added":
            # Annotation offsets count within their part; the answer's text is all parts.
            self._part_start = len(state.text)
            return None
        if kind == "response.output_text.annotation.added":
            self._annotated = True
            self._cite(obj.get("annotation"))
            return None
        if kind == "response.created" or kind == "response.in_progress":
            response = obj.get("response") or {}
            if kind == "response.created":
                state.response_id = response.get("id")
                state.model = response.get("model") or state.model
            self._start_output(response.get("output"))
            return None
        if kind == "response.failed":
            response = obj.get("response") or {}
            self._spent(response)
            raise _failed(self._provider, response, data)
        if kind == "error":
            raise _error_event(self._provider, obj, data)
        return None  # in_progress, content parts, annotations, tool progress, later additions

    def _spent(self, response: Any) -> None:
        # What a failed response used is the error's usage (err.usage), not an estimate;
        # a count of the wrong shape must not hide why it failed, so it is left out.
        usage = response.get("usage") if isinstance(response, Mapping) else None
        if isinstance(usage, Mapping):
            with contextlib.suppress(AttributeError, TypeError, ValueError):
                self.state.usage = _usage(usage)

    def _arguments(self, index: Any, delta: Any) -> Optional[StreamChunk]:
        if self._kinds.get(index) not in _CALLS:
            return None  # an MCP call's arguments, say: not the caller's to run
        self._streamed.add(index)
        return self.state.argument_delta(index, delta)

    def _reasoning(self, index: Any, part: Any, delta: Any) -> Optional[StreamChunk]:
        self._streamed.add(index)
        at = (index, part)
        if delta and self._reasoning_at != at:
            # A new summary part or a new reasoning item: a paragraph of its own.
            if self._reasoning_at is not None and type(delta) is str:
                delta = "\n\n" + delta
            self._reasoning_at = at
        return self.state.emit(None, delta)

    def _item_added(self, index: Any, item: Mapping[str, Any]) -> Optional[StreamChunk]:
        kind = item.get("type")
        if type(index) is not int or not isinstance(kind, str):
            raise malformed(self._provider, "an output item without index or type", str(item))
        self._kinds[index] = kind
        self._given[index] = item
        item_id = item.get("id")
        if isinstance(item_id, str):
            self._ids[item_id] = index
        if kind not in _OWN:
            return self._server_tool(kind, item, "running")
        if kind not in _CALLS:
            if kind == "message":
                # Reasoning before a message (a preamble before a call) goes back before it.
                self._place_reasoning(None)
            return None
        call_id = item.get("call_id")
        # The reasoning that led here goes back right before this call.
        self._place_reasoning(call_id if isinstance(call_id, str) else None)
        self.state.tool_delta(index, call_id, item.get("name"), None)
        return self.state.emit(None, None)

    def _item_done(self, index: Any, item: Mapping[str, Any]) -> Optional[StreamChunk]:
        kind = item.get("type")
        if index not in self._kinds:
            # A server that sends only finished items: added and done at once.
            self._item_added(index, item)
        self._finished.add(index)
        self._output.append(item)
        state = self.state
        if kind == "reasoning":
            text = self._item_text(item)
            chunk = None if index in self._streamed else state.emit(None, text or None)
            self._pending.append(("thinking" if text else "redacted", text, json.dumps(item)))
            return chunk
        if kind not in _OWN:
            # A tool OpenAI ran itself: never a tool call; the turn goes back whole.
            self._whole = True
            return self._server_tool(str(kind), item, "done")
        if index in self._streamed:
            if kind == "custom_tool_call":
                self._keep_custom(item)
            elif kind == "message" and not self._annotated:
                self._late_citations(item)
            if kind in _CALLS:
                # The finished call's whole arguments win over what streamed: a delta sent
                # before its output_item.added was dropped (no call to give it to yet).
                whole = item.get("arguments") if kind == "function_call" else item.get("input")
                if isinstance(whole, str) and state.tool_arguments(index, whole):
                    return state.emit(None, None)
            return None
        if kind == "message":
            return self._message(item)
        if kind in _CALLS:
            whole = item.get("arguments") if kind == "function_call" else item.get("input")
            if kind == "custom_tool_call":
                self._keep_custom(item)
            return self._arguments(index, whole) if whole else state.emit(None, None)
        return None

    def _keep_custom(self, item: Mapping[str, Any]) -> None:
        # A custom tool's call goes back as its own item type: the item rides on the call.
        call_id = item.get("call_id")
        if isinstance(call_id, str) and call_id:
            part = ReasoningPart(
                kind="signature",
                signature=str(item.get("type")),
                data=json.dumps(item),
                tool_call_id=call_id,
                provider=WIRE,
            )
            self.state.add_reasoning_part(part)

    def _server_tool(
        self, kind: str, item: Mapping[str, Any], status: str
    ) -> Optional[StreamChunk]:
        # web_search_call -> "web_search": the tool's name, as Llm.server_tool takes it.
        name = kind[: -len("_call")] if kind.endswith("_call") else kind
        item_id = item.get("id")
        event = ServerToolEvent(
            provider=WIRE,
            name=name or "unknown",
            status=status,
            id=item_id if isinstance(item_id, str) else None,
            raw=item,
        )
        return server_tool_chunk(event, self.state.tool_calls)

    def _cite(self, annotation: Any) -> None:
        if not isinstance(annotation, Mapping) or not isinstance(annotation.get("type"), str):
            return  # not the documented shape: nothing to cite rather than a broken answer
        start, end = annotation.get("start_index"), annotation.get("end_index")
        shift = self._part_start

        def text(name: str) -> Optional[str]:
            value = annotation.get(name)
            return value if isinstance(value, str) else None

        self.state.add_citation(
            Citation(
                provider=WIRE,
                kind=annotation["type"],
                url=text("url"),
                title=text("title"),
                file_id=text("file_id"),
                filename=text("filename"),
                source_index=annotation.get("index")
                if type(annotation.get("index")) is int
                else None,
                text_start=start + shift if type(start) is int else None,
                text_end=end + shift if type(end) is int else None,
                raw=annotation,
            )
        )
        self._whole = True

    def _late_citations(self, item: Mapping[str, Any]) -> None:
        # A server that streams the text but puts its annotations only on the finished item:
        # they are read there, their offsets from where this message's text began.
        parts = [
            p
            for p in item.get("content") or ()
            if isinstance(p, Mapping) and p.get("type") == "output_text" and p.get("annotations")
        ]
        if not parts:
            return
        texts = [p.get("text") or "" for p in item.get("content") or () if isinstance(p, Mapping)]
        start = len(self.state.text) - sum(len(t) for t in texts if isinstance(t, str))
        for part in item.get("content") or ():
            if not isinstance(part, Mapping) or part.get("type") != "output_text":
                continue
            self._part_start = start
            for annotation in part.get("annotations") or ():
                self._cite(annotation)
            text = part.get("text")
            start += len(text) if isinstance(text, str) else 0

    def _message(self, item: Mapping[str, Any]) -> Optional[StreamChunk]:
        text: list[str] = []
        refusal: list[str] = []
        for part in item.get("content") or ():
            if part.get("type") == "output_text":
                self._part_start = len(self.state.text) + sum(map(len, text))
                for annotation in part.get("annotations") or ():
                    self._cite(annotation)
                text.append(part.get("text") or "")
            elif part.get("type") == "refusal":
                refusal.append(part.get("refusal") or "")
        if refusal:
            return self.state.emit_refusal("".join(refusal), "".join(text) or None)
        return self.state.emit("".join(text) or None, None)

    @staticmethod
    def _item_text(item: Mapping[str, Any]) -> str:
        parts = item.get("summary") or item.get("content") or ()
        return "\n\n".join(p.get("text") or "" for p in parts if isinstance(p, Mapping))

    def _place_reasoning(self, call_id: Optional[str]) -> None:
        for kind, text, data in self._pending:
            self.state.add_reasoning_part(
                ReasoningPart(kind=kind, text=text, data=data, tool_call_id=call_id, provider=WIRE)
            )
        self._pending.clear()

    def _ended(self, response: Mapping[str, Any], kind: str) -> Optional[StreamChunk]:
        state = self.state
        chunk = self._unannounced(response.get("output"))
        self._place_reasoning(None)
        if self._whole:
            state.keep_items((ProviderItem(provider=WIRE, kind="output", data=self._output),))
        state.response_id = response.get("id") or state.response_id
        state.model = response.get("model") or state.model
        usage = response.get("usage")
        if usage:
            state.usage = _usage(usage)
        if kind == "response.incomplete":
            details = response.get("incomplete_details") or {}
            # max_output_tokens -> length, content_filter -> content_filter; raw kept.
            state.raw_finish_reason = details.get("reason") or "incomplete"
            if details:
                state.stop_details = StopDetails(
                    provider=WIRE, category=state.raw_finish_reason, raw=details
                )
        else:
            state.raw_finish_reason = response.get("status") or "completed"
        state.finished = True
        return chunk

    def _start_output(self, output: Any) -> None:
        # A start event that already holds items (a compatible server's whole answer in
        # response.created or response.in_progress): content, kept to be read at the end.
        if isinstance(output, list):
            for index, item in enumerate(output):
                if isinstance(item, Mapping):
                    self._given.setdefault(index, item)

    def _unannounced(self, output: Any) -> Optional[StreamChunk]:
        # A server that puts (part of) its answer only in the terminal response, or only
        # in a start event (an output_item.added holding the whole item and no .done, a
        # response.created holding the output): the items no event finished or streamed
        # are read, the terminal's form first, in order, and go up as one chunk, so an
        # answer is never dropped (the openai SDK reads the terminal's items too).
        items = dict(self._given)
        if isinstance(output, list):
            items.update(enumerate(output))
        read = self._finished | self._streamed
        text: list[str] = []
        reasoning: list[str] = []
        refusal: list[str] = []
        found = False
        for index in sorted(items):
            item = items[index]
            if (
                index in read
                or not isinstance(item, Mapping)
                or self._ids.get(item.get("id"), index) in read  # type: ignore[arg-type]
            ):
                continue
            got = self._item_done(index, item)
            found = True
            if got is not None:
                text.append(got.content_delta or "")
                reasoning.append(got.reasoning_delta or "")
                refusal.append(got.refusal_delta or "")
        if not found:
            return None
        return stream_chunk(
            "".join(text) or None,
            "".join(reasoning) or None,
            self.state.tool_calls,
            "".join(refusal) or None,
        )

    def whole(self, response: Mapping[str, Any], raw: str) -> CompletionResponse:
        """A whole (non-streamed) response, read through the same steps as a stream."""
        status = response.get("status")
        if status == "failed" or response.get("error"):
            self._spent(response)
            raise _failed(self._provider, response, raw)
        self.state.response_id = response.get("id")
        self.state.model = response.get("model")
        for index, item in enumerate(response.get("output") or ()):
            self._item_done(index, item)
        self._ended(response, "response.incomplete" if status == "incomplete" else "")
        return self.state.response()
