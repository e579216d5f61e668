"""The stream lifecycle: a worker thread per stream, typed hand-offs, exactly one terminal.

``ChatModel`` binds a :class:`WireFormat` to a connection pool; :class:`Streaming` runs one
request (the algorithm in :mod:`.exchange`) on a worker thread (:mod:`.worker`) and
delivers its events through one I/O-free protocol (:mod:`.delivery`) whose operations
:mod:`.driving` carries out once for the blocking, asyncio, background and pull drivers.
Wire formats plug in from :mod:`blazen.providers` by implementing
:class:`blazen._kit.WireFormat` (the provider kit, one layer down); nothing here knows a
provider by name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .chat import ChatModel, Recipe, revive
from .checks import check_callable, check_controls, check_request
from .coro import cancel_safe
from .delivery import (
    INTERRUPT_RETRIES,
    ChunkCallback,
    DoneCallback,
    ErrorCallback,
    call_once,
    leaving,
    new_gate,
)
from .lifecycle import init, shutdown
from .options import ModelOptions
from .sink import AnySink, ChunkSink, DoneSink, ErrorSink, Sink, is_sink, sink_callbacks
from .streaming import Streaming

if TYPE_CHECKING:
    from .fallback import DEFAULT_SWITCH_ON, Fallback, SwitchOn

__all__ = [
    "DEFAULT_SWITCH_ON",
    "INTERRUPT_RETRIES",
    "AnySink",
    "ChatModel",
    "ChunkCallback",
    "ChunkSink",
    "DoneCallback",
    "DoneSink",
    "ErrorCallback",
    "ErrorSink",
    "Fallback",
    "ModelOptions",
    "Recipe",
    "Sink",
    "Streaming",
    "SwitchOn",
    "call_once",
    "cancel_safe",
    "check_callable",
    "check_controls",
    "check_request",
    "init",
    "is_sink",
    "leaving",
    "new_gate",
    "revive",
    "shutdown",
    "sink_callbacks",
]


def __getattr__(name: str) -> Any:
    # Fallback loads with Providers.fallback (blazen.providers is itself loaded on first
    # use): `import blazen` does not pay for it.
    if name not in ("DEFAULT_SWITCH_ON", "Fallback", "SwitchOn"):
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(".fallback", __name__), name)
    globals()[name] = value
    return value
