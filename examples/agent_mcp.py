"""An agent with a Python tool and an MCP server's tool, called in parallel in one turn.

The MCP server (``mcp_weather_server.py``, beside this file) runs as a subprocess over
stdio for as long as the ``with`` block; it ends with the block, also on Ctrl-C. Needs
``pip install 'blazen-stream[mcp]'`` (Python 3.10+). Run it against any OpenAI-compatible
server, or with none to replay a scripted conversation::

    python examples/agent_mcp.py
    BLAZEN_BASE_URL=http://127.0.0.1:8080/v1 python examples/agent_mcp.py "Weather in Lima?"
"""

from __future__ import annotations

import os
import sys

from _demo import model_or_demo, paced

from blazen import Agent, ToolResult, tool
from blazen.agent import mcp
from blazen.testing import Reply, openai_sse, openai_tool_sse

HERE = os.path.dirname(os.path.abspath(__file__))


@tool
def get_local_time(city: str) -> str:
    """The local time in a city."""
    return {"oslo": "09:41", "paris": "09:41", "lima": "03:41"}.get(city.lower(), "08:41")


def scripted_conversation() -> list[Reply]:
    """What a capable model sends: both tools at once, then the answer."""
    calls = openai_tool_sse(
        [
            ("call_1", "get_weather", {"city": "Oslo"}),
            ("call_2", "get_local_time", {"city": "Oslo"}),
        ],
        usage={"prompt_tokens": 150, "completion_tokens": 38, "total_tokens": 188},
    )
    answer = openai_sse(
        ["In Oslo it is 4 C with light snow; ", "the local time is 09:41."],
        usage={"prompt_tokens": 230, "completion_tokens": 17, "total_tokens": 247},
    )
    return [Reply.sse(paced(calls, 0.01)), Reply.sse(paced(answer))]


def main() -> int:
    question = sys.argv[1] if len(sys.argv) > 1 else "What's the weather and time in Oslo?"
    model = model_or_demo(scripted_conversation())
    server = [sys.executable, os.path.join(HERE, "mcp_weather_server.py")]
    with open(os.devnull, "w") as quiet, mcp.stdio(server, stderr=quiet) as weather:
        agent = Agent(
            model,
            tools=[get_local_time, *weather.tools()],
            system_prompt="Answer in one sentence. Use the tools for weather and time.",
            max_iterations=4,
        )

        def on_tool_result(result: ToolResult) -> None:
            mark = "error" if result.is_error else "ok"
            print(f"[{mark}] {result.call.name} -> {result.content}")

        result = agent.run(
            question,
            on_tool_result=on_tool_result,
            on_error=lambda err: print(f"failed: {err}", file=sys.stderr),
            timeout=120,
        )
    if result is None:
        return 1
    print(result.text)
    print(
        f"({result.iterations} model turns, {len(result.tool_calls)} tool calls, "
        f"server {weather.name!r})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
