"""The state of one agent run: the conversation, usage, tool results, limits, and how it ends.

:class:`blazen.Agent` drives a run (blocking or on asyncio); this module knows neither
threads nor the event loop, nor the agent class: it reads what it needs through
:class:`RunSettings`. It turns each model response into history, each turn's tool results
into history or the run's end, and each way of ending into a result or a :class:`RunFailed`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import traceback
from collections.abc import Mapping
from typing import Any, Callable, Optional, Protocol

import attrs

from .._cancel import CancelToken, tokens_for
from .._llm import Llm
from .._stream import ChatModel, check_controls, is_sink, sink_callbacks
from .._types import (
    ChatMessage,
    CompletionRequest,
    CompletionResponse,
    ServerTool,
    TokenUsage,
    ToolCall,
)
from ..errors import (
    BlazenError,
    CallbackError,
    CancelledError,
    MaxIterationsError,
    TimeoutError,
    ToolError,
)
from .results import AgentResult, ToolResult
from .tools import Tool

__all__ = ["AgentRun", "RunFailed", "RunSettings"]

logger = logging.getLogger("blazen")


class RunSettings(Protocol):
    """What a run reads of its agent: the model, the tools and the limits.

    :class:`blazen.Agent` is one. A run reads these when it needs them, never copies them,
    so it sees the agent exactly as the agent is.
    """

    @property
    def model(self) -> ChatModel:
        """The model every turn streams from (its own total timeout caps each turn's)."""

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools offered to the model, with unique names."""

    @property
    def server_tools(self) -> tuple[ServerTool, ...]:
        """The provider-side tools offered beside :attr:`tools`."""

    @property
    def system_prompt(self) -> Optional[str]:
        """Sent before the conversation on every turn; not part of the result's messages."""

    @property
    def max_iterations(self) -> int:
        """The most model turns a run may take."""

    @property
    def max_tokens(self) -> Optional[int]:
        """The token limit of each turn."""

    @property
    def temperature(self) -> Optional[float]:
        """The sampling temperature of each turn."""

    @property
    def stop_on_tool_error(self) -> bool:
        """Whether a tool that raises ends the run instead of becoming an error result."""

    @property
    def output(self) -> Optional[type]:
        """The class of the typed final answer, or None for text."""

    @property
    def reasoning(self) -> Mapping[str, Any]:
        """Each turn's reasoning options (``reasoning_effort``, ``reasoning_budget``...)."""


class RunFailed(Exception):
    """Raised inside a run to end it with ``error``; the driver delivers that, or raises it."""

    def __init__(self, error: BlazenError) -> None:
        super().__init__(error.message)
        self.error = error


Callback = Optional[Callable[..., Any]]


def with_sink(
    sink: Any, on_chunk: Callback, on_done: Callback, on_error: Callback
) -> tuple[Callback, Callback, Callback]:
    """A run's callbacks with ``sink``'s methods filling the kinds not given by keyword.

    The sink's ``on_done(finish_reason, usage)`` gets the run's last finish reason and the
    usage summed over every turn, so a sink written for streams serves an agent unchanged.
    """
    if sink is None:
        return on_chunk, on_done, on_error
    if not is_sink(sink):
        msg = f"sink must have on_chunk, on_done or on_error, got {type(sink).__name__}"
        raise TypeError(msg)
    methods = sink_callbacks(sink)
    done = methods["on_done"]
    if on_done is None and done is not None:
        on_done = functools.partial(_sink_done, done)
    return on_chunk or methods["on_chunk"], on_done, on_error or methods["on_error"]


def _sink_done(done: Callable[..., Any], result: AgentResult) -> Any:
    return done(result.finish_reason, result.usage)


class AgentRun:
    """One run of an agent. Created per call; never shared between runs."""

    def __init__(
        self,
        settings: RunSettings,
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
        self.settings = settings
        #: The tools by name: the model calls them by name, and an exit tool ends the run.
        self.by_name = {t.name: t for t in settings.tools}
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
        self.tokens = tokens_for(cancel)
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
        own = self.settings.model.options.timeout
        return max(min(left, own) if own is not None else left, 0.001)

    def check(self) -> None:
        """End the run if it was cancelled or its time is up."""
        if any(t.cancelled for t in self.tokens):
            reason = self._reason()
            raise RunFailed(
                CancelledError("the agent run was cancelled" + (f": {reason}" if reason else ""))
            )
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise RunFailed(self._timed_out())

    def _timed_out(self) -> TimeoutError:
        return TimeoutError(
            f"the agent run did not finish within its timeout of {self.timeout:g} s "
            f"({self.iterations} model turn(s) done)",
            limit="total",
            seconds=self.timeout or 0.0,
        )

    def before_turn(self) -> None:
        """Check the limits before asking the model again."""
        if self.iterations >= self.settings.max_iterations:
            n = self.settings.max_iterations
            raise RunFailed(
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
        settings = self.settings
        return Llm.completion_request(
            self.messages,
            tools=[*(t.definition for t in settings.tools), *settings.server_tools],
            system=settings.system_prompt,
            max_tokens=settings.max_tokens,
            temperature=settings.temperature,
            output=settings.output,
            **settings.reasoning,
        )

    def paused(self) -> bool:
        """Whether the last turn was paused by the provider (to be continued, not answered)."""
        return self.last is not None and self.last.finish_reason == "paused"

    def absorb(self, resp: CompletionResponse) -> list[ToolCall]:
        """Record a model turn; return the tool calls it asked for (none: it answered)."""
        self.iterations += 1
        self.last = resp
        if resp.usage is not None:
            self.usage = self.usage + resp.usage
        calls: list[ToolCall] = []
        renamed: dict[str, str] = {}
        seen = {c.id for m in self.messages for c in m.tool_calls}
        for i, call in enumerate(resp.tool_calls):
            if not call.id or call.id in seen:
                # Results are matched to calls by id across the whole conversation (Gemini
                # and Ollama map ids back to names), but some servers number their calls
                # afresh in every response: every call of a run gets its own id.
                new_id = f"call_{self.iterations}_{i}"
                while new_id in seen:
                    new_id += "_"
                renamed[call.id] = new_id
                call = ToolCall(new_id, call.name, call.arguments_json, caller=call.caller)
            seen.add(call.id)
            calls.append(call)
        # The model's own turn, reasoning and signatures included, so that the next request
        # carries them back (thinking models refuse a tool-use turn without them).
        turn = resp.message
        parts = turn.reasoning_parts
        if renamed:
            parts = tuple(
                attrs.evolve(p, tool_call_id=renamed[p.tool_call_id])
                if p.tool_call_id in renamed
                else p
                for p in parts
            )
        self.messages.append(attrs.evolve(turn, tool_calls=tuple(calls), reasoning_parts=parts))
        self.calls.extend(calls)
        return calls

    def absorb_results(self, results: list[ToolResult]) -> Optional[AgentResult]:
        """Record a turn's tool results; return the run's result if an exit tool ended it."""
        for r in results:
            self.messages.append(Llm.tool_result(r.call.id, r.content, is_error=r.is_error))
            self.results.append(r)
        images = [(r, i) for r in results for i in r.images]
        if images:
            # After every result of the turn: OpenAI-format wires want the tool messages
            # right after the call, and take images only in a user message.
            names = ", ".join(dict.fromkeys(f"{r.call.name} ({r.call.id})" for r, _ in images))
            self.messages.append(
                Llm.user(f"The images returned by {names}:", images=[i for _, i in images])
            )
        if self.settings.stop_on_tool_error:
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
                raise RunFailed(err)
        for r in results:
            tool = self.by_name.get(r.call.name)
            if tool is not None and tool.exit and not r.is_error:
                return self.result(exit=r)
        return None

    def result(self, exit: Optional[ToolResult] = None) -> AgentResult:
        """The run as it stands."""
        last = self.last
        text = last.content if last is not None else ""
        answer: Any = text
        if last is not None and last.output is not None:
            answer = last.output  # the validated typed answer (Agent(output=...))
        return AgentResult(
            text=text,
            output=exit.output if exit is not None else answer,
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

    def _callback_failed(self, name: str, exc: Exception) -> RunFailed:
        # The traceback as text the model has masked: a callback may quote what it was sent.
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        logger.error(
            "%s raised %s; stopping the agent run\n%s",
            name,
            type(exc).__name__,
            self.settings.model.redact(trace),
        )
        err = CallbackError(f"{name} raised {type(exc).__name__}: {exc}; the agent run was stopped")
        err.__cause__ = exc
        return RunFailed(err)
