"""One class per way of consuming a stream, each written the way its documentation shows.

Every client does the same job: stream one completion and assemble its text and its tool
calls' arguments (so that no client is credited for skipping work another one does). Each
one also knows how to abort mid-stream the way its users would: raise inside the loop (or,
for blazen, inside ``on_chunk``), and cancel from another thread where the library offers a
way. Imports happen inside each class so that a runner process loads one library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any, Optional

from .streams import Spec

__all__ = ["CLIENTS", "Abort", "Client", "make_client"]

Result = tuple[str, tuple[str, ...]]
MESSAGES = [{"role": "user", "content": "Tell me a joke."}]
KEY = "sk-bench-0000"
_ENDPOINTS = {
    "openai": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "responses": "/v1/responses",
}


class Abort(Exception):
    """Raised by a benchmark's chunk handler to abort a stream (scenario f)."""


class Client:
    """The interface of every benchmarked client."""

    name = ""
    formats: tuple[str, ...] = ("openai",)
    #: Whether another thread can cancel a stream this client is reading.
    can_cancel = False

    def __init__(self, base: str) -> None:
        self.base = base

    @staticmethod
    def path(spec: Spec) -> str:
        """The request path of ``spec``'s stream in its wire format's endpoint."""
        return spec.path() + _ENDPOINTS[spec.fmt]

    def stream(self, spec: Spec, on_text: Optional[Callable[[], None]] = None) -> Result:
        """Stream ``spec`` to the end; return the assembled text and tool arguments.

        ``on_text`` runs once per text delta, inside the client's loop or callback: it may
        raise :class:`Abort` to end the stream early.
        """
        raise NotImplementedError

    def cancel_during(
        self, spec: Spec, after: int, fire: Callable[[Callable[[], None]], None]
    ) -> None:
        """Stream ``spec``; after ``after`` text deltas call ``fire(cancel)`` from a thread."""
        raise NotImplementedError

    def close(self) -> None:
        """Release pooled connections."""

    def long_lived(self) -> None:
        """Keep what a long-lived worker keeps between streams (scenario h); most already do."""


def _collect_tools(args: dict[int, list[str]]) -> tuple[str, ...]:
    return tuple("".join(args[i]) for i in sorted(args))


# -- the floor: a raw socket, chunked decoding, SSE split and json.loads ----------------


def _fold(fmt: str, payloads: Iterable[Any], on_text: Any, done: Any) -> Result:
    """The text and tool-call arguments of a stream's ``data:`` payloads (str or bytes).

    The least a client must do with each payload, the same for every library that hands
    over payloads rather than assembling the answer itself.
    """
    text: list[str] = []
    args: dict[int, list[str]] = {}
    loads = json.loads
    for data in payloads:
        if fmt == "openai":
            if data == done:
                break
            obj = loads(data)
            choices = obj["choices"]
            if not choices:
                continue
            delta = choices[0]["delta"]
            content = delta.get("content")
            if content:
                text.append(content)
                if on_text is not None:
                    on_text()
            for tc in delta.get("tool_calls") or ():
                args.setdefault(tc["index"], []).append(tc["function"]["arguments"])
        elif fmt == "responses":
            obj = loads(data)
            kind = obj["type"]
            if kind == "response.output_text.delta":
                text.append(obj["delta"])
                if on_text is not None:
                    on_text()
            elif kind == "response.function_call_arguments.delta":
                args.setdefault(obj["output_index"], []).append(obj["delta"])
            elif kind == "response.completed":
                break
        else:
            obj = loads(data)
            kind = obj["type"]
            if kind == "content_block_delta":
                delta = obj["delta"]
                if delta["type"] == "text_delta":
                    text.append(delta["text"])
                    if on_text is not None:
                        on_text()
                else:
                    args.setdefault(obj["index"], []).append(delta["partial_json"])
            elif kind == "message_stop":
                break
    return "".join(text), _collect_tools(args)


class RawSocket(Client):
    """The least work that can read these streams: what any library adds is overhead."""

    name = "raw socket (floor)"
    formats = ("openai", "anthropic", "responses")
    can_cancel = True

    def __init__(self, base: str) -> None:
        super().__init__(base)
        host, port = base.split("//")[1].split(":")
        self.addr = (host, int(port))

    def _open(self, spec: Spec) -> tuple[socket.socket, bytes]:
        body = json.dumps({"model": "m", "messages": MESSAGES, "stream": True}).encode()
        path = self.path(spec)
        sock = socket.create_connection(self.addr)
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("closed before headers")
            buf += data
        return sock, buf.split(b"\r\n\r\n", 1)[1]

    def _events(self, sock: socket.socket, raw: bytes) -> Any:
        for batch in self._reads(sock, raw):
            yield from batch

    def _reads(self, sock: socket.socket, raw: bytes) -> Any:
        # Chunked decoding, then SSE events split on blank lines: a list per socket read.
        recv = sock.recv
        body = b""
        pos = 0
        finished = False
        while True:
            out = []
            while True:
                nl = raw.find(b"\r\n", pos)
                if nl < 0:
                    break
                size = int(raw[pos:nl], 16)
                if size == 0:
                    finished = True
                    break
                end = nl + 2 + size
                if end + 2 > len(raw):
                    break
                out.append(raw[nl + 2 : end])
                pos = end + 2
            if out:
                body += b"".join(out)
                start = 0
                events = []
                while True:
                    cut = body.find(b"\n\n", start)
                    if cut < 0:
                        break
                    events.append(body[start:cut])
                    start = cut + 2
                body = body[start:]
                if events:
                    yield events
            if finished:
                return
            raw = raw[pos:]
            pos = 0
            data = recv(65536)
            if not data:
                return
            raw += data

    def _run(self, spec: Spec, sock: socket.socket, raw: bytes, on_text: Any) -> Result:
        try:
            return self._consume(spec, self._events(sock, raw), on_text)
        finally:
            sock.close()

    def _consume(self, spec: Spec, events: Any, on_text: Any) -> Result:
        payloads = (event[event.index(b"data: ") + 6 :] for event in events)
        return _fold(spec.fmt, payloads, on_text, b"[DONE]")

    def stream(self, spec: Spec, on_text: Optional[Callable[[], None]] = None) -> Result:
        sock, raw = self._open(spec)
        return self._run(spec, sock, raw, on_text)

    def cancel_during(
        self, spec: Spec, after: int, fire: Callable[[Callable[[], None]], None]
    ) -> None:
        sock, raw = self._open(spec)
        count = [0]

        def cancel() -> None:
            sock.shutdown(socket.SHUT_RDWR)

        def on_text() -> None:
            count[0] += 1
            if count[0] == after:
                fire(cancel)

        with contextlib.suppress(OSError, ValueError):
            self._run(spec, sock, raw, on_text)


def _replay(events: queue.SimpleQueue[Optional[list[bytes]]]) -> Any:
    """The events of each batch a reading thread handed over, until it hands over None."""
    while True:
        batch = events.get()
        if batch is None:
            return
        yield from batch


class RawThreaded(RawSocket):
    """The floor of blazen's thread model: the raw socket read on a worker thread.

    SPEC promise 2 puts the HTTP request and the parsing on a worker thread and the
    callbacks on the caller's: a thread started per stream and a hand-off per read. This
    is that shape with nothing else, so (d) shows what the contract itself costs.
    """

    name = "raw socket + worker thread"
    can_cancel = False

    def stream(self, spec: Spec, on_text: Optional[Callable[[], None]] = None) -> Result:
        sock, raw = self._open(spec)
        events: queue.SimpleQueue[Optional[list[bytes]]] = queue.SimpleQueue()

        def work() -> None:
            # One hand-off per socket read, as blazen batches: what one read brought.
            try:
                for batch in self._reads(sock, raw):
                    events.put(batch)
            except OSError:
                pass  # the caller shut the socket down (it stopped early)
            finally:
                events.put(None)

        worker = threading.Thread(target=work, daemon=True)
        worker.start()

        try:
            return self._consume(spec, _replay(events), on_text)
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            worker.join()
            sock.close()


# -- blazen ----------------------------------------------------------------------------


class _Decoder:
    """Chunked decoding and the SSE split of :meth:`RawSocket._reads`, fed one read at a time."""

    __slots__ = ("body", "finished", "raw")

    def __init__(self) -> None:
        self.raw = b""
        self.body = b""
        self.finished = False

    def feed(self, data: bytes) -> list[bytes]:
        raw = self.raw + data if self.raw else data
        pos = 0
        out = []
        while True:
            nl = raw.find(b"\r\n", pos)
            if nl < 0:
                break
            size = int(raw[pos:nl], 16)
            if size == 0:
                self.finished = True
                break
            end = nl + 2 + size
            if end + 2 > len(raw):
                break
            out.append(raw[nl + 2 : end])
            pos = end + 2
        self.raw = raw[pos:]
        events = []
        if out:
            body = self.body + b"".join(out)
            start = 0
            while True:
                cut = body.find(b"\n\n", start)
                if cut < 0:
                    break
                events.append(body[start:cut])
                start = cut + 2
            self.body = body[start:]
        return events


class RawShared(RawSocket):
    """The floor of a multiplexed design: one reader thread for every stream's socket.

    Not blazen's shape today (SPEC promise 2 is met by a worker thread per stream, which
    ``raw socket + worker thread`` measures): one thread waits on all sockets at once
    (epoll) and hands each read's events to the stream's caller through its queue, so a
    chunk wakes one thread, not two, and a busy moment serves several sockets per wake.
    The request is sent on the caller's thread, as the other raw floors send it.
    """

    name = "raw socket + one shared reader"
    can_cancel = False

    def __init__(self, base: str) -> None:
        super().__init__(base)
        import selectors

        self._selector = selectors.DefaultSelector()
        self._reader: Optional[threading.Thread] = None
        # Registering, and taking a stream off the selector, are done under this lock:
        # a caller that stops early and the reader finishing a body may both try.
        self._lock = threading.Lock()

    def _read_all(self) -> None:
        select = self._selector.select
        while True:
            for key, _ in select():
                sock, decoder, events, gone = key.data
                try:
                    data = sock.recv(65536)
                except OSError:  # the caller stopped early and closed it
                    data = b""
                batch = decoder.feed(data) if data else []
                if batch:
                    events.put(batch)
                if not data or decoder.finished:
                    self._drop(sock, gone)
                    events.put(None)

    def _drop(self, sock: socket.socket, gone: list[bool]) -> None:
        with self._lock:
            if not gone:
                gone.append(True)
                self._selector.unregister(sock)

    def stream(self, spec: Spec, on_text: Optional[Callable[[], None]] = None) -> Result:
        import selectors

        sock, raw = self._open(spec)
        events: queue.SimpleQueue[Optional[list[bytes]]] = queue.SimpleQueue()
        decoder = _Decoder()
        gone: list[bool] = []
        first = decoder.feed(raw) if raw else []
        if first:
            events.put(first)
        if decoder.finished:
            gone.append(True)
            events.put(None)
        else:
            with self._lock:
                if self._reader is None:
                    self._reader = threading.Thread(target=self._read_all, daemon=True)
                    self._reader.start()
                self._selector.register(sock, selectors.EVENT_READ, (sock, decoder, events, gone))

        try:
            return self._consume(spec, _replay(events), on_text)
        finally:
            self._drop(sock, gone)  # before the descriptor can be reused by another stream
            sock.close()


class Blazen(Client):
    """``Streaming.complete`` with an ``on_chunk`` callback: the full callback path."""

    name = "blazen"
    can_cancel = True

    def __init__(self, base: str) -> None:
        super().__init__(base)
        import blazen

        self.blazen = blazen
        self.req = blazen.Llm.completion_request(
            [blazen.Llm.user("Tell me a joke.")], max_tokens=256
        )
        self.models: dict[str, Any] = {}
        if hasattr(blazen.Providers, "anthropic"):
            self.formats = ("openai", "anthropic")
        try:  # a baseline checkout from before the Responses wire has no api= option
            blazen.Providers.openai(api_key=KEY, api="responses")
        except (TypeError, ValueError):
            pass
        else:
            self.formats = (*self.formats, "responses")

    def _model(self, spec: Spec) -> Any:
        key = spec.path()
        model = self.models.get(key)
        if model is None:
            providers = self.blazen.Providers
            opts: dict[str, Any] = {"max_retries": 0, "max_connections": 256}
            if spec.fmt == "openai":
                model = providers.openai(api_key=KEY, base_url=self.base + key + "/v1", **opts)
            elif spec.fmt == "responses":
                url = self.base + key + "/v1"
                model = providers.openai(api_key=KEY, base_url=url, api="responses", **opts)
            else:
                model = providers.anthropic(api_key=KEY, base_url=self.base + key, **opts)
            self.models[key] = model
        return model

    def stream(self, spec: Spec, on_text: Optional[Callable[[], None]] = None) -> Result:
        # The response keeps the text and the tool calls; the callback sees every chunk.
        def on_chunk(chunk: Any) -> None:
            if chunk.content_delta is not None and on_text is not None:
                on_text()

        try:
            resp = self.blazen.Streaming.complete(self._model(spec), self.req, on_chunk=on_chunk)
        except self.blazen.CallbackError as exc:
            raise exc.__cause__ from None  # type: ignore[misc]
        assert resp is not None
        return resp.content, tuple(c.arguments_json for c in resp.tool_calls)

    def cancel_during(
        self, spec: Spec, after: int, fire: Callable[[Callable[[], None]], None]
    ) -> None:
        token = self.blazen.CancelToken()
        count = [0]

        def on_chunk(chunk: Any) -> None:
            if chunk.content_delta is not None:
                count[0] += 1
                if count[0] == after:
                    fire(token.cancel)

        self.blazen.Streaming.complete(
            self._model(spec), self.req, on_chunk=on_chunk, on_error=_noop, cancel=token
        )

    def close(self) -> None:
        for model in self.models.values():
            model.close()
        self.models.clear()


class BlazenBaseline(Blazen):
    """blazen imported from another checkout (``--baseline PATH``): the "before" of a run."""

    name = "blazen (baseline)"

    def __init__(self, base: str) -> None:
        # The runner process imports nothing of blazen before this: put the checkout first.
        sys.path.insert(0, os.environ["BLAZEN_BASELINE"])
        super().__init__(base)


def _noop(*args: Any) -> None:
    return None


# -- requests + sseclient-py, as sseclient-py's README shows ------------------------------


class RequestsSSEClient(Client):
    name = "requests + sseclient-py"
    formats = ("openai", "anthropic")

    def __init__(self, base: str) -> None:
        super().__init__(base)
        import requests
        import sseclient

        self.requests = requests
        self.sseclient = sseclient
        self.post = requests.post
        self.session: Any = None

    def long_lived(self) -> None:
        # A worker that lives for weeks keeps one Session, and closes each response.
        self.session = self.requests.Session()
        self.post = self.session.post

    def stream(self, spec: Spec, on_text: Optional[Callable[[], None]] = None) -> Result:
        url = self.base + self.path(spec)
        response = self.post(
            url,
            stream=True,
            headers={"Accept": "text/event-stream", "Authorization": f"Bearer {KEY}"},
            json={"model": "m", "messages": MESSAGES, "stream": True},
        )
        client = self.sseclient.SSEClient(response)
        try:
            return _fold(spec.fmt, (event.data for event in client.events()), on_text, "[DONE]")
        finally:
            if self.session is not None:
                response.close()

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


# -- httpx + httpx-sse -----------------------------------------------------------------


class HttpxSSE(Client):
    name = "httpx + httpx-sse"
    formats = ("openai", "anthropic")

    def __init__(self, base: str) -> None:
        super().__init__(base)
        import httpx
        import httpx_sse

        self.client = httpx.Client(
            timeout=60, limits=httpx.Limits(max_connections=1000, max_keepalive_connections=64)
        )
        self.connect_sse = httpx_sse.connect_sse

    def stream(self, spec: Spec, on_text: Optional[Callable[[], None]] = None) -> Result:
        url = self.base + self.path(spec)
        body = {"model": "m", "messages": MESSAGES, "stream": True}
        with self.connect_sse(
            self.client, "POST", url, json=body, headers={"Authorization": f"Bearer {KEY}"}
        ) as source:
            return _fold(spec.fmt, (sse.data for sse in source.iter_sse()), on_text, "[DONE]")

    def close(self) -> None:
        self.client.close()


# -- the official SDKs -----------------------------------------------------------------


class OpenAISDK(Client):
    name = "openai SDK"
    formats = ("openai", "responses")

    def __init__(self, base: str) -> None:
        super().__init__(base)
        import openai

        self.root = openai.OpenAI(api_key=KEY, base_url=base + "/v1", max_retries=0)
        self.clients: dict[str, Any] = {}

    def _client(self, spec: Spec) -> Any:
        key = spec.path()
        if key not in self.clients:
            # with_options shares the root client's connection pool.
            self.clients[key] = self.root.with_options(base_url=self.base + key + "/v1")
        return self.clients[key]

    def stream(self, spec: Spec, on_text: Optional[Callable[[], None]] = None) -> Result:
        if spec.fmt == "responses":
            return self._responses(spec, on_text)
        text: list[str] = []
        args: dict[int, list[str]] = {}
        stream = self._client(spec).chat.completions.create(
            model="gpt-4o-mini",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        with stream:
            for chunk in stream:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                if delta.content:
                    text.append(delta.content)
                    if on_text is not None:
                        on_text()
                for tc in delta.tool_calls or ():
                    args.setdefault(tc.index, []).append(tc.function.arguments)
        return "".join(text), _collect_tools(args)

    def _responses(self, spec: Spec, on_text: Optional[Callable[[], None]]) -> Result:
        # The SDK's Responses stream: typed events, folded as its docs show.
        text: list[str] = []
        args: dict[int, list[str]] = {}
        stream = self._client(spec).responses.create(
            model="gpt-5-mini", input=MESSAGES, stream=True
        )
        with stream:
            for event in stream:
                if event.type == "response.output_text.delta":
                    text.append(event.delta)
                    if on_text is not None:
                        on_text()
                elif event.type == "response.function_call_arguments.delta":
                    args.setdefault(event.output_index, []).append(event.delta)
        return "".join(text), _collect_tools(args)

    def close(self) -> None:
        self.root.close()
        self.clients.clear()


class AnthropicSDK(Client):
    name = "anthropic SDK"
    formats = ("anthropic",)

    def __init__(self, base: str) -> None:
        super().__init__(base)
        import anthropic

        self.root = anthropic.Anthropic(api_key=KEY, base_url=base, max_retries=0)
        self.clients: dict[str, Any] = {}

    def _client(self, spec: Spec) -> Any:
        key = spec.path()
        if key not in self.clients:
            self.clients[key] = self.root.with_options(base_url=self.base + key)
        return self.clients[key]

    def stream(self, spec: Spec, on_text: Optional[Callable[[], None]] = None) -> Result:
        text: list[str] = []
        args: dict[int, list[str]] = {}
        stream = self._client(spec).messages.create(
            model="claude-sonnet-4-20250514", max_tokens=256, messages=MESSAGES, stream=True
        )
        with stream:
            for event in stream:
                if event.type == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        text.append(delta.text)
                        if on_text is not None:
                            on_text()
                    elif delta.type == "input_json_delta":
                        args.setdefault(event.index, []).append(delta.partial_json)
        return "".join(text), _collect_tools(args)

    def close(self) -> None:
        self.root.close()
        self.clients.clear()


class LiteLLM(Client):
    name = "litellm"

    def __init__(self, base: str) -> None:
        super().__init__(base)
        # Never reach the network for the model price list.
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.telemetry = False
        self.litellm = litellm

    def stream(self, spec: Spec, on_text: Optional[Callable[[], None]] = None) -> Result:
        text: list[str] = []
        args: dict[int, list[str]] = {}
        response = self.litellm.completion(
            model="openai/gpt-4o-mini",
            api_base=self.base + spec.path() + "/v1",
            api_key=KEY,
            messages=MESSAGES,
            stream=True,
            max_retries=0,
        )
        for chunk in response:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                text.append(delta.content)
                if on_text is not None:
                    on_text()
            for tc in delta.tool_calls or ():
                args.setdefault(tc.index, []).append(tc.function.arguments or "")
        return "".join(text), _collect_tools(args)


CLIENTS: dict[str, type[Client]] = {
    "raw": RawSocket,
    "raw-threaded": RawThreaded,
    "raw-shared": RawShared,
    "blazen": Blazen,
    "blazen-baseline": BlazenBaseline,
    "requests-sseclient": RequestsSSEClient,
    "httpx-sse": HttpxSSE,
    "openai": OpenAISDK,
    "anthropic": AnthropicSDK,
    "litellm": LiteLLM,
}

#: The Python module each client needs, to skip those not installed.
MODULES = {
    "raw": "json",
    "raw-threaded": "json",
    "raw-shared": "selectors",
    "blazen": "blazen",
    "blazen-baseline": "blazen",
    "requests-sseclient": "sseclient",
    "httpx-sse": "httpx_sse",
    "openai": "openai",
    "anthropic": "anthropic",
    "litellm": "litellm",
}

#: What ``import`` costs for each client (scenario e).
IMPORTS = {
    "raw": "import socket, json",
    "raw-threaded": "import socket, json, threading, queue",
    "raw-shared": "import socket, json, threading, queue, selectors",
    "blazen": "import blazen",
    "blazen-baseline": "import blazen",
    "requests-sseclient": "import requests, sseclient",
    "httpx-sse": "import httpx, httpx_sse",
    "openai": "import openai",
    "anthropic": "import anthropic",
    "litellm": "import litellm",
}


#: Imports measured beside the clients in scenario (e) that are no client themselves: the
#: libraries blazen is built on, which its own import time is compared with.
IMPORT_REFERENCES = {
    "requests-sseclient-attrs": "import requests, sseclient, attrs",
}


def make_client(key: str, base: str) -> Client:
    """The client registered under ``key``, connected to the benchmark server at ``base``."""
    return CLIENTS[key](base)
