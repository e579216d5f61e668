"""Continuing a paused turn inside one logical stream. No I/O.

A provider may pause a long turn and ask the client to send the content back so the model
goes on (Anthropic's ``pause_turn``, a server-tool loop that hit its iteration limit:
https://platform.claude.com/docs/en/agents-and-tools/tool-use/server-tools; Gemini's
``CONTINUATION``, an answer cut at the per-request token limit). The worker
then sends the next request itself and folds its stream into the same state and the same
fold: the callbacks see one stream, one terminal, the text of every part in order and the
usage summed. A wire that can continue has a ``continuation(req, paused)`` method
(:class:`Continuable`); one that has none never pauses.
"""

from __future__ import annotations

from typing import Optional, Protocol, runtime_checkable

import attrs

from .._kit import StreamState, normalise_finish_reason
from .._types import CompletionRequest, CompletionResponse, ProviderItem

__all__ = ["Continuable", "continuation_limit", "joined", "next_request", "next_whole_request"]


@runtime_checkable
class Continuable(Protocol):
    """A wire format that can continue a turn its provider paused."""

    def continuation(
        self, req: CompletionRequest, paused: CompletionResponse
    ) -> Optional[CompletionRequest]:
        """The request that continues ``paused``, or None if it cannot be continued."""
        ...


def continuation_limit(model_limit: int, req: CompletionRequest) -> int:
    """How many continuations one stream may make: the model's, lowered by the request's."""
    own = req.max_continuations
    return model_limit if own is None else min(model_limit, own)


def next_request(
    wire: object, req: CompletionRequest, state: StreamState, done: int, limit: int
) -> Optional[CompletionRequest]:
    """The request that continues the paused stream in ``state``, or None to end it here.

    None when the turn was not paused, when the wire cannot continue it, or when ``done``
    continuations already reached ``limit`` (the stream then ends ``"paused"``). The next
    request is always the *original* request with all the content so far as its last
    assistant turn, so a second continuation does not send the first one's blocks twice.
    """
    # The ending first: a runtime protocol check walks the protocol's members, and almost
    # every stream ends unpaused. An ending that is not text is no pause: the response
    # assembled next reports it as a malformed payload.
    raw = state.raw_finish_reason
    if done >= limit or not isinstance(raw, str) or normalise_finish_reason(raw, False) != "paused":
        return None
    if not isinstance(wire, Continuable):
        return None
    paused = state.response()
    nxt = wire.continuation(req, paused)
    if nxt is None:
        return None
    # The next message folds into the same state: its end signal is its own.
    state.finished = False
    state.raw_finish_reason = None
    return nxt


def next_whole_request(
    wire: object, req: CompletionRequest, paused: CompletionResponse, done: int, limit: int
) -> Optional[CompletionRequest]:
    """:func:`next_request` for a whole (non-streamed) response."""
    if done >= limit or paused.finish_reason != "paused" or not isinstance(wire, Continuable):
        return None
    return wire.continuation(req, paused)


def joined(first: CompletionResponse, then: CompletionResponse) -> CompletionResponse:
    """Two whole (non-streamed) responses of one continued turn as one response.

    The text, reasoning, calls and citations of both in order (the second's citation spans
    moved past the first's text), usage added, the ending and details of the second, the
    id of the first; verbatim content of the same kind joined into one list.
    """
    shift = len(first.content)
    moved = tuple(
        attrs.evolve(
            c,
            text_start=None if c.text_start is None else c.text_start + shift,
            text_end=None if c.text_end is None else c.text_end + shift,
        )
        for c in then.citations
    )
    items: dict[tuple[str, str], ProviderItem] = {}
    # The token that continued the first is spent: only the second's may go on.
    spent = [i for i in first.provider_items if i.kind != "continuation"]
    for item in (*spent, *then.provider_items):
        key = (item.provider, item.kind)
        before = items.get(key)
        if before is not None and isinstance(before.data, list) and isinstance(item.data, list):
            item = attrs.evolve(before, data=[*before.data, *item.data])
        items[key] = item
    usage = then.usage
    if first.usage is not None:
        usage = first.usage if usage is None else first.usage + usage
    reasoning = "".join(r for r in (first.reasoning, then.reasoning) if r) or None
    return attrs.evolve(
        then,
        content=first.content + then.content,
        reasoning=reasoning,
        tool_calls=(*first.tool_calls, *then.tool_calls),
        usage=usage,
        model=then.model or first.model,
        reasoning_parts=(*first.reasoning_parts, *then.reasoning_parts),
        id=first.id or then.id,
        citations=(*first.citations, *moved),
        stop_details=then.stop_details or first.stop_details,
        provider_items=tuple(items.values()),
    )
