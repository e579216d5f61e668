"""An agent with two tools: it looks up the weather and the local time, then answers.

Run it against any OpenAI-compatible server (llama.cpp, LM Studio, vLLM, Ollama's /v1)::

    python examples/agent_weather.py --base-url http://127.0.0.1:8080/v1 "Weather in Oslo?"
    BLAZEN_BASE_URL=http://localhost:11434/v1 BLAZEN_MODEL=qwen2.5:3b \
        python examples/agent_weather.py

With no server given (and no OPENAI_API_KEY) it replays a scripted two-turn conversation
from a local ``blazen.testing.StreamServer`` and says so on stderr, so it always runs.

About small local models: the default local model (Gemma 3 270M) may call tools poorly:
it may invent tool names, send arguments that are not valid JSON or do not fit the schema,
or ignore the tools and answer directly. The agent sends each such mistake back to the model
as an error result it can correct, and ``max_iterations`` bounds the loop, so a weak model
ends in a (possibly wrong) answer or a clear ``MaxIterationsError``, never a hang. A server
also needs a chat template that supports tools (llama-cpp-python: ``--chat_format
chatml-function-calling``). Run that way, Gemma 3 270M usually calls no tool at all and
answers with a plausible-sounding sentence; models of 3B and up call tools far more
reliably.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Literal

from _demo import model_or_demo, paced

import blazen
from blazen import Agent, ToolResult, tool
from blazen.testing import Reply, openai_sse, openai_tool_sse

# Canned data, so the example needs no weather service.
WEATHER = {"oslo": (4, "light snow"), "paris": (18, "sunny"), "lima": (22, "overcast")}
ZONES = {
    "oslo": ("Europe/Oslo", "09:41"),
    "paris": ("Europe/Paris", "09:41"),
    "lima": ("America/Lima", "03:41"),
}


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Current weather in a city.

    Args:
        city: The city's name, e.g. "Oslo".
        unit: Temperature unit.
    """
    if city.lower() not in WEATHER:
        msg = f"no weather data for {city!r}; known cities: {', '.join(WEATHER)}"
        raise LookupError(msg)  # the model sees this as an error result and may retry
    degrees, sky = WEATHER[city.lower()]
    if unit == "fahrenheit":
        return f"{degrees * 9 / 5 + 32:.0f} F, {sky}"
    return f"{degrees} C, {sky}"


@tool
def get_local_time(city: str) -> dict[str, str]:
    """The local time and time zone of a city.

    Args:
        city: The city's name.
    """
    zone, clock = ZONES.get(city.lower(), ("UTC", "08:41"))
    return {"city": city, "time_zone": zone, "local_time": clock}


def scripted_conversation() -> list[Reply]:
    """What a capable model sends: two tool calls at once, then the answer."""
    calls = openai_tool_sse(
        [
            ("call_1", "get_weather", {"city": "Oslo"}),
            ("call_2", "get_local_time", {"city": "Oslo"}),
        ],
        usage={"prompt_tokens": 182, "completion_tokens": 41, "total_tokens": 223},
    )
    answer = openai_sse(
        ["In Oslo it is ", "4 C with light snow, ", "and the local time is 09:41."],
        usage={"prompt_tokens": 268, "completion_tokens": 19, "total_tokens": 287},
    )
    return [Reply.sse(paced(calls, 0.01)), Reply.sse(paced(answer))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("question", nargs="?", default="What's the weather and time in Oslo?")
    parser.add_argument(
        "--base-url",
        default=os.environ.get("BLAZEN_BASE_URL"),
        help="an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1 (env BLAZEN_BASE_URL)",
    )
    parser.add_argument("--model", default=os.environ.get("BLAZEN_MODEL", "default"))
    args = parser.parse_args()

    if args.base_url:
        model = blazen.Providers.openai_compat("local", args.base_url, model=args.model)
    else:
        model = model_or_demo(scripted_conversation())

    agent = Agent(
        model,
        tools=[get_weather, get_local_time],
        system_prompt="Answer in one sentence. Use the tools for weather and time.",
        max_iterations=4,
    )

    mid_line = False

    def on_chunk(chunk: blazen.StreamChunk) -> None:
        nonlocal mid_line
        if chunk.content_delta:
            print(chunk.content_delta, end="", flush=True)
            mid_line = True

    def on_tool_call(call: blazen.ToolCall) -> None:
        nonlocal mid_line
        if mid_line:  # the model said something before calling tools
            print()
            mid_line = False
        print(f"[tool] {call.name}({call.arguments_json})")

    def on_tool_result(result: ToolResult) -> None:
        mark = "error" if result.is_error else "ok"
        print(f"  [{mark}] {result.call.name} -> {result.content}")

    result = agent.run(
        args.question,
        on_chunk=on_chunk,
        on_tool_call=on_tool_call,
        on_tool_result=on_tool_result,
        on_error=lambda err: print(f"\nfailed: {err}", file=sys.stderr),
        timeout=120,
    )
    if result is None:
        return 1
    print(
        f"\n({result.iterations} model turns, {len(result.tool_calls)} tool calls, "
        f"{result.usage.total_tokens} tokens)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
