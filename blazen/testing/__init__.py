"""Test your own callbacks offline: a real HTTP server in a thread that replays wire bytes.

``StreamServer`` listens on a loopback port and answers each request with the next
scripted :class:`Reply`: the status, the headers and the body exactly as a provider would
send them, whole or split into separate TCP writes with pauses between them. It records
every request it got and notices when the client closes a connection, so a test can check
that a cancelled stream really hung up. Example::

    from blazen import Llm, Providers, Streaming
    from blazen.testing import Reply, StreamServer, openai_sse

    with StreamServer([Reply.sse(openai_sse(["Hel", "lo"]))]) as server:
        model = Providers.openai_compat("test", server.base_url)
        resp = Streaming.complete(model, Llm.completion_request([Llm.user("hi")]))
        assert resp.content == "Hello"
        assert server.requests[0].json()["stream"] is True

:mod:`.replies` holds what the server answers (:class:`Reply` and the :class:`Pause`,
:class:`Stall` and :class:`Drop` between writes), :mod:`.wire` the builders of wire bytes,
:mod:`.server` the server and its records, :mod:`.recorder` the :class:`Recorder` of
callbacks, and :mod:`.batches` a fake of the providers' batch APIs (:class:`BatchServer`).
Nothing here imports the rest of blazen: the fake servers stay independent of the client
they test.
"""

from __future__ import annotations

from .batches import BatchFailure, BatchServer, FakeBatch
from .recorder import Recorder
from .replies import ENCODINGS, FRAMINGS, Action, Drop, Pause, Reply, Stall
from .server import ConnectionRecord, RecordedRequest, StreamServer
from .wire import openai_sse, openai_tool_sse, responses_sse, split_bytes, sse, sse_event

__all__ = [
    "Action",
    "BatchFailure",
    "BatchServer",
    "ConnectionRecord",
    "Drop",
    "ENCODINGS",
    "FRAMINGS",
    "FakeBatch",
    "Pause",
    "RecordedRequest",
    "Recorder",
    "Reply",
    "Stall",
    "StreamServer",
    "openai_sse",
    "openai_tool_sse",
    "responses_sse",
    "split_bytes",
    "sse",
    "sse_event",
]
