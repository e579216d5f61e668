"""One MCP session: the SDK's client on a private event loop thread, driven from sync code.

The official SDK is asyncio (anyio) all the way down; the agent is synchronous. A session
owns one thread that runs one event loop with one task holding the SDK's ``Client`` open
(its task groups must be entered and left by the same task). Everything else reaches that
loop through ``run_coroutine_threadsafe``: the tool listing, each call (one task per call,
so calls run concurrently), and the stop. Callers wait on a ``threading.Event`` that the
call's end, the caller's CancelToken, a deadline or the session's end sets, so a stalled
server never holds a caller: a waiter that gives up cancels its task, and the SDK then
sends the server ``notifications/cancelled``.

Leaving the session (``close``, ``__exit__``, also on Ctrl-C) stops the task; the SDK
closes the server's stdin and kills its process tree if it lingers (stdio), or ends the
HTTP session with a DELETE where the server keeps one; then the loop cancels every task
left and the thread ends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Coroutine
from typing import Any, Callable, Optional, TypeVar

from ..._cancel import CancelToken
from ...errors import BlazenError, CancelledError, ConnectionError, TimeoutError
from .convert import failure, reply
from .tools import McpTool, ToolContent, listing_tools

__all__ = ["McpSession", "Opener"]

logger = logging.getLogger("blazen")

T = TypeVar("T")

#: Builds the SDK client (an async context manager yielding ``mcp.Client``), on the loop.
Opener = Callable[[], Any]

#: How long leaving the session waits for the SDK's own shutdown (it bounds its waits:
#: about 4.5 s for a stdio server that ignores its closed stdin) before cancelling it.
CLOSE_GRACE = 8.0


class McpSession:
    """A connection to one MCP server; its tools for :class:`blazen.Agent`.

    Built by :func:`blazen.agent.mcp.stdio` or :func:`blazen.agent.mcp.http`; use it as a
    context manager (or call :meth:`open` and :meth:`close`). Safe to call from any number
    of threads at once; each call waits on its own thread, the session's loop on its own.
    """

    def __init__(
        self,
        opener: Opener,
        *,
        name: Optional[str],
        fallback_name: str,
        transport: str,
        attributes: dict[str, Any],
        timeout: Optional[float],
        connect_timeout: float,
    ) -> None:
        self._opener = opener
        self._name = name or fallback_name
        self._named = name is not None
        self._transport = transport
        self._attributes = {**attributes, "blazen.mcp.server": self._name}
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop: Optional[asyncio.Event] = None
        self._main: Optional[asyncio.Task[None]] = None
        # On the loop thread only: the session serves calls (set as it starts, cleared as
        # it ends). A call that reaches the loop after that starts no task: asyncio.run has
        # already gathered the tasks it cancels, and one made then would never be awaited.
        self._serving = False
        self._client: Any = None
        self._ready: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()
        self._listed: list[Any] = []
        self._waiters: set[threading.Event] = set()
        self._ended = threading.Event()
        self._closed = False

    # -- what it offers ----------------------------------------------------------------

    @property
    def name(self) -> str:
        """The server's name: ``name=``, else the one it announced, else its script or host."""
        return self._name

    @property
    def span_attributes(self) -> dict[str, Any]:
        """The attributes of the ``execute_tool`` spans of this server's tools."""
        return dict(self._attributes)

    def __repr__(self) -> str:
        state = "open" if self._thread is not None and not self._ended.is_set() else "closed"
        return f"McpSession({self._name!r}, transport={self._transport!r}, {state})"

    def tools(self, *, prefix: str = "") -> list[McpTool]:
        """The server's tools as :class:`blazen.Tool` values, for ``Agent(tools=[...])``.

        Each tool's schema is the server's ``inputSchema``; the agent checks the model's
        arguments against it before calling. ``prefix`` is put before every name (to keep
        two servers' tools apart); names are made to fit the providers' rule
        (``[A-Za-z0-9_-]``, 64 characters).
        """
        if self._thread is None:
            msg = "the MCP session is not open: use it as `with mcp.stdio([...]) as server:`"
            raise RuntimeError(msg)
        return listing_tools(self, self._listed, prefix)

    # -- opening and closing -----------------------------------------------------------

    def __enter__(self) -> McpSession:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> McpSession:
        """Start the server (stdio) or connect (HTTP), and list its tools; returns the session.

        Raises :class:`blazen.ConnectionError` when the server cannot be started or reached,
        :class:`blazen.TimeoutError` when it does not answer within ``connect_timeout``.
        """
        with self._lock:
            if self._thread is not None:
                msg = "an MCP session opens once; build another with mcp.stdio(...)/mcp.http(...)"
                raise RuntimeError(msg)
            self._thread = threading.Thread(
                target=self._run, name=f"blazen-mcp-{self._name}"[:60], daemon=True
            )
            self._thread.start()
        try:
            self._listed = self._ready.result(timeout=self._connect_timeout)
        except concurrent.futures.TimeoutError:
            self.close()
            raise TimeoutError(
                f"the MCP server {self._name!r} did not answer within connect_timeout="
                f"{self._connect_timeout:g} s",
                limit="connect",
                seconds=self._connect_timeout,
            ) from None
        except BlazenError:
            self.close()
            raise
        except BaseException:
            self.close()  # Ctrl-C while connecting: nothing is left running
            raise
        return self

    def close(self) -> None:
        """End the session: the server process exits (stdio), the HTTP session ends.

        Idempotent, safe from any thread. Waits for the session's thread to end; a Ctrl-C
        meanwhile is held until it has, then raised.
        """
        with self._lock:
            thread, self._closed = self._thread, True
        if thread is None or thread is threading.current_thread():
            return
        self._post(self._signal_stop)
        interrupted: Optional[BaseException] = None
        deadline = time.monotonic() + CLOSE_GRACE
        cancelled = False
        while thread.is_alive():
            try:
                thread.join(0.05)
            except KeyboardInterrupt as exc:  # finish closing first: nothing may be left
                interrupted = exc
            if not cancelled and time.monotonic() > deadline:
                # The SDK's shutdown is stuck (an HTTP server that never answers the
                # DELETE): cancel it; its stdio shutdown is shielded and bounded.
                cancelled = True
                deadline = time.monotonic() + CLOSE_GRACE
                self._post(self._cancel_main)
            elif cancelled and time.monotonic() > deadline:
                logger.warning(
                    "the MCP session %r did not end; its thread is abandoned", self._name
                )
                break
        if interrupted is not None:
            raise interrupted

    # -- calls ---------------------------------------------------------------------------

    def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        cancel: Optional[CancelToken] = None,
        timeout: Optional[float] = None,
    ) -> ToolContent:
        """Call ``tool`` on the server; its text and images, or a typed blazen error.

        Raises :class:`blazen.ToolError` when the server answers ``isError`` or refuses the
        call, :class:`blazen.TimeoutError` when ``timeout`` (or the session's) runs out,
        :class:`blazen.CancelledError` when ``cancel`` is cancelled and
        :class:`blazen.ConnectionError` when the server has gone. The call in flight is
        cancelled on the server in every one of those cases.
        """
        doing = f"calling {tool!r}"
        limit = self._timeout if timeout is None else timeout

        async def one() -> ToolContent:
            return reply(await self._client.call_tool(tool, arguments), self._name, tool)

        return self._wait(one, doing, cancel, limit)

    def _wait(
        self,
        make: Callable[[], Coroutine[Any, Any, T]],
        doing: str,
        cancel: Optional[CancelToken],
        limit: Optional[float],
    ) -> T:
        wake = threading.Event()
        future, stop = self._submit(make, doing)
        future.add_done_callback(lambda _: wake.set())
        unsubscribe = cancel.subscribe(wake.set) if cancel is not None else None
        with self._lock:
            self._waiters.add(wake)
        if self._ended.is_set():
            wake.set()
        deadline = None if limit is None else time.monotonic() + limit
        try:
            while not future.done():
                if cancel is not None and cancel.cancelled:
                    reason = f": {cancel.reason}" if cancel.reason else ""
                    raise CancelledError(
                        f"{doing} on the MCP server {self._name!r} was cancelled{reason}"
                    )
                if self._ended.is_set():
                    raise ConnectionError(
                        f"the MCP session {self._name!r} ended while {doing}"
                        + (": the server has gone" if not self._closed else " (it was closed)")
                    )
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(
                        f"the MCP server {self._name!r} did not answer within {limit:g} s "
                        f"while {doing}",
                        limit="tool",
                        seconds=limit or 0.0,
                    )
                wake.wait(left)
                wake.clear()
            try:
                return future.result()
            except concurrent.futures.CancelledError:
                raise ConnectionError(
                    f"the MCP session {self._name!r} ended while {doing}"
                ) from None
            except BaseException as exc:
                raise failure(exc, self._name, doing) from None
        finally:
            # Not done: a cancel, a deadline, the session's end or Ctrl-C. The task is
            # cancelled on the loop, and the SDK tells the server.
            stop()
            if unsubscribe is not None:
                unsubscribe()
            with self._lock:
                self._waiters.discard(wake)

    def _submit(
        self, make: Callable[[], Coroutine[Any, Any, T]], doing: str
    ) -> tuple[concurrent.futures.Future[T], Callable[[], None]]:
        """Run ``make()`` on the session's loop: its future, and how to stop it.

        The coroutine is made on the loop thread, once it is sure to run: a loop that
        stops first (the server died) leaves no coroutine behind that was never awaited.
        """
        loop = self._loop
        if loop is None or self._ended.is_set() or self._closed:
            state = "closed" if self._closed else "not open" if loop is None else "over"
            raise ConnectionError(
                f"the MCP session {self._name!r} is {state}; cannot go on {doing}"
            )
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        tasks: list[asyncio.Task[T]] = []

        def copy(task: asyncio.Task[T]) -> None:
            if task.cancelled():
                future.set_exception(concurrent.futures.CancelledError())
            elif task.exception() is not None:
                future.set_exception(task.exception())
            else:
                future.set_result(task.result())

        def start() -> None:
            if not self._serving:
                future.cancel()  # the session is ending: the call fails as its end does
                return
            if not future.set_running_or_notify_cancel():
                return  # stopped before it began
            task = loop.create_task(make())
            tasks.append(task)
            task.add_done_callback(copy)

        def stop() -> None:
            if future.cancel() or future.done():
                return  # never began, or already over
            self._post(lambda: [t.cancel() for t in tasks])

        try:
            loop.call_soon_threadsafe(start)
        except RuntimeError:  # the loop closed meanwhile
            raise ConnectionError(
                f"the MCP session {self._name!r} is over; cannot go on {doing}"
            ) from None
        return future, stop

    # -- the loop thread -----------------------------------------------------------------

    def _post(self, fn: Callable[[], Any]) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to stop
                loop.call_soon_threadsafe(fn)

    def _signal_stop(self) -> None:
        if self._client is None:
            # Still connecting (a server that never answers): nothing to wait for, so the
            # connect is cancelled; the SDK's stdio shutdown still ends the process.
            self._cancel_main()
        elif self._stop is not None:
            self._stop.set()

    def _cancel_main(self) -> None:
        if self._main is not None:
            self._main.cancel()

    def _run(self) -> None:
        try:
            # asyncio.run cancels and awaits every task left once the main one ends, so
            # no call's future is left pending when the thread goes.
            asyncio.run(self._serve())
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(failure(exc, self._name, "connecting"))
            elif not self._closed:
                logger.warning(
                    "the MCP session %r ended: %s", self._name, failure(exc, self._name, "serving")
                )
        finally:
            self._loop = None
            self._ended.set()
            if not self._ready.done():
                self._ready.set_exception(
                    ConnectionError(f"the MCP session {self._name!r} ended while connecting")
                )
            with self._lock:
                waiters = list(self._waiters)
            for wake in waiters:
                wake.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._main = asyncio.current_task()
        if self._closed:  # closed before the loop ran
            return
        self._serving = True
        try:
            async with self._opener() as client:
                self._client = client
                listed = await _all_tools(client)
                info = getattr(client, "server_info", None)
                self._announce(
                    getattr(info, "name", None), getattr(client, "protocol_version", None)
                )
                self._ready.set_result(listed)
                await self._stop.wait()
        finally:
            self._serving = False

    def _announce(self, server_name: Any, version: Any) -> None:
        # Before the session is handed out: no call reads these concurrently.
        if isinstance(version, str):
            self._attributes["mcp.protocol.version"] = version
        if not self._named and isinstance(server_name, str) and server_name:
            self._name = server_name
            self._attributes["blazen.mcp.server"] = server_name


async def _all_tools(client: Any) -> list[Any]:
    """Every tool of the server, page after page (``nextCursor``)."""
    tools: list[Any] = []
    cursor: Optional[str] = None
    for _ in range(1000):  # a server that pages forever does not hold the caller forever
        page = await _awaited(client.list_tools(cursor=cursor))
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


async def _awaited(value: Awaitable[T]) -> T:
    return await value
