"""Immutable values: messages, requests, tool calls, chunks, usage and responses.

Every value here is an attrs frozen class with slots (finished by :func:`immutable`;
no ``__weakref__`` slot, as nothing refers to a value weakly), so one
request may be reused for any number of calls from any number of threads. Containers are
stored as tuples; JSON-like dicts (tool parameters, response formats) are deep-copied on
construction and never mutated afterwards.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable

from .calls import (
    ArgumentFragments,
    ToolCall,
    ToolCalls,
    ToolDefinition,
    tool_call_snapshot,
    tool_calls_view,
)
from .completion import (
    CompletionRequest,
    CompletionResponse,
    StreamChunk,
    TokenUsage,
    name_response,
    priced_usage,
    server_tool_chunk,
    stream_chunk,
)
from .frozen import FrozenInstanceError, by_value, immutable
from .messages import (
    AUDIO_FORMATS,
    Attachment,
    AudioPart,
    ChatMessage,
    ContentPart,
    DocumentPart,
    ImagePart,
    ReasoningPart,
    TextPart,
    VideoPart,
)
from .provider import Citation, ProviderItem, ServerTool, ServerToolEvent, StopDetails

if TYPE_CHECKING:
    from .embedding import EmbeddingResponse, Vector
    from .stream_events import ChunkEvent, DoneEvent, ErrorEvent, StreamEvent

__all__ = [
    "AUDIO_FORMATS",
    "ArgumentFragments",
    "Attachment",
    "AudioPart",
    "ChatMessage",
    "ChunkEvent",
    "Citation",
    "CompletionRequest",
    "CompletionResponse",
    "ContentPart",
    "DocumentPart",
    "DoneEvent",
    "EmbeddingResponse",
    "ErrorEvent",
    "FrozenInstanceError",
    "ImagePart",
    "ProviderItem",
    "ReasoningPart",
    "ServerTool",
    "ServerToolEvent",
    "StopDetails",
    "StreamChunk",
    "StreamEvent",
    "TextPart",
    "TokenUsage",
    "ToolCall",
    "ToolCalls",
    "ToolDefinition",
    "Vector",
    "VideoPart",
    "by_value",
    "immutable",
    "name_response",
    "priced_usage",
    "server_tool_chunk",
    "stream_chunk",
    "tool_call_snapshot",
    "tool_calls_view",
]

# Values only some users need load on first use: embeddings, and the pull loop's events.
_LAZY = {
    "EmbeddingResponse": ".embedding",
    "Vector": ".embedding",
    "ChunkEvent": ".stream_events",
    "DoneEvent": ".stream_events",
    "ErrorEvent": ".stream_events",
    "StreamEvent": ".stream_events",
}

#: Applied to each lazily loaded value before it is handed out. The ``blazen`` package sets
#: it, so that a value reports ``blazen`` as its module whichever way it was first loaded.
def _as_is(value: Any) -> Any:
    return value


on_load: Callable[[Any], Any] = _as_is


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = on_load(getattr(importlib.import_module(module, __name__), name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

