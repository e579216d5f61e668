"""ToolContent: a tool's text and images, sent back to the model on every wire that takes images."""

from __future__ import annotations

import pytest

import blazen
from blazen import Agent, Llm, tool
from blazen.agent import ToolContent
from blazen.testing import Reply, openai_sse, openai_tool_sse, sse_event

from .conftest import model_for, sse_reply

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@tool
def snapshot(label: str) -> ToolContent:
    """A picture of the scene."""
    return ToolContent(text=f"snapshot {label}", images=[Llm.image(data=PNG)])


def test_the_images_follow_the_tool_results_in_a_user_message(server, model):
    """OpenAI format: the tool message says an image follows; the next user message has it."""
    server.add(
        Reply.sse(openai_tool_sse([("c1", "snapshot", {"label": "a"})])),
        Reply.sse(openai_sse(["a red dot"])),
    )
    result = Agent(model, tools=[snapshot]).run("look")
    assert result.tool_results[0].images[0].data == PNG
    messages = server.requests[1].json()["messages"]
    assert messages[-2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "snapshot a\n(1 image follows this result)",
    }
    assert messages[-1]["role"] == "user"
    assert messages[-1]["content"][-1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG}"},
    }


def anthropic_tool_use() -> Reply:
    """A Messages API stream that calls snapshot(label="a"), as the streaming docs show it."""
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [],
    }
    events = [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "snapshot",
                    "input": {},
                },
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"label": "a"}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 9},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return Reply.sse([sse_event(data, event=name) for name, data in events])


def test_anthropic_gets_the_image_in_the_tool_results_turn_after_them(server):
    """Messages API: one user turn, the tool_result block first, then the text and image."""
    server.add(anthropic_tool_use(), sse_reply("text.sse", "anthropic"))
    model = model_for("anthropic", server)
    Agent(model, tools=[snapshot]).run("look")
    blocks = server.requests[1].json()["messages"][-1]["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "text", "image"]
    assert blocks[2]["source"] == {"type": "base64", "media_type": "image/png", "data": PNG}


def test_tool_content_refuses_what_is_not_an_image():
    """images= takes Llm.image values only; text must be a string."""
    with pytest.raises(TypeError, match=r"Llm\.image"):
        ToolContent(text="x", images=["https://example.com/a.png"])
    with pytest.raises(TypeError):
        ToolContent(text=3)  # type: ignore[arg-type]
    assert blazen.agent.ToolContent is ToolContent
