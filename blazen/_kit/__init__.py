"""The provider kit: what a wire format is made of, and all a provider imports to write one.

It sits between the transport (:mod:`blazen._http`) and its two users, the stream engine
(:mod:`blazen._stream`) and the built-in wire formats (:mod:`blazen.providers`); a
third-party provider imports the same names. Nothing here does I/O.

- :class:`WireFormat`: build the request, start a :class:`Fold` per stream, read an error
  body, read a whole (non-streamed) response; :class:`HttpRequest` is what ``build`` returns.
- :class:`Fold`: one stream's reading of its payloads, with the wire's between-payload
  state as its own typed attributes.
- :class:`StreamState`: what every answer has (text, reasoning, tool calls, finish reason,
  usage), and the chunks a fold returns (:meth:`StreamState.emit`);
  :func:`normalise_finish_reason` maps raw finish reasons.
- :func:`parse_json` decodes a payload; :func:`malformed` is the error for one of the wrong
  shape, :data:`SHAPE_ERRORS` / :func:`shape_error` what the engine makes of an exception a
  fold raised on one.
- :class:`EmbeddingWire`: an embedding endpoint (build the request for a batch of texts,
  read its :class:`EmbeddingBatch` of vectors).
- :func:`error_from_body`, :func:`error_from_http`, :func:`error_event` (with
  :func:`error_payload`, :func:`event_error_payload`, :func:`first_str` for wires that read
  more of their errors themselves) classify a provider's errors like its HTTP statuses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._http import HttpRequest
from .errors import (
    error_event,
    error_from_body,
    error_from_http,
    error_payload,
    event_error_payload,
    first_str,
    malformed,
)
from .payload import SHAPE_ERRORS, parse_json, shape_error
from .state import StreamState, normalise_finish_reason
from .wire import Fold, WireFormat

if TYPE_CHECKING:
    from .embedding import EmbeddingBatch, EmbeddingWire

__all__ = [
    "SHAPE_ERRORS",
    "EmbeddingBatch",
    "EmbeddingWire",
    "Fold",
    "HttpRequest",
    "StreamState",
    "WireFormat",
    "error_event",
    "error_from_body",
    "error_from_http",
    "error_payload",
    "event_error_payload",
    "first_str",
    "malformed",
    "normalise_finish_reason",
    "parse_json",
    "shape_error",
]


def __getattr__(name: str) -> Any:
    # The embedding half loads with the first embedding provider: `import blazen` does not
    # pay for it.
    if name not in ("EmbeddingBatch", "EmbeddingWire"):
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(".embedding", __name__), name)
    globals()[name] = value
    return value
