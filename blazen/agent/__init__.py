"""Agents: the tool loop on top of streaming.

:mod:`.loop` runs it (blocking and asyncio), :mod:`.run` keeps one run's state,
:mod:`.calls` checks and runs the tool calls of a turn, :mod:`.results` holds the values a
run hands back, and :mod:`.tools` turns Python functions into tools the model may call;
:mod:`.mcp` (imported on its own: ``from blazen.agent import mcp``) offers an MCP
server's tools. Imports run one way: ``tools`` <- ``results`` <- ``calls``, ``run`` <-
``loop``, and ``tools``, ``results`` <- ``mcp``.
"""

from __future__ import annotations

from .loop import Agent
from .results import AgentResult, ToolContent, ToolResult
from .tools import Tool, tool

__all__ = ["Agent", "AgentResult", "Tool", "ToolContent", "ToolResult", "tool"]
