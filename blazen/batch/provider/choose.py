"""Which provider batch API serves a model: chosen by its wire format, as streams are."""

from __future__ import annotations

from ..._stream import ChatModel
from ...errors import UnsupportedError
from ...providers.anthropic import AnthropicWire
from ...providers.gemini import GeminiWire
from ...providers.openai import OpenAIWire
from ...providers.responses import ResponsesWire
from .anthropic import AnthropicBatches
from .api import BatchAPI
from .gemini import GeminiBatches
from .openai import OpenAIBatches

__all__ = ["batch_api_for"]


def batch_api_for(model: ChatModel) -> BatchAPI:
    """The batch API of ``model``'s wire, or ``UnsupportedError`` for a wire without one."""
    wire = model.wire
    # Azure's batch API wants global-batch deployments and its own file paths: not spoken.
    # A Responses-API model batches on OpenAI's Batch API too (endpoint /v1/responses).
    if isinstance(wire, (OpenAIWire, ResponsesWire)) and model.provider != "azure":
        return OpenAIBatches(model, wire)
    if isinstance(wire, AnthropicWire):
        return AnthropicBatches(model, wire)
    if isinstance(wire, GeminiWire):
        return GeminiBatches(model, wire)
    msg = (
        f"{model.provider} has no batch API blazen speaks: via='provider' works with OpenAI "
        "(and OpenAI-compatible servers with OpenAI's Batch API), Anthropic and Gemini; use "
        "via='stream' (the default) here"
    )
    raise UnsupportedError(msg, provider=model.provider)
