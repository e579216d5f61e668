"""Immutable values: messages, requests, tool calls, chunks, usage and responses.

Every value here is an attrs frozen class with slots (finished by :func:`immutable`;
no ``__weakref__`` slot, as nothing refers to a value weakly), so one
request may be reused for any number of calls from any number of threads. Containers are
stored as tuples; JSON-like dicts (tool parameters, response formats) are deep-copied on
construction and never mutated afterwards.
"""

from __future__ import annotations

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
from .embedding import EmbeddingResponse, Vector
from .frozen import FrozenInstanceError, immutable
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
    "immutable",
    "name_response",
    "priced_usage",
    "server_tool_chunk",
    "stream_chunk",
    "tool_call_snapshot",
    "tool_calls_view",
]
