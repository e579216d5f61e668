"""MCP values as blazen's: tool names, call results and SDK failures. No I/O, no threads.

A server's ``tools/list`` entry becomes the name and schema the model sees; a
``CallToolResult`` becomes the :class:`~blazen.agent.ToolContent` the model reads, or the
error it is told about; every exception the SDK and its transports raise becomes one typed
blazen error, in :func:`failure`, most specific first.
"""

from __future__ import annotations

import builtins
import json
import re
from collections.abc import Iterable
from typing import Any

from ..._types import ImagePart
from ...errors import BlazenError, ConnectionError, TimeoutError, ToolError, safe_str
from ..results import ToolContent

__all__ = ["failure", "leaf", "model_name", "reply"]

# OpenAI's rule for function names (the strictest wire's); MCP also allows "." and longer
# names (https://modelcontextprotocol.io/specification/2025-11-25/server/tools#tool-names).
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")

# JSON-RPC error codes the SDK raises as MCPError (mcp_types): a request that timed out and
# a connection that closed while the request waited.
_REQUEST_TIMEOUT = -32001
_CONNECTION_CLOSED = -32000


def model_name(remote: str, prefix: str = "") -> str:
    """The name the model calls ``remote`` by: ``prefix`` + the name, in the wires' alphabet."""
    return _NOT_ALLOWED.sub("_", prefix + remote)[:64] or "_"


def _text_of(block: Any) -> str:
    """The text a model reads for one content block that is not an image."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind == "resource":
        inner = block.resource
        text = getattr(inner, "text", None)
        if isinstance(text, str):
            return text
        return f"[binary resource {inner.uri} ({inner.mime_type or 'no type'}) not shown]"
    if kind == "resource_link":
        return f"[resource {block.name}: {block.uri}]"
    if kind == "audio":
        return f"[audio ({block.mime_type}) not shown: the model is sent text and images only]"
    return f"[{kind or type(block).__name__} content not shown]"


def reply(result: Any, server: str, tool: str) -> ToolContent:
    """A ``CallToolResult`` as what the model reads; raises ToolError for ``isError``.

    Text blocks are joined in order, images kept as image parts; with no content blocks,
    the structured content is sent as JSON (the spec asks servers to send both).
    """
    texts: list[str] = []
    images: list[ImagePart] = []
    blocks: Iterable[Any] = result.content or ()
    for block in blocks:
        if getattr(block, "type", "") == "image":
            images.append(ImagePart(data=block.data, media_type=block.mime_type))
        else:
            texts.append(_text_of(block))
    if not texts and not images and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(texts)
    if result.is_error:
        raise ToolError(
            f"the MCP server {server!r} answered that {tool!r} failed: {text or '(no message)'}",
            tool_name=tool,
        )
    return ToolContent(text=text, images=images)


def leaf(exc: BaseException) -> BaseException:
    """The first exception that is not a group: what anyio's task groups wrap."""
    # Duck-typed: BaseExceptionGroup is a builtin from 3.11 only (anyio backports it).
    while True:
        inner = getattr(exc, "exceptions", None)
        if not isinstance(inner, tuple) or not inner or not isinstance(inner[0], BaseException):
            return exc
        exc = inner[0]


def failure(exc: BaseException, server: str, doing: str) -> BlazenError:
    """The blazen error for ``exc``, raised by the SDK while ``doing`` (e.g. "calling 'add'")."""
    exc = leaf(exc)
    if isinstance(exc, BlazenError):
        return exc
    name = type(exc).__name__
    where = f"the MCP server {server!r}"
    err: BlazenError
    code = getattr(exc, "code", None)
    if name == "MCPError" and code == _REQUEST_TIMEOUT:
        err = TimeoutError(f"{where} did not answer in time while {doing}", limit="tool")
    elif name == "MCPError" and code == _CONNECTION_CLOSED:
        err = ConnectionError(f"the connection to {where} closed while {doing}")
    elif name == "MCPError":
        err = ToolError(f"{where} refused while {doing}: {safe_str(exc)}")
    elif isinstance(exc, builtins.TimeoutError) or "Timeout" in name:
        err = TimeoutError(f"{where} did not answer in time while {doing}", limit="tool")
    elif isinstance(exc, (OSError, EOFError)) or "Connect" in name or "Closed" in name:
        err = ConnectionError(
            f"the connection to {where} failed while {doing}: {name}: {safe_str(exc)}"
        )
    else:
        err = ConnectionError(f"{where} failed while {doing}: {name}: {safe_str(exc)}")
    err.__cause__ = exc
    return err
