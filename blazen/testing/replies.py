"""What the server answers: a scripted :class:`Reply` and the actions between its writes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

import attrs

__all__ = ["Action", "Drop", "ENCODINGS", "FRAMINGS", "Pause", "Reply", "Stall"]


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


FRAMINGS: Mapping[str, Mapping[str, Any]] = {
    "length": {"transfer": "length"},
    "length+close": {"transfer": "length", "close": True},
    "close": {"transfer": "close"},
    "http/1.0": {"transfer": "close", "version": "HTTP/1.0"},
    "chunked": {"transfer": "chunked"},
    "chunked+close": {"transfer": "chunked", "close": True},
}
"""Every way an HTTP/1.1 server may frame a body, by name, and the :class:`Reply` fields
each one sets: ``length`` (Content-Length, kept alive), ``length+close`` (Content-Length and
``Connection: close``), ``close`` (close-delimited), ``http/1.0`` (an HTTP/1.0 status line,
close-delimited), ``chunked`` and ``chunked+close``. ``Reply.framed(name)`` applies one."""

ENCODINGS: tuple[Optional[str], ...] = (None, "gzip", "deflate")
"""The content codings a body may come in: ``None`` (as it is), ``gzip`` and ``deflate``,
each compressing the body as one stream flushed at every write (``Reply(encoding=...)``)."""


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

    How the answer is framed beyond that: ``close=True`` sends ``Connection: close`` and
    closes the connection after the body, whatever its transfer (gunicorn's sync workers,
    many proxies, Python's ``http.server``); ``version="HTTP/1.0"`` answers as an HTTP/1.0
    server; ``encoding`` (``"gzip"`` or ``"deflate"``) compresses the body as one stream,
    each write flushed so it can be inflated as it arrives; ``length`` is the
    Content-Length to announce instead of the body's own size (larger: a body cut short
    of its length). :meth:`framed` applies one of :data:`FRAMINGS` by name.
    """

    status: int = 200
    headers: Mapping[str, str] = attrs.field(default=None, converter=_headers)
    body: Sequence[Action] = ()
    transfer: str = "chunked"
    raw: bool = False
    close: bool = False
    version: str = "HTTP/1.1"
    encoding: Optional[str] = None
    length: Optional[int] = None

    def framed(self, framing: str, encoding: Optional[str] = None) -> Reply:
        """This reply framed as :data:`FRAMINGS` names it, compressed with ``encoding``."""
        try:
            how = FRAMINGS[framing]
        except KeyError:
            msg = f"unknown framing {framing!r}; one of {sorted(FRAMINGS)}"
            raise ValueError(msg) from None
        return attrs.evolve(self, encoding=encoding, **how)

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
