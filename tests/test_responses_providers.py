"""``api="responses"`` on the factories: which presets take it, where it posts, what it sends."""

from __future__ import annotations

from typing import Any

import pytest

import blazen
from blazen import Llm, ReasoningPart
from blazen.providers import PROVIDERS
from blazen.testing import Recorder, Reply, StreamServer

from .conftest import fixture_bytes, model_for

REQ = Llm.completion_request([Llm.user("hi")])
SERVES = sorted(n for n, info in PROVIDERS.items() if info.responses and n != "openai_compat")
REFUSES = sorted(n for n, info in PROVIDERS.items() if info.wire == "openai" and not info.responses)


def text_reply() -> Reply:
    return Reply.sse(fixture_bytes("responses", "text.sse"))


def sent(model: blazen.ChatModel, req: blazen.CompletionRequest, server: StreamServer) -> Any:
    """The recorded request ``model`` sent for ``req`` (and the stream's Recorder)."""
    server.add(text_reply())
    rec = Recorder()
    blazen.Streaming.complete(model, req, rec.handler)
    assert rec.error is None, rec.error
    return server.requests[-1]


@pytest.mark.parametrize("name", SERVES)
def test_every_preset_that_documents_the_responses_api_posts_to_its_responses_path(server, name):
    """A preset marked as serving it streams from {base_url}/responses with its key."""
    model = model_for(name, server, api="responses")
    request = sent(model, REQ, server)
    path = "/openai/v1/responses" if name == "azure" else "/v1/responses"
    assert request.path == path
    assert request.json()["input"] == [{"role": "user", "content": "hi"}]
    key = f"{name}-key-SECRET-0123456789"
    assert key in (request.header("authorization") or request.header("api-key") or "")


def test_openai_compat_takes_the_responses_api_for_any_server(server):
    """Any server a caller names may serve it: openai_compat accepts api='responses'."""
    model = blazen.Providers.openai_compat("proxy", server.base_url, api="responses")
    assert sent(model, REQ, server).path == "/v1/responses"


@pytest.mark.parametrize("name", REFUSES)
def test_a_preset_whose_docs_say_nothing_of_it_refuses_the_responses_api(server, name):
    """A preset not marked as serving it refuses api='responses' when the model is made."""
    with pytest.raises(blazen.UnsupportedError, match="Responses API"):
        model_for(name, server, api="responses")


def test_an_unknown_api_is_a_value_error(server):
    """api= is 'chat' or 'responses'; anything else is refused by name."""
    with pytest.raises(ValueError, match="api must be 'chat'"):
        model_for("openai", server, api="assistants")


@pytest.mark.parametrize(
    ("name", "url"),
    [
        ("openai", "https://api.openai.com/v1/responses"),
        ("deepseek", "https://api.deepseek.com/responses"),
        ("perplexity", "https://api.perplexity.ai/v1/responses"),
        ("xai", "https://api.x.ai/v1/responses"),
        ("vllm", "http://localhost:8000/v1/responses"),
    ],
)
def test_the_default_responses_url_is_the_one_each_provider_documents(name, url):
    """Without base_url each preset posts where its own documentation says."""
    model = getattr(blazen.Providers, name)(api_key="k", api="responses")
    assert model.wire.build(REQ, stream=True).url == url


def test_azure_sends_the_deployment_as_the_model_of_its_v1_api(server):
    """Azure's Responses API is {endpoint}/openai/v1/responses with the deployment as model."""
    model = blazen.Providers.azure(
        api_key="az-key", base_url=server.url, model="my-gpt5", api="responses"
    )
    request = sent(model, REQ, server)
    assert request.path == "/openai/v1/responses" and request.header("api-key") == "az-key"
    assert request.json()["model"] == "my-gpt5"


# -- what goes in the body ---------------------------------------------------------------


def body(server: StreamServer, req: blazen.CompletionRequest, **options: Any) -> Any:
    options.setdefault("model", "gpt-4o-mini")
    return sent(model_for("openai", server, api="responses", **options), req, server).json()


def test_stateless_by_default_and_encrypted_reasoning_only_where_a_model_reasons(server):
    """store false; the include is asked for a reasoning request or model, never for gpt-4o-mini."""
    plain = body(server, REQ)
    assert plain["store"] is False and "include" not in plain
    reasoning = Llm.completion_request([Llm.user("hi")], reasoning_effort="low")
    assert body(server, reasoning)["include"] == ["reasoning.encrypted_content"]
    assert body(server, REQ, model="gpt-5")["include"] == ["reasoning.encrypted_content"]
    assert "include" not in body(server, REQ, model="gpt-5-chat-latest")
    assert "include" not in body(server, REQ, model="gpt-5", encrypted_reasoning=False)
    assert body(server, REQ, encrypted_reasoning=True)["include"] == ["reasoning.encrypted_content"]


def test_store_true_keeps_state_on_the_server_and_previous_response_id_continues_it(server):
    """With store=True no encrypted items are asked for; previous_response_id is sent as given."""
    req = Llm.completion_request([Llm.user("And then?")], previous_response_id="resp_text01")
    sent_body = body(server, req, store=True, model="gpt-5")
    assert sent_body["store"] is True and "include" not in sent_body
    assert sent_body["previous_response_id"] == "resp_text01"


@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini", "ollama"])
def test_other_wires_refuse_previous_response_id_before_sending(server, name):
    """Only the Responses API keeps answers to continue: the other wires refuse the field."""
    req = Llm.completion_request([Llm.user("hi")], previous_response_id="resp_1")
    rec = Recorder()
    blazen.Streaming.complete(model_for(name, server), req, rec.handler)
    assert isinstance(rec.error, blazen.UnsupportedError) and server.requests == []


@pytest.mark.parametrize(
    ("kwargs", "attachments", "match"),
    [
        ({"stop": ["END"]}, (), "no stop sequences"),
        ({"reasoning_budget": 2048}, (), "reasoning_budget"),
        ({}, ("audio",), "cannot take audio"),
    ],
)
def test_what_the_responses_api_has_no_field_for_is_refused_before_sending(
    server, kwargs, attachments, match
):
    """stop, a thinking budget and audio have no place in the Responses API: refused, unsent."""
    parts = [Llm.audio(b"RIFF" + bytes(40), format="wav")] if attachments else []
    req = Llm.completion_request([Llm.user("hi", attachments=parts)], **kwargs)
    rec = Recorder()
    blazen.Streaming.complete(model_for("openai", server, api="responses"), req, rec.handler)
    assert isinstance(rec.error, blazen.UnsupportedError) and match in rec.error.message
    assert server.requests == []


def test_reasoning_of_another_wire_is_never_sent_to_this_one(server):
    """An assistant turn's Anthropic signature or plain thinking stays out of the input."""
    turn = Llm.assistant("Earlier answer.")
    turn = blazen.ChatMessage(
        role="assistant",
        content=turn.content,
        reasoning_parts=(
            ReasoningPart(text="mine", signature="sig", provider="anthropic"),
            ReasoningPart(text="plain thinking"),
        ),
    )
    req = Llm.completion_request([Llm.user("a"), turn, Llm.user("b")])
    assert body(server, req)["input"] == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "Earlier answer."},
        {"role": "user", "content": "b"},
    ]


def test_a_reasoning_item_without_encrypted_content_goes_back_only_when_stored(server):
    """Sent statelessly, an item only a server that stored it knows would be a 404: left out."""
    part = ReasoningPart(
        text="t",
        data='{"id": "rs_1", "type": "reasoning", "summary": []}',
        provider="openai-responses",
    )
    turn = blazen.ChatMessage(role="assistant", content="x", reasoning_parts=(part,))
    req = Llm.completion_request([Llm.user("a"), turn, Llm.user("b")])
    assert len(body(server, req)["input"]) == 3
    assert body(server, req, store=True)["input"][1] == {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [],
    }


def test_a_custom_tool_call_goes_back_as_its_item_with_a_custom_output(server):
    """A custom tool call returns as custom_tool_call, its result as custom_tool_call_output."""
    from .test_responses import replay

    _, first = replay("custom_tool_call.sse")
    call = first.tool_calls[0]
    req = Llm.completion_request(
        [Llm.user("run it"), first.message, Llm.tool_result(call.id, "45")]
    )
    items = body(server, req)["input"]
    assert items[1]["type"] == "custom_tool_call" and items[1]["input"] == call.arguments_json
    assert items[2] == {"type": "custom_tool_call_output", "call_id": "call_C", "output": "45"}


def test_a_turn_kept_whole_goes_back_as_its_output_items(server):
    """The web_search_call item and the cited message go back exactly as they came."""
    from .test_responses import replay

    _, first = replay("web_search_citations.sse")
    req = Llm.completion_request([Llm.user("news?"), first.message, Llm.user("more")])
    items = body(server, req)["input"]
    assert items[1:3] == first.provider_items[0].data
    assert items[1]["type"] == "web_search_call" and items[2]["content"][0]["annotations"]
    assert items[3] == {"role": "user", "content": "more"}


@pytest.mark.parametrize(
    ("name", "config", "sent"),
    [
        ("web_search", {}, {"type": "web_search"}),
        (
            "web_search",
            {"search_context_size": "low"},
            {"type": "web_search", "search_context_size": "low"},
        ),
        ("code_execution", {}, {"type": "code_interpreter", "container": {"type": "auto"}}),
        (
            "file_search",
            {"vector_store_ids": ["vs_1"]},
            {"type": "file_search", "vector_store_ids": ["vs_1"]},
        ),
        ("web_search_preview", {}, {"type": "web_search_preview"}),
    ],
)
def test_server_tools_go_as_openai_built_in_tools(server, name, config, sent):
    """Llm.server_tool(name, **config) is the built-in tool's entry in tools, beside functions."""
    fn = Llm.tool("f", "A function.", {"type": "object", "properties": {}})
    req = Llm.completion_request([Llm.user("hi")], tools=[fn, Llm.server_tool(name, **config)])
    tools = body(server, req)["tools"]
    assert tools[0]["name"] == "f" and tools[1] == sent


def test_an_unknown_server_tool_is_refused_before_sending(server):
    """A built-in tool OpenAI does not document is an UnsupportedError naming the known ones."""
    req = Llm.completion_request([Llm.user("hi")], tools=[Llm.server_tool("google_search")])
    rec = Recorder()
    blazen.Streaming.complete(model_for("openai", server, api="responses"), req, rec.handler)
    assert isinstance(rec.error, blazen.UnsupportedError) and "web_search" in rec.error.message
    assert server.requests == []


# -- the command line --------------------------------------------------------------------


def test_blazen_chat_api_responses_streams_from_the_responses_api(server, capsys, monkeypatch):
    """blazen chat --api responses posts to /responses and prints the answer."""
    from blazen import cli

    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-0123456789")
    server.add(text_reply())
    argv = ["chat", "--provider", "openai", "--base-url", server.base_url, "--api", "responses"]
    assert cli.main([*argv, "hi"]) == 0
    assert "Why did the scarecrow win an award?" in capsys.readouterr().out
    assert server.requests[0].path == "/v1/responses"


def test_blazen_batch_api_responses_runs_each_item_on_the_responses_api(server, tmp_path):
    """blazen batch --api responses sends every item to /responses."""
    from blazen import cli

    prompts = tmp_path / "in.jsonl"
    prompts.write_text('{"id": "a", "prompt": "hi"}\n{"id": "b", "prompt": "ho"}\n')
    server.add(text_reply(), text_reply())
    out = tmp_path / "out.jsonl"
    argv = ["batch", str(prompts), "--out", str(out), "--base-url", server.base_url]
    assert cli.main([*argv, "--api", "responses", "--concurrency", "1"]) == 0
    assert [r.path for r in server.requests] == ["/v1/responses"] * 2
    assert out.read_text().count("Why did the scarecrow win an award?") == 2


@pytest.mark.parametrize("provider", ["anthropic", "local"])
def test_blazen_chat_api_on_a_provider_of_its_own_api_is_a_usage_error(provider, capsys):
    """--api applies to OpenAI-format providers only: exit status 2, saying so."""
    from blazen import cli

    assert cli.main(["chat", "--provider", provider, "--api", "responses", "hi"]) == 2
    assert "--api applies to OpenAI-format providers" in capsys.readouterr().err


def test_no_reasoning_asks_for_no_summary(server):
    """reasoning_effort='none' is sent alone: there is no reasoning to summarise."""
    req = Llm.completion_request([Llm.user("hi")], reasoning_effort="none")
    assert body(server, req, model="gpt-5.1")["reasoning"] == {"effort": "none"}


def _preamble_turn() -> bytes:
    """A turn that reasons, says a preamble, then calls: output items in that order."""
    from blazen.testing import sse_event

    reasoning = {
        "id": "rs_pre",
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "gAAAAABpPRE" + "e" * 40,
    }
    message = {
        "id": "msg_pre",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
    }
    call = {
        "id": "fc_pre",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_pre",
        "name": "lookup",
        "arguments": '{"q":1}',
    }
    events = [
        {"type": "response.created", "response": {"id": "resp_pre", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": reasoning},
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
        {"type": "response.output_item.added", "output_index": 1, "item": message},
        {
            "type": "response.output_text.delta",
            "output_index": 1,
            "content_index": 0,
            "delta": "Let me look.",
        },
        {"type": "response.output_item.done", "output_index": 1, "item": message},
        {"type": "response.output_item.added", "output_index": 2, "item": call},
        {"type": "response.output_item.done", "output_index": 2, "item": call},
        {
            "type": "response.completed",
            "response": {"id": "resp_pre", "status": "completed", "output": []},
        },
    ]
    return b"".join(
        sse_event({**e, "sequence_number": n}, str(e["type"])) for n, e in enumerate(events)
    )


def test_reasoning_before_a_preamble_goes_back_before_it(server):
    """reasoning, a preamble message, a call: the next request keeps that order."""
    server.add(Reply.sse(_preamble_turn()))
    first = blazen.Streaming.complete(model_for("openai", server, api="responses"), REQ)
    assert first.content == "Let me look." and first.tool_calls[0].id == "call_pre"
    req = Llm.completion_request([Llm.user("hi"), first.message, Llm.tool_result("call_pre", "1")])
    items = body(server, req)["input"]
    assert [i.get("type") or i["role"] for i in items] == [
        "user",
        "reasoning",
        "assistant",
        "function_call",
        "function_call_output",
    ]
    assert items[1]["id"] == "rs_pre" and items[1]["encrypted_content"].startswith("gAAAAABpPRE")
