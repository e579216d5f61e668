"""Continuing a paused turn inside one logical stream. No I/O.

A provider may pause a long turn and ask the client to send the content back so the model
goes on (Anthropic's ``pause_turn``, a server-tool loop that hit its iteration limit:
https://platform.claude.com/docs/en/agents-and-tools/tool-use/server-tools). The worker
then sends the next request itself and folds its stream into the same state and the same
fold: the callbacks see one stream, one terminal, the text of every part in order and the
usage summed. A wire that can continue has a ``continuation(req, paused)`` method
(:class:`Continuable`); one that has none never pauses.
"""

from __future__ import annotations

from typing import Optional, Protocol, runtime_checkable

from .._kit import StreamState, normalise_finish_reason
from .._types import CompletionRequest, CompletionResponse

__all__ = ["Continuable", "continuation_limit", "next_request"]


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
    if done >= limit or not isinstance(wire, Continuable):
        return None
    if normalise_finish_reason(state.raw_finish_reason, False) != "paused":
        return None
    paused = state.response()
    nxt = wire.continuation(req, paused)
    if nxt is None:
        return None
    # The next message folds into the same state: its end signal is its own.
    state.finished = False
    state.raw_finish_reason = None
    return nxt
