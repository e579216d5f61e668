"""blazen: stream LLM chat completions through callbacks, from synchronous Python.

See ``Streaming.complete`` for the contract, ``Providers`` for the models and ``Llm`` for
the request builders.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
import types
from typing import TYPE_CHECKING, Any

from . import _types
from ._cancel import CancelToken, cancel_scope
from ._llm import Llm
from ._stream import ChatModel, ModelOptions, Sink, Streaming, init, shutdown
from ._types import (
    AudioPart,
    ChatMessage,
    Citation,
    CompletionRequest,
    CompletionResponse,
    DocumentPart,
    ImagePart,
    ProviderItem,
    ReasoningPart,
    ServerTool,
    ServerToolEvent,
    StopDetails,
    StreamChunk,
    TextPart,
    TokenUsage,
    ToolCall,
    ToolCalls,
    ToolDefinition,
    VideoPart,
)
from ._version import __version__
from .errors import (
    AgentError,
    AuthError,
    BlazenError,
    CallbackError,
    CancelledError,
    ConnectionError,
    ContentPolicyError,
    ContextLengthError,
    InternalError,
    InvalidRequestError,
    MaxIterationsError,
    OutputValidationError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    RefusalError,
    TimeoutError,
    ToolError,
    UnsupportedError,
    ValidationError,
    WorkflowError,
)

if TYPE_CHECKING:
    from . import batch
    from ._telemetry import capture_otel_content
    from ._types import ChunkEvent, DoneEvent, EmbeddingResponse, ErrorEvent
    from .agent import Agent, AgentResult, Tool, ToolResult, tool
    from .providers import Providers
    from .workflow import (
        Context,
        Event,
        StepHandler,
        StepOutput,
        Workflow,
        WorkflowResult,
        workflow,
    )

__all__ = [
    "Agent",
    "AgentError",
    "AgentResult",
    "AudioPart",
    "AuthError",
    "BlazenError",
    "CallbackError",
    "CancelToken",
    "CancelledError",
    "ChatMessage",
    "ChatModel",
    "ChunkEvent",
    "Citation",
    "CompletionRequest",
    "CompletionResponse",
    "ConnectionError",
    "ContentPolicyError",
    "Context",
    "ContextLengthError",
    "DocumentPart",
    "DoneEvent",
    "EmbeddingResponse",
    "ErrorEvent",
    "Event",
    "ImagePart",
    "InternalError",
    "InvalidRequestError",
    "Llm",
    "MaxIterationsError",
    "OutputValidationError",
    "ModelOptions",
    "OverloadedError",
    "ProviderItem",
    "ProviderError",
    "Providers",
    "RateLimitError",
    "ReasoningPart",
    "RefusalError",
    "ServerTool",
    "ServerToolEvent",
    "Sink",
    "StepHandler",
    "StepOutput",
    "StopDetails",
    "StreamChunk",
    "Streaming",
    "TextPart",
    "TimeoutError",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolCalls",
    "ToolDefinition",
    "ToolError",
    "ToolResult",
    "UnsupportedError",
    "ValidationError",
    "VideoPart",
    "Workflow",
    "WorkflowError",
    "WorkflowResult",
    "__version__",
    "batch",
    "cancel_scope",
    "capture_otel_content",
    "init",
    "shutdown",
    "tool",
    "workflow",
]



def _exported(value: Any) -> Any:
    """Make an exported class or function report ``blazen`` as its module, as httpx's do.

    Reprs, pickles, tracebacks and docs then name ``blazen.StreamChunk``, the name users
    import, not the private module that defines it. A class's own string annotations
    (``from __future__ import annotations``) are resolved first, in the module that wrote
    them: ``typing.get_type_hints`` looks them up in the module a class reports.
    """
    if isinstance(value, type):
        # Its own annotations only (inspect.get_annotations is Python 3.10+).
        own = value.__dict__.get("__annotations__")  # noqa: RUF063
        if own and value.__module__ in sys.modules:
            # The defining module's names, then blazen's: a name imported there only for
            # type checking (errors.py's TokenUsage) resolves through its export here.
            namespace = {**globals(), **vars(sys.modules[value.__module__])}
            value.__annotations__ = {k: _resolved(v, namespace) for k, v in own.items()}
    if isinstance(value, type) or callable(value):
        with contextlib.suppress(AttributeError, TypeError):  # a builtin: left as is
            value.__module__ = __name__
    return value


#: Each annotation string compiled once: the exported classes repeat a few dozen of them.
_HINTS: dict[str, types.CodeType] = {}


def _resolved(hint: Any, namespace: dict[str, Any]) -> Any:
    if not isinstance(hint, str):
        return hint
    try:
        code = _HINTS.get(hint)
        if code is None:
            code = _HINTS[hint] = compile(hint, "<annotation>", "eval")
        return eval(code, namespace)
    except Exception:
        return hint  # a name only imported for type checking: as unresolvable as before


for _name in __all__:
    if _name not in ("__version__", "batch") and _name in globals():
        _exported(globals()[_name])
del _name


def _exported_class(value: Any) -> Any:
    # blazen's own classes only: a shared typing alias (StreamEvent) or a stdlib type
    # (Vector is array.array) is left as it is.
    own = isinstance(value, type) and value.__module__.startswith(__name__ + ".")
    return _exported(value) if own else value


# The values blazen._types loads on first use report blazen too, however they are reached.
_types.on_load = _exported_class

# A library never configures logging for its users; it only makes sure it is silent.
logging.getLogger("blazen").addHandler(logging.NullHandler())

# The providers (wire formats, factories, registry), batch runs, the agent and its tool
# machinery (asyncio, inspect, schema building), the workflow builder and engine and the
# OpenTelemetry bridge load on first use: `import blazen` costs what the streaming core
# needs, and a module that only names blazen's types pays for no more.
_LAZY = {
    "Agent": ".agent",
    "AgentResult": ".agent",
    "ToolResult": ".agent",
    "Tool": ".agent",
    "tool": ".agent",
    "Context": ".workflow",
    "Event": ".workflow",
    "StepHandler": ".workflow",
    "StepOutput": ".workflow",
    "Workflow": ".workflow",
    "WorkflowResult": ".workflow",
    "workflow": ".workflow",
    "Providers": ".providers",
    "capture_otel_content": "._telemetry",
    "ChunkEvent": "._types",
    "DoneEvent": "._types",
    "ErrorEvent": "._types",
    "EmbeddingResponse": "._types",
    "batch": ".batch",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module 'blazen' has no attribute {name!r}"
        raise AttributeError(msg)
    imported = importlib.import_module(module, __name__)
    value = imported if name == "batch" else _exported(getattr(imported, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Facade(types.ModuleType):
    """The ``blazen`` module, which hears when a lazily loaded subpackage arrives."""

    def __setattr__(self, name: str, value: Any) -> None:
        # The import system binds each subpackage it loads on its parent, by whatever route
        # it was imported (`blazen.Workflow`, `from blazen.workflow import Context`, another
        # subpackage). Its exported names report `blazen` from then on, as if imported
        # eagerly; and `blazen.workflow` stays the decorator, never the subpackage.
        if isinstance(value, types.ModuleType) and value.__name__.startswith(__name__ + "."):
            child = "." + value.__name__[len(__name__) + 1 :]
            loaded = vars(value)
            for exported, module in _LAZY.items():
                if module == child and exported != "batch" and exported in loaded:
                    globals()[exported] = _exported(loaded[exported])
            if _LAZY.get(name) == child and name != "batch":
                return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Facade
