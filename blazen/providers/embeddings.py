"""Every wire's embedding endpoint: build the request, read the vectors. No I/O.

- OpenAI ``POST /embeddings`` (and Azure's deployment URL, and the OpenAI-format
  services): ``{"input": [...], "model", "encoding_format": "base64", "dimensions"?}``,
  answered ``{"data": [{"index", "embedding"}], "model", "usage": {"prompt_tokens",
  "total_tokens"}}`` (https://platform.openai.com/docs/api-reference/embeddings/create).
  At most 2,048 inputs a request. Base64, as the official SDK asks by default: the
  float32 bytes themselves, a fifth of the JSON text. A server that ignores the field
  (llama.cpp's, some proxies) sends number lists, which are read as well; and
  llama-cpp-python's, for a model without pooling, a list per token, which is averaged.
- Gemini ``POST models/{model}:batchEmbedContents``: ``{"requests": [{"model":
  "models/...", "content": {"parts": [{"text"}]}, "outputDimensionality"?}]}``, answered
  ``{"embeddings": [{"values": [...]}]}`` (https://ai.google.dev/api/embeddings), at most
  100 requests a batch; no token counts.
- Ollama ``POST /api/embed``: ``{"model", "input": [...], "dimensions"?}``, answered
  ``{"model", "embeddings": [[...]], "prompt_eval_count"}``
  (https://docs.ollama.com/api/embed).
"""

from __future__ import annotations

import base64
import json
import math
import sys
from array import array
from collections.abc import Mapping, Sequence
from typing import Any, Optional
from urllib.parse import quote

from .._http import HttpRequest
from .._kit import EmbeddingBatch, error_from_http, malformed
from .._types import TokenUsage, Vector
from ..errors import ProviderError

__all__ = [
    "ANY_CONCURRENCY",
    "GEMINI_BATCH",
    "OPENAI_BATCH",
    "GeminiEmbeddings",
    "OllamaEmbeddings",
    "OpenAIEmbeddings",
]

#: OpenAI: "any array must be 2048 dimensions or less" (the input list).
OPENAI_BATCH = 2048
#: Gemini: a batchEmbedContents request holds at most 100 requests.
GEMINI_BATCH = 100
#: Ollama documents no limit; a batch this size keeps one request short.
OLLAMA_BATCH = 512
#: No limit of the server's own on requests in flight (the call's ``concurrency`` rules).
ANY_CONCURRENCY = 1 << 16

_SWAP = sys.byteorder != "little"  # base64 embeddings are little-endian float32


def _vector(values: Any) -> Vector:
    """A packed float32 vector from a base64 string or a list of numbers."""
    if isinstance(values, str):
        vector = array("f")
        vector.frombytes(base64.b64decode(values, validate=True))
        if _SWAP:
            vector.byteswap()
        return vector
    if not isinstance(values, list):
        msg = f"an embedding is a list of numbers or a base64 string, got {type(values).__name__}"
        raise TypeError(msg)
    if values and isinstance(values[0], list):
        return _mean(values)
    # array() refuses anything that is not a number (a string, None) with TypeError.
    return array("f", values)


def _mean(rows: list[Any]) -> Vector:
    """One vector per token, averaged into one (mean pooling).

    llama-cpp-python's server answers with a vector per token when the model has no pooling
    of its own (a chat model such as the bundled Gemma: its ``/v1/embeddings`` cannot be
    told to pool), where every other server sends one per input.
    """
    vectors = [array("f", row) for row in rows]
    width = len(vectors[0])
    if any(len(v) != width for v in vectors):
        msg = "per-token embeddings of different lengths"
        raise ValueError(msg)
    sums = [0.0] * width
    for vector in vectors:
        for i, x in enumerate(vector):
            sums[i] += x
    return array("f", [x / len(vectors) for x in sums])


def _count(provider: str, vectors: Sequence[Vector], count: int, body: str) -> None:
    """One vector per input, all of one width, every number finite; else malformed."""
    if len(vectors) != count:
        raise malformed(provider, f"{len(vectors)} embeddings for {count} inputs", body)
    widths = {len(v) for v in vectors}
    if len(widths) > 1:
        raise malformed(provider, f"embeddings of {len(widths)} different widths", body)
    for n, vector in enumerate(vectors):
        # A NaN or an infinity anywhere makes the sum one (float32 values cannot overflow
        # a double's sum): one C loop per vector instead of a Python test per number.
        if not math.isfinite(sum(vector)):
            raise malformed(provider, f"embedding {n} holds NaN or an infinity", body)


def _in_index_order(provider: str, items: Any, body: str) -> list[Any]:
    """OpenAI's ``data`` put in ``index`` order, each input's index exactly once.

    A server that numbers none of them (no ``index`` at all) is read in the order sent.
    """
    if not isinstance(items, list):
        raise malformed(provider, "data that is not a list", body)
    if not any(isinstance(item, dict) and "index" in item for item in items):
        return items
    placed: list[Any] = [None] * len(items)
    for item in items:
        index = item.get("index")
        if type(index) is not int or not 0 <= index < len(items) or placed[index] is not None:
            # Two vectors for one input, or one for none: which is which cannot be known.
            msg = f"embeddings whose indexes are not 0..{len(items) - 1} once each"
            raise malformed(provider, msg, body)
        placed[index] = item
    return placed


def _headers(auth: Optional[tuple[str, str]], extra: Mapping[str, str]) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        headers[auth[0]] = auth[1]
    headers.update(extra)
    return headers


class _HttpErrors:
    """The error of a non-200 answer: every embeddings endpoint answers in its provider's
    usual error shapes (OpenAI's, google.rpc's, Ollama's), which the kit reads."""

    provider: str

    def error(self, status: int, headers: Mapping[str, str], body: str) -> ProviderError:
        """The typed error for an HTTP failure."""
        return error_from_http(self.provider, status, headers, body)


class OpenAIEmbeddings(_HttpErrors):
    """OpenAI's ``/embeddings``, and every server that speaks it."""

    def __init__(
        self,
        *,
        provider: str,
        url: str,
        model: str,
        auth: Optional[tuple[str, str]],
        headers: Mapping[str, str],
        send_model: bool = True,
        base64: bool = True,
        dimensions_field: str = "dimensions",
        batch_size: int = OPENAI_BATCH,
        concurrency: int = ANY_CONCURRENCY,
    ) -> None:
        self.provider = provider
        self.model = model
        self.batch_size = batch_size
        self.concurrency = concurrency
        # Azure's URL names the deployment: "{model}" in it is the call's model.
        self._url = url
        self._headers = _headers(auth, headers)
        # Azure names the deployment in the URL; the body's model is then only a label.
        self._send_model = send_model
        self._base64 = base64
        self._dimensions_field = dimensions_field

    def __repr__(self) -> str:
        return f"OpenAIEmbeddings(provider={self.provider!r}, model={self.model!r})"

    def body(self, texts: Sequence[str], *, model: str, dimensions: Optional[int]) -> Any:
        """The JSON body (as the official ``openai`` SDK's ``embeddings.create`` sends it)."""
        body: dict[str, Any] = {"input": list(texts)}
        if self._send_model:
            body["model"] = model
        if dimensions is not None:
            body[self._dimensions_field] = dimensions
        if self._base64:
            body["encoding_format"] = "base64"
        return body

    def build(self, texts: Sequence[str], *, model: str, dimensions: Optional[int]) -> HttpRequest:
        """The POST to ``/embeddings``."""
        url = self._url.replace("{model}", quote(model, safe=""))
        return HttpRequest.post_json(
            url, self._headers, self.body(texts, model=model, dimensions=dimensions)
        )

    def parse(self, body: str, count: int) -> EmbeddingBatch:
        """``data`` put in ``index`` order (the API gives each item its input's index)."""
        payload = json.loads(body)
        if isinstance(payload, dict) and payload.get("error") is not None:
            raise error_from_http(self.provider, 200, {}, body)
        items = _in_index_order(self.provider, payload["data"], body)
        vectors = tuple(_vector(item["embedding"]) for item in items)
        _count(self.provider, vectors, count, body)
        usage = payload.get("usage")
        return EmbeddingBatch(
            vectors=vectors,
            usage=None
            if not isinstance(usage, dict)
            else TokenUsage(
                prompt_tokens=usage.get("prompt_tokens") or 0,
                total_tokens=usage.get("total_tokens") or usage.get("prompt_tokens") or 0,
            ),
            model=payload.get("model") if isinstance(payload.get("model"), str) else None,
        )


class GeminiEmbeddings(_HttpErrors):
    """Gemini's ``batchEmbedContents`` under ``{base_url}/models/``."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str,
        headers: Mapping[str, str],
        provider: str = "gemini",
        batch_size: int = GEMINI_BATCH,
    ) -> None:
        self.provider = provider
        self.model = model
        self.batch_size = batch_size
        self.concurrency = ANY_CONCURRENCY
        self._base = base_url.rstrip("/")
        # The key goes in x-goog-api-key, never in the URL (which errors and logs show).
        self._headers = _headers(("x-goog-api-key", api_key) if api_key else None, headers)

    def __repr__(self) -> str:
        return f"GeminiEmbeddings(model={self.model!r})"

    @staticmethod
    def _name(model: str) -> str:
        return model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"

    def body(self, texts: Sequence[str], *, model: str, dimensions: Optional[int]) -> Any:
        """The JSON body: one EmbedContentRequest per text, each naming the model."""
        name = self._name(model)
        requests: list[dict[str, Any]] = []
        for text in texts:
            # "role": "user" as google-genai's embed_content sends it (optional in the API).
            content = {"parts": [{"text": text}], "role": "user"}
            item: dict[str, Any] = {"model": name, "content": content}
            if dimensions is not None:
                item["outputDimensionality"] = dimensions
            requests.append(item)
        return {"requests": requests}

    def build(self, texts: Sequence[str], *, model: str, dimensions: Optional[int]) -> HttpRequest:
        """The POST to ``models/{model}:batchEmbedContents``."""
        url = f"{self._base}/{self._name(model)}:batchEmbedContents"
        return HttpRequest.post_json(
            url, self._headers, self.body(texts, model=model, dimensions=dimensions)
        )

    def parse(self, body: str, count: int) -> EmbeddingBatch:
        """``embeddings[i].values``, in request order."""
        payload = json.loads(body)
        vectors = tuple(_vector(item["values"]) for item in payload["embeddings"])
        _count(self.provider, vectors, count, body)
        meta = payload.get("usageMetadata")
        usage = None
        if isinstance(meta, dict) and "promptTokenCount" in meta:
            prompt = meta["promptTokenCount"]
            total = meta.get("totalTokenCount", prompt)
            usage = TokenUsage(prompt_tokens=prompt, total_tokens=total)
        return EmbeddingBatch(vectors=vectors, usage=usage, model=None)


class OllamaEmbeddings(_HttpErrors):
    """Ollama's ``/api/embed`` (not the older single-text ``/api/embeddings``)."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str,
        headers: Mapping[str, str],
        provider: str = "ollama",
        batch_size: int = OLLAMA_BATCH,
    ) -> None:
        self.provider = provider
        self.model = model
        self.batch_size = batch_size
        self.concurrency = ANY_CONCURRENCY
        self._url = base_url.rstrip("/") + "/api/embed"
        auth = ("Authorization", f"Bearer {api_key}") if api_key else None
        self._headers = _headers(auth, headers)

    def __repr__(self) -> str:
        return f"OllamaEmbeddings(model={self.model!r})"

    def body(self, texts: Sequence[str], *, model: str, dimensions: Optional[int]) -> Any:
        """The JSON body."""
        body: dict[str, Any] = {"model": model, "input": list(texts)}
        if dimensions is not None:
            body["dimensions"] = dimensions
        return body

    def build(self, texts: Sequence[str], *, model: str, dimensions: Optional[int]) -> HttpRequest:
        """The POST to ``/api/embed``."""
        return HttpRequest.post_json(
            self._url, self._headers, self.body(texts, model=model, dimensions=dimensions)
        )

    def parse(self, body: str, count: int) -> EmbeddingBatch:
        """``embeddings``, in input order; ``prompt_eval_count`` is the tokens read."""
        payload = json.loads(body)
        if isinstance(payload, dict) and payload.get("error") is not None:
            raise error_from_http(self.provider, 200, {}, body)
        vectors = tuple(_vector(values) for values in payload["embeddings"])
        _count(self.provider, vectors, count, body)
        prompt = payload.get("prompt_eval_count")
        usage = None if prompt is None else TokenUsage(prompt_tokens=prompt, total_tokens=prompt)
        model = payload.get("model")
        return EmbeddingBatch(
            vectors=vectors, usage=usage, model=model if isinstance(model, str) else None
        )
