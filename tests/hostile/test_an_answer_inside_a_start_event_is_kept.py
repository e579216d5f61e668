"""An answer inside a start event is content, never metadata (issue 41, item 2).

With programmatic tool calling (Claude calling a tool from code in its code-execution
container) the Messages API sends a whole turn in ``message_start``: ``content`` already holds
the ``tool_use`` block with its ``caller``, ``stop_reason`` is ``"tool_use"``, the
``container`` is there, and only ``message_stop`` follows. Blocks may come whole in
``content_block_start`` too (a server tool's call with its input, its result, text with its
first words). Each is read as the official ``anthropic`` SDK reads the same bytes, and the
next request sends the container and the call with its caller back, as the docs require
(https://platform.claude.com/docs/en/agents-and-tools/tool-use/programmatic-tool-calling).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import openai
import pytest

import blazen
from blazen import Agent, Llm, Streaming, tool
from blazen._codec import decode, encode_chunk
from blazen.testing import Recorder, Reply, StreamServer, sse_event

from ..conftest import fixture_bytes, model_for

CODE_RUN = {"type": "code_execution_20260120", "tool_id": "srvtoolu_01PtcCode"}
CONTAINER = "container_011PtcRun"
FIRST = "programmatic_tool_call.sse"  # streamed: text, the code, the first call
IN_START = "programmatic_tool_call_in_message_start.sse"  # the whole turn in message_start
ANSWER = "programmatic_tool_call_answer.sse"  # the code's result and the answer
SALES = {"West": "120", "East": "95"}


@tool
def query_sales(region: str) -> str:
    """Units sold in a region.

    Args:
        region: A sales region.
    """
    return SALES[region]


def _reply(name: str) -> Reply:
    return Reply.sse(fixture_bytes("anthropic", name))


def _request() -> blazen.CompletionRequest:
    return Llm.completion_request(
        [Llm.user("Sales by region?")],
        tools=[query_sales.definition, Llm.server_tool("code_execution")],
    )


def _sdk_reads(blob: bytes) -> Any:
    """The anthropic SDK's final message for ``blob`` (its own accumulate_event)."""
    with (
        StreamServer([Reply.sse(blob)]) as server,
        anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0) as client,
        client.messages.stream(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        ) as stream,
    ):
        return stream.get_final_message()


def test_a_tool_call_inside_message_start_is_reported_with_its_caller(server, complete):
    """The call in message_start reaches on_chunk and the response, caller kept; done says
    "tool_calls"; the container (id and expiry) is kept on the response."""
    server.add(_reply(IN_START))
    rec = Recorder()
    resp = complete(model_for("anthropic", server, max_retries=0), _request(), rec.handler)
    call = blazen.ToolCall("toolu_01PtcEast", "query_sales", '{"region": "East"}', caller=CODE_RUN)
    assert rec.kinds[-1] == "done" and rec.terminals == 1
    assert rec.done == ("tool_calls", resp.usage)
    assert resp.tool_calls == (call,) and resp.tool_calls[0].caller == CODE_RUN
    assert resp.finish_reason == "tool_calls" and resp.raw_finish_reason == "tool_use"
    streamed = [c for c in rec.chunks if not c.is_final]
    assert streamed and streamed[0].tool_calls == (call,)
    kept = {i.kind: i.data for i in resp.provider_items}
    assert kept["container"] == {"id": CONTAINER, "expires_at": "2026-12-01T23:09:05Z"}


def test_the_next_request_sends_the_container_and_the_call_with_its_caller_back(server):
    """After a message_start answer, the JSON the server receives holds the container id,
    the tool_use block with its caller, and the result in a user turn of tool_result only."""
    model = model_for("anthropic", server, max_retries=0)
    server.add(_reply(IN_START), _reply(ANSWER))
    turn = Streaming.complete(model, _request(), on_error=pytest.fail)
    call = turn.tool_calls[0]
    nxt = Llm.completion_request(
        [*_request().messages, turn.message, Llm.tool_result(call.id, "95")],
        tools=_request().tools,
    )
    answer = Streaming.complete(model, nxt, on_error=pytest.fail)
    assert answer.content == "West sold 120, East 95."
    body = server.requests[1].json()
    assert body["container"] == CONTAINER
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_01PtcEast",
                    "name": "query_sales",
                    "input": {"region": "East"},
                    "caller": CODE_RUN,
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_01PtcEast", "content": "95"}],
        },
    ]


def test_a_non_streamed_programmatic_call_keeps_its_caller_and_container(server):
    """model.complete() reads the same turn whole: the caller and the container are kept."""
    message = json.loads(fixture_bytes("anthropic", IN_START).split(b"data: ")[1].split(b"\n")[0])
    body = json.dumps(message["message"]).encode()
    server.add(Reply(headers={"Content-Type": "application/json"}, body=[body], transfer="length"))
    resp = model_for("anthropic", server, max_retries=0).complete(_request())
    assert [c.caller for c in resp.tool_calls] == [CODE_RUN]
    assert resp.finish_reason == "tool_calls"
    nxt = Llm.completion_request([*_request().messages, resp.message, Llm.user("go on")])
    sent = model_for("anthropic", server).wire.body(nxt, stream=True)
    assert sent["container"] == CONTAINER
    assert sent["messages"][1]["content"][0]["caller"] == CODE_RUN


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_agent_runs_through_a_programmatic_tool_call_to_the_answer(mode):
    """Three turns (a streamed call from code, a call inside message_start, the answer): the
    agent runs both calls, sends the container and each call with its caller back, and
    ends with the answer, never stopping at the message_start turn."""
    with StreamServer([_reply(FIRST), _reply(IN_START), _reply(ANSWER)]) as server:
        agent = Agent(
            model_for("anthropic", server, max_retries=0),
            tools=[query_sales, Llm.server_tool("code_execution")],
        )
        question = "Sales by region?"
        run = agent.run if mode == "sync" else lambda q: asyncio.run(agent.run_async(q))
        result = run(question)
        sent = [r.json() for r in server.requests]
    assert result.text == "West sold 120, East 95." and result.finish_reason == "stop"
    assert result.iterations == 3
    assert [(c.id, c.caller) for c in result.tool_calls] == [
        ("toolu_01PtcWest", CODE_RUN),
        ("toolu_01PtcEast", CODE_RUN),
    ]
    assert [r.content for r in result.tool_results] == ["120", "95"]
    assert len(sent) == 3 and "container" not in sent[0]
    assert sent[1]["container"] == sent[2]["container"] == CONTAINER
    # The first turn goes back as it came: the code that runs and the call it made.
    first = sent[1]["messages"][1]["content"]
    assert [b["type"] for b in first] == ["text", "server_tool_use", "tool_use"]
    assert first[2]["caller"] == CODE_RUN
    # The message_start turn goes back with its call and the call's caller.
    second = sent[2]["messages"][3]
    assert second == {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_01PtcEast",
                "name": "query_sales",
                "input": {"region": "East"},
                "caller": CODE_RUN,
            }
        ],
    }
    assert sent[2]["messages"][4] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_01PtcEast", "content": "95"}],
    }


def _start(content: list[Any], stop: Any) -> bytes:
    message = {
        "id": "msg_whole",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-7",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 40, "output_tokens": 9},
    }
    return sse_event({"type": "message_start", "message": message}, "message_start")


THOUGHT = {"type": "thinking", "thinking": "Two parts.", "signature": "EqQBCkgIARABGAIi"}
STOP = sse_event({"type": "message_stop"}, "message_stop")
WHOLE_CASES = {
    "a programmatic call streamed": fixture_bytes("anthropic", FIRST),
    "a programmatic call in message_start": fixture_bytes("anthropic", IN_START),
    "thinking and text in message_start": _start(
        [THOUGHT, {"type": "text", "text": "Hello"}, {"type": "text", "text": " there."}],
        "end_turn",
    )
    + STOP,
    "text in message_start, more streamed after it": _start(
        [{"type": "text", "text": "Hello"}], None
    )
    + sse_event(
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        "content_block_start",
    )
    + sse_event(
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "!"}},
        "content_block_delta",
    )
    + sse_event({"type": "content_block_stop", "index": 1}, "content_block_stop")
    + sse_event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 3},
        },
        "message_delta",
    )
    + STOP,
}


@pytest.mark.parametrize("blob", list(WHOLE_CASES.values()), ids=list(WHOLE_CASES))
def test_blocks_that_come_whole_read_as_the_anthropic_sdk_reads_them(server, blob):
    """Text, thinking, tool calls with their caller, the stop reason and the container agree
    with the SDK's accumulation of the same bytes, and every word reached a chunk."""
    message = _sdk_reads(blob)
    server.add(Reply.sse(blob))
    rec = Recorder()
    resp = Streaming.complete(
        model_for("anthropic", server, max_retries=0), _request(), rec.handler
    )
    blocks = message.content
    text = "".join(b.text for b in blocks if b.type == "text")
    assert resp.content == text == "".join(c.content_delta or "" for c in rec.chunks)
    assert (resp.reasoning or "") == "".join(b.thinking for b in blocks if b.type == "thinking")
    sdk_calls = [
        (b.id, b.name, b.input, b.caller.model_dump() if b.caller else None)
        for b in blocks
        if b.type == "tool_use"
    ]
    assert [(c.id, c.name, c.arguments(), c.caller) for c in resp.tool_calls] == sdk_calls
    assert resp.raw_finish_reason == message.stop_reason
    kept = {i.kind: i.data for i in resp.provider_items}
    if message.container is None:
        assert "container" not in kept
    else:
        assert kept["container"]["id"] == message.container.id
        assert kept["container"]["expires_at"] == message.container.expires_at.strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
    signed = [(p.text, p.signature) for p in resp.reasoning_parts if p.signature]
    assert signed == [(b.thinking, b.signature) for b in blocks if b.type == "thinking"]


def test_a_tool_calls_caller_travels_through_the_event_codec():
    """A chunk written by a sink or --json and read back keeps each call's caller."""
    call = blazen.ToolCall("toolu_1", "query_sales", '{"region": "East"}', caller=CODE_RUN)
    chunk = blazen.StreamChunk(tool_calls=(call,))
    obj = encode_chunk(chunk)
    assert obj["tool_calls"][0]["caller"] == CODE_RUN
    kind, args = decode(json.loads(json.dumps(obj)))
    assert kind == "chunk" and args[0].tool_calls == (call,)


# -- the Responses API: output items a start event already holds --------------------------

_MESSAGE = {
    "type": "message",
    "id": "msg_1",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Hi there", "annotations": []}],
}
_CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "query_sales",
    "arguments": '{"region": "East"}',
    "status": "completed",
}
_RESPONSE = {"id": "resp_1", "object": "response", "model": "gpt-5", "output": []}
_USAGE = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}


def _events(*events: dict[str, Any]) -> bytes:
    return b"".join(sse_event(e, e["type"]) for e in events)


def _created(output: list[Any], kind: str = "response.created") -> dict[str, Any]:
    return {"type": kind, "response": {**_RESPONSE, "status": "in_progress", "output": output}}


def _added(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.added", "output_index": 0, "item": item}


def _completed(output: list[Any]) -> dict[str, Any]:
    response = {**_RESPONSE, "status": "completed", "output": output, "usage": _USAGE}
    return {"type": "response.completed", "response": response}


RESPONSES_CASES = {
    # The terminal repeats the item: the openai SDK's final response reads it there.
    "a whole message in output_item.added": (
        _events(_created([]), _added(_MESSAGE), _completed([_MESSAGE])),
        True,
    ),
    "a whole call in output_item.added": (
        _events(_created([]), _added(_CALL), _completed([_CALL])),
        True,
    ),
    # Only the start event holds the item.
    "a whole message in output_item.added, none in the terminal": (
        _events(_created([]), _added(_MESSAGE), _completed([])),
        False,
    ),
    "the output in response.created": (
        _events(_created([_MESSAGE]), _completed([])),
        False,
    ),
    "the output in response.in_progress": (
        _events(_created([]), _created([_CALL], "response.in_progress"), _completed([])),
        False,
    ),
}


@pytest.mark.parametrize(("blob", "in_terminal"), RESPONSES_CASES.values(), ids=RESPONSES_CASES)
def test_an_item_a_responses_start_event_holds_is_the_answer(server, blob, in_terminal):
    """The item's text or call reaches a chunk and the response, once; where the terminal
    repeats it, blazen and the openai SDK's final response agree."""
    server.add(Reply.sse(blob))
    rec = Recorder()
    resp = Streaming.complete(
        model_for("responses", server, max_retries=0), _request(), rec.handler
    )
    item = _MESSAGE if b'"type":"message"' in blob else _CALL
    assert rec.kinds[-1] == "done" and rec.terminals == 1
    if item is _MESSAGE:
        assert resp.content == rec.text == "Hi there" and resp.finish_reason == "stop"
    else:
        assert resp.content == "" and resp.finish_reason == "tool_calls"
        assert [(c.id, c.name, c.arguments()) for c in resp.tool_calls] == [
            ("call_1", "query_sales", {"region": "East"})
        ]
        assert rec.chunks[-1].tool_calls == resp.tool_calls
    if in_terminal:
        with (
            StreamServer([Reply.sse(blob)]) as other,
            openai.OpenAI(api_key="k", base_url=other.base_url, max_retries=0) as client,
            client.responses.stream(model="m", input="hi") as stream,
        ):
            for _ in stream:
                pass
            final = stream.get_final_response()
        assert resp.content == final.output_text
        calls = [
            (o.call_id, o.name, o.arguments) for o in final.output if o.type == "function_call"
        ]
        assert [(c.id, c.name, c.arguments_json) for c in resp.tool_calls] == calls
