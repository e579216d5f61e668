"""OpenTelemetry: GenAI-convention spans and metrics when the application uses it, none without.

The global tracer and meter providers can be set once per process: one session fixture sets
an SDK TracerProvider (in-memory exporter) and MeterProvider (in-memory reader) for every
test here; each test clears the exporter first.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import blazen
from blazen import Agent, CancelToken, Llm, Streaming, tool
from blazen.testing import Recorder, Reply, Stall, StreamServer, openai_sse, openai_tool_sse

from .conftest import KEY_FOR_TESTS

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


class Raising(SpanProcessor):
    """A span processor that raises while armed: a broken exporter or SDK."""

    armed = False

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.armed:
            raise RuntimeError("exporter down")

    def on_end(self, span: Any) -> None:
        if self.armed:
            raise RuntimeError("exporter down")


class Telemetry:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self.raising = Raising()

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans() if s.name == name]
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        out = []
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == metric:
                        out.extend(m.data.data_points)
        return out


_TELEMETRY: list[Telemetry] = []


@pytest.fixture(scope="session")
def _providers() -> Telemetry:
    if not _TELEMETRY:
        tel = Telemetry()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(tel.exporter))
        tracer_provider.add_span_processor(tel.raising)
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[tel.reader]))
        _TELEMETRY.append(tel)
    return _TELEMETRY[0]


@pytest.fixture
def otel(_providers: Telemetry, monkeypatch: pytest.MonkeyPatch) -> Iterator[Telemetry]:
    monkeypatch.delenv("BLAZEN_OTEL", raising=False)
    monkeypatch.delenv("BLAZEN_OTEL_CAPTURE_CONTENT", raising=False)
    _providers.exporter.clear()
    yield _providers
    _providers.raising.armed = False
    blazen.capture_otel_content(None)


def text_turn(*parts: str) -> Reply:
    return Reply.sse(openai_sse(parts, usage=USAGE))


def test_a_stream_is_one_client_span_with_the_genai_attributes(otel, server, model):
    """A finished stream: `chat {model}`, kind CLIENT, request and response attributes, no text."""
    server.add(text_turn("Hel", "lo"))
    req = Llm.completion_request(
        [Llm.user("a secret prompt")], max_tokens=50, temperature=0.5, system="be brief"
    )
    Streaming.complete(model, req, on_chunk=lambda c: None)
    span = otel.span(f"chat {model.model}")
    assert span.kind is SpanKind.CLIENT
    a = dict(span.attributes or {})
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == model.model
    assert a["gen_ai.request.max_tokens"] == 50
    assert a["gen_ai.request.temperature"] == 0.5
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert a["gen_ai.usage.input_tokens"] == 10
    assert a["gen_ai.usage.output_tokens"] == 5
    assert a["server.address"] == "127.0.0.1"
    assert "gen_ai.response.model" in a
    assert a["gen_ai.response.id"].startswith("chatcmpl-")
    assert span.status.status_code is StatusCode.UNSET
    assert [e.name for e in span.events] == ["gen_ai.first_chunk"]
    assert span.events[0].attributes["gen_ai.response.time_to_first_chunk"] >= 0
    # No prompt or completion text by default, and never the key.
    flat = repr(a) + repr([e.attributes for e in span.events])
    assert "secret prompt" not in flat and "Hello" not in flat and "be brief" not in flat
    assert KEY_FOR_TESTS not in flat


def test_the_stream_span_is_a_child_of_the_callers_current_span(otel, server, model, complete):
    """Blocking, asyncio and background forms: the parent is the span current at the call."""
    server.add(text_turn("hi"))
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("request") as parent:
        complete(model, Llm.completion_request([Llm.user("hi")]), on_chunk=lambda c: None)
    span = otel.span(f"chat {model.model}")
    assert span.parent is not None
    assert span.parent.span_id == parent.get_span_context().span_id
    assert span.context.trace_id == parent.get_span_context().trace_id


def test_metrics_token_usage_and_duration_histograms(otel, server, model):
    """gen_ai.client.token.usage per token type, gen_ai.client.operation.duration in seconds."""
    server.add(text_turn("hi"))
    Streaming.complete(model, Llm.completion_request([Llm.user("hi")]))
    tokens = otel.points("gen_ai.client.token.usage")
    by_type = {p.attributes["gen_ai.token.type"]: p for p in tokens}
    assert set(by_type) == {"input", "output"}
    assert by_type["input"].sum >= 10 and by_type["output"].sum >= 5
    assert by_type["input"].attributes["gen_ai.provider.name"] == "openai"
    durations = otel.points("gen_ai.client.operation.duration")
    assert durations and all(p.sum >= 0 for p in durations)
    assert otel.points("gen_ai.client.operation.time_to_first_chunk")


def test_a_failed_stream_sets_error_type_and_status(otel, server, model):
    """An HTTP 401: error.type is the blazen class, the status is error, no key in sight."""
    server.add(Reply.json({"error": {"message": "bad key"}}, status=401))
    Streaming.complete(model, Llm.completion_request([Llm.user("hi")]), on_error=lambda e: None)
    span = otel.span(f"chat {model.model}")
    assert span.attributes["error.type"] == "AuthError"
    assert span.status.status_code is StatusCode.ERROR
    assert KEY_FOR_TESTS not in repr(span.attributes) + str(span.status.description)
    failed = [
        p
        for p in otel.points("gen_ai.client.operation.duration")
        if p.attributes.get("error.type") == "AuthError"
    ]
    assert failed


def test_an_error_raised_without_on_error_still_ends_the_span(otel, server, model):
    """No on_error: the error is raised, and the span has ended with it."""
    server.add(Reply.json({"error": {"message": "nope"}}, status=400))
    with pytest.raises(blazen.BlazenError):
        Streaming.complete(model, Llm.completion_request([Llm.user("hi")]))
    assert otel.span(f"chat {model.model}").status.status_code is StatusCode.ERROR


def test_a_cancelled_stream_ends_its_span_as_cancelled(otel, server, model):
    """cancel() mid-stream: error.type CancelledError, the span ended once."""
    server.add(Reply.sse([openai_sse(["Hel"], done=False)[1], Stall()]))
    token = CancelToken()
    Streaming.complete(
        model,
        Llm.completion_request([Llm.user("hi")]),
        on_chunk=lambda c: token.cancel("enough"),
        on_error=lambda e: None,
        cancel=token,
    )
    span = otel.span(f"chat {model.model}")
    assert span.attributes["error.type"] == "CancelledError"
    assert [e.name for e in span.events] == ["gen_ai.first_chunk"]


def test_retries_are_events_on_one_span(otel, server, model):
    """A 500 then a stream: one span, one retry event, success."""
    server.add(Reply.json({"error": {"message": "oops"}}, status=500), text_turn("ok"))
    Streaming.complete(model, Llm.completion_request([Llm.user("hi")]))
    span = otel.span(f"chat {model.model}")
    assert [e.name for e in span.events] == ["blazen.retry", "gen_ai.first_chunk"]
    assert span.status.status_code is StatusCode.UNSET


def test_content_is_captured_only_when_asked(otel, server, model):
    """capture_otel_content(True): input and output messages as the conventions' JSON."""
    blazen.capture_otel_content(True)
    server.add(text_turn("Hel", "lo"))
    Streaming.complete(model, Llm.completion_request([Llm.user("a prompt")], system="terse"))
    a = otel.span(f"chat {model.model}").attributes
    assert "a prompt" in a["gen_ai.input.messages"]
    assert "terse" in a["gen_ai.system_instructions"]
    assert '"Hello"' in a["gen_ai.output.messages"]


def test_blazen_otel_0_turns_it_off(otel, server, model, monkeypatch):
    """BLAZEN_OTEL=0: no span, even with a provider set."""
    monkeypatch.setenv("BLAZEN_OTEL", "0")
    server.add(text_turn("hi"))
    Streaming.complete(model, Llm.completion_request([Llm.user("hi")]))
    assert otel.spans() == []


def test_concurrent_streams_each_get_their_own_span(otel, server, model):
    """Two threads, two streams: two spans, each the child of its own thread's span."""
    server.add(text_turn("a"), text_turn("b"))
    tracer = trace.get_tracer("test")
    parents: dict[str, int] = {}

    def one(name: str) -> None:
        with tracer.start_as_current_span(name) as parent:
            parents[name] = parent.get_span_context().span_id
            Streaming.complete(model, Llm.completion_request([Llm.user(name)]))

    threads = [threading.Thread(target=one, args=(n,)) for n in ("t1", "t2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    chats = [s for s in otel.spans() if s.name.startswith("chat ")]
    assert sorted(s.parent.span_id for s in chats) == sorted(parents.values())


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"sunny in {city}"


def test_an_agent_run_is_invoke_agent_with_execute_tool_children(otel, server, model):
    """invoke_agent holds both chat spans and one execute_tool span per tool call."""
    server.add(
        Reply.sse(openai_tool_sse([("call_1", "get_weather", {"city": "Paris"})], usage=USAGE)),
        text_turn("It is sunny."),
    )
    Agent(model, tools=[get_weather]).run("Weather in Paris?")
    agent = otel.span("invoke_agent")
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    tool_span = otel.span("execute_tool get_weather")
    assert tool_span.attributes["gen_ai.tool.name"] == "get_weather"
    assert tool_span.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool_span.parent.span_id == agent.context.span_id
    chats = [s for s in otel.spans() if s.name.startswith("chat ")]
    assert len(chats) == 2
    assert all(s.parent.span_id == agent.context.span_id for s in chats)


def test_an_mcp_tools_execute_tool_span_names_its_server(otel, server, model):
    """An MCP tool's span says which server ran it, over which transport, with which method."""
    pytest.importorskip("mcp")
    from blazen.agent import mcp

    script = os.path.join(os.path.dirname(__file__), "fixtures", "mcp", "server.py")
    server.add(
        Reply.sse(openai_tool_sse([("call_1", "add", {"a": 1, "b": 2})], usage=USAGE)),
        text_turn("3"),
    )
    with open(os.devnull, "w") as log, mcp.stdio([sys.executable, script, "stdio"], stderr=log) as s:
        Agent(model, tools=s.tools()).run("1+2?")
    span = otel.span("execute_tool add")
    assert span.attributes["blazen.mcp.server"] == "blazen-test-server"
    assert span.attributes["network.transport"] == "pipe"
    assert span.attributes["mcp.method.name"] == "tools/call"
    assert span.attributes["gen_ai.tool.type"] == "extension"
    assert span.parent.span_id == otel.span("invoke_agent").context.span_id


def test_a_workflow_run_and_its_steps_get_spans(otel, server, model):
    """invoke_workflow, with one child span per step, and the step's stream inside it."""
    server.add(text_turn("hi"))
    wf = blazen.workflow("greeter")

    @wf.step("greet", accepts=["blazen::StartEvent"], emits=["blazen::StopEvent"])
    def greet(_event):
        Streaming.complete(model, Llm.completion_request([Llm.user("hi")]))
        return blazen.StepOutput.single(
            blazen.Event.create(event_type="blazen::StopEvent", data={"result": "ok"})
        )

    wf.run()
    run = otel.span("invoke_workflow greeter")
    step = otel.span("step greet")
    assert step.parent.span_id == run.context.span_id
    assert otel.span(f"chat {model.model}").parent.span_id == step.context.span_id


@pytest.mark.parametrize("mode", ["run", "run_async"])
def test_an_async_steps_span_is_a_child_of_the_run_with_its_stream_inside(otel, server, model, mode):
    """An async step gets its span under the run's, and its complete_async's chat span under it."""
    server.add(text_turn("hi"))
    wf = blazen.workflow("async_greeter")

    @wf.step("greet", accepts=["blazen::StartEvent"], emits=["blazen::StopEvent"])
    async def greet(_event):
        await Streaming.complete_async(model, Llm.completion_request([Llm.user("hi")]))
        return blazen.Event.create(event_type="blazen::StopEvent", data={"result": "ok"})

    if mode == "run":
        wf.run()
    else:
        asyncio.run(wf.run_async())
    run = otel.span("invoke_workflow async_greeter")
    step = otel.span("step greet")
    assert step.parent.span_id == run.context.span_id
    assert otel.span(f"chat {model.model}").parent.span_id == step.context.span_id


def test_a_failing_step_marks_its_span_and_the_runs(otel):
    """A step that raises: error status on the step span and on the run span."""
    wf = blazen.workflow("broken")

    @wf.step("boom", accepts=["blazen::StartEvent"], emits=["blazen::StopEvent"])
    def boom(_event):
        raise RuntimeError("no")

    with pytest.raises(blazen.WorkflowError):
        wf.run()
    assert otel.span("step boom").attributes["error.type"] == "RuntimeError"
    assert otel.span("invoke_workflow broken").status.status_code is StatusCode.ERROR


def test_without_opentelemetry_nothing_is_imported():
    """`import blazen` and a whole stream: opentelemetry never enters sys.modules."""
    code = (
        "import sys, blazen\n"
        "from blazen.testing import StreamServer, Reply, openai_sse\n"
        "with StreamServer() as s:\n"
        "    s.add(Reply.sse(openai_sse(['hi'])))\n"
        "    m = blazen.Providers.openai(api_key='sk-x', base_url=s.base_url)\n"
        "    blazen.Streaming.complete(m, blazen.Llm.completion_request([blazen.Llm.user('x')]))\n"
        "print(sorted(n for n in sys.modules if n.startswith('opentelemetry')))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_opentelemetry_imported_but_no_provider_set_records_nothing():
    """The API alone (no SDK provider set): no tracer is asked for, nothing recorded."""
    code = (
        "import opentelemetry.trace, opentelemetry.metrics, blazen\n"
        "from blazen import _telemetry\n"
        "print(_telemetry.stream_span('openai', 'http://h', 'm', "
        "blazen.Llm.completion_request([blazen.Llm.user('x')])))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"


def test_server_address_holds_no_credentials(otel):
    """A base URL with user and password: server.address is the host alone."""
    with StreamServer() as srv:
        srv.add(text_turn("hi"))
        url = srv.base_url.replace("http://", "http://user:hunter2pass@")
        m = blazen.Providers.openai_compat("c", url, api_key=KEY_FOR_TESTS)
        Streaming.complete(m, Llm.completion_request([Llm.user("hi")]), on_error=lambda e: None)
    spans = [s for s in otel.spans() if s.name.startswith("chat ")]
    assert spans and spans[0].attributes["server.address"] == "127.0.0.1"
    assert "hunter2pass" not in repr(spans[0].attributes)


def test_an_sdk_that_raises_changes_nothing_of_the_stream(otel, server, model, caplog):
    """A span processor raising at start and end: the stream still ends once, with done."""
    otel.raising.armed = True
    server.add(text_turn("Hel", "lo"))
    rec = Recorder()
    Streaming.complete(model, Llm.completion_request([Llm.user("hi")]), rec.handler)
    assert rec.text == "Hello" and rec.kinds[-1] == "done" and rec.terminals == 1
    assert "OpenTelemetry raised" in caplog.text


def test_capture_content_from_the_environment(otel, server, model, monkeypatch):
    """BLAZEN_OTEL_CAPTURE_CONTENT=1 puts the messages on the span."""
    monkeypatch.setenv("BLAZEN_OTEL_CAPTURE_CONTENT", "1")
    server.add(text_turn("ok"))
    Streaming.complete(model, Llm.completion_request([Llm.user("from env")]))
    assert "from env" in otel.span(f"chat {model.model}").attributes["gen_ai.input.messages"]


@tool
def broken_tool(city: str) -> str:
    """A tool that fails."""
    raise ValueError("no such city")


def test_a_failing_tool_marks_its_execute_tool_span(otel, server, model):
    """The tool raised: its span has error.type and the error status; the run goes on."""
    server.add(
        Reply.sse(openai_tool_sse([("call_9", "broken_tool", {"city": "X"})], usage=USAGE)),
        text_turn("Sorry."),
    )
    Agent(model, tools=[broken_tool]).run("Weather?")
    span = otel.span("execute_tool broken_tool")
    assert span.attributes["error.type"] == "ValueError"
    assert span.status.status_code is StatusCode.ERROR
    assert otel.span("invoke_agent").status.status_code is StatusCode.UNSET


def test_an_async_agent_run_nests_its_spans(otel, server, model):
    """run_async: the same tree as run()."""
    server.add(
        Reply.sse(openai_tool_sse([("call_1", "get_weather", {"city": "Oslo"})], usage=USAGE)),
        text_turn("Sunny."),
    )
    asyncio.run(Agent(model, tools=[get_weather]).run_async("Weather?"))
    agent = otel.span("invoke_agent")
    assert otel.span("execute_tool get_weather").parent.span_id == agent.context.span_id
    chats = [s for s in otel.spans() if s.name.startswith("chat ")]
    assert len(chats) == 2 and all(s.parent.span_id == agent.context.span_id for s in chats)


def test_a_failed_agent_run_reports_the_blazen_error(otel, server, model):
    """The model's stream failed: invoke_agent carries that error's class."""
    server.add(Reply.json({"error": {"message": "bad"}}, status=401))
    Agent(model, tools=[get_weather]).run("Weather?", on_error=lambda e: None)
    assert otel.span("invoke_agent").attributes["error.type"] == "AuthError"


def test_an_sdk_that_raises_changes_nothing_of_agent_or_workflow_runs(otel, server, model):
    """Spans failing to start or end: the agent run and the workflow run still succeed."""
    otel.raising.armed = True
    server.add(
        Reply.sse(openai_tool_sse([("call_1", "get_weather", {"city": "Oslo"})], usage=USAGE)),
        text_turn("Sunny."),
    )
    assert Agent(model, tools=[get_weather]).run("Weather?").text == "Sunny."
    wf = blazen.workflow("sturdy")

    @wf.step("go", accepts=["blazen::StartEvent"], emits=["blazen::StopEvent"])
    def go(_event):
        return blazen.StepOutput.single(
            blazen.Event.create(event_type="blazen::StopEvent", data={"result": 1})
        )

    assert wf.run().result == 1


def test_a_fallbacks_span_records_each_hop_and_who_answered(otel):
    """Primary 429, secondary answers: one span, a blazen.fallback event, the answering provider."""
    with StreamServer([Reply.json({"error": {"message": "slow"}}, status=429)]) as first:
        primary = blazen.Providers.openai(api_key="k", base_url=first.base_url, max_retries=0)
        with StreamServer([text_turn("Hi")]) as second:
            secondary = blazen.Providers.groq(api_key="k", base_url=second.base_url)
            fb = blazen.Providers.fallback(primary, secondary)
            Streaming.complete(fb, Llm.completion_request([Llm.user("hi")]))
    (span,) = otel.spans()
    hops = [e for e in span.events if e.name == "blazen.fallback"]
    assert [(e.attributes["blazen.fallback.provider"], e.attributes["error.type"]) for e in hops] == [
        ("openai", "RateLimitError")
    ]
    assert dict(span.attributes or {})["gen_ai.provider.name"] == "groq"


def test_a_priced_streams_span_carries_its_cost(otel):
    """gpt-4o-mini through a local server: blazen.usage.cost_usd is genai-prices' price."""
    genai_prices = pytest.importorskip("genai_prices")
    reply = Reply.sse(openai_sse(["Hi"], usage=USAGE, model="gpt-4o-mini"))
    with StreamServer([reply]) as server:
        model = blazen.Providers.openai(api_key="k", base_url=server.base_url, model="gpt-4o-mini")
        Streaming.complete(model, Llm.completion_request([Llm.user("hi")]))
    (span,) = otel.spans()
    price = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=10, output_tokens=5), "gpt-4o-mini", provider_id="openai"
    ).total_price
    assert dict(span.attributes or {})["blazen.usage.cost_usd"] == pytest.approx(float(price))
