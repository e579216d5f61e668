"""An MCP server's tools as :class:`blazen.Tool` values: the server's schema, a remote call.

An :class:`McpTool` is a :class:`~blazen.Tool` whose function calls the server through its
session, so the agent runs it exactly as a Python tool: arguments checked against the
schema first (here the server's ``inputSchema``), the call on a worker thread, the run's
CancelToken passed in (a cancel, Ctrl-C or time limit reaches the call in flight), its
failures made error results the model reads.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol

from ..._cancel import CancelToken
from ..results import ToolContent
from ..tools import Tool
from .convert import model_name

__all__ = ["Caller", "McpTool", "ToolContent", "listing_tools"]


class Caller(Protocol):
    """What a tool needs of its session (:class:`~blazen.agent.mcp.McpSession` is one)."""

    @property
    def name(self) -> str:
        """The server's name, for spans and messages."""

    @property
    def span_attributes(self) -> dict[str, Any]:
        """The server's span attributes (transport, address, protocol version)."""

    def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        cancel: Optional[CancelToken] = None,
        timeout: Optional[float] = None,
    ) -> ToolContent:
        """Call ``tool`` with ``arguments``; its content, or a typed blazen error."""


class _Remote:
    """The function behind an MCP tool: one call through the session."""

    __slots__ = ("_session", "_tool")

    def __init__(self, session: Caller, tool: str) -> None:
        self._session = session
        self._tool = tool

    # The token parameter is hidden from the model (see Tool); keyword-only with an
    # unlikely name, so that no argument of the server's schema can take its place.
    def __call__(self, *, _blazen_cancel: CancelToken, **arguments: Any) -> ToolContent:
        return self._session.call(self._tool, arguments, cancel=_blazen_cancel)

    def __repr__(self) -> str:
        return f"<MCP tool {self._tool!r} of {self._session.name!r}>"


def _schema(listed: Any) -> dict[str, Any]:
    schema = listed.input_schema
    schema = dict(schema) if isinstance(schema, dict) else {}
    # Every wire wants an object schema; the spec requires one, but not every server sends it.
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    return schema


class McpTool(Tool):
    """A tool of an MCP server, for :class:`blazen.Agent`: build them with ``session.tools()``.

    ``remote_name`` is the server's name for it (the model may see another: see
    ``prefix=``), ``server`` the server's name.
    """

    __slots__ = ("_session", "remote_name", "server")

    def __init__(self, session: Caller, listed: Any, *, prefix: str = "") -> None:
        super().__init__(
            _Remote(session, listed.name),
            name=model_name(listed.name, prefix),
            description=listed.description or getattr(listed, "title", None) or "",
            parameters=_schema(listed),
        )
        self._session = session
        #: The tool's name on its server.
        self.remote_name: str = listed.name
        #: The name of the server it runs on.
        self.server: str = session.name

    @property
    def span_attributes(self) -> dict[str, Any]:
        """The server's name, transport and address, and the MCP method."""
        return {
            **self._session.span_attributes,
            "gen_ai.tool.type": "extension",
            "mcp.method.name": "tools/call",
        }

    def __repr__(self) -> str:
        return f"McpTool(name={self.name!r}, server={self.server!r})"


def listing_tools(session: Caller, listed: list[Any], prefix: str) -> list[McpTool]:
    """A tool per listed entry; refuses two that end up with one name."""
    if not isinstance(prefix, str):
        msg = f"prefix must be a string, got {type(prefix).__name__}"
        raise TypeError(msg)
    tools = [McpTool(session, entry, prefix=prefix) for entry in listed]
    seen: dict[str, str] = {}
    for t in tools:
        if t.name in seen:
            msg = (
                f"the MCP server {session.name!r} has tools {seen[t.name]!r} and "
                f"{t.remote_name!r}, both named {t.name!r} for the model; pass prefix=..."
            )
            raise ValueError(msg)
        seen[t.name] = t.remote_name
    return tools
