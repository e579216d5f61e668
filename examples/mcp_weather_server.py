"""A small MCP server (the official SDK's MCPServer) with one tool: the weather of a city.

``examples/agent_mcp.py`` starts it over stdio; ``python examples/mcp_weather_server.py
http 8765`` serves it over streamable HTTP at ``http://127.0.0.1:8765/mcp`` instead.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("weather")

# Canned data, so the example needs no weather service.
WEATHER = {"oslo": "4 C, light snow", "paris": "18 C, sunny", "lima": "22 C, overcast"}


@server.tool()
def get_weather(city: str) -> str:
    """Current weather in a city."""
    if city.lower() not in WEATHER:
        # An isError result: the model reads it and may try again.
        raise ToolError(f"no weather data for {city!r}; known cities: {', '.join(WEATHER)}")
    return WEATHER[city.lower()]


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
