"""A provider that answers what the docs' code blocks ask, for tests/test_docs.py.

The docs' examples call ``Providers.openai()``, ``Providers.anthropic()`` and the official
SDKs with no key of ours; the test points their base-URL variables at a
``blazen.testing.StreamServer`` whose ``respond`` is :func:`respond`. It answers by what the
request asks, the way the real APIs shape their replies: a JSON answer that fits the
schema of a ``response_format``, a call of the first tool when tools are offered and no tool
result has come back yet, text otherwise; streamed (SSE) or whole, in OpenAI's chat
completions or Anthropic's Messages format.
"""

from __future__ import annotations

import json
from typing import Any

from blazen.testing import (
    RecordedRequest,
    Reply,
    openai_sse,
    openai_tool_sse,
    responses_sse,
    sse_event,
)

TEXT = ["Hello ", "from ", "the ", "docs ", "server."]
USAGE = {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}


def sample(schema: Any, name: str = "") -> Any:
    """A value that fits a JSON schema of the kinds blazen writes (strict objects, enums)."""
    if not isinstance(schema, dict):
        return None
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return sample(options[0], name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {key: sample(sub, key) for key, sub in props.items()}
    if kind == "array":
        return [sample(schema.get("items", {}), name)]
    if kind == "string":
        return "Paris" if name in ("city", "location") else "text"
    if kind == "integer":
        return 3
    if kind == "number":
        return 18.5
    if kind == "boolean":
        return True
    return None


def _openai(body: dict[str, Any]) -> Reply:
    messages = body.get("messages", [])
    tools = body.get("tools") or []
    fmt = body.get("response_format") or {}
    stream = body.get("stream", False)
    if fmt.get("type") == "json_schema":
        text = [json.dumps(sample(fmt["json_schema"]["schema"]))]
    elif tools and not any(m.get("role") == "tool" for m in messages):
        function = tools[0]["function"]
        args = sample(function.get("parameters", {}))
        if stream:
            return Reply.sse(openai_tool_sse([("call_1", function["name"], args)], usage=USAGE))
        call = {"id": "call_1", "type": "function", "function": {
            "name": function["name"], "arguments": json.dumps(args)}}
        return _openai_whole({"role": "assistant", "content": None, "tool_calls": [call]},
                             "tool_calls")
    else:
        text = TEXT
    if stream:
        return Reply.sse(openai_sse(text, usage=USAGE, model=body.get("model", "test-model")))
    return _openai_whole({"role": "assistant", "content": "".join(text)}, "stop")


def _openai_whole(message: dict[str, Any], finish: str) -> Reply:
    return Reply.json({
        "id": "chatcmpl-docs", "object": "chat.completion", "created": 0, "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE,
    })


def _anthropic(body: dict[str, Any]) -> Reply:
    model = body.get("model", "claude-test")
    usage = {"input_tokens": 9, "output_tokens": 5}
    events = [sse_event({"type": "message_start", "message": {
        "id": "msg_docs", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 9, "output_tokens": 1}}}, "message_start"),
        sse_event({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}, "content_block_start")]
    events += [sse_event({"type": "content_block_delta", "index": 0,
                          "delta": {"type": "text_delta", "text": t}}, "content_block_delta")
               for t in TEXT]
    events += [
        sse_event({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        sse_event({"type": "message_delta", "delta": {"stop_reason": "end_turn",
                   "stop_sequence": None}, "usage": {"output_tokens": usage["output_tokens"]}},
                  "message_delta"),
        sse_event({"type": "message_stop"}, "message_stop"),
    ]
    return Reply.sse(events)


def _responses(body: dict[str, Any]) -> Reply:
    # OpenAI's Responses API: a call of the first function tool until its output has come
    # back, text otherwise; whole when not streamed (the completed event's response).
    items = body.get("input") or []
    answered = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)
    tools = [t for t in body.get("tools") or [] if t.get("type") == "function"]
    usage = {"input_tokens": 9, "output_tokens": 5, "total_tokens": 14}
    model = body.get("model", "test-model")
    if tools and not answered:
        args = sample(tools[0].get("parameters", {}))
        events = responses_sse(calls=[("call_1", tools[0]["name"], args)], usage=usage, model=model)
    else:
        events = responses_sse(TEXT, usage=usage, model=model)
    if body.get("stream"):
        return Reply.sse(events)
    last = json.loads(events[-1].decode().split("data: ", 1)[1])
    return Reply.json(last["response"])


def _embeddings(body: dict[str, Any]) -> Reply:
    """OpenAI's embeddings object: a float vector per input, in order."""
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    # As wide as asked (``dimensions``), as OpenAI's text-embedding-3 models answer.
    width = body.get("dimensions") or 3
    data = [
        {"object": "embedding", "index": i, "embedding": [len(t) / 10] + [0.5] * (width - 1)}
        for i, t in enumerate(texts)
    ]
    usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
    return Reply.json({"object": "list", "data": data, "model": body["model"], "usage": usage})


def respond(request: RecordedRequest) -> Reply:
    """The reply to one request, by its path and body."""
    if request.path.endswith("/chat/completions"):
        return _openai(request.json())
    if request.path.endswith("/responses"):
        return _responses(request.json())
    if request.path.endswith("/messages"):
        return _anthropic(request.json())
    if request.path.endswith("/embeddings"):
        return _embeddings(request.json())
    return Reply.json({"error": {"message": f"the docs server has no {request.path}"}}, status=404)
