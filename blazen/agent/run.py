"""The state of one agent run: the conversation, usage, tool results, and how it ends.

:class:`blazen.Agent` drives a run (blocking or on asyncio); this module knows neither
threads nor the event loop. It turns each model response into history, each tool call into
a job or an error result the model can act on, and each way of ending into a result or an
error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from .._cancel import CancelToken, ambient_token
from .._llm import Llm
from .._stream import check_controls
from .._types import ChatMessage, CompletionRequest, CompletionResponse, TokenUsage, ToolCall
from ..errors import (
    BlazenError,
    CallbackError,
    CancelledError,
    MaxIterationsError,
    TimeoutError,
    ToolError,
    ValidationError,
)
from .results import AgentResult, ToolResult
from .tools import Tool
from .tools.hints import is_attrs_class

if TYPE_CHECKING:
    from .loop import Agent

__all__ = ["Job"]

logger = logging.getLogger("blazen")


class Job:
    """A validated tool call, ready to run."""

    __slots__ = ("call", "kwargs", "tool")

    def __init__(self, call: ToolCall, tool: Tool, kwargs: dict[str, Any]) -> None:
        self.call = call
        self.tool = tool
        self.kwargs = kwargs


class _Failed(Exception):
    """Ends a run with ``error`` (delivered to on_error, or raised)."""

    def __init__(self, error: BlazenError) -> None:
        super().__init__(error.message)
        self.error = error


def _jsonable(value: Any) -> Any:
    if is_attrs_class(type(value)):
        import attrs  # only installed, and only needed, when the tool returns an attrs value

        return attrs.asdict(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    msg = f"{type(value).__name__} is not JSON-serialisable"
    raise TypeError(msg)


def _content(value: Any) -> str:
    """A tool's return value as the text the model reads."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=_jsonable, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


class _Run:
    """One run of an agent. Created per call; never shared between runs."""

    def __init__(
        self,
        agent: Agent,
        messages: list[ChatMessage],
        *,
        on_chunk: Optional[Callable[..., Any]] = None,
        on_tool_call: Optional[Callable[..., Any]] = None,
        on_tool_result: Optional[Callable[..., Any]] = None,
        on_done: Optional[Callable[..., Any]] = None,
        on_error: Optional[Callable[..., Any]] = None,
        cancel: Optional[CancelToken],
        timeout: Optional[float],
    ) -> None:
        callbacks = {
            "on_chunk": on_chunk,
            "on_tool_call": on_tool_call,
            "on_tool_result": on_tool_result,
            "on_done": on_done,
            "on_error": on_error,
        }
        check_controls(callbacks, cancel, timeout)
        self.agent = agent
        self.by_name = {t.name: t for t in agent.tools}
        self.messages = list(messages)
        self.on_chunk = on_chunk
        self.on_tool_call = on_tool_call
        self.on_tool_result = on_tool_result
        self.cancel = cancel
        self.timeout = None if timeout is None else float(timeout)
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.iterations = 0
        self.usage = TokenUsage()
        self.calls: list[ToolCall] = []
        self.results: list[ToolResult] = []
        self.last: Optional[CompletionResponse] = None
        #: The error the current stream ended with, as delivered to our on_error.
        self.stream_error: Optional[BlazenError] = None
        #: Called (from any thread) when the run is cancelled, to wake a waiting driver.
        self.wakers: list[Callable[[], Any]] = []
        #: Handed to tools that take a CancelToken; cancelled when the run is.
        self.tool_token = CancelToken()
        # A workflow's cancel_scope reaches the tools as well as the streams.
        self.tokens = [t for t in {id(t): t for t in (cancel, ambient_token()) if t}.values()]
        self._unsubscribe = [t.subscribe(self._cancelled) for t in self.tokens]
        self._closed = False

    # -- limits ------------------------------------------------------------------------

    def _cancelled(self) -> None:
        # Runs on whichever thread called cancel().
        self.tool_token.cancel(self._reason())
        for wake in list(self.wakers):
            wake()

    def _reason(self) -> str:
        return next((t.reason for t in self.tokens if t.cancelled and t.reason), "")

    def remaining(self) -> Optional[float]:
        """Seconds left of the run's timeout, or None without one."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def stream_timeout(self) -> Optional[float]:
        """The total limit for the next stream: the run's time left, or the model's own."""
        left = self.remaining()
        if left is None:
            return None
        own = self.agent.model.options.timeout
        return max(min(left, own) if own is not None else left, 0.001)

    def check(self) -> None:
        """End the run if it was cancelled or its time is up."""
        if any(t.cancelled for t in self.tokens):
            reason = self._reason()
            raise _Failed(
                CancelledError("the agent run was cancelled" + (f": {reason}" if reason else ""))
            )
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise _Failed(self._timed_out())

    def _timed_out(self) -> TimeoutError:
        return TimeoutError(
            f"the agent run did not finish within its timeout of {self.timeout:g} s "
            f"({self.iterations} model turn(s) done)",
            limit="total",
            seconds=self.timeout or 0.0,
        )

    def before_turn(self) -> None:
        """Check the limits before asking the model again."""
        if self.iterations >= self.agent.max_iterations:
            n = self.agent.max_iterations
            raise _Failed(
                MaxIterationsError(
                    f"the model was still calling tools after max_iterations={n} turn(s); the "
                    "run was stopped (err.result holds the conversation: raise max_iterations, "
                    "or continue with agent.run(err.result.messages))",
                    result=self.result(),
                )
            )
        self.check()

    def capture(self, err: BlazenError) -> None:
        """The on_error of every stream: keep the error for the driver."""
        self.stream_error = err

    def translate(self, err: BlazenError) -> BlazenError:
        """A stream's error as the run's: the run's own timeout is named as such."""
        if (
            isinstance(err, TimeoutError)
            and err.limit == "total"
            and self.deadline is not None
            and self.deadline - time.monotonic() < 0.01
        ):
            run_err = self._timed_out()
            run_err.partial, run_err.partial_reasoning = err.partial, err.partial_reasoning
            return run_err
        return err

    def close(self, *, failed: bool) -> None:
        """Stop listening for cancels; a failed run also cancels tools still running."""
        if self._closed:
            return
        self._closed = True
        for unsub in self._unsubscribe:
            unsub()
        if failed:
            self.tool_token.cancel("the agent run ended")

    # -- the conversation --------------------------------------------------------------

    def request(self) -> CompletionRequest:
        """The request for the next model turn."""
        agent = self.agent
        return Llm.completion_request(
            self.messages,
            tools=[t.definition for t in agent.tools],
            system=agent.system_prompt,
            max_tokens=agent.max_tokens,
            temperature=agent.temperature,
        )

    def absorb(self, resp: CompletionResponse) -> list[ToolCall]:
        """Record a model turn; return the tool calls it asked for (none: it answered)."""
        self.iterations += 1
        self.last = resp
        if resp.usage is not None:
            self.usage = TokenUsage(
                **{
                    name: getattr(self.usage, name) + getattr(resp.usage, name)
                    for name in TokenUsage._fields
                }
            )
        calls: list[ToolCall] = []
        seen = {c.id for m in self.messages for c in m.tool_calls}
        for i, call in enumerate(resp.tool_calls):
            if not call.id or call.id in seen:
                # Results are matched to calls by id across the whole conversation (Gemini
                # and Ollama map ids back to names), but some servers number their calls
                # afresh in every response: every call of a run gets its own id.
                new_id = f"call_{self.iterations}_{i}"
                while new_id in seen:
                    new_id += "_"
                call = ToolCall(new_id, call.name, call.arguments_json)
            seen.add(call.id)
            calls.append(call)
        if calls:
            self.messages.append(Llm.assistant(resp.content or None, calls))
        else:
            self.messages.append(Llm.assistant(resp.content))
        self.calls.extend(calls)
        return calls

    def prepare(self, calls: list[ToolCall]) -> list[Union[Job, ToolResult]]:
        """A job per valid call; an error result, for the model, per invalid one."""
        out: list[Union[Job, ToolResult]] = []
        for call in calls:
            tool = self.by_name.get(call.name)
            if tool is None:
                names = ", ".join(self.by_name) or "none"
                problem = f"there is no tool named {call.name!r} (tools: {names})"
                out.append(self._invalid(call, problem))
                continue
            try:
                kwargs = tool.validate(call.arguments())
            except ValidationError as exc:
                out.append(self._invalid(call, exc.message, exc))
                continue
            except ValueError as exc:
                problem = f"the arguments of {call.name!r} are not a JSON object: {exc}"
                out.append(self._invalid(call, problem, exc))
                continue
            if tool.cancel_parameter is not None:
                kwargs[tool.cancel_parameter] = self.tool_token
            out.append(Job(call, tool, kwargs))
        return out

    def _invalid(
        self, call: ToolCall, problem: str, error: Optional[BaseException] = None
    ) -> ToolResult:
        return ToolResult(
            call=call,
            content=f"Error: {problem}. Correct the call and try again.",
            error=error or ValidationError(problem),
            kind="invalid",
        )

    def execute(self, job: Job) -> ToolResult:
        """Run a tool (on a worker thread); what it raises becomes an error result."""
        if self.tool_token.cancelled:
            return self._not_run(job)
        try:
            if job.tool.is_async:
                value = asyncio.run(job.tool.fn(**job.kwargs))
            else:
                value = job.tool.fn(**job.kwargs)
        except Exception as exc:
            return self._raised(job, exc)
        return ToolResult(call=job.call, content=_content(value), output=value)

    async def execute_async(self, job: Job) -> ToolResult:
        """Await a coroutine-function tool; what it raises becomes an error result."""
        if self.tool_token.cancelled:
            return self._not_run(job)
        try:
            value = await job.tool.fn(**job.kwargs)
        except Exception as exc:
            return self._raised(job, exc)
        return ToolResult(call=job.call, content=_content(value), output=value)

    def _not_run(self, job: Job) -> ToolResult:
        # A pool thread freed by a cancelled tool must not start the next one: the run is over.
        err = CancelledError("the agent run ended before this tool started")
        return ToolResult(call=job.call, content=f"Error: {err.message}", error=err, kind="raised")

    def _raised(self, job: Job, exc: Exception) -> ToolResult:
        logger.warning(
            "tool %r raised %s: %s", job.tool.name, type(exc).__name__, exc, exc_info=exc
        )
        return ToolResult(
            call=job.call,
            content=f"Error: the tool {job.tool.name!r} failed: {type(exc).__name__}: {exc}",
            error=exc,
            kind="raised",
        )

    def absorb_results(self, results: list[ToolResult]) -> Optional[AgentResult]:
        """Record a turn's tool results; return the run's result if an exit tool ended it."""
        for r in results:
            self.messages.append(Llm.tool_result(r.call.id, r.content))
            self.results.append(r)
        if self.agent.stop_on_tool_error:
            failed = next((r for r in results if r.kind == "raised"), None)
            if failed is not None:
                name = failed.call.name
                err = ToolError(
                    f"tool {name!r} raised {type(failed.error).__name__}: {failed.error}; the "
                    "run was stopped (stop_on_tool_error=True)",
                    tool_name=name,
                    result=self.result(),
                )
                err.__cause__ = failed.error
                raise _Failed(err)
        for r in results:
            tool = self.by_name.get(r.call.name)
            if tool is not None and tool.exit and not r.is_error:
                return self.result(exit=r)
        return None

    def result(self, exit: Optional[ToolResult] = None) -> AgentResult:
        """The run as it stands."""
        text = self.last.content if self.last is not None else ""
        return AgentResult(
            text=text,
            output=exit.output if exit is not None else text,
            messages=tuple(self.messages),
            iterations=self.iterations,
            usage=self.usage,
            tool_calls=tuple(self.calls),
            tool_results=tuple(self.results),
            finish_reason=self.last.finish_reason if self.last is not None else "",
            exit_tool=exit.call.name if exit is not None else None,
        )

    # -- callbacks ---------------------------------------------------------------------

    def callback(self, name: str, fn: Optional[Callable[..., Any]], *args: Any) -> None:
        """Call a user callback; one that raises ends the run with CallbackError."""
        if fn is None:
            return
        try:
            fn(*args)
        except Exception as exc:
            raise self._callback_failed(name, exc) from exc

    async def callback_async(self, name: str, fn: Optional[Callable[..., Any]], *args: Any) -> None:
        """:meth:`callback` for asyncio: a coroutine result is awaited."""
        if fn is None:
            return
        try:
            value = fn(*args)
            if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
                await value
        except Exception as exc:
            raise self._callback_failed(name, exc) from exc

    def _callback_failed(self, name: str, exc: Exception) -> _Failed:
        logger.error("%s raised %s; stopping the agent run", name, type(exc).__name__, exc_info=exc)
        err = CallbackError(f"{name} raised {type(exc).__name__}: {exc}; the agent run was stopped")
        err.__cause__ = exc
        return _Failed(err)
