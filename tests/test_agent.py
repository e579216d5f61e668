"""The agent loop against the local test server: tools run, results go back, one ending."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from typing import Any, Optional

import pytest

import blazen
from blazen import Agent, CancelToken, Llm, tool
from blazen.testing import Reply, Stall, StreamServer, openai_sse, openai_tool_sse

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def tools_turn(*calls: tuple[str, str, Any], usage: Optional[dict[str, int]] = USAGE) -> Reply:
    return Reply.sse(openai_tool_sse(calls, usage=usage))


def text_turn(*parts: str, usage: Optional[dict[str, int]] = USAGE) -> Reply:
    return Reply.sse(openai_sse(parts, usage=usage))


def tool_messages(server: StreamServer, i: int) -> list[dict[str, Any]]:
    """The tool-result messages of the i-th request the server received."""
    return [m for m in server.requests[i].json()["messages"] if m["role"] == "tool"]


@tool
def get_weather(city: str) -> str:
    """Current weather in a city.

    Args:
        city: The city's name.
    """
    return f"18 C and sunny in {city}"


@tool
def get_time(tz: str) -> str:
    """The local time in a time zone."""
    return f"14:05 in {tz}"


@pytest.fixture
def agent(model: blazen.ChatModel) -> Agent:
    return Agent(model, tools=[get_weather, get_time], system_prompt="Be brief.")


def test_run_returns_answer_history_iterations_usage_and_calls(server, agent):
    """A tool turn then an answer: the result holds everything the run did."""
    server.add(
        tools_turn(("call_1", "get_weather", {"city": "Paris"})),
        text_turn("It is ", "sunny."),
    )
    result = agent.run("Weather in Paris?")
    assert result.text == result.output == "It is sunny."
    assert result.iterations == 2 and result.finish_reason == "stop"
    assert result.usage.total_tokens == 30 and result.usage.prompt_tokens == 20
    assert [c.name for c in result.tool_calls] == ["get_weather"]
    assert [(r.kind, r.output) for r in result.tool_results] == [("ok", "18 C and sunny in Paris")]
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert result.messages[1].tool_calls == result.tool_calls
    assert result.exit_tool is None
    first = server.requests[0].json()
    assert first["messages"][0] == {"role": "system", "content": "Be brief."}
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather", "get_time"]
    assert first["tools"][0]["function"]["parameters"] == get_weather.parameters


def test_callbacks_run_on_the_calling_thread_in_order_with_one_done(server, agent):
    """Chunks, tool calls, tool results, more chunks, then exactly one done."""
    server.add(
        tools_turn(("a", "get_weather", {"city": "Oslo"}), ("b", "get_time", {"tz": "CET"})),
        text_turn("Done."),
    )
    seen: list[tuple[str, Any, str]] = []

    def record(kind: str):
        return lambda *args: seen.append((kind, args, threading.current_thread().name))

    result = agent.run(
        "Weather and time?",
        on_chunk=record("chunk"),
        on_tool_call=record("tool_call"),
        on_tool_result=record("tool_result"),
        on_done=record("done"),
        on_error=record("error"),
    )
    kinds = [k for k, _, _ in seen]
    first_tool = kinds.index("tool_call")
    assert set(kinds[:first_tool]) == {"chunk"}
    assert kinds[first_tool : first_tool + 4] == [
        "tool_call",
        "tool_call",
        "tool_result",
        "tool_result",
    ]
    assert set(kinds[first_tool + 4 : -1]) == {"chunk"} and kinds[-1] == "done"
    assert {t for _, _, t in seen} == {threading.current_thread().name}
    assert seen[-1][1] == (result,)
    # Chunks carry the cumulative snapshot, exactly as Streaming.complete delivers them.
    chunks = [args[0] for k, args, _ in seen if k == "chunk"]
    snapshots = [c.tool_calls for c in chunks[:first_tool] if c.tool_calls]
    assert snapshots[-1] == result.tool_calls
    assert [args[0].call.id for k, args, _ in seen if k == "tool_result"] == ["a", "b"]


def test_parallel_calls_run_concurrently_and_results_keep_call_order(server, model):
    """The first call can only finish once the second has (so they ran at once); it is
    still reported and sent back first."""
    fast_done = threading.Event()
    finished: list[str] = []

    @tool
    def slow(x: int) -> int:
        assert fast_done.wait(5), "the second call never ran beside the first"
        finished.append("slow")
        return x

    @tool
    def fast(x: int) -> int:
        finished.append("fast")
        fast_done.set()
        return x * 10

    server.add(tools_turn(("1", "slow", {"x": 1}), ("2", "fast", {"x": 2})), text_turn("ok"))
    result = Agent(model, tools=[slow, fast]).run("go")
    assert finished == ["fast", "slow"]
    assert [r.output for r in result.tool_results] == [1, 20]
    assert tool_messages(server, 1) == [
        {"role": "tool", "tool_call_id": "1", "content": "1"},
        {"role": "tool", "tool_call_id": "2", "content": "20"},
    ]


def test_tool_concurrency_limits_how_many_tools_run_at_once(server, model):
    """With tool_concurrency=2, two of five calls run together, never three."""
    cond = threading.Condition()
    running = peak = 0

    @tool
    def work(n: int) -> int:
        nonlocal running, peak
        with cond:
            running += 1
            peak = max(peak, running)
            cond.notify_all()
            # Hold the first call until a second one runs beside it.
            cond.wait_for(lambda: peak >= 2, timeout=5)
            running -= 1
        return n

    server.add(tools_turn(*[(f"c{i}", "work", {"n": i}) for i in range(5)]), text_turn("ok"))
    result = Agent(model, tools=[work], tool_concurrency=2).run("go")
    assert peak == 2
    assert [r.output for r in result.tool_results] == [0, 1, 2, 3, 4]


def test_a_raising_tool_becomes_an_error_result_the_model_sees(server, model, caplog):
    """The exception goes back to the model as the tool's result; the run goes on."""

    @tool
    def lookup(city: str) -> str:
        raise LookupError(f"no such city: {city}")

    server.add(tools_turn(("c1", "lookup", {"city": "Atlantis"})), text_turn("Sorry."))
    result = Agent(model, tools=[lookup]).run("go")
    assert result.text == "Sorry."
    (res,) = result.tool_results
    assert res.kind == "raised" and res.is_error and isinstance(res.error, LookupError)
    assert tool_messages(server, 1)[0]["content"] == (
        "Error: the tool 'lookup' failed: LookupError: no such city: Atlantis"
    )
    assert "tool 'lookup' raised LookupError" in caplog.text


def test_stop_on_tool_error_ends_the_run_with_tool_error(server, model):
    """With stop_on_tool_error=True the run ends at the raising tool, the model not asked again."""

    @tool
    def boom() -> None:
        raise RuntimeError("kaput")

    server.add(tools_turn(("c1", "boom", {})), text_turn("never"))
    errors: list[blazen.BlazenError] = []
    done: list[Any] = []
    agent = Agent(model, tools=[boom], stop_on_tool_error=True)
    assert agent.run("go", on_error=errors.append, on_done=done.append) is None
    (err,) = errors
    assert isinstance(err, blazen.ToolError) and isinstance(err, blazen.AgentError)
    assert err.tool_name == "boom" and isinstance(err.__cause__, RuntimeError)
    assert "kaput" in err.message and not done
    assert err.result.messages[-1].role == "tool"
    assert len(server.requests) == 1


@dataclasses.dataclass
class Booking:
    room: str
    nights: int


def test_invalid_arguments_go_back_to_the_model_and_the_tool_does_not_run(server, model):
    """Arguments that break the schema are an error result; the model's second try runs."""
    calls: list[Booking] = []

    @tool
    def book(booking: Booking) -> str:
        calls.append(booking)
        return "booked"

    server.add(
        tools_turn(("c1", "book", {"booking": {"room": "12", "nights": "two"}})),
        tools_turn(("c2", "book", {"booking": {"room": "12", "nights": 2}})),
        text_turn("Booked."),
    )
    result = Agent(model, tools=[book]).run("book it")
    assert calls == [Booking("12", 2)]
    assert [r.kind for r in result.tool_results] == ["invalid", "ok"]
    assert tool_messages(server, 1)[0]["content"] == (
        "Error: invalid arguments for tool 'book': booking.nights: expected integer, got 'two'. "
        "Correct the call and try again."
    )
    assert isinstance(result.tool_results[0].error, blazen.ValidationError)


def test_unknown_tools_and_broken_json_are_error_results(server, agent):
    """A model calling a tool that does not exist, or sending broken JSON, is told so."""
    server.add(
        tools_turn(("c1", "get_wether", {"city": "Rome"}), ("c2", "get_time", '{"tz": "CET"')),
        text_turn("Hmm."),
    )
    result = agent.run("go")
    assert [r.kind for r in result.tool_results] == ["invalid", "invalid"]
    first, second = (m["content"] for m in tool_messages(server, 1))
    assert "no tool named 'get_wether' (tools: get_weather, get_time)" in first
    assert "the arguments of 'get_time' are not a JSON object" in second


def test_max_iterations_ends_with_an_error_that_holds_the_conversation(server, agent):
    """A model that never stops calling tools ends in MaxIterationsError after max turns,
    the last turn's tools having run so the history can be resumed."""
    server.add(*[tools_turn((f"c{i}", "get_time", {"tz": "UTC"})) for i in range(2)])
    agent = Agent(agent.model, tools=agent.tools, max_iterations=2)
    with pytest.raises(blazen.MaxIterationsError, match="max_iterations=2") as info:
        agent.run("loop")
    result = info.value.result
    assert result.iterations == 2 and len(result.tool_results) == 2
    assert result.messages[-1].role == "tool"
    assert len(server.requests) == 2
    # The history is valid to continue from.
    server.add(text_turn("Finally."))
    assert agent.run(result.messages).text == "Finally."
    assert len(server.requests[2].json()["messages"]) == 5


def test_an_exit_tool_ends_the_run_with_its_value(server, model):
    """A successful exit tool's return value is the output; the model is not asked again."""

    @tool(exit=True)
    def final_answer(answer: str, confidence: float) -> dict[str, Any]:
        """Give the final answer."""
        return {"answer": answer, "confidence": confidence}

    server.add(
        tools_turn(
            ("c1", "get_time", {"tz": "UTC"}),
            ("c2", "final_answer", {"answer": "42", "confidence": 1}),
        ),
    )
    result = Agent(model, tools=[get_time, final_answer]).run("go")
    assert result.output == {"answer": "42", "confidence": 1.0}
    assert result.exit_tool == "final_answer" and result.text == ""
    assert len(result.tool_results) == 2 and len(server.requests) == 1


def test_an_exit_tool_that_fails_does_not_end_the_run(server, model):
    """An exit tool given bad arguments is an error result; the run continues."""

    @tool(exit=True)
    def submit(n: int) -> int:
        return n

    server.add(
        tools_turn(("c1", "submit", {"n": "x"})),
        tools_turn(("c2", "submit", {"n": 7})),
    )
    result = Agent(model, tools=[submit]).run("go")
    assert result.output == 7 and result.iterations == 2


def test_a_stream_error_is_the_runs_error_raised_without_on_error(server, agent):
    """A provider error in any turn ends the run; with no on_error it is raised."""
    server.add(
        tools_turn(("c1", "get_time", {"tz": "UTC"})),
        Reply.json({"error": {"message": "bad key", "type": "invalid_api_key"}}, status=401),
    )
    with pytest.raises(blazen.AuthError, match="bad key"):
        agent.run("go")


def test_on_chunk_that_raises_ends_the_run_with_callback_error(server, agent):
    """A chunk callback that raises aborts the stream and the run: one CallbackError."""
    server.add(text_turn("a", "b"))
    errors: list[blazen.BlazenError] = []

    def bad(chunk: Any) -> None:
        raise ValueError("ui broke")

    assert agent.run("go", on_chunk=bad, on_error=errors.append) is None
    (err,) = errors
    assert isinstance(err, blazen.CallbackError) and isinstance(err.__cause__, ValueError)


def test_tool_callbacks_that_raise_end_the_run_with_callback_error(server, agent):
    """on_tool_call or on_tool_result raising stops the run with CallbackError."""
    for name in ("on_tool_call", "on_tool_result"):
        server.add(tools_turn(("c1", "get_time", {"tz": "UTC"})))
        errors: list[blazen.BlazenError] = []

        def bad(arg: Any) -> None:
            raise KeyError("oops")

        assert agent.run("go", on_error=errors.append, **{name: bad}) is None
        (err,) = errors
        assert isinstance(err, blazen.CallbackError) and err.message.startswith(name)
        assert isinstance(err.__cause__, KeyError)


def test_ctrl_c_while_waiting_delivers_cancelled_then_reraises(server, agent):
    """A KeyboardInterrupt while the run waits reports CancelledError, then propagates."""
    server.add(tools_turn(("c1", "get_time", {"tz": "UTC"})))
    errors: list[blazen.BlazenError] = []

    def interrupt(result: Any) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        agent.run("go", on_tool_result=interrupt, on_error=errors.append)
    assert [type(e) for e in errors] == [blazen.CancelledError]


def test_cancel_while_a_tool_runs_ends_the_run_and_tells_the_tool(server, model):
    """Cancelling stops waiting at once, the running tool sees its token cancelled, and
    calls not yet started never start."""
    started = threading.Event()
    saw_cancel = threading.Event()
    ran: list[int] = []

    @tool
    def slow(n: int, cancel: CancelToken) -> int:
        ran.append(n)
        started.set()
        stopped = threading.Event()
        cancel.subscribe(stopped.set)
        if stopped.wait(5):
            saw_cancel.set()
        return n

    server.add(tools_turn(("c1", "slow", {"n": 1}), ("c2", "slow", {"n": 2})))
    token = CancelToken()
    threading.Thread(target=lambda: started.wait(5) and token.cancel("user hit stop")).start()
    errors: list[blazen.BlazenError] = []
    begin = time.monotonic()
    Agent(model, tools=[slow], tool_concurrency=1).run("go", cancel=token, on_error=errors.append)
    assert time.monotonic() - begin < 3
    (err,) = errors
    assert isinstance(err, blazen.CancelledError) and "user hit stop" in err.message
    assert saw_cancel.wait(5)
    assert ran == [1]


def test_timeout_while_a_tool_runs_ends_the_run_with_the_runs_timeout(server, model):
    """The run's timeout covers tools too; the error names the run's limit."""
    release = threading.Event()

    @tool
    def stuck() -> None:
        release.wait(5)

    server.add(tools_turn(("c1", "stuck", {})))
    try:
        with pytest.raises(blazen.TimeoutError, match="agent run did not finish within") as info:
            Agent(model, tools=[stuck]).run("go", timeout=0.3)
    finally:
        release.set()
    assert info.value.limit == "total" and info.value.seconds == 0.3


def test_timeout_during_a_stream_is_the_runs_timeout_and_closes_the_connection(server, agent):
    """A stalled model turn ends at the run's deadline, and the socket is closed."""
    server.add(Reply.sse([openai_sse(["Hel"], done=False)[1], Stall()]))
    with pytest.raises(blazen.TimeoutError, match="agent run") as info:
        agent.run("go", timeout=1.0)
    assert info.value.partial == "Hel"
    assert server.wait_closed(5)


def test_cancel_during_a_stream_closes_the_connection(server, agent):
    """Cancelling mid-stream ends the run with CancelledError and hangs up."""
    token = CancelToken()
    server.add(Reply.sse([openai_sse(["Hel"], done=False)[1], Stall()]))
    with pytest.raises(blazen.CancelledError):
        agent.run("go", cancel=token, on_chunk=lambda c: token.cancel())
    assert server.wait_closed(5)


def test_a_workflow_cancel_scope_reaches_the_tools(server, model):
    """A token set by cancel_scope cancels a run started inside it, tools included."""
    token = CancelToken()

    @tool
    def wait_here(cancel: CancelToken) -> None:
        token.cancel("budget spent")
        stopped = threading.Event()
        cancel.subscribe(stopped.set)
        stopped.wait(5)

    server.add(tools_turn(("c1", "wait_here", {})))
    with blazen.cancel_scope(token), pytest.raises(blazen.CancelledError, match="budget spent"):
        Agent(model, tools=[wait_here]).run("go")


def test_history_continues_a_conversation_and_omits_the_system_prompt(server, agent):
    """result.messages plus a new question is a valid next input."""
    server.add(text_turn("Hi."), text_turn("Bye."))
    first = agent.run("Hello")
    second = agent.run([*first.messages, Llm.user("Goodbye")])
    assert second.text == "Bye."
    sent = server.requests[1].json()["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert all(m.role != "system" for m in second.messages)


def test_call_ids_repeated_across_turns_are_made_unique(server, agent):
    """Servers that number calls afresh in each response still get every result matched
    to the right call."""
    server.add(
        tools_turn(
            ("call_0", "get_weather", {"city": "Rome"}), ("call_1", "get_time", {"tz": "CET"})
        ),
        tools_turn(("call_0", "get_time", {"tz": "UTC"})),
        text_turn("ok"),
    )
    result = agent.run("go")
    ids = [c.id for c in result.tool_calls]
    assert ids == ["call_0", "call_1", "call_2_0"]
    sent = server.requests[2].json()["messages"]
    assert [c["id"] for m in sent if m.get("tool_calls") for c in m["tool_calls"]] == ids
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids


def test_tool_values_are_sent_as_json(server, model):
    """Non-string return values reach the model as JSON; dataclasses as objects."""

    @tool
    def quote() -> Booking:
        return Booking("7", 3)

    server.add(tools_turn(("c1", "quote", {})), text_turn("ok"))
    Agent(model, tools=[quote]).run("go")
    assert tool_messages(server, 1)[0]["content"] == '{"room": "7", "nights": 3}'


def test_plain_functions_are_accepted_and_bad_configuration_fails_early(model):
    """Functions become tools; duplicates and bad limits are errors at construction."""

    def ping() -> str:
        return "pong"

    agent = Agent(model, tools=[ping])
    assert [t.name for t in agent.tools] == ["ping"]
    with pytest.raises(TypeError, match="tools must be a list"):
        Agent(model, tools=ping)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="repeated: ping"):
        Agent(model, tools=[ping, ping])
    with pytest.raises(ValueError, match="max_iterations"):
        Agent(model, max_iterations=0)
    with pytest.raises(ValueError, match="max_tokens"):
        Agent(model, max_tokens=0)
    with pytest.raises(TypeError, match=r"blazen\.Providers"):
        Agent("gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_done must be callable"):
        agent.run("x", on_done=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        agent.run("x", timeout=0)
    with pytest.raises(TypeError, match="input must be"):
        agent.run(42)  # type: ignore[arg-type]


# -- asyncio -------------------------------------------------------------------------------


def test_run_async_awaits_coroutine_tools_and_callbacks(server, model):
    """Coroutine tools are awaited on the loop; sync tools run beside them; async callbacks
    are awaited, all on the loop's thread."""

    @tool
    async def fetch(url: str) -> str:
        await asyncio.sleep(0.01)
        return f"<html>{url}</html>"

    server.add(
        tools_turn(("c1", "fetch", {"url": "a"}), ("c2", "get_time", {"tz": "UTC"})),
        text_turn("Fetched."),
    )
    threads: set[str] = set()
    results: list[Any] = []

    async def on_tool_result(result: Any) -> None:
        threads.add(threading.current_thread().name)
        results.append(result.output)

    async def main() -> Any:
        return await Agent(model, tools=[fetch, get_time]).run_async(
            "go",
            on_chunk=lambda c: threads.add(threading.current_thread().name),
            on_tool_result=on_tool_result,
        )

    result = asyncio.run(main())
    assert result.text == "Fetched."
    assert results == ["<html>a</html>", "14:05 in UTC"]
    assert threads == {threading.current_thread().name}
    assert [m["content"] for m in tool_messages(server, 1)] == results


def test_sync_run_awaits_a_coroutine_tool_on_its_worker_thread(server, model):
    """A coroutine tool also works in the blocking run."""

    @tool
    async def add(a: int, b: int) -> int:
        return a + b

    server.add(tools_turn(("c1", "add", {"a": 2, "b": 3})), text_turn("5"))
    assert Agent(model, tools=[add]).run("go").tool_results[0].output == 5


def test_cancelling_the_task_cancels_the_stream_and_reports_once(server, agent):
    """Task cancellation closes the connection, delivers CancelledError, then re-raises."""
    server.add(Reply.sse([openai_sse(["Hel"], done=False)[1], Stall()]))
    errors: list[blazen.BlazenError] = []

    async def main() -> None:
        got_chunk = asyncio.Event()
        task = asyncio.ensure_future(
            agent.run_async("go", on_chunk=lambda c: got_chunk.set(), on_error=errors.append)
        )
        await asyncio.wait_for(got_chunk.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert [type(e) for e in errors] == [blazen.CancelledError]
    assert server.wait_closed(5)


def test_run_async_errors_and_timeouts_keep_the_contract(server, model):
    """An async run that times out in a tool ends in one TimeoutError."""

    @tool
    async def nap() -> None:
        await asyncio.sleep(5)

    server.add(tools_turn(("c1", "nap", {})))
    errors: list[blazen.BlazenError] = []

    async def main() -> Any:
        return await Agent(model, tools=[nap]).run_async("go", timeout=0.3, on_error=errors.append)

    begin = time.monotonic()
    assert asyncio.run(main()) is None
    assert time.monotonic() - begin < 3
    assert [type(e) for e in errors] == [blazen.TimeoutError]
