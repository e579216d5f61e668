"""What the stream engine needs of a wire format: :class:`WireFormat` and its :class:`Fold`.

A provider plugs into the engine by implementing :class:`WireFormat`; the engine knows no
provider by name. For each stream the engine makes one :class:`StreamState` and asks the
wire for a fold over it (:meth:`WireFormat.start`); the fold object keeps whatever the wire
must remember between payloads as its own typed attributes. No I/O here.

A minimal wire, for a server that streams ``data: {"text": "..."}`` and ends with
``data: [END]``::

    class EchoFold:
        def __init__(self, provider: str, state: StreamState) -> None:
            self.provider, self.state = provider, state

        def fold(self, event: str, data: str) -> Optional[StreamChunk]:
            if data == "[END]":
                self.state.finished = True
                return None
            obj = parse_json(self.provider, data)
            return self.state.emit(obj.get("text"), None)

    class EchoWire:
        provider = "echo"
        framing = "sse"
        stream_content_types = ("text/event-stream",)

        def start(self, state: StreamState) -> EchoFold:
            return EchoFold(self.provider, state)

        # build(), error() and parse_response() as WireFormat says
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional, Protocol

from .._http import HttpRequest
from .._types import CompletionRequest, CompletionResponse, StreamChunk
from ..errors import ProviderError
from .state import StreamState

__all__ = ["Fold", "WireFormat"]


class Fold(Protocol):
    """One stream's reading of its payloads, made by :meth:`WireFormat.start`.

    It folds each payload into the :class:`StreamState` it was made for, and keeps what the
    wire needs between payloads (open blocks, pending signatures...) as attributes of its
    own. One fold serves one stream on one thread: it needs no lock.
    """

    def fold(self, event: str, data: str) -> Optional[StreamChunk]:
        """Fold one payload; return the chunk to deliver, if any.

        ``event`` is the SSE event name (``"message"`` when the event has none; ``""`` for
        an NDJSON line) and ``data`` the payload's text. Raises a
        :class:`~blazen.ProviderError` subclass for an error event; a payload of the wrong
        shape may raise ``LookupError``, ``TypeError``, ``AttributeError`` or ``ValueError``
        (the engine reports it as a malformed payload, see :data:`~.payload.SHAPE_ERRORS`).
        Sets ``state.finished`` on the provider's end signal.
        """
        ...


class WireFormat(Protocol):
    """One provider's wire format: build the request, fold payloads, read error bodies.

    A wire format is shared by every stream of a model, on any thread: it keeps no
    per-stream state (that is its :class:`Fold`'s).
    """

    #: Name used in errors and logs ("openai", "groq", "anthropic"...).
    provider: str
    #: "sse" or "ndjson".
    framing: str
    #: Content types a successful streaming response may carry.
    stream_content_types: tuple[str, ...]

    def build(self, req: CompletionRequest, *, stream: bool) -> HttpRequest:
        """The HTTP request for ``req``."""
        ...

    def start(self, state: StreamState) -> Fold:
        """A fresh fold for one stream, folding into ``state``."""
        ...

    def error(self, status: int, headers: Mapping[str, str], body: str) -> ProviderError:
        """The error for a non-success HTTP response, or for a 200 whose JSON body is an error.

        :func:`~.errors.error_from_http` is the usual answer; it classifies a 200 like an
        error inside a stream.
        """
        ...

    def parse_response(self, body: str) -> CompletionResponse:
        """The response of a non-streaming request (``build(req, stream=False)``)."""
        ...
