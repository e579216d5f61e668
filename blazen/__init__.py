"""blazen: stream LLM chat completions through callbacks, from synchronous Python.

See ``Streaming.complete`` for the contract, ``Providers`` for the models and ``Llm`` for
the request builders.
"""

from __future__ import annotations

import logging

from ._cancel import CancelToken, cancel_scope
from ._lifecycle import init, shutdown
from ._llm import Llm
from ._model import ChatModel, ModelOptions
from ._providers import Providers
from ._streaming import Streaming
from ._types import (
    ChatMessage,
    CompletionRequest,
    CompletionResponse,
    ImagePart,
    StreamChunk,
    TextPart,
    TokenUsage,
    ToolCall,
    ToolDefinition,
)
from ._version import __version__
from .errors import (
    AuthError,
    BlazenError,
    CallbackError,
    CancelledError,
    ConnectionError,
    ContentPolicyError,
    ContextLengthError,
    InternalError,
    InvalidRequestError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    TimeoutError,
    UnsupportedError,
    ValidationError,
)

__all__ = [
    "AuthError",
    "BlazenError",
    "CallbackError",
    "CancelToken",
    "CancelledError",
    "ChatMessage",
    "ChatModel",
    "CompletionRequest",
    "CompletionResponse",
    "ConnectionError",
    "ContentPolicyError",
    "ContextLengthError",
    "ImagePart",
    "InternalError",
    "InvalidRequestError",
    "Llm",
    "ModelOptions",
    "OverloadedError",
    "ProviderError",
    "Providers",
    "RateLimitError",
    "StreamChunk",
    "Streaming",
    "TextPart",
    "TimeoutError",
    "TokenUsage",
    "ToolCall",
    "ToolDefinition",
    "UnsupportedError",
    "ValidationError",
    "__version__",
    "cancel_scope",
    "init",
    "shutdown",
]

# A library never configures logging for its users; it only makes sure it is silent.
logging.getLogger("blazen").addHandler(logging.NullHandler())
