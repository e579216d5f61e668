"""What an agent run hands back: one :class:`ToolResult` per tool call, one :class:`AgentResult`.

Frozen attrs values, built by the run and read by the caller; they know nothing of threads,
streams or how the run got there, so a caller may keep, compare, pickle or copy them freely.
"""

from __future__ import annotations

from typing import Any, Optional

import attrs

from .._types import ChatMessage, ImagePart, TokenUsage, ToolCall, immutable

__all__ = ["AgentResult", "ToolContent", "ToolResult"]


def _images(value: Any) -> tuple[ImagePart, ...]:
    images = tuple(value)
    for image in images:
        if not isinstance(image, ImagePart):
            msg = f"ToolContent images must be Llm.image(...) values, got {type(image).__name__}"
            raise TypeError(msg)
    return images


@immutable
@attrs.frozen(kw_only=True)
class ToolContent:
    """What a tool returns when it has images for the model beside its text.

    MCP tools return one; a Python tool may too. The model reads ``text`` as the tool's
    result, and the ``images`` (``Llm.image(...)`` values) come right after the turn's tool
    results, in a user message: tool messages carry text only on most wires.
    """

    text: str = attrs.field(validator=attrs.validators.instance_of(str))
    images: tuple[ImagePart, ...] = attrs.field(default=(), converter=_images)


# The output may be anything and the error an exception, neither with a useful equality:
# results compare (and hash) by identity, as they always have.
@immutable
@attrs.frozen(kw_only=True, eq=False)
class ToolResult:
    """What one tool call produced.

    ``kind`` is ``"ok"``, ``"invalid"`` (the model's call was wrong: an unknown tool, or
    arguments that are not JSON or do not fit the schema; the tool did not run) or
    ``"raised"`` (the tool raised ``error``; for an MCP tool, also a server that answered
    ``isError``, crashed or timed out). ``content`` is the text the model was sent and
    ``images`` the images sent after it (from a :class:`ToolContent`).
    """

    call: ToolCall
    content: str
    output: Any = None
    error: Optional[BaseException] = None
    kind: str = "ok"
    images: tuple[ImagePart, ...] = ()

    @property
    def is_error(self) -> bool:
        """Whether the model was sent an error instead of a value."""
        return self.kind != "ok"


@immutable
@attrs.frozen(kw_only=True)
class AgentResult:
    """How an agent run ended: the answer, the whole conversation, and what it cost.

    ``text`` is the last model turn's text; ``output`` is the return value of the ``exit``
    tool that ended the run, or ``text`` when the model answered. ``messages`` is the whole
    conversation without the system prompt, ready to continue with
    ``agent.run([*result.messages, Llm.user("...")])``. ``usage`` sums every turn.
    """

    text: str
    output: Any
    messages: tuple[ChatMessage, ...]
    iterations: int
    usage: TokenUsage
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    finish_reason: str = ""
    exit_tool: Optional[str] = None
