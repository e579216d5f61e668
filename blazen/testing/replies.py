"""What the server answers: a scripted :class:`Reply` and the actions between its writes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

import attrs

__all__ = ["Action", "Drop", "Pause", "Reply", "Stall"]


@attrs.frozen
class Pause:
    """Wait this many seconds before the next write (ends early if the client hangs up)."""

    seconds: float


@attrs.frozen
class Stall:
    """Send nothing more; hold the connection until the client closes it."""


@attrs.frozen
class Drop:
    """Close the connection now, mid-response."""


#: One item of a reply's body: bytes to write, or a :class:`Pause`, :class:`Stall` or :class:`Drop`.
Action = Union[bytes, Pause, Stall, Drop]


def _headers(headers: Optional[Mapping[str, str]]) -> Mapping[str, str]:
    # A fresh dict per reply for None, so no two replies share (and mutate) one default.
    return {} if headers is None else headers


@attrs.frozen(kw_only=True)
class Reply:
    """One scripted response.

    ``body`` is a sequence of writes: each ``bytes`` item is one TCP write (one HTTP chunk
    with ``transfer="chunked"``), interleaved with :class:`Pause`, :class:`Stall` and
    :class:`Drop`. ``transfer`` is ``"chunked"`` (as providers stream), ``"close"`` (no
    length: the body ends when the connection closes) or ``"length"`` (Content-Length).
    ``raw=True`` writes ``body`` as it is, with no status line or headers: for servers that
    never answer or answer garbage.
    """

    status: int = 200
    headers: Mapping[str, str] = attrs.field(default=None, converter=_headers)
    body: Sequence[Action] = ()
    transfer: str = "chunked"
    raw: bool = False

    @classmethod
    def sse(
        cls,
        events: Union[bytes, Sequence[Action]],
        *,
        status: int = 200,
        headers: Optional[Mapping[str, str]] = None,
        transfer: str = "chunked",
    ) -> Reply:
        """An event stream; ``events`` is the whole body, or a list of writes."""
        body = [events] if isinstance(events, bytes) else list(events)
        return cls(
            status=status,
            headers={"Content-Type": "text/event-stream", **(headers or {})},
            body=body,
            transfer=transfer,
        )

    @classmethod
    def json(
        cls, payload: Any, *, status: int = 200, headers: Optional[Mapping[str, str]] = None
    ) -> Reply:
        """A JSON body, such as a provider's error response."""
        return cls(
            status=status,
            headers={"Content-Type": "application/json", **(headers or {})},
            body=[json.dumps(payload).encode()],
            transfer="length",
        )
