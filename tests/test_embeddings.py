"""Embeddings on every wire that has them: request bodies, vectors, batches, and endings.

The fixtures under ``tests/fixtures/<provider>/embeddings/`` are response bodies written
from each provider's API reference; the OpenAI ones are also read by the official
``openai`` SDK's ``embeddings.create`` over the same socket, whose request body blazen's
must equal. An echo server (a real ``http.server`` on loopback) answers each request from
its own texts, so order, batching and concurrency are checked on what was really sent.
"""

from __future__ import annotations

import array
import asyncio
import base64
import json
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import blazen
from blazen import CancelToken, Providers
from blazen.testing import Reply, Stall, StreamServer

from .conftest import FIXTURES, KEY_FOR_TESTS


def _body(provider: str, name: str) -> Any:
    return json.loads((FIXTURES / provider / "embeddings" / name).read_text())


def _floats(values: Any) -> list[float]:
    """What a float32 vector holds, as Python floats."""
    return list(array.array("f", values))


# -- an echo server: each text "t<n>" embeds as [n, len(batch)] --------------------------


class _Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    in_flight = 0
    most = 0
    lock = threading.Lock()
    delay = 0.0
    batches: list[int] = []  # noqa: RUF012 (reset by the fixture)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.most = max(cls.most, cls.in_flight)
            cls.batches.append(len(body["input"]))
        try:
            time.sleep(cls.delay)
            data = []
            for i, text in enumerate(body["input"]):
                vector = array.array("f", [float(text[1:]), float(len(body["input"]))])
                data.append(
                    {"object": "embedding", "index": i, "embedding": base64.b64encode(vector.tobytes()).decode()}
                )
            data.reverse()  # the index says where each goes, not the order
            out = json.dumps(
                {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": len(data), "total_tokens": len(data)}}
            ).encode()
        finally:
            with cls.lock:
                cls.in_flight -= 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def echo() -> Iterator[ThreadingHTTPServer]:
    _Echo.in_flight = _Echo.most = 0
    _Echo.delay = 0.0
    _Echo.batches = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def _echo_url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


# -- OpenAI and the official SDK ---------------------------------------------------------


@pytest.mark.parametrize("name", ["base64.json", "float.json"])
def test_openai_embed_sends_what_the_sdk_sends_and_reads_the_same_vectors(name):
    """Same path, headers that matter and JSON body as ``embeddings.create``; same vectors."""
    fixture = _body("openai", name)
    texts = ["first", "second", "third"]
    with StreamServer([Reply.json(fixture), Reply.json(fixture)]) as server:
        with openai.OpenAI(api_key=KEY_FOR_TESTS, base_url=server.base_url, max_retries=0) as client:
            sdk = client.embeddings.create(model="text-embedding-3-small", input=texts, dimensions=8)
        model = Providers.openai(api_key=KEY_FOR_TESTS, base_url=server.base_url)
        resp = model.embed(texts, dimensions=8)
        sdk_req, ours = server.requests
    assert ours.path == sdk_req.path == "/v1/embeddings"
    assert ours.json() == sdk_req.json()
    assert ours.header("Authorization") == sdk_req.header("Authorization")
    assert [list(v) for v in resp.vectors] == [_floats(d.embedding) for d in sdk.data]
    assert resp.usage.prompt_tokens == sdk.usage.prompt_tokens == 9
    assert resp.model == sdk.model and resp.dimensions == 8 and len(resp) == 3


def test_azure_embed_goes_to_the_embedding_deployment_as_the_sdk_does():
    """Azure's URL names the deployment and the api-version; the key is the api-key header."""
    fixture = _body("openai", "base64.json")
    with StreamServer([Reply.json(fixture), Reply.json(fixture)]) as server:
        with openai.AzureOpenAI(
            api_key=KEY_FOR_TESTS, azure_endpoint=server.url, api_version="2024-10-21", max_retries=0
        ) as client:
            client.embeddings.create(model="my-embedder", input=["a", "b", "c"])
        model = Providers.azure(
            api_key=KEY_FOR_TESTS, base_url=server.url, model="chat-deploy", embedding_model="my-embedder"
        )
        model.embed(["a", "b", "c"])
        sdk_req, ours = server.requests
    assert ours.path == sdk_req.path == "/openai/deployments/my-embedder/embeddings?api-version=2024-10-21"
    assert ours.json() == sdk_req.json()
    assert ours.header("api-key") == sdk_req.header("api-key") == KEY_FOR_TESTS


def test_a_per_call_model_replaces_the_embedding_model():
    """``embed(model=...)`` names the model of that call only."""
    fixture = _body("openai", "base64.json")
    with StreamServer([Reply.json(fixture), Reply.json(fixture)]) as server:
        model = Providers.openai(
            api_key=KEY_FOR_TESTS, base_url=server.base_url, embedding_model="text-embedding-3-large"
        )
        model.embed(["a", "b", "c"])
        model.embed(["a", "b", "c"], model="other")
        first, second = (r.json()["model"] for r in server.requests)
    assert (first, second) == ("text-embedding-3-large", "other")


@pytest.mark.parametrize(
    ("preset", "default"),
    [
        ("together", "BAAI/bge-base-en-v1.5"),
        ("fireworks", "nomic-ai/nomic-embed-text-v1.5"),
        ("cohere", "embed-v4.0"),
    ],
)
def test_openai_format_presets_embed_with_their_default_model(preset, default):
    """The presets with an embedding endpoint: ``{base_url}/embeddings``, their own model."""
    with StreamServer([Reply.json(_body("openai", "float.json"))]) as server:
        model = getattr(Providers, preset)(api_key=KEY_FOR_TESTS, base_url=server.base_url)
        assert len(model.embed(["a", "b", "c"])) == 3
        (sent,) = server.requests
    assert sent.path == "/v1/embeddings" and sent.header("Authorization") == f"Bearer {KEY_FOR_TESTS}"
    assert sent.json() == {"input": ["a", "b", "c"], "model": default, "encoding_format": "base64"}


def test_mistral_names_the_width_output_dimension_as_its_api_does():
    """Mistral's ``/v1/embeddings`` takes ``output_dimension`` and refuses unknown fields
    (https://docs.mistral.ai/api/endpoint/embeddings): ``dimensions=`` goes under that name."""
    with StreamServer([Reply.json(_body("openai", "float.json"))] * 2) as server:
        model = Providers.mistral(api_key=KEY_FOR_TESTS, base_url=server.base_url)
        model.embed(["a", "b", "c"], dimensions=8)
        model.embed(["a", "b", "c"])
        sized, plain = (r.json() for r in server.requests)
    assert sized == {"input": ["a", "b", "c"], "model": "mistral-embed", "output_dimension": 8}
    assert plain == {"input": ["a", "b", "c"], "model": "mistral-embed"}


# -- Gemini and Ollama, from their API references -----------------------------------------


def test_gemini_embed_uses_batch_embed_contents_with_the_key_in_a_header():
    """One EmbedContentRequest per text, each naming the model; the key never in the URL."""
    with StreamServer([Reply.json(_body("gemini", "batch.json"))]) as server:
        model = Providers.gemini(api_key=KEY_FOR_TESTS, base_url=server.url)
        resp = model.embed(["a", "b", "c"], dimensions=8)
        (sent,) = server.requests
    assert sent.path == "/models/gemini-embedding-001:batchEmbedContents"
    assert KEY_FOR_TESTS not in sent.path and sent.header("x-goog-api-key") == KEY_FOR_TESTS
    assert sent.json() == {
        "requests": [
            {
                "model": "models/gemini-embedding-001",
                "content": {"parts": [{"text": t}], "role": "user"},
                "outputDimensionality": 8,
            }
            for t in "abc"
        ]
    }
    expected = [_floats(e["values"]) for e in _body("gemini", "batch.json")["embeddings"]]
    assert [list(v) for v in resp.vectors] == expected
    assert resp.usage is None  # batchEmbedContents reports no token counts


def test_ollama_embed_uses_api_embed_and_reads_prompt_eval_count():
    """``/api/embed`` takes the list as ``input``; its token count is the usage."""
    with StreamServer([Reply.json(_body("ollama", "embed.json"))]) as server:
        model = Providers.ollama(base_url=server.url)
        resp = model.embed(["a", "b", "c"])
        (sent,) = server.requests
    assert sent.path == "/api/embed"
    assert sent.json() == {"model": "embeddinggemma", "input": ["a", "b", "c"]}
    assert [list(v) for v in resp.vectors] == [_floats(v) for v in _body("ollama", "embed.json")["embeddings"]]
    assert resp.usage.prompt_tokens == 9 and resp.model == "embeddinggemma"


def test_providers_without_an_embedding_endpoint_say_so():
    """Anthropic and Groq have none: UnsupportedError, before anything is sent."""
    for model in (Providers.anthropic(api_key="k"), Providers.groq(api_key="k")):
        with pytest.raises(blazen.UnsupportedError, match="embedding"):
            model.embed("hi")


# -- batches, order, concurrency ----------------------------------------------------------


def test_any_number_of_texts_come_back_in_order_across_batches(echo):
    """5,000 texts go as three requests of at most 2,048, and each vector is its own text's."""
    model = Providers.openai(api_key="k", base_url=_echo_url(echo))
    texts = [f"t{i}" for i in range(5000)]
    resp = model.embed(texts)
    assert sorted(_Echo.batches) == [904, 2048, 2048]
    assert [v[0] for v in resp.vectors] == [float(i) for i in range(5000)]
    assert resp.usage.prompt_tokens == 5000


def test_no_more_batches_are_in_flight_than_concurrency(echo):
    """``concurrency=2`` over ten batches: the server never sees three at once."""
    _Echo.delay = 0.05
    model = Providers.openai(api_key="k", base_url=_echo_url(echo))
    resp = model.embed([f"t{i}" for i in range(100)], batch_size=10, concurrency=2)
    assert len(resp) == 100 and len(_Echo.batches) == 10
    assert 1 <= _Echo.most <= 2


def test_an_empty_list_sends_nothing(server):
    """No texts, no request: an empty response."""
    model = Providers.openai(api_key="k", base_url=server.base_url)
    resp = model.embed([])
    assert resp.vectors == () and server.requests == []


def test_embed_refuses_what_is_not_text_before_sending(server):
    """A number, bytes or a list holding one is a TypeError, and nothing goes out."""
    model = Providers.openai(api_key="k", base_url=server.base_url)
    for bad in (5, b"x", ["a", 3], {"a": 1}):
        with pytest.raises(TypeError):
            model.embed(bad)
    with pytest.raises(ValueError):
        model.embed("a", dimensions=0)
    assert server.requests == []


# -- retries and endings ------------------------------------------------------------------


def test_a_rate_limit_is_retried_like_a_stream(server):
    """429 then 200: one response, two requests."""
    server.add(
        Reply.json({"error": {"message": "slow down", "type": "rate_limit"}}, status=429, headers={"Retry-After": "0"}),
        Reply.json(_body("openai", "base64.json")),
    )
    model = Providers.openai(api_key="k", base_url=server.base_url)
    assert len(model.embed(["a", "b", "c"])) == 3
    assert len(server.requests) == 2


def test_a_refused_key_is_one_auth_error_that_never_shows_the_key(server):
    """401 echoing the key: AuthError, the key masked in message, body and repr."""
    server.add(Reply.json({"error": {"message": f"bad key {KEY_FOR_TESTS}", "type": "invalid_request_error"}}, status=401))
    model = Providers.openai(api_key=KEY_FOR_TESTS, base_url=server.base_url)
    with pytest.raises(blazen.AuthError) as info:
        model.embed("a")
    err = info.value
    assert KEY_FOR_TESTS not in f"{err} {err!r} {err.body}"


def test_a_response_with_the_wrong_number_of_vectors_is_a_malformed_payload(server):
    """Two vectors for three texts: a ProviderError, never a short list."""
    fixture = _body("openai", "base64.json")
    fixture["data"] = fixture["data"][:2]
    server.add(Reply.json(fixture))
    model = Providers.openai(api_key="k", base_url=server.base_url, max_retries=0)
    with pytest.raises(blazen.ProviderError, match="2 embeddings for 3 inputs") as info:
        model.embed(["a", "b", "c"])
    assert info.value.error_type == "malformed_payload"


def test_cancel_tears_every_connection_down(server):
    """A server that never answers: cancel() ends the call with CancelledError, sockets closed."""
    server.add(*[Reply(body=[Stall()], raw=True)] * 3)
    model = Providers.openai(api_key="k", base_url=server.base_url, max_retries=0)
    token = CancelToken()
    threading.Timer(0.3, token.cancel, args=("enough",)).start()
    start = time.monotonic()
    with pytest.raises(blazen.CancelledError, match="enough"):
        model.embed([f"t{i}" for i in range(30)], batch_size=10, concurrency=3, cancel=token)
    assert time.monotonic() - start < 5
    assert server.wait_closed(5)


def test_the_total_timeout_bounds_the_whole_call(server):
    """``timeout=`` over a stalled server: TimeoutError naming the total limit."""
    server.add(Reply(body=[Stall()], raw=True))
    model = Providers.openai(api_key="k", base_url=server.base_url, max_retries=0)
    with pytest.raises(blazen.TimeoutError) as info:
        model.embed("a", timeout=0.3)
    assert info.value.limit == "total"
    assert server.wait_closed(5)


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_ctrl_c_while_waiting_stops_the_workers_and_propagates(server):
    """KeyboardInterrupt on the caller's thread: raised, and no worker left behind."""
    server.add(Reply(body=[Stall()], raw=True))
    model = Providers.openai(api_key="k", base_url=server.base_url, max_retries=0)
    before = threading.active_count()
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        model.embed("a")
    assert server.wait_closed(5)
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [t for t in threading.enumerate() if t.name == "blazen-embed"]


def test_embed_async_returns_the_same_vectors(echo):
    """``await model.embed_async(...)`` gives what ``embed`` gives."""
    model = Providers.openai(api_key="k", base_url=_echo_url(echo))
    resp = asyncio.run(model.embed_async([f"t{i}" for i in range(10)]))
    assert [v[0] for v in resp.vectors] == [float(i) for i in range(10)]


def test_cancelling_the_task_cancels_the_embedding(server):
    """The task's cancellation closes the connection before CancelledError reaches it."""
    server.add(Reply(body=[Stall()], raw=True))
    model = Providers.openai(api_key="k", base_url=server.base_url, max_retries=0)

    async def main() -> None:
        task = asyncio.ensure_future(model.embed_async("a"))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert server.wait_closed(5)


def test_an_embedding_pickles_and_its_vectors_are_packed():
    """Four bytes a number, a buffer numpy-style readers take, and it survives pickling."""
    vector = array.array("f", [0.5, -1.0])
    resp = blazen.EmbeddingResponse(vectors=(vector,), model="m")
    assert pickle.loads(pickle.dumps(resp)) == resp
    assert memoryview(resp.vectors[0]).itemsize == 4 and memoryview(resp.vectors[0]).format == "f"


def test_a_body_that_is_not_json_is_a_malformed_payload(server):
    """An HTML page with 200: a ProviderError saying blazen cannot read it."""
    server.add(Reply(headers={"Content-Type": "text/html"}, body=[b"<html>oops</html>"], transfer="length"))
    model = Providers.openai(api_key="k", base_url=server.base_url, max_retries=0)
    with pytest.raises(blazen.ProviderError) as info:
        model.embed("a")
    assert info.value.error_type == "malformed_payload"


def test_a_body_that_stalls_after_its_headers_ends_at_the_idle_timeout(server):
    """Headers, half a body, then nothing: TimeoutError after idle_timeout, connection closed."""
    server.add(Reply(headers={"Content-Type": "application/json"}, body=[b'{"object": "list", "da', Stall()]))
    model = Providers.openai(api_key="k", base_url=server.base_url, max_retries=0, idle_timeout=0.5)
    start = time.monotonic()
    with pytest.raises(blazen.TimeoutError):
        model.embed("a")
    assert time.monotonic() - start < 10 and server.wait_closed(5)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    count=st.integers(min_value=0, max_value=60),
    batch_size=st.integers(min_value=1, max_value=25),
    concurrency=st.integers(min_value=1, max_value=6),
)
def test_vectors_come_back_in_input_order_for_any_batching(echo, count, batch_size, concurrency):
    """Whatever the number of texts, batch size and concurrency: vector i is text i's."""
    _Echo.batches = []
    model = Providers.openai(api_key="k", base_url=_echo_url(echo))
    resp = model.embed([f"t{i}" for i in range(count)], batch_size=batch_size, concurrency=concurrency)
    assert [v[0] for v in resp.vectors] == [float(i) for i in range(count)]
    assert sorted(_Echo.batches) == sorted([batch_size] * (count // batch_size) + ([count % batch_size] if count % batch_size else []))


def test_gemini_embed_sends_what_google_genai_sends_and_reads_the_same_vectors():
    """Same path, key header and body as google-genai's ``models.embed_content``; same vectors."""
    genai = pytest.importorskip("google.genai")
    types = pytest.importorskip("google.genai.types")
    body = _body("gemini", "batch.json")
    with StreamServer([Reply.json(body), Reply.json(body)]) as server:
        client = genai.Client(
            api_key=KEY_FOR_TESTS,
            http_options=types.HttpOptions(base_url=server.url, api_version="v1beta"),
        )
        config = types.EmbedContentConfig(output_dimensionality=8)
        sdk = client.models.embed_content(model="gemini-embedding-001", contents=["a", "b", "c"], config=config)
        model = Providers.gemini(api_key=KEY_FOR_TESTS, base_url=server.url + "/v1beta")
        resp = model.embed(["a", "b", "c"], dimensions=8)
        sdk_req, ours = server.requests
    assert ours.path == sdk_req.path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert ours.json() == sdk_req.json()
    assert ours.header("x-goog-api-key") == sdk_req.header("x-goog-api-key") == KEY_FOR_TESTS
    assert [list(v) for v in resp.vectors] == [_floats(e.values) for e in sdk.embeddings]
