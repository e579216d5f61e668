"""The model's tool calls: checked into jobs, and jobs run into results. No threads of its own.

Every way a call can go wrong ends here as a :class:`ToolResult` the model reads and may act
on (an unknown tool, arguments that do not fit, a tool that raises), never as an exception
that ends the run: the loop decides what ends a run, and on which thread a job runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import logging
import traceback
from collections.abc import Mapping
from typing import Any, Callable, Optional, Union

import attrs

from .._cancel import CancelToken
from .._telemetry import attach, detach, mark_error, operation_span
from .._types import ToolCall
from ..errors import CancelledError, ValidationError, safe_str
from .results import ToolContent, ToolResult
from .tools import Tool

__all__ = ["Job", "execute", "execute_async", "prepare"]

logger = logging.getLogger("blazen")


@attrs.frozen(eq=False)
class Job:
    """A validated tool call, ready to run: handed to a worker thread or awaited."""

    call: ToolCall
    tool: Tool
    #: The function's keyword arguments, converted to the types it declared.
    kwargs: dict[str, Any]
    #: Masks the model's keys in what is logged of the tool (its arguments came from the
    #: server, and an error may quote them).
    redact: Callable[[str], str] = str


def prepare(
    calls: list[ToolCall],
    tools: Mapping[str, Tool],
    token: CancelToken,
    redact: Callable[[str], str] = str,
) -> list[Union[Job, ToolResult]]:
    """A job per valid call; an error result, for the model, per invalid one.

    ``tools`` maps names to tools; ``token`` goes to each tool that takes a CancelToken;
    ``redact`` masks secrets in what is logged.
    """
    out: list[Union[Job, ToolResult]] = []
    for call in calls:
        tool = tools.get(call.name)
        if tool is None:
            names = ", ".join(tools) or "none"
            problem = f"there is no tool named {call.name!r} (tools: {names})"
            out.append(_invalid(call, problem))
            continue
        try:
            kwargs = tool.validate(call.arguments())
        except ValidationError as exc:
            out.append(_invalid(call, exc.message, exc))
            continue
        except ValueError as exc:
            problem = f"the arguments of {call.name!r} are not a JSON object: {exc}"
            out.append(_invalid(call, problem, exc))
            continue
        if tool.cancel_parameter is not None:
            kwargs[tool.cancel_parameter] = token
        out.append(Job(call, tool, kwargs, redact))
    return out


def _invalid(call: ToolCall, problem: str, error: Optional[BaseException] = None) -> ToolResult:
    return ToolResult(
        call=call,
        content=f"Error: {problem}. Correct the call and try again.",
        error=error or ValidationError(problem),
        kind="invalid",
    )


def _span_attributes(job: Job) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": job.tool.name,
        "gen_ai.tool.call.id": job.call.id,
        "gen_ai.tool.type": "function",
        # An MCP tool adds its server, transport and method here.
        **job.tool.span_attributes,
    }


def _returned(job: Job, value: Any) -> ToolResult:
    if isinstance(value, ToolContent):
        text = value.text
        if value.images:
            n = len(value.images)
            note = f"({n} image{'s' if n > 1 else ''} follow{'' if n > 1 else 's'} this result)"
            text = f"{text}\n{note}" if text else note
        return ToolResult(call=job.call, content=text, output=value, images=value.images)
    return ToolResult(call=job.call, content=content(value), output=value)


def execute(job: Job, token: CancelToken, parent: Any = None) -> ToolResult:
    """Run a tool (on a worker thread); what it raises becomes an error result.

    A cancelled ``token`` means the run is over: the tool does not start. ``parent`` is the
    OpenTelemetry context of the agent run (from the caller's thread), if any: the tool's
    ``execute_tool`` span is its child.
    """
    if token.cancelled:
        return _not_run(job)
    attached = attach(parent)
    try:
        with operation_span(f"execute_tool {job.tool.name}", _span_attributes(job)) as span:
            try:
                if job.tool.is_async:
                    value = asyncio.run(job.tool.fn(**job.kwargs))
                else:
                    value = job.tool.fn(**job.kwargs)
            except Exception as exc:
                mark_error(span, exc)
                return _raised(job, exc)
            return _returned(job, value)
    finally:
        detach(attached)


async def execute_async(job: Job, token: CancelToken) -> ToolResult:
    """Await a coroutine-function tool; what it raises becomes an error result."""
    if token.cancelled:
        return _not_run(job)
    with operation_span(f"execute_tool {job.tool.name}", _span_attributes(job)) as span:
        try:
            value = await job.tool.fn(**job.kwargs)
        except Exception as exc:
            mark_error(span, exc)
            return _raised(job, exc)
        return _returned(job, value)


def _not_run(job: Job) -> ToolResult:
    # A pool thread freed by a cancelled tool must not start the next one: the run is over.
    err = CancelledError("the agent run ended before this tool started")
    return ToolResult(call=job.call, content=f"Error: {err.message}", error=err, kind="raised")


def _raised(job: Job, exc: Exception) -> ToolResult:
    # The traceback as text the model has masked: the tool may quote its arguments.
    logger.warning(
        "tool %r raised %s\n%s",
        job.tool.name,
        type(exc).__name__,
        job.redact("".join(traceback.format_exception(type(exc), exc, exc.__traceback__))),
    )
    return ToolResult(
        call=job.call,
        content=f"Error: the tool {job.tool.name!r} failed: {type(exc).__name__}: {safe_str(exc)}",
        error=exc,
        kind="raised",
    )


def content(value: Any) -> str:
    """A tool's return value as the text the model reads: JSON where it can be, else str()."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=_jsonable, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _jsonable(value: Any) -> Any:
    if attrs.has(type(value)):
        return attrs.asdict(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    msg = f"{type(value).__name__} is not JSON-serialisable"
    raise TypeError(msg)
