"""OpenRouter's ``reasoning_details``: the upstream model's reasoning blocks, kept to go back.

OpenRouter normalises every upstream's reasoning into one array on the message
(https://openrouter.ai/docs/guides/best-practices/reasoning-tokens): ``reasoning.text``
(text, with the upstream's ``signature`` for Claude), ``reasoning.summary`` and
``reasoning.encrypted`` (``data``), each with ``id``, ``format`` and ``index``. Streamed,
an entry arrives in pieces keyed by ``index``; sent back unchanged on the assistant turn,
it preserves the reasoning across tool calls (Claude with thinking refuses a tool-use turn
without it). Each merged entry becomes one :class:`~blazen.ReasoningPart` whose ``data``
is the entry as JSON text, sent back exactly as it came. No I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._kit import StreamState
from .._types import ChatMessage, ReasoningPart
from ..errors import ValidationError

__all__ = ["WIRE", "Details", "sent_back"]

#: What ReasoningPart.provider says of the parts these entries make.
WIRE = "openrouter"
# The pieces of an entry that grow by concatenation; every other field is set whole.
_GROWING = ("text", "summary")


class Details:
    """The ``reasoning_details`` entries of one answer, merged piece by piece until its end."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        #: Entries by their ``index``, in the order they began (which is index order).
        self.pending: dict[Any, dict[str, Any]] = {}

    def add(self, details: Any) -> None:
        """Merge one payload's ``reasoning_details`` pieces into the entries kept so far."""
        if not isinstance(details, list):
            return  # not the documented shape: nothing to keep rather than a broken turn
        pending = self.pending
        for piece in details:
            if not isinstance(piece, Mapping):
                continue
            key = piece.get("index")
            if not isinstance(key, (int, str)):
                key = len(pending)  # no usable index: an entry of its own
            entry = pending.get(key)
            if entry is None:
                pending[key] = dict(piece)
                continue
            for name, value in piece.items():
                if (
                    name in _GROWING
                    and isinstance(value, str)
                    and isinstance(entry.get(name), str)
                ):
                    entry[name] += value
                elif value is not None and value != "":
                    entry[name] = value

    def flush(self, state: StreamState) -> None:
        """Turn the merged entries into reasoning parts on ``state`` (at the end of the answer)."""
        pending, self.pending = self.pending, {}
        for entry in pending.values():
            data = json.dumps(entry, ensure_ascii=False)
            if entry.get("type") == "reasoning.encrypted":
                state.add_reasoning_part(ReasoningPart(kind="redacted", data=data, provider=WIRE))
                continue
            text = entry.get("text") or entry.get("summary") or ""
            signature = entry.get("signature")
            state.add_reasoning_part(
                ReasoningPart(
                    text=text if isinstance(text, str) else "",
                    signature=signature if isinstance(signature, str) and signature else None,
                    data=data,
                    provider=WIRE,
                )
            )


def sent_back(message: ChatMessage) -> list[Any]:
    """The ``reasoning_details`` array for an assistant turn: its entries, as they came."""
    out = []
    for part in message.reasoning_parts:
        if part.provider != WIRE or not part.data:
            continue
        try:
            out.append(json.loads(part.data))
        except ValueError as exc:
            msg = (
                f"a ReasoningPart of {WIRE} carries its reasoning_details entry as JSON text "
                f"in data; this one is not JSON ({exc}): send back resp.message as it came"
            )
            raise ValidationError(msg, provider=WIRE) from exc
    return out
