"""``blazen.Agent``: the tool loop on top of ``Streaming.complete``. It never sees wire JSON.

A run streams a completion, runs the tools the model asked for, sends their results back and
repeats, until the model answers without calling a tool, an ``exit`` tool ends the run, or
the model has had ``max_iterations`` turns.

Threads: every model turn streams through :meth:`Streaming.complete` on the thread that
called :meth:`Agent.run`, and every callback runs on that thread too. Tools run on a small
pool of worker threads (``tool_concurrency`` at a time) so that the caller can stop waiting
for them the moment the run is cancelled or times out. :meth:`Agent.run_async` keeps the
same contract on an event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import inspect
import queue
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional, Union

from .._cancel import CancelToken
from .._llm import Llm
from .._stream import (
    INTERRUPT_RETRIES,
    ChatModel,
    Streaming,
    call_once,
    cancel_safe,
    leaving,
    new_gate,
)
from .._telemetry import PROVIDER_NAMES, current_context, operation_span
from .._types import ChatMessage, CompletionResponse, ServerTool, StreamChunk, ToolCall
from ..errors import BlazenError, CancelledError, ToolError
from .calls import Job, execute, execute_async, prepare
from .results import AgentResult, ToolResult
from .run import AgentRun, RunFailed, with_sink
from .tools import Tool

__all__ = ["Agent"]

Input = Union[str, ChatMessage, Sequence[ChatMessage]]


def _messages(value: Input) -> list[ChatMessage]:
    if isinstance(value, str):
        return [Llm.user(value)]
    if isinstance(value, ChatMessage):
        return [value]
    if isinstance(value, Sequence) and all(isinstance(m, ChatMessage) for m in value):
        return [m for m in value if isinstance(m, ChatMessage)]
    msg = "input must be a string, a ChatMessage, or a list of ChatMessage values"
    raise TypeError(msg)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = f"{name} must be an int of at least 1, got {value!r}"
        raise ValueError(msg)
    return value


class Agent:
    """A model with tools, looped until it answers.

    ``tools`` are :class:`Tool` values or plain functions (wrapped with
    :meth:`Tool.from_function`), and provider-side tools (``Llm.server_tool("web_search")``),
    which the provider runs itself: their calls are never run here, their blocks go back
    with each turn. The agent holds no per-run state: one agent may run any number of
    times, from any number of threads.

    - Parallel tool calls in one turn run concurrently, up to ``tool_concurrency`` at a
      time; their results go back to the model in the order of the calls.
    - Arguments the model sends are checked against the tool's schema before it runs. A
      call to an unknown tool, arguments that are not JSON or do not fit the schema, and a
      tool that raises all become an error result the model sees and may correct. With
      ``stop_on_tool_error=True`` a tool that raises ends the run with
      :class:`~blazen.ToolError` instead.
    - ``max_iterations`` counts model turns. The tools the last allowed turn asked for still
      run (so an ``exit`` tool there still ends the run, and the history stays valid to
      resume); if the model would need another turn, the run ends with
      :class:`~blazen.MaxIterationsError`, an error rather than a result quietly cut short,
      whose ``result`` holds the conversation so far.
    - A turn the provider paused (Anthropic ``pause_turn``) past the stream's own
      ``max_continuations`` ends ``"paused"``: the run continues it with the next turn, as a
      stream continues one, counted in ``max_iterations``.
    - An ``exit`` tool ends the run when it succeeds: its return value is
      :attr:`AgentResult.output` and the model is not called again.
    - ``output=Weather`` (an attrs class, a dataclass or a ``TypedDict``) asks every turn
      for a typed final answer (see ``Llm.completion_request``): the answer that ends the
      run is then :attr:`AgentResult.output`, a validated ``Weather``; one that is not
      ends the run with :class:`~blazen.OutputValidationError`.
    - ``reasoning_effort``, ``reasoning_budget`` and ``reasoning_display`` go to every turn
      as ``Llm.completion_request`` takes them; each turn's thinking (signatures included)
      goes back with it.

    Example::

        @blazen.tool
        def get_weather(city: str) -> str:
            '''Current weather in a city.'''
            return f"18 C and sunny in {city}"

        def show(chunk):
            print(chunk.content_delta or "", end="", flush=True)

        agent = blazen.Agent(model, tools=[get_weather], system_prompt="Be brief.")
        result = agent.run("Weather in Paris?", on_chunk=show)
        print(result.iterations, result.usage.total_tokens, result.tool_results)
    """

    def __init__(
        self,
        model: ChatModel,
        tools: Sequence[Union[Tool, ServerTool, Callable[..., Any]]] = (),
        *,
        system_prompt: Optional[str] = None,
        max_iterations: int = 10,
        tool_concurrency: int = 4,
        stop_on_tool_error: bool = False,
        max_tokens: Optional[int] = None,
        temperature: Optional[float] = None,
        output: Optional[type] = None,
        reasoning_effort: Optional[str] = None,
        reasoning_budget: Union[int, str, None] = None,
        reasoning_display: Optional[str] = None,
    ) -> None:
        if not isinstance(model, ChatModel):
            msg = f"model must come from blazen.Providers, got {type(model).__name__}"
            raise TypeError(msg)
        if system_prompt is not None and not isinstance(system_prompt, str):
            msg = f"system_prompt must be a string or None, got {type(system_prompt).__name__}"
            raise TypeError(msg)
        if callable(tools) or isinstance(tools, (str, bytes)):
            msg = "tools must be a list of tools or functions, e.g. tools=[get_weather]"
            raise TypeError(msg)
        server = tuple(t for t in tools if isinstance(t, ServerTool))
        wrapped = tuple(
            t if isinstance(t, Tool) else Tool.from_function(t)
            for t in tools
            if not isinstance(t, ServerTool)
        )
        names = [t.name for t in wrapped]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            msg = f"tool names must be unique; repeated: {', '.join(duplicates)}"
            raise ValueError(msg)
        self.model = model
        self.tools = wrapped
        #: The provider-side tools offered beside :attr:`tools` (``Llm.server_tool``).
        self.server_tools = server
        self.system_prompt = system_prompt
        self.max_iterations = _positive_int("max_iterations", max_iterations)
        self.tool_concurrency = _positive_int("tool_concurrency", tool_concurrency)
        self.stop_on_tool_error = bool(stop_on_tool_error)
        self.max_tokens = max_tokens
        self.temperature = temperature
        #: Each turn's reasoning options, as ``Llm.completion_request`` takes them.
        self.reasoning = {
            "reasoning_effort": reasoning_effort,
            "reasoning_budget": reasoning_budget,
            "reasoning_display": reasoning_display,
        }
        # Build one request now so that a bad max_tokens, temperature or output type fails
        # here, not later.
        spec = Llm.completion_request(
            [Llm.user("")],
            max_tokens=max_tokens,
            temperature=temperature,
            system=system_prompt,
            tools=[*(t.definition for t in wrapped), *server],
            output=output,
            **self.reasoning,  # type: ignore[arg-type]
        ).output
        #: The typed final answer (see ``Llm.completion_request(output=...)``), or None.
        self.output = None if spec is None else spec.type

    def __repr__(self) -> str:
        return f"Agent(model={self.model!r}, tools={[t.name for t in self.tools]!r})"

    # -- the blocking call -------------------------------------------------------------

    def run(
        self,
        input: Input,
        *,
        on_chunk: Optional[Callable[[StreamChunk], Any]] = None,
        on_tool_call: Optional[Callable[[ToolCall], Any]] = None,
        on_tool_result: Optional[Callable[[ToolResult], Any]] = None,
        on_done: Optional[Callable[[AgentResult], Any]] = None,
        on_error: Optional[Callable[[BlazenError], Any]] = None,
        cancel: Optional[CancelToken] = None,
        timeout: Optional[float] = None,
        sink: Any = None,
    ) -> Optional[AgentResult]:
        """Run the loop on ``input`` (a string, a message, or a list of messages); block until done.

        ``on_chunk`` sees every chunk of every model turn, exactly as from
        :meth:`Streaming.complete` (its ``is_final`` marks the end of a turn, not of the run).
        ``on_tool_call(call)`` fires for each call before the tools of a turn start;
        ``on_tool_result(result)`` fires for each in call order as the results come in. Then
        exactly one of ``on_done(result)`` or ``on_error(err)`` fires for the whole run.

        ``cancel`` and ``timeout`` (seconds, the whole run) stop the current stream and any
        tools not yet started; a tool already running cannot be interrupted, but it can take a
        :class:`CancelToken` parameter and stop itself. ``sink`` (a :class:`blazen.Sink`)
        takes the kinds not given by keyword; its ``on_done(finish_reason, usage)`` gets the
        run's total usage. Returns the :class:`AgentResult`; on failure returns None if
        ``on_error`` was given, else raises the error.
        """
        on_chunk, on_done, on_error = with_sink(sink, on_chunk, on_done, on_error)
        run = AgentRun(
            self,
            _messages(input),
            on_chunk=on_chunk,
            on_tool_call=on_tool_call,
            on_tool_result=on_tool_result,
            on_done=on_done,
            on_error=on_error,
            cancel=cancel,
            timeout=timeout,
        )
        error: Optional[BlazenError] = None
        gate = new_gate()  # the terminal of an interrupted run: made at most once
        # An exception the caller is handling while it calls: not an interrupt of this run.
        outer = sys.exc_info()[1]
        try:
            with operation_span("invoke_agent", self._span_attributes()):
                result = self._drive(run)
        except RunFailed as failed:
            # The run's own errors (a tool's, a callback's, max_iterations) mask the
            # model's keys as its streams' errors do.
            error = self.model.scrub(failed.error)
        finally:
            # Ctrl-C, or a tool's SystemExit (or another BaseException): the run ends with
            # one terminal, then the exception goes on up, as the process asked. As in the
            # stream drivers: a finally whose first statement is a try (Python 3.10 runs a
            # pending signal handler at an except clause's entry), an idempotent step
            # retried when a second interrupt lands in it, the terminal through a one-shot
            # gate. An Exception other than the run's own propagates with no terminal.
            try:
                for _ in INTERRUPT_RETRIES:
                    try:
                        _end_interrupted(run, on_error, gate, outer, KeyboardInterrupt)
                        break
                    except BaseException:  # the next try starts the step over
                        continue
            except BaseException:  # landed on the loop's jump back: one try more
                try:  # noqa: SIM105
                    _end_interrupted(run, on_error, gate, outer, KeyboardInterrupt)
                except BaseException:
                    pass
            run.close(failed=error is not None)
        if error is not None:
            if on_error is None:
                raise error
            on_error(error)
            return None
        if on_done is not None:
            on_done(result)
        return result

    def _span_attributes(self) -> dict[str, Any]:
        return {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": PROVIDER_NAMES.get(self.model.provider, self.model.provider),
            "gen_ai.request.model": self.model.model,
        }

    def _drive(self, run: AgentRun) -> AgentResult:
        while True:
            run.before_turn()
            calls = run.absorb(self._stream(run))
            if not calls:
                if run.paused():
                    continue  # the paused turn is in the conversation: the next one goes on
                return run.result()
            done = run.absorb_results(self._run_tools(run, calls))
            if done is not None:
                return done

    def _stream(self, run: AgentRun) -> CompletionResponse:
        run.stream_error = None
        resp = Streaming.complete(
            self.model,
            run.request(),
            on_chunk=run.on_chunk,
            on_error=run.capture,
            cancel=run.cancel,
            timeout=run.stream_timeout(),
        )
        if resp is None:
            assert run.stream_error is not None
            raise RunFailed(run.translate(run.stream_error))
        return resp

    def _run_tools(self, run: AgentRun, calls: list[ToolCall]) -> list[ToolResult]:
        jobs = prepare(calls, run.by_name, run.tool_token, self.model.redact)
        for call in calls:
            run.callback("on_tool_call", run.on_tool_call, call)
        wake: queue.SimpleQueue[None] = queue.SimpleQueue()
        run.wakers.append(functools.partial(wake.put, None))
        pending = [j for j in jobs if isinstance(j, Job)]
        # Even a single call runs on a pool thread: the caller must stay free to stop
        # waiting the moment the run is cancelled or its time is up.
        pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, min(self.tool_concurrency, len(pending))),
            thread_name_prefix="blazen-tool",
        )
        futures: dict[int, concurrent.futures.Future[ToolResult]] = {}
        finished = False
        parent = current_context()  # the agent run's span, parent of the tools' spans
        try:
            for i, job in enumerate(jobs):
                if isinstance(job, Job):
                    futures[i] = pool.submit(execute, job, run.tool_token, parent)
                    futures[i].add_done_callback(lambda _: wake.put(None))
            results: list[ToolResult] = []
            for i, job in enumerate(jobs):
                if isinstance(job, ToolResult):
                    result = job
                else:
                    future = futures[i]
                    while not future.done():
                        run.check()
                        left = run.remaining()
                        # Woken by this tool, another tool, or a cancel; then look again.
                        with contextlib.suppress(queue.Empty):
                            wake.get(timeout=left) if left is not None else wake.get()
                    result = future.result()
                results.append(result)
                run.callback("on_tool_result", run.on_tool_result, result)
            finished = True
            return results
        finally:
            run.wakers.clear()
            if not finished:
                # Tools not yet started never start; running ones are told to stop and
                # finish on their own threads.
                run.tool_token.cancel("the agent run ended")
            pool.shutdown(wait=finished, cancel_futures=True)

    # -- asyncio -----------------------------------------------------------------------

    @cancel_safe
    async def run_async(
        self,
        input: Input,
        *,
        on_chunk: Optional[Callable[[StreamChunk], Any]] = None,
        on_tool_call: Optional[Callable[[ToolCall], Any]] = None,
        on_tool_result: Optional[Callable[[ToolResult], Any]] = None,
        on_done: Optional[Callable[[AgentResult], Any]] = None,
        on_error: Optional[Callable[[BlazenError], Any]] = None,
        cancel: Optional[CancelToken] = None,
        timeout: Optional[float] = None,
        sink: Any = None,
    ) -> Optional[AgentResult]:
        """:meth:`run` for asyncio: callbacks run on the event loop and may be coroutines.

        Coroutine-function tools are awaited on the loop; plain ones run on worker threads.
        Cancelling the task cancels the current stream and the pending tools, delivers
        ``on_error(CancelledError)`` and re-raises :class:`asyncio.CancelledError`.
        """
        on_chunk, on_done, on_error = with_sink(sink, on_chunk, on_done, on_error)
        run = AgentRun(
            self,
            _messages(input),
            on_chunk=on_chunk,
            on_tool_call=on_tool_call,
            on_tool_result=on_tool_result,
            on_done=on_done,
            on_error=on_error,
            cancel=cancel,
            timeout=timeout,
        )
        error: Optional[BlazenError] = None
        gate = new_gate()  # the terminal of an interrupted run: made at most once
        outer = sys.exc_info()[1]
        try:
            with operation_span("invoke_agent", self._span_attributes()):
                result = await self._drive_async(run)
        except RunFailed as failed:
            # The run's own errors (a tool's, a callback's, max_iterations) mask the
            # model's keys as its streams' errors do.
            error = self.model.scrub(failed.error)
        finally:
            # The task's cancellation (or a BaseException): one terminal, then it goes on
            # up; see run(). A second cancel while the terminal is awaited is absorbed.
            try:
                for _ in INTERRUPT_RETRIES:
                    try:
                        for value in _end_interrupted(
                            run, on_error, gate, outer, asyncio.CancelledError
                        ):
                            if inspect.isawaitable(value):
                                await value
                        break
                    except BaseException:  # the next try starts the step over
                        continue
            except BaseException:  # landed on the loop's jump back: the gate decides
                pass
            run.close(failed=error is not None)
        if error is not None:
            if on_error is None:
                raise error
            await _call(on_error, error)
            return None
        if on_done is not None:
            await _call(on_done, result)
        return result

    async def _drive_async(self, run: AgentRun) -> AgentResult:
        while True:
            run.before_turn()
            calls = run.absorb(await self._stream_async(run))
            if not calls:
                if run.paused():
                    continue  # the paused turn is in the conversation: the next one goes on
                return run.result()
            done = run.absorb_results(await self._run_tools_async(run, calls))
            if done is not None:
                return done

    async def _stream_async(self, run: AgentRun) -> CompletionResponse:
        run.stream_error = None
        resp = await Streaming.complete_async(
            self.model,
            run.request(),
            on_chunk=run.on_chunk,
            on_error=run.capture,
            cancel=run.cancel,
            timeout=run.stream_timeout(),
        )
        if resp is None:
            assert run.stream_error is not None
            raise RunFailed(run.translate(run.stream_error))
        return resp

    async def _run_tools_async(self, run: AgentRun, calls: list[ToolCall]) -> list[ToolResult]:
        loop = asyncio.get_running_loop()
        jobs = prepare(calls, run.by_name, run.tool_token, self.model.redact)
        for call in calls:
            await run.callback_async("on_tool_call", run.on_tool_call, call)
        gate = asyncio.Semaphore(self.tool_concurrency)
        woken = asyncio.Event()
        run.wakers.append(lambda: loop.call_soon_threadsafe(woken.set))
        pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.tool_concurrency, thread_name_prefix="blazen-tool"
        )

        async def one(job: Job) -> ToolResult:
            async with gate:
                if job.tool.is_async:
                    return await execute_async(job, run.tool_token)
                return await loop.run_in_executor(
                    pool, execute, job, run.tool_token, current_context()
                )

        tasks = [loop.create_task(one(j)) if isinstance(j, Job) else j for j in jobs]
        watcher = loop.create_task(woken.wait())
        results: list[ToolResult] = []
        try:
            for item in tasks:
                if isinstance(item, ToolResult):
                    result = item
                else:
                    while not item.done():
                        run.check()
                        await asyncio.wait(
                            {item, watcher},
                            timeout=run.remaining(),
                            return_when=asyncio.FIRST_COMPLETED,
                        )
                    result = item.result()
                results.append(result)
                await run.callback_async("on_tool_result", run.on_tool_result, result)
            return results
        finally:
            run.wakers.clear()
            if len(results) < len(tasks):
                run.tool_token.cancel("the agent run ended")
            watcher.cancel()
            for item in tasks:
                if isinstance(item, asyncio.Task):
                    item.cancel()
            pool.shutdown(wait=False, cancel_futures=True)


async def _call(fn: Callable[..., Any], *args: Any) -> None:
    value = fn(*args)
    if inspect.isawaitable(value):
        await value


def _end_interrupted(
    run: AgentRun,
    on_error: Optional[Callable[[BlazenError], Any]],
    gate: Iterator[bool],
    outer: Optional[BaseException],
    cancelled: type[BaseException],
) -> list[Any]:
    """If a BaseException is leaving the run: close it failed and make its one terminal.

    ``cancelled`` is the interrupt that ends it as cancelled (Ctrl-C for :meth:`Agent.run`,
    the task's cancellation for :meth:`Agent.run_async`); any other BaseException ends it
    with :func:`_stopped_by`. Idempotent: the terminal goes through ``gate``. Returns
    ``[what on_error returned]`` when it was called now, else ``[]``.
    """
    exc = leaving(outer)
    if exc is None or isinstance(exc, Exception):
        return []
    run.close(failed=True)
    if on_error is None:
        return []
    if isinstance(exc, cancelled):
        if cancelled is KeyboardInterrupt:
            message = "the agent run was interrupted (Ctrl-C)"
        else:
            message = "the agent run's task was cancelled"
        err: BlazenError = run.stream_error or CancelledError(message)
    else:
        err = _stopped_by(exc)
    return call_once(gate, on_error, (err,))


def _stopped_by(exc: BaseException) -> ToolError:
    """The error of a run that a tool's ``SystemExit`` (or other BaseException) ended."""
    err = ToolError(
        f"a tool raised {type(exc).__name__}; the agent run was stopped and it propagates"
    )
    err.__cause__ = exc
    return err
