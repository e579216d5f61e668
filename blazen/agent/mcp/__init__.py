"""MCP servers' tools for :class:`blazen.Agent`, over stdio or streamable HTTP.

Built on the official SDK (``pip install 'blazen-stream[mcp]'``, Python 3.10+), which is imported
when a session is built, not with blazen. Example::

    from blazen.agent import mcp

    with mcp.stdio(["python", "weather_server.py"]) as weather, \\
            mcp.http("http://127.0.0.1:8765/mcp") as docs:
        agent = Agent(model, tools=[get_time, *weather.tools(), *docs.tools()])
        agent.run("...")

:mod:`.session` runs the SDK's client on a private event loop thread, :mod:`.tools` makes
the server's tools :class:`blazen.Tool` values, :mod:`.convert` turns the SDK's results and
failures into blazen's.
"""

from __future__ import annotations

import os
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any, Optional, TextIO, Union

from ..._version import __version__
from .session import McpSession
from .tools import McpTool

__all__ = ["McpSession", "McpTool", "http", "stdio"]


def _sdk() -> Any:
    try:
        import mcp
    except ImportError as exc:
        msg = (
            "blazen.agent.mcp needs the MCP SDK: pip install 'blazen-stream[mcp]' (Python 3.10+), "
            f"({type(exc).__name__}: {exc})"
        )
        raise ImportError(msg) from exc
    return mcp


def _seconds(name: str, value: Optional[float], *, allow_none: bool) -> Optional[float]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        msg = f"{name} must be a positive number of seconds{' or None' if allow_none else ''}"
        raise ValueError(msg + f", got {value!r}")
    return float(value)


def _errlog(stream: Optional[TextIO]) -> TextIO:
    # The server's stderr goes to a real file descriptor: where the caller says, else this
    # process's stderr (or the original one when sys.stderr was replaced by an object
    # without a descriptor, as test runners and notebooks do).
    for candidate in (stream, sys.stderr, sys.__stderr__):
        if candidate is None:
            continue
        try:
            candidate.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        return candidate
    return open(os.devnull, "w")


def stdio(
    command: Sequence[str],
    *,
    env: Optional[Mapping[str, str]] = None,
    cwd: Union[str, os.PathLike[str], None] = None,
    name: Optional[str] = None,
    timeout: Optional[float] = None,
    connect_timeout: float = 30.0,
    stderr: Optional[TextIO] = None,
    protocol: str = "auto",
) -> McpSession:
    """A session with the MCP server that ``command`` starts, over its stdin and stdout.

    The process starts when the session opens (``with``) and ends when it closes, also
    after Ctrl-C: the SDK closes its stdin, then kills its process tree if it lingers.
    ``env`` is added to a safe minimal environment (the SDK's: ``PATH``, ``HOME``...);
    ``timeout`` limits each tool call (seconds; None: only the agent run's limits);
    ``connect_timeout`` the start and the tool listing; ``stderr`` takes the server's log
    (default: this process's stderr). ``name`` names the server in spans and errors
    (default: the name it announces). ``protocol`` is the SDK's connect mode: ``"auto"``
    (the newest version both sides speak, falling back to the initialize handshake of
    servers from before 2026), ``"legacy"`` (that handshake always), or a version string.

    Example::

        with mcp.stdio(["python", "weather_server.py"], timeout=30) as weather:
            result = Agent(model, tools=weather.tools()).run("Weather in Oslo?")
    """
    if isinstance(command, (str, bytes)) or not command:
        msg = 'command must be a list such as ["python", "server.py"], not a string'
        raise TypeError(msg)
    argv = [os.fspath(part) for part in command]
    if not all(isinstance(part, str) and part for part in argv):
        msg = f"command must hold non-empty strings, got {list(command)!r}"
        raise TypeError(msg)
    limit = _seconds("timeout", timeout, allow_none=True)
    connect = _seconds("connect_timeout", connect_timeout, allow_none=False) or 30.0
    _check_protocol(protocol)
    sdk = _sdk()
    params = sdk.StdioServerParameters(
        command=argv[0],
        args=argv[1:],
        env=None if env is None else dict(env),
        cwd=None if cwd is None else os.fspath(cwd),
    )
    errlog = _errlog(stderr)

    def opener() -> Any:
        transport = sdk.stdio_client(params, errlog=errlog)
        return sdk.Client(transport, client_info=_client_info(sdk), mode=protocol)

    return McpSession(
        opener,
        name=name,
        fallback_name=_program(argv),
        transport="stdio",
        attributes={"network.transport": "pipe"},
        timeout=limit,
        connect_timeout=connect,
    )


def http(
    url: str,
    *,
    headers: Optional[Mapping[str, str]] = None,
    name: Optional[str] = None,
    timeout: Optional[float] = None,
    connect_timeout: float = 30.0,
    protocol: str = "auto",
) -> McpSession:
    """A session with the MCP server at ``url``, over streamable HTTP.

    ``headers`` go with every request (an ``Authorization`` header, say: never logged nor
    shown in a repr or an error). Closing ends the HTTP session with the SDK's ``DELETE``
    where the server keeps one (``Mcp-Session-Id``: the initialize-handshake protocol; the
    2026-07-28 protocol keeps none), and closes the connections. ``timeout``,
    ``connect_timeout``, ``name`` and ``protocol`` are as for :func:`stdio`.

    Example::

        headers = {"Authorization": f"Bearer {token}"}
        with mcp.http("http://127.0.0.1:8765/mcp", headers=headers) as docs:
            result = Agent(model, tools=docs.tools(prefix="docs_")).run("Find the guide.")
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        msg = f"url must be an http(s) URL such as 'http://127.0.0.1:8765/mcp', got {url!r:.80}"
        raise ValueError(msg)
    parts = urllib.parse.urlsplit(url)
    limit = _seconds("timeout", timeout, allow_none=True)
    connect = _seconds("connect_timeout", connect_timeout, allow_none=False) or 30.0
    sent = {str(k): str(v) for k, v in (headers or {}).items()}
    _check_protocol(protocol)
    sdk = _sdk()

    def opener() -> Any:
        return _HttpClient(sdk, url, sent, protocol)

    attributes: dict[str, Any] = {"network.transport": "tcp"}
    if parts.hostname:
        attributes["server.address"] = parts.hostname
    attributes["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
    return McpSession(
        opener,
        name=name,
        fallback_name=parts.hostname or "mcp",
        transport="http",
        attributes=attributes,
        timeout=limit,
        connect_timeout=connect,
    )


def _check_protocol(protocol: str) -> None:
    # "auto", "legacy" or a dated version ("2026-07-28"); the SDK names the versions it knows.
    if not isinstance(protocol, str) or not protocol:
        msg = f'protocol must be "auto", "legacy" or a protocol version, got {protocol!r}'
        raise ValueError(msg)


def _program(argv: list[str]) -> str:
    """A name for the server before it announces one: its script's, else its command's."""
    script = next((a for a in argv[1:] if not a.startswith("-") and "." in a), argv[0])
    return os.path.basename(script) or script


def _client_info(sdk: Any) -> Any:
    return sdk.Implementation(name="blazen", version=__version__)


class _HttpClient:
    """The SDK's client over streamable HTTP with our headers, and the HTTP client it uses."""

    def __init__(self, sdk: Any, url: str, headers: dict[str, str], protocol: str) -> None:
        self._sdk = sdk
        self._url = url
        self._headers = headers
        self._protocol = protocol
        self._stack: Any = None

    async def __aenter__(self) -> Any:
        import contextlib

        import httpx2  # the SDK's own HTTP client library, installed with it
        from mcp.client.streamable_http import streamable_http_client

        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            # The SDK's default timeouts: 30 s to connect or write, 300 s for a read
            # (a server may hold a response stream open); ours run on top.
            http_client = await stack.enter_async_context(
                httpx2.AsyncClient(headers=self._headers, timeout=httpx2.Timeout(30.0, read=300.0))
            )
            transport = streamable_http_client(self._url, http_client=http_client)
            client = await stack.enter_async_context(
                self._sdk.Client(
                    transport, client_info=_client_info(self._sdk), mode=self._protocol
                )
            )
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return client

    async def __aexit__(self, *exc: Any) -> None:
        await self._stack.__aexit__(*exc)
