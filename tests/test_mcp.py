"""MCP tools for the agent, against a real MCP server written with the SDK's MCPServer.

The server (``tests/fixtures/mcp/server.py``) runs as a subprocess, over stdio and on a
loopback port over streamable HTTP. Its tools answer, refuse (``isError``), raise, stall,
crash the process, return an image and wait for each other; the agent runs over the wire
against ``blazen.testing.StreamServer``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp")

import blazen
from blazen import Agent, CancelToken, Event, Streaming, tool, workflow
from blazen.agent import ToolContent, mcp
from blazen.agent.mcp.convert import model_name
from blazen.testing import Reply, StreamServer, openai_sse, openai_tool_sse

SERVER = Path(__file__).parent / "fixtures" / "mcp" / "server.py"
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def ctrl_c_after(seconds: float) -> None:
    """A real SIGINT to this process (as Ctrl-C sends): it wakes a blocked wait."""
    threading.Timer(seconds, os.kill, args=(os.getpid(), signal.SIGINT)).start()


def mcp_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("blazen-mcp")]


def gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` has exited (and been reaped) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def wait_for_text(path: Path, within: float = 10.0) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    return ""


@pytest.fixture(scope="module")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Any:
    # The server's tracebacks (its failing tools log them) go here, not into the test output.
    with open(tmp_path_factory.mktemp("mcp") / "server.log", "w") as f:
        yield f


def stdio_session(log: Any, **kw: Any) -> mcp.McpSession:
    return mcp.stdio([sys.executable, str(SERVER), "stdio"], stderr=log, **kw)


@pytest.fixture(scope="module")
def stdio_server(server_log: Any) -> Any:
    with stdio_session(server_log) as session:
        yield session


@contextlib.contextmanager
def http_process(log: Any) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The test server on a free loopback port over streamable HTTP: its URL and process."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)], stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def http_url(server_log: Any) -> Any:
    with http_process(server_log) as (url, _):
        yield url


@pytest.fixture(scope="module")
def http_server(http_url: str) -> Any:
    with mcp.http(http_url) as session:
        yield session


@pytest.fixture(params=["stdio", "http"])
def session(request: pytest.FixtureRequest) -> mcp.McpSession:
    return request.getfixturevalue(f"{request.param}_server")


# -- tools, schemas and results ---------------------------------------------------------


def test_the_tools_carry_the_servers_input_schema_and_description(session):
    """Each tool's parameters are the server's inputSchema, its description the server's."""
    tools = {t.name: t for t in session.tools()}
    add = tools["add"]
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert add.parameters["required"] == ["a", "b"]
    assert add.description == "Add two integers."
    assert add.server == "blazen-test-server" and add.remote_name == "add"
    assert isinstance(add, blazen.Tool)


def test_a_dotted_name_is_made_to_fit_and_still_calls_the_right_tool(session):
    """MCP allows "docs.search"; the model sees docs_search, the server gets docs.search."""
    (search,) = [t for t in session.tools() if t.remote_name == "docs.search"]
    assert search.name == "docs_search"
    assert search(_blazen_cancel=CancelToken(), query="x") == ToolContent(text="found: x")


def test_prefix_keeps_two_servers_tools_apart(session):
    """tools(prefix=) names every tool with the prefix first."""
    assert {t.name for t in session.tools(prefix="w_")} >= {"w_add", "w_docs_search"}


def test_a_call_answers_with_text(session):
    """A tool that answers comes back as its text."""
    assert session.call("add", {"a": 2, "b": 3}) == ToolContent(text="5")


def test_an_image_result_is_an_image_part(session):
    """ImageContent becomes an ImagePart with its MIME type."""
    (image,) = session.call("picture", {}).images
    assert image.media_type == "image/png" and image.data.startswith("iVBORw0KGgo")


@pytest.mark.parametrize(
    ("tool_name", "args", "says"),
    [("refuse", {"reason": "no"}, "refused: no"), ("fail", {"message": "boom"}, "fail")],
)
def test_is_error_results_are_tool_errors(session, tool_name, args, says):
    """An isError result (a refusal, or a tool that raised on the server) is a ToolError."""
    with pytest.raises(blazen.ToolError, match=says):
        session.call(tool_name, args)


def test_an_unknown_tool_is_a_tool_error(session):
    """The server's refusal of a call to a tool it lacks is a typed error."""
    with pytest.raises(blazen.BlazenError):
        session.call("no_such_tool", {})


def test_a_stalled_call_times_out_and_the_server_sees_the_cancel(session, tmp_path):
    """timeout= ends a stalled call with TimeoutError, and the server's tool is cancelled."""
    marker = tmp_path / "cancelled"
    with pytest.raises(blazen.TimeoutError, match=r"0\.3 s"):
        session.call("stall", {"seconds": 30, "marker": str(marker)}, timeout=0.3)
    assert wait_for_text(marker) == "cancelled"
    assert session.call("add", {"a": 1, "b": 1}).text == "2"  # the session goes on


def test_a_cancel_token_reaches_the_call_in_flight(session, tmp_path):
    """Cancelling the token ends the call with CancelledError; the server's tool stops."""
    marker = tmp_path / "cancelled"
    token = CancelToken()
    threading.Timer(0.3, token.cancel, args=("user hit stop",)).start()
    with pytest.raises(blazen.CancelledError, match="user hit stop"):
        session.call("stall", {"seconds": 30, "marker": str(marker)}, cancel=token)
    assert wait_for_text(marker) == "cancelled"


def test_ctrl_c_during_a_call_cancels_it_on_the_server(session, tmp_path):
    """A KeyboardInterrupt while the caller waits propagates, and the call is cancelled."""
    marker = tmp_path / "cancelled"
    ctrl_c_after(0.5)
    with pytest.raises(KeyboardInterrupt):
        session.call("stall", {"seconds": 30, "marker": str(marker)})
    assert wait_for_text(marker) == "cancelled"


def test_calls_run_concurrently(session):
    """Two calls from two threads are in flight at once: each sees the other arrive."""
    out: list[str] = []
    group = uuid.uuid4().hex
    threads = [
        threading.Thread(
            target=lambda: out.append(session.call("meet", {"group": group, "count": 2}).text)
        )
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert out == ["met", "met"]


# -- opening and closing ----------------------------------------------------------------


def test_leaving_the_with_ends_the_server_process_and_the_thread(server_log):
    """After the block, the server process has exited and no session thread is left."""
    before = len(mcp_threads())
    with stdio_session(server_log) as session:
        pid = int(session.call("pid", {}).text)
        assert len(mcp_threads()) == before + 1
    assert gone(pid)
    assert len(mcp_threads()) == before
    with pytest.raises(blazen.ConnectionError, match="closed"):
        session.call("add", {"a": 1, "b": 2})


def test_a_server_that_lingers_after_its_stdin_closes_is_killed(server_log):
    """A wrapper that outlives the server (a shell that then sleeps) is ended too, in time."""
    script = f"{sys.executable} {SERVER} stdio; sleep 60"
    before = len(mcp_threads())
    with mcp.stdio(["sh", "-c", script], stderr=server_log) as session:
        server_pid = int(session.call("pid", {}).text)
        shell_pid = int(session.call("parent_pid", {}).text)
        left = time.monotonic()
    assert time.monotonic() - left < 15
    assert gone(server_pid) and gone(shell_pid)
    assert len(mcp_threads()) == before


def test_ctrl_c_inside_the_with_still_ends_the_server(server_log):
    """A KeyboardInterrupt in the block goes up, after the server process has ended."""
    before = len(mcp_threads())
    pid = 0
    with pytest.raises(KeyboardInterrupt), stdio_session(server_log) as session:
        pid = int(session.call("pid", {}).text)
        raise KeyboardInterrupt
    assert pid and gone(pid)
    assert len(mcp_threads()) == before


def test_a_crashed_server_is_a_connection_error_for_every_call(server_log):
    """The server dies mid-call: that call and later ones are ConnectionErrors; close works."""
    before = len(mcp_threads())
    with stdio_session(server_log) as session:
        pid = int(session.call("pid", {}).text)
        with pytest.raises(blazen.ConnectionError):
            session.call("crash", {})
        with pytest.raises(blazen.ConnectionError):
            session.call("add", {"a": 1, "b": 2})
    assert gone(pid)
    assert len(mcp_threads()) == before


def test_an_http_server_that_dies_mid_call_is_a_connection_error(server_log):
    """Over HTTP too: the process behind the URL dies during a call, a typed error, in time."""
    before = len(mcp_threads())
    with http_process(server_log) as (url, proc), mcp.http(url) as session:
        with pytest.raises((blazen.ConnectionError, blazen.TimeoutError)):
            session.call("crash", {}, timeout=30)
        assert proc.wait(10) == 3
        with pytest.raises(blazen.ConnectionError):
            session.call("add", {"a": 1, "b": 2}, timeout=30)
    assert len(mcp_threads()) == before


def test_ctrl_c_inside_an_http_with_closes_the_session(http_url):
    """A KeyboardInterrupt in the block goes up once the HTTP session's thread has ended."""
    before = len(mcp_threads())
    with pytest.raises(KeyboardInterrupt), mcp.http(http_url, protocol="legacy") as session:
        session.call("add", {"a": 1, "b": 2})
        raise KeyboardInterrupt
    assert len(mcp_threads()) == before


def test_a_command_that_does_not_exist_is_a_connection_error():
    """A server that cannot start fails at the with, and leaves no thread."""
    before = len(mcp_threads())
    server = mcp.stdio(["/no/such/dir/no-such-mcp-server"])
    with pytest.raises(blazen.ConnectionError, match="no-such-mcp-server"), server:
        pass
    assert len(mcp_threads()) == before


def test_a_server_that_never_answers_times_out_at_connect(server_log):
    """connect_timeout bounds the start: a process that says nothing is a TimeoutError."""
    before = len(mcp_threads())
    session = mcp.stdio([sys.executable, "-c", "import time; time.sleep(60)"], connect_timeout=1.0)
    with pytest.raises(blazen.TimeoutError, match="connect_timeout"):
        session.open()
    assert len(mcp_threads()) == before


@pytest.mark.parametrize(
    ("script", "error"),
    [
        ("pass", blazen.ConnectionError),  # exits at once
        (
            "print('this is not JSON-RPC', flush=True); import time; time.sleep(60)",
            blazen.TimeoutError,
        ),
        ("import sys; sys.stdout.write('{\\n' * 1000); sys.stdout.flush()", blazen.ConnectionError),
    ],
    ids=["exits", "garbage-then-silence", "garbage-then-exit"],
)
def test_a_server_that_is_not_an_mcp_server_fails_at_the_with(script, error):
    """A process that exits, or speaks garbage, fails the open with a typed error in time."""
    before = len(mcp_threads())
    session = mcp.stdio([sys.executable, "-c", script], connect_timeout=3.0, stderr=sys.__stderr__)
    started = time.monotonic()
    with pytest.raises(error):
        session.open()
    assert time.monotonic() - started < 3.0 + 10.0
    assert len(mcp_threads()) == before


def test_ctrl_c_while_connecting_ends_the_process_and_the_thread(tmp_path):
    """A SIGINT while the session waits for a silent server: KeyboardInterrupt, nothing left."""
    pid_file = tmp_path / "pid"
    script = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    )
    before = len(mcp_threads())
    session = mcp.stdio([sys.executable, "-c", script], connect_timeout=60)
    threading.Thread(target=lambda: wait_for_text(pid_file) and ctrl_c_after(0.2)).start()
    with pytest.raises(KeyboardInterrupt):
        session.open()
    assert gone(int(pid_file.read_text()))
    assert len(mcp_threads()) == before


def test_nothing_listens_at_the_url_is_a_connection_error():
    """An HTTP session to a closed port fails at the with, with a blazen error."""
    before = len(mcp_threads())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with (
        pytest.raises(blazen.ConnectionError),
        mcp.http(f"http://127.0.0.1:{port}/mcp", connect_timeout=20),
    ):
        pass
    assert len(mcp_threads()) == before


def test_an_http_session_sends_its_headers_and_never_shows_them(http_url):
    """headers= reach the server; the session's repr and names do not show them."""
    with mcp.http(http_url, headers={"Authorization": "Bearer SECRET-123"}) as session:
        assert "SECRET" not in repr(session) and "SECRET" not in repr(session.tools())
        assert session.call("add", {"a": 1, "b": 2}).text == "3"


def test_closing_a_legacy_http_session_ends_it_on_the_server(http_url):
    """With the initialize handshake the server keeps a session; closing ends it (DELETE)."""
    with mcp.http(http_url, protocol="legacy") as watcher:
        held = int(watcher.call("sessions", {}).text)
        assert held >= 1
        with mcp.http(http_url, protocol="legacy") as other:
            assert int(other.call("sessions", {}).text) == held + 1
        deadline = time.monotonic() + 10
        while int(watcher.call("sessions", {}).text) != held and time.monotonic() < deadline:
            time.sleep(0.05)
        assert int(watcher.call("sessions", {}).text) == held


def test_the_2026_protocol_over_http_keeps_no_session_to_end(http_server):
    """The default connect speaks 2026-07-28, which is stateless: the server holds none."""
    assert http_server.span_attributes["mcp.protocol.version"] >= "2026"
    assert http_server.call("sessions", {}).text == "0"


def test_bad_arguments_are_refused_before_anything_starts():
    """A string command or a bad URL or timeout is a programming error, at once."""
    with pytest.raises(TypeError):
        mcp.stdio("python server.py")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        mcp.http("127.0.0.1:8000/mcp")
    with pytest.raises(ValueError):
        mcp.stdio(["python"], timeout=0)


# -- in the agent -------------------------------------------------------------------------


@tool
def get_time(tz: str) -> str:
    """The local time in a time zone."""
    return f"14:05 in {tz}"


def tools_turn(*calls: tuple[str, str, Any]) -> Reply:
    return Reply.sse(openai_tool_sse(calls, usage=USAGE))


def text_turn(*parts: str) -> Reply:
    return Reply.sse(openai_sse(parts, usage=USAGE))


def tool_messages(server: StreamServer, i: int) -> list[dict[str, Any]]:
    return [m for m in server.requests[i].json()["messages"] if m["role"] == "tool"]


def test_two_turns_call_a_python_tool_and_an_mcp_tool_in_parallel(server, model, session):
    """One turn calls get_time and the MCP add at once; both results go back in order."""
    server.add(
        tools_turn(("c1", "get_time", {"tz": "UTC"}), ("c2", "add", {"a": 20, "b": 22})),
        text_turn("It is 14:05; ", "the sum is 42."),
    )
    agent = Agent(model, tools=[get_time, *session.tools()])
    result = agent.run("time and sum?")
    assert result.text == "It is 14:05; the sum is 42." and result.iterations == 2
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages(server, 1)] == [
        ("c1", "14:05 in UTC"),
        ("c2", "42"),
    ]
    sent = {
        t["function"]["name"]: t["function"]["parameters"]
        for t in server.requests[0].json()["tools"]
    }
    assert sent["add"]["properties"]["b"]["type"] == "integer" and "get_time" in sent


def test_the_agent_runs_mcp_calls_concurrently(server, model, session):
    """Two parallel MCP calls in one turn are in flight at once (tool_concurrency=2)."""
    group = uuid.uuid4().hex
    server.add(
        tools_turn(
            ("c1", "meet", {"group": group, "count": 2}),
            ("c2", "meet", {"group": group, "count": 2}),
        ),
        text_turn("done"),
    )
    Agent(model, tools=session.tools(), tool_concurrency=2).run("go")
    assert [m["content"] for m in tool_messages(server, 1)] == ["met", "met"]


def test_with_tool_concurrency_1_the_calls_take_turns(server, model, session):
    """The same turn with tool_concurrency=1: the first call waits alone (the check can fail)."""
    group = uuid.uuid4().hex
    server.add(
        tools_turn(
            ("c1", "meet", {"group": group, "count": 2}),
            ("c2", "meet", {"group": group, "count": 2}),
        ),
        text_turn("done"),
    )
    Agent(model, tools=session.tools(), tool_concurrency=1).run("go")
    assert [m["content"] for m in tool_messages(server, 1)] == ["alone", "met"]


def test_a_python_tool_and_an_mcp_tool_run_at_the_same_time(server, model, session):
    """In one turn, a Python tool and an MCP tool are in flight together: each meets the other."""
    group = uuid.uuid4().hex

    @tool
    def local_meet(count: int) -> str:
        """Meets the MCP call from this side, through the same server."""
        return session.call("meet", {"group": group, "count": count}).text

    server.add(
        tools_turn(
            ("c1", "local_meet", {"count": 2}), ("c2", "meet", {"group": group, "count": 2})
        ),
        text_turn("done"),
    )
    Agent(model, tools=[local_meet, *session.tools()]).run("go")
    assert [m["content"] for m in tool_messages(server, 1)] == ["met", "met"]


def test_mcp_failures_are_error_results_never_exceptions(server, model, session):
    """isError, bad arguments and a timeout reach the model as errors; run returns."""
    server.add(
        tools_turn(
            ("c1", "refuse", {"reason": "not today"}),
            ("c2", "add", {"a": "two", "b": 2}),
            ("c3", "stall", {"seconds": 30}),
        ),
        text_turn("sorry"),
    )
    tools = [t for t in session.tools() if t.name != "stall"]
    short = mcp_stall_with_timeout(session)
    result = Agent(model, tools=[*tools, short], tool_concurrency=3).run("go")
    assert result.text == "sorry"
    kinds = [(r.call.id, r.kind, r.is_error) for r in result.tool_results]
    assert kinds == [("c1", "raised", True), ("c2", "invalid", True), ("c3", "raised", True)]
    sent = {m["tool_call_id"]: m["content"] for m in tool_messages(server, 1)}
    assert "refused: not today" in sent["c1"]
    assert "invalid arguments for tool 'add'" in sent["c2"]
    assert "did not answer within" in sent["c3"]


def mcp_stall_with_timeout(session: mcp.McpSession) -> blazen.Tool:
    """The server's stall tool, called with a short per-call timeout."""
    (stall,) = [t for t in session.tools() if t.name == "stall"]

    def short_stall(seconds: float, cancel: CancelToken) -> ToolContent:
        return session.call("stall", {"seconds": seconds}, cancel=cancel, timeout=0.5)

    return blazen.Tool(short_stall, name="stall", parameters=stall.parameters)


def test_an_image_result_reaches_the_model_after_the_tool_results(server, model, session):
    """The image goes in a user message right after the turn's tool messages."""
    server.add(tools_turn(("c1", "picture", {})), text_turn("a dot"))
    Agent(model, tools=session.tools()).run("draw")
    messages = server.requests[1].json()["messages"]
    assert [m["role"] for m in messages[-2:]] == ["tool", "user"]
    image = [p for p in messages[-1]["content"] if p["type"] == "image_url"]
    assert image[0]["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    assert "follows this result" in messages[-2]["content"]


@pytest.mark.parametrize("how", ["cancel", "timeout", "ctrl-c"])
def test_a_run_that_ends_cancels_the_mcp_call_in_flight(server, model, session, tmp_path, how):
    """Cancel, timeout= and Ctrl-C end the run at once and cancel the call on the server."""
    marker = tmp_path / "cancelled"
    server.add(tools_turn(("c1", "stall", {"seconds": 30, "marker": str(marker)})))
    agent = Agent(model, tools=session.tools())
    errors: list[blazen.BlazenError] = []
    token = CancelToken()
    if how == "cancel":
        threading.Timer(0.5, token.cancel).start()
        agent.run("go", cancel=token, on_error=errors.append)
        assert isinstance(errors[0], blazen.CancelledError)
    elif how == "timeout":
        agent.run("go", timeout=1.5, on_error=errors.append)
        assert isinstance(errors[0], blazen.TimeoutError)
    else:
        ctrl_c_after(0.8)
        with pytest.raises(KeyboardInterrupt):
            agent.run("go", on_error=errors.append)
        assert isinstance(errors[0], blazen.CancelledError)
    assert wait_for_text(marker) == "cancelled"


def test_a_workflows_timeout_ms_reaches_an_mcp_call_in_a_step(server, model, session, tmp_path):
    """An agent in a step calls a stalling MCP tool: timeout_ms ends the run and the call."""
    marker = tmp_path / "cancelled"
    server.add(tools_turn(("c1", "stall", {"seconds": 30, "marker": str(marker)})))
    agent = Agent(model, tools=session.tools())
    wf = workflow("mcp_in_a_step", timeout_ms=1500)

    @wf.step("ask", accepts=["StartEvent"], emits=["StopEvent"])
    def ask(event: Event) -> Event:
        result = agent.run("go")
        return Event.create(event_type="StopEvent", data={"result": result.text})

    with pytest.raises(blazen.TimeoutError, match="timeout_ms"):
        wf.run()
    assert wait_for_text(marker) == "cancelled"


def test_streaming_is_untouched_by_an_open_session(server, model, stdio_server):
    """A session's loop thread does not get in the way of a plain stream on this thread."""
    server.add(text_turn("hi"))
    resp = Streaming.complete(model, blazen.Llm.completion_request([blazen.Llm.user("x")]))
    assert resp is not None and resp.content == "hi"
    assert json.loads(json.dumps(stdio_server.span_attributes))["network.transport"] == "pipe"


def test_run_async_calls_mcp_tools_and_a_cancelled_task_cancels_the_call(
    server, model, session, tmp_path
):
    """Under run_async, MCP tools answer; cancelling the task cancels the call in flight."""
    import asyncio

    marker = tmp_path / "cancelled"
    server.add(
        tools_turn(("c1", "add", {"a": 1, "b": 2})),
        text_turn("3"),
        tools_turn(("c2", "stall", {"seconds": 30, "marker": str(marker)})),
    )
    agent = Agent(model, tools=session.tools())

    async def main() -> tuple[Any, list[blazen.BlazenError]]:
        first = await agent.run_async("1+2?")
        errors: list[blazen.BlazenError] = []
        task = asyncio.ensure_future(agent.run_async("stall", on_error=errors.append))
        await asyncio.sleep(1.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return first, errors

    first, errors = asyncio.run(main())
    assert first.text == "3" and first.tool_results[0].content == "3"
    assert isinstance(errors[0], blazen.CancelledError)
    assert wait_for_text(marker) == "cancelled"


def test_a_server_that_crashes_mid_run_is_an_error_result_and_callbacks_stay_here(
    server, model, server_log
):
    """The server dies during a call: the model reads the error, run returns, and every
    callback ran on the calling thread."""
    server.add(
        tools_turn(("c1", "crash", {})),
        tools_turn(("c2", "add", {"a": 1, "b": 1})),
        text_turn("the server is gone"),
    )
    threads: set[int] = set()

    def seen(*_: Any) -> None:
        threads.add(threading.get_ident())

    with stdio_session(server_log) as crashing:
        result = Agent(model, tools=crashing.tools()).run(
            "go", on_chunk=seen, on_tool_call=seen, on_tool_result=seen, on_done=seen
        )
    assert result.text == "the server is gone"
    assert [(r.call.id, r.kind) for r in result.tool_results] == [
        ("c1", "raised"),
        ("c2", "raised"),
    ]
    assert all(isinstance(r.error, blazen.ConnectionError) for r in result.tool_results)
    assert threads == {threading.get_ident()}


def test_the_mcp_example_runs_offline_with_its_own_server():
    """examples/agent_mcp.py starts its MCP server, runs both tools, answers, and ends it."""
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("BLAZEN_BASE_URL", None)
    proc = subprocess.run(
        [sys.executable, str(root / "examples" / "agent_mcp.py")],
        capture_output=True,
        text=True,
        timeout=90,
        env={**env, "PYTHONPATH": str(root)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "[ok] get_weather -> 4 C, light snow",
        "[ok] get_local_time -> 09:41",
        "In Oslo it is 4 C with light snow; the local time is 09:41.",
        "(2 model turns, 2 tool calls, server 'weather')",
    ]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=100), st.text(alphabet="ab_.-/ ", max_size=10))
def test_every_mcp_tool_name_is_offered_in_the_providers_alphabet(remote, prefix):
    """Whatever a server names a tool, the model sees 1-64 of [A-Za-z0-9_-]."""
    name = model_name(remote, prefix)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name), name
