"""Attacks on this round's hot-path changes, as a hostile server and a hostile caller.

Each test here either failed before its fix (it says which) or pins a promise no other
test pinned: chunked framing that http.client would read differently, the tool-call
shortcut under interleaved calls and stray deltas, and snapshots that must never change
once delivered.
"""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

import blazen
from blazen import Llm, Streaming
from blazen._http.chunked import ChunkedBody
from blazen.testing import Drop, Recorder, Reply, StreamServer, openai_sse

from .test_transport_fast_paths import _response

REQ = Llm.completion_request([Llm.user("hi")])


def named_sse(obj: dict[str, Any]) -> bytes:
    """One SSE event named by its payload's type (Anthropic's and the Responses API's way)."""
    return b"event: %s\ndata: %s\n\n" % (obj["type"].encode(), json.dumps(obj).encode())


# -- snapshots already delivered never change -------------------------------------------


def test_a_finished_call_that_rewrites_its_arguments_leaves_earlier_snapshots_alone():
    """Responses API: a delta sent before its call was announced is lost, so the finished
    item's whole arguments replace what streamed. The chunks delivered before that must
    still show what had streamed when they were made (each chunk's ``tool_calls`` is the
    snapshot *so far*, an immutable value), read then or later.

    Failed before the fix: ``tool_arguments`` rewrote the list of fragments that earlier
    snapshots share in place, so every chunk already delivered (still unread) showed the
    final arguments, ``{"a":1,"b":2}`` three times instead of ``{"b":`` then ``{"b":2}``;
    and what a callback saw depended on whether it read the value before the worker got to
    ``output_item.done``.
    """
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_a", "name": "f"}
    whole = '{"a":1,"b":2}'
    done_item = {**call, "status": "completed", "arguments": whole}
    events = [
        named_sse({"type": "response.created", "response": {"id": "resp_1", "model": "m"}}),
        # Before output_item.added: no call to give it to yet, so it is dropped.
        named_sse(
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 0,
                "delta": '{"a":1,',
            }
        ),
        named_sse(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**call, "status": "in_progress", "arguments": ""},
            }
        ),
        named_sse(
            {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"b":'}
        ),
        named_sse(
            {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "2}"}
        ),
        named_sse({"type": "response.output_item.done", "output_index": 0, "item": done_item}),
        named_sse(
            {
                "type": "response.completed",
                "response": {
                    "id": "resp_1",
                    "model": "m",
                    "status": "completed",
                    "output": [done_item],
                    "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
                },
            }
        ),
    ]
    kept: list[blazen.StreamChunk] = []
    with StreamServer([Reply.sse(events)]) as server:
        model = blazen.Providers.openai(
            api_key="sk-test", base_url=server.base_url, api="responses", max_retries=0
        )
        resp = Streaming.complete(model, REQ, on_chunk=kept.append)
    assert resp is not None and resp.tool_calls[0].arguments_json == whole
    seen = [[c.arguments_json for c in chunk.tool_calls] for chunk in kept]
    assert seen[:3] == [[""], ['{"b":'], ['{"b":2}']]
    assert seen[3:] and all(s == [whole] for s in seen[3:])


# -- value classes ----------------------------------------------------------------------


@pytest.mark.parametrize("bad", [None, 5, b"{}", {"a": 1}])
def test_a_tool_call_with_arguments_that_are_not_text_is_refused_when_built(bad):
    """A programming mistake raises TypeError at once (SPEC: "Programming mistakes ...
    raise TypeError/ValueError immediately").

    Failed before the fix: ``ToolCall("id", "f", None)`` was built, and its
    ``arguments_json``, ``==``, ``hash`` and ``repr`` each raised AttributeError later
    (``'NoneType' object has no attribute 'text'``), far from the mistake.
    """
    with pytest.raises(TypeError, match="arguments_json must be a str"):
        blazen.ToolCall("call_1", "f", bad)


def test_a_server_tools_credentials_never_show_in_its_repr_or_its_requests():
    """SPEC promise 10: keys never leak into reprs. The Responses wire sends an ``mcp``
    server tool's config as given, and that config carries the remote server's credential
    (``authorization``, ``headers``; Anthropic's MCP servers say ``authorization_token``).

    Failed before the fix: ``repr(ServerTool)`` (by_value's repr, as attrs' before it) and
    so ``repr(CompletionRequest)`` printed every config value, the token included. Now the
    credential's name shows and its value is masked; the value sent is unchanged.
    """
    secrets = ["sk-SECRET-mcp-0123456789", "SECRET-header-0123456789", "SECRET-nested-01234567"]
    tool = Llm.server_tool(
        "mcp",
        server_label="docs",
        server_url="https://mcp.example/sse",
        authorization=secrets[0],
        headers={"X-Api-Key": secrets[1]},
        servers=[{"authorization_token": secrets[2]}],
        require_approval="never",
    )
    req = Llm.completion_request([Llm.user("hi")], tools=[tool])
    for shown in (repr(tool), str(tool), repr(req), f"{req}"):
        assert not any(secret in shown for secret in secrets), shown
        assert "authorization" in shown and "X-Api-Key" in shown and "never" in shown
    assert tool.config["authorization"] == secrets[0]
    assert tool == Llm.server_tool("mcp", **tool.config)
