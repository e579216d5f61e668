"""The stream state every wire format folds its payloads into. No I/O.

It holds what every provider's answer has (text, reasoning, tool calls, finish reason,
usage); what one wire needs between payloads (Anthropic's open blocks, Gemini's thought
run) lives on that wire's own fold object (:class:`~.wire.Fold`), typed, never here.

A fold reads one payload and calls :meth:`StreamState.tool_delta` for each
tool-call fragment, then :meth:`StreamState.emit` with the text and reasoning deltas; ``emit``
returns the chunk to deliver (or None when the payload changed nothing a user can see).
Tool calls are assembled here once for every provider: ``id``, ``name`` and ``type`` are set
once and never concatenated, only ``arguments`` fragments are appended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

from .._types import (
    ArgumentFragments,
    Citation,
    CompletionResponse,
    ProviderItem,
    ReasoningPart,
    StopDetails,
    StreamChunk,
    TokenUsage,
    ToolCall,
    stream_chunk,
    tool_call_snapshot,
    tool_calls_view,
)
from .finish import normalise_finish_reason

__all__ = ["StreamState", "normalise_finish_reason"]

# How many calls may still be changing in a snapshot's own copy before the oldest of them
# join the shared part (see StreamState._freeze).
_TAIL_MAX = 8
_TAIL_KEEP = 4


class _Text:
    """Text that grows by small deltas, kept as a few long strings instead of one per delta.

    A stream of 200,000 tokens would otherwise hold 200,000 small ``str`` objects, each
    costing about 60 bytes beyond its text; joining every 256 parts makes that negligible.
    """

    __slots__ = ("_blocks", "_parts")

    def __init__(self) -> None:
        self._blocks: list[str] = []
        self._parts: list[str] = []

    def add(self, delta: str) -> None:
        parts = self._parts
        parts.append(delta)
        if len(parts) >= 256:
            self._blocks.append("".join(parts))
            parts.clear()

    def __bool__(self) -> bool:
        return bool(self._parts or self._blocks)

    def __str__(self) -> str:
        # Join once into a single block: the peak is the blocks plus the whole text (no
        # third copy from joining the tail separately), and reading it again costs nothing.
        blocks = self._blocks
        if self._parts:
            blocks.append("".join(self._parts))
            self._parts.clear()
        if len(blocks) > 1:
            blocks[:] = ["".join(blocks)]
        return blocks[0] if blocks else ""


class _Call:
    __slots__ = ("caller", "id", "name", "parts", "position", "synthetic_id", "touched")

    def __init__(self, call_id: Optional[str], number: int) -> None:
        self.synthetic_id = not call_id
        self.id = call_id or f"call_{number}"
        self.name = ""
        self.caller: Optional[dict[str, Any]] = None
        self.parts: list[str] = []
        #: The ToolCall for this call as it stands, until a fragment changes it.
        #: Where this call stands in the snapshot.
        self.position = number
        #: Changed since the last snapshot was built.
        self.touched = False


class StreamState:
    """What has streamed so far: text, reasoning, tool calls, finish reason, usage."""

    __slots__ = (
        "_base",
        "_by_key",
        "_calls",
        "_citations",
        "_current",
        "_dirty",
        "_frozen",
        "_items",
        "_parts",
        "_reasoning",
        "_refusal",
        "_snapshot",
        "_tail",
        "_text",
        "_touched",
        "finished",
        "model",
        "on_response",
        "raw_finish_reason",
        "read_on",
        "response_id",
        "stop_details",
        "usage",
    )

    def __init__(self) -> None:
        self._text = _Text()
        self._reasoning = _Text()
        # Only a refused answer has one: a text-only stream never touches it.
        self._refusal: Optional[_Text] = None
        # Reasoning the wire format kept as the provider sent it (signed thinking blocks,
        # Gemini's thought signatures); only reasoning streams make the list.
        self._parts: Optional[list[ReasoningPart]] = None
        # Only an answer with citations or verbatim provider content makes these.
        self._citations: Optional[list[Citation]] = None
        self._items: tuple[ProviderItem, ...] = ()
        #: Why the provider stopped or refused (see :class:`~blazen.StopDetails`), if it said.
        self.stop_details: Optional[StopDetails] = None
        self._calls: list[_Call] = []
        self._by_key: dict[Union[int, str], _Call] = {}
        self._current: Optional[_Call] = None
        self._dirty = False
        self._snapshot: Sequence[ToolCall] = ()
        # The calls' current ToolCalls: the first _frozen of them in _base, a list that
        # snapshots share and that only grows, the rest (the calls still changing, a few)
        # in _tail, copied into each snapshot. A delta rebuilds its own call only, so a
        # snapshot costs O(tail), not O(calls). A call taken up again after it was frozen
        # thaws it and the calls after it into a fresh base (old snapshots keep theirs).
        self._base: list[ToolCall] = []
        self._frozen = 0
        self._tail: list[Optional[ToolCall]] = []
        # The calls touched since the last snapshot.
        self._touched: list[_Call] = []
        #: The provider's end signal was seen ([DONE], message_stop, done: true, ...).
        self.finished = False
        #: Set with ``finished`` by a payload whose end signal may not be the last (Gemini's
        #: finishReason): the engine reads on to the end of the body, waiting at most a
        #: short grace for more (and clears the flag, so the next such signal sets it anew).
        self.read_on = False
        #: Called once by :meth:`response` before it assembles the answer: a wire's last
        #: look at the stream (work done once at the end, not per payload).
        self.on_response: Optional[Callable[[], None]] = None
        self.raw_finish_reason: Optional[str] = None
        self.usage: Optional[TokenUsage] = None
        self.model: Optional[str] = None
        #: The provider's id of this answer (``chatcmpl-...``, ``msg_...``), if it gave one.
        self.response_id: Optional[str] = None

    # -- folding -----------------------------------------------------------------------

    def tool_delta(
        self,
        index: Optional[int],
        call_id: Optional[str],
        name: Optional[str],
        arguments: Optional[str],
    ) -> None:
        """Merge one tool-call fragment, keyed by ``index``, else ``id``, else the current call.

        ``TypeError`` for a fragment of the wrong type: the worker reports a malformed payload.
        """
        if call_id is None and name is None and type(index) is int and type(arguments) is str:
            # The usual fragment: more arguments for a call already known by its index.
            known = self._by_key.get(index)
            if known is not None:
                if arguments:
                    known.parts.append(arguments)
                if not known.touched:
                    known.touched = True
                    self._touched.append(known)
                self._current = known
                self._dirty = True
                return
        for value in (call_id, name, arguments):
            if value is not None and type(value) is not str:
                msg = f"a tool-call field is {type(value).__name__}, not text"
                raise TypeError(msg)
        if index is not None and (type(index) is not int):
            msg = f"a tool-call index is {type(index).__name__}, not an integer"
            raise TypeError(msg)
        call: Optional[_Call]
        if index is not None:
            call = self._by_key.get(index)
            if call is not None and call_id and not call.synthetic_id and call.id != call_id:
                # Some servers number every call 0: a new id at a known index is a new call.
                call = self._by_key.get(call_id) or self._new_call(call_id)
                self._by_key[index] = call
            if call is None and call_id:
                # Some servers number calls per chunk: an id we know wins over a new index.
                call = self._by_key.get(call_id)
                if call is not None:
                    self._by_key[index] = call
            if call is None:
                call = self._new_call(call_id)
                self._by_key[index] = call
        elif call_id:
            call = self._by_key.get(call_id)
            if call is None:
                call = self._new_call(call_id)
        else:
            call = self._current or self._new_call(None)
        if call_id and call.synthetic_id:
            call.id = call_id
            call.synthetic_id = False
            self._by_key[call_id] = call
        if name and not call.name:
            call.name = name
        if arguments:
            call.parts.append(arguments)
        if not call.touched:
            call.touched = True
            self._touched.append(call)
        self._current = call
        self._dirty = True

    def argument_delta(self, index: int, fragment: str) -> Optional[StreamChunk]:
        """:meth:`tool_delta` with only ``arguments``, then :meth:`emit` with no text: the chunk.

        The hot path of a streamed tool call (a wire whose payload is one argument fragment
        for a call it already announced): when nothing else is pending, the call's snapshot
        is rebuilt in place, without the general merge. Anything else takes the general way,
        with the same result.
        """
        call = self._by_key.get(index) if type(index) is int else None
        frozen = self._frozen
        if call is None or self._dirty or type(fragment) is not str or call.position < frozen:
            self.tool_delta(index, None, None, fragment)
            return self.emit(None, None)
        parts = call.parts
        if fragment:
            parts.append(fragment)
        self._current = call
        tail = self._tail
        tail[call.position - frozen] = tool_call_snapshot(
            call.id, call.name, ArgumentFragments(parts, len(parts)), call.caller
        )
        snapshot = self._snapshot = self._snapshot_now()
        return stream_chunk(None, None, snapshot)

    def _snapshot_now(self) -> Sequence[ToolCall]:
        # Every tail entry is set once no call is pending (a call gets its ToolCall when
        # first touched). A few calls (the usual case) are a plain tuple, as cheap as it gets.
        tail = tuple(self._tail)
        if self._frozen:
            return tool_calls_view(self._base, self._frozen, tail)  # type: ignore[arg-type]
        return tail  # type: ignore[return-value]

    def tool_arguments(self, index: int, arguments: str) -> bool:
        """Make the arguments of the call at ``index`` exactly ``arguments``; True if changed.

        For a wire whose finished call repeats its whole arguments (the Responses API's
        ``output_item.done``): what streamed before may have lost a delta (one sent before
        its call was announced), and the finished text is the truth. The next snapshot
        carries it (snapshots replace, never append).
        """
        call = self._by_key.get(index)
        if call is None or type(arguments) is not str or "".join(call.parts) == arguments:
            return False
        # A fresh list: the snapshots already delivered share the old one (their
        # ArgumentFragments read its first n parts) and must keep showing what they showed.
        call.parts = [arguments]
        if not call.touched:
            call.touched = True
            self._touched.append(call)
        self._dirty = True
        return True

    def tool_caller(self, index: int, caller: Any) -> None:
        """Record who made the call at ``index`` (see :attr:`ToolCall.caller`), if it is a
        JSON object; the next snapshot carries it."""
        call = self._by_key.get(index)
        if call is None or not isinstance(caller, dict) or call.caller == caller:
            return
        call.caller = caller
        if not call.touched:
            call.touched = True
            self._touched.append(call)
        self._dirty = True

    def _new_call(self, call_id: Optional[str]) -> _Call:
        call = _Call(call_id, len(self._calls))
        self._calls.append(call)
        self._tail.append(None)
        if call_id:
            self._by_key[call_id] = call
        return call

    def emit(self, content: Optional[str], reasoning: Optional[str]) -> Optional[StreamChunk]:
        """Record this payload's deltas; return the chunk to deliver, or None if nothing changed.

        ``TypeError`` for a delta that is not text: the worker reports a malformed payload,
        and no callback ever sees a number where the contract promises a string.
        """
        if content:
            if type(content) is not str:
                raise TypeError(f"a text delta is {type(content).__name__}, not text")
            self._text.add(content)
        else:
            content = None
        if reasoning:
            if type(reasoning) is not str:
                raise TypeError(f"a reasoning delta is {type(reasoning).__name__}, not text")
            self._reasoning.add(reasoning)
        else:
            reasoning = None
        if self._dirty:
            # A delta touches one call: the others keep their ToolCall from the last snapshot.
            self._dirty = False
            tail = self._tail
            for c in self._touched:
                c.touched = False
                if c.position < self._frozen:
                    self._thaw(c.position)
                tail[c.position - self._frozen] = tool_call_snapshot(
                    c.id, c.name, ArgumentFragments(c.parts, len(c.parts)), c.caller
                )
            self._touched.clear()
            if len(tail) > _TAIL_MAX:
                self._freeze(len(tail) - _TAIL_KEEP)
            self._snapshot = self._snapshot_now()
        elif content is None and reasoning is None:
            return None
        return stream_chunk(content, reasoning, self._snapshot)

    def emit_refusal(
        self, refusal: Optional[str], content: Optional[str] = None, reasoning: Optional[str] = None
    ) -> Optional[StreamChunk]:
        """:meth:`emit` for a payload that also carries refusal text (the model declining).

        Kept apart from :meth:`emit` so that the usual payload pays nothing for refusals.
        ``TypeError`` for a refusal that is not text, as for any other delta.
        """
        if refusal and type(refusal) is not str:
            raise TypeError(f"a refusal delta is {type(refusal).__name__}, not text")
        chunk = self.emit(content, reasoning)
        if not refusal:
            return chunk
        if self._refusal is None:
            self._refusal = _Text()
        self._refusal.add(refusal)
        if chunk is None:
            return stream_chunk(None, None, self._snapshot, refusal)
        return stream_chunk(chunk.content_delta, chunk.reasoning_delta, chunk.tool_calls, refusal)

    def add_reasoning_part(self, part: ReasoningPart) -> None:
        """Keep a reasoning part to be sent back with the turn (see :class:`ReasoningPart`).

        A wire format that records none leaves the reasoning text to become one plain part.
        """
        if self._parts is None:
            self._parts = []
        self._parts.append(part)

    def add_citation(self, citation: Citation) -> None:
        """Keep a citation for :attr:`CompletionResponse.citations`."""
        if self._citations is None:
            self._citations = []
        self._citations.append(citation)

    @property
    def citations(self) -> tuple[Citation, ...]:
        """The citations so far."""
        return () if self._citations is None else tuple(self._citations)

    def keep_items(self, items: tuple[ProviderItem, ...]) -> None:
        """Set the turn's verbatim provider content (see :class:`~blazen.ProviderItem`)."""
        self._items = items

    def _freeze(self, count: int) -> None:
        # Move the oldest tail calls into the shared base: appending leaves every existing
        # snapshot's prefix as it was.
        tail = self._tail
        self._base.extend(tail[:count])  # type: ignore[arg-type]
        del tail[:count]
        self._frozen += count

    def _thaw(self, position: int) -> None:
        # A frozen call changed: a new base without it, so no snapshot sees it change.
        base = self._base
        self._tail[:0] = base[position : self._frozen]
        self._base = base[:position]
        self._frozen = position

    # -- reading -----------------------------------------------------------------------

    @property
    def text(self) -> str:
        """All text so far."""
        return str(self._text)

    @property
    def reasoning(self) -> str:
        """All reasoning so far."""
        return str(self._reasoning)

    @property
    def refusal(self) -> Optional[str]:
        """All refusal text so far, or None if the model has not declined."""
        return None if self._refusal is None else str(self._refusal)

    @property
    def tool_calls(self) -> Sequence[ToolCall]:
        """The current snapshot."""
        if self._dirty:
            self.emit(None, None)
        return self._snapshot

    @property
    def has_content(self) -> bool:
        """Whether any text, reasoning, refusal or tool call has streamed."""
        return bool(self._text or self._reasoning or self._refusal or self._calls)

    def final_chunk(self) -> StreamChunk:
        """The chunk that closes a successful stream (``is_final``, the last snapshot)."""
        return StreamChunk(tool_calls=self.tool_calls, is_final=True)

    def set_citations(self, citations: Sequence[Citation]) -> None:
        """Replace the citations so far (a wire that re-reads them whole at the end)."""
        self._citations = list(citations)

    def response(self) -> CompletionResponse:
        """The assembled response; ``TypeError`` if the provider's finish reason is not text."""
        hook = self.on_response
        if hook is not None:
            self.on_response = None
            hook()
        raw = self.raw_finish_reason
        if raw is not None and type(raw) is not str:
            raise TypeError(f"the finish reason is {type(raw).__name__}, not text")
        if self.model is not None and type(self.model) is not str:
            raise TypeError(f"the model name is {type(self.model).__name__}, not text")
        calls = tuple(self.tool_calls)
        reasoning = self.reasoning
        refusal = self.refusal
        finish = normalise_finish_reason(raw, bool(calls))
        if refusal is not None:
            # OpenAI ends a refusal with "stop": a refused answer means the same everywhere.
            finish = "content_filter"
        parts: tuple[ReasoningPart, ...]
        if self._parts is not None:
            parts = tuple(self._parts)
        else:
            parts = (ReasoningPart(text=reasoning),) if reasoning else ()
        return CompletionResponse(
            content=self.text,
            reasoning=reasoning or None,
            tool_calls=calls,
            finish_reason=finish,
            raw_finish_reason=raw,
            usage=self.usage,
            model=self.model,
            refusal=refusal,
            reasoning_parts=parts,
            # An id is only ever reported, never relied on: one that is not text is dropped.
            id=self.response_id if type(self.response_id) is str else None,
            citations=self.citations,
            stop_details=self.stop_details,
            provider_items=self._items,
        )
