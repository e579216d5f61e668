"""Shared fixtures: a real HTTP server on loopback (blazen.testing.StreamServer)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import blazen
from blazen import Llm
from blazen.testing import Recorder, Reply, StreamServer

FIXTURES = Path(__file__).parent / "fixtures"


KEY_FOR_TESTS = "sk-test-SECRET-0123456789"


def fixture_bytes(provider: str, name: str) -> bytes:
    """The raw wire bytes of ``tests/fixtures/<provider>/<name>``."""
    return (FIXTURES / provider / name).read_bytes()


@pytest.fixture(autouse=True)
def _no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests never reach a real provider, whatever the developer's shell holds.
    for var in list(os.environ):
        if var.endswith(("_API_KEY", "_BASE_URL")) or var in (
            "AZURE_OPENAI_ENDPOINT",
            "OPENAI_API_VERSION",
        ):
            monkeypatch.delenv(var, raising=False)


@pytest.fixture
def server() -> Iterator[StreamServer]:
    with StreamServer() as srv:
        yield srv


@pytest.fixture
def model(server: StreamServer) -> blazen.ChatModel:
    """An OpenAI-format model pointed at the test server, with quick retries."""
    return blazen.Providers.openai(api_key="sk-test-SECRET-0123456789", base_url=server.base_url)


@pytest.fixture
def req() -> blazen.CompletionRequest:
    return Llm.completion_request([Llm.system("You are terse."), Llm.user("Tell me a joke.")])


def sse_reply(name: str, provider: str = "openai", **kw: object) -> Reply:
    return Reply.sse(fixture_bytes(provider, name), **kw)  # type: ignore[arg-type]


class Form:
    """One way of running a stream, with complete()'s calling convention.

    ``blocking`` is Streaming.complete; ``async`` runs Streaming.complete_async on a fresh
    event loop in this thread; ``background`` starts a StreamHandle and waits for it.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def callback_thread(self, caller: str) -> str:
        """The thread the callbacks run on when ``caller`` starts the stream."""
        return "blazen-handle" if self.name == "background" else caller

    def __call__(self, model, req, handler=None, **kw):
        if self.name == "blocking":
            return blazen.Streaming.complete(model, req, handler, **kw)
        if self.name == "async":
            return asyncio.run(blazen.Streaming.complete_async(model, req, handler, **kw))
        handle = blazen.Streaming.start(model, req, handler, **kw)
        try:
            return handle.result(timeout=60)
        except blazen.BlazenError:
            if handler is None and kw.get("on_error") is None:
                raise
            return None
        finally:
            handle.join(10)


@pytest.fixture(params=["blocking", "async", "background"])
def complete(request: pytest.FixtureRequest) -> Form:
    """Run the same contract test for the blocking, asyncio and background forms."""
    return Form(request.param)


def ndjson_reply(name: str, provider: str = "ollama", **kw: object) -> Reply:
    """An NDJSON stream replayed from ``tests/fixtures/<provider>/<name>``."""
    return Reply(
        headers={"Content-Type": "application/x-ndjson"},
        body=[fixture_bytes(provider, name)],
        **kw,  # type: ignore[arg-type]
    )


def json_reply(
    provider: str, name: str, status: int, headers: dict[str, str] | None = None
) -> Reply:
    """An HTTP error whose body is ``tests/fixtures/<provider>/<name>``, byte for byte."""
    return Reply(
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
        body=[fixture_bytes(provider, name)],
        transfer="length",
    )


def stream(
    server: StreamServer,
    model: blazen.ChatModel,
    req: blazen.CompletionRequest,
    *replies: Reply,
) -> tuple[Recorder, blazen.CompletionResponse | None]:
    """Queue ``replies``, stream ``req`` with a Recorder, return it and the response."""
    server.add(*replies)
    rec = Recorder()
    resp = blazen.Streaming.complete(model, req, rec.handler)
    return rec, resp


#: Every factory, and where its wire expects the test server's address.
NATIVE = ("openai", "azure", "anthropic", "gemini", "ollama")
PRESET_NAMES = (
    "openrouter",
    "groq",
    "together",
    "mistral",
    "deepseek",
    "fireworks",
    "perplexity",
    "xai",
    "cohere",
    "lm_studio",
    "vllm",
    "llamacpp",
)


def model_for(
    name: str, server: StreamServer, api_key: str = "", **options: object
) -> blazen.ChatModel:
    """``Providers.<name>`` pointed at ``server``, with a key unless ``api_key`` is given.

    ``"responses"`` (a wire, not a factory) is ``Providers.openai(api="responses")``.
    """
    if name == "responses":
        name, options = "openai", {"api": "responses", **options}
    base = {
        "anthropic": server.url,
        "gemini": server.url + "/v1beta",
        "ollama": server.url,
        "azure": server.url,
    }.get(name, server.base_url)
    factory = getattr(blazen.Providers, name)
    return factory(api_key=api_key or f"{name}-key-SECRET-0123456789", base_url=base, **options)  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def tls_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (made with the openssl command)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")),
        ],
        check=True,
        capture_output=True,
    )
    return d / "cert.pem", d / "key.pem"


def thread_count() -> int:
    """Live threads, but for blazen's starter and shared reader threads, which exit on their
    own idle timers."""
    return sum(t.name not in ("blazen-starter", "blazen-reader") for t in threading.enumerate())


@pytest.fixture
def unraisables(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """For signal storms: what Python reports as unraisable, kept out of pytest's hands.

    A signal handler's exception landing in a garbage collector's callback is "ignored" by
    Python (reported as unraisable), and one landing inside pytest's own unraisable hook
    makes pytest fail the test. Neither reached blazen. They are kept in a C method, where
    no signal can land.
    """
    caught: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", caught.append)
    return caught


def text_reply(provider: str) -> Reply:
    """The provider's recorded plain-text stream, as a reply of the test server."""
    return Reply.sse(fixture_bytes(provider, "text.sse"))


def blazen_request_body(provider: str, req: blazen.CompletionRequest) -> dict[str, Any]:
    """The JSON body blazen sends for ``req`` to ``provider`` ("anthropic" or "openai")."""
    with StreamServer([text_reply(provider)]) as server:
        if provider == "anthropic":
            model = blazen.Providers.anthropic(api_key="k", base_url=server.url, max_retries=0)
        else:
            model = blazen.Providers.openai(api_key="k", base_url=server.base_url, max_retries=0)
        errors: list[Any] = []
        blazen.Streaming.complete(model, req, on_error=errors.append)
        assert errors == []
        body: dict[str, Any] = server.requests[0].json()
        return body
