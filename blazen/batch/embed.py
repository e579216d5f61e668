"""``batch.embed``: any number of texts embedded into a JSONL file, resumable after a crash.

The texts are read as the run goes, ``chunk`` at a time, and each chunk goes through
``model.embed`` (its batches, concurrency, retries and time limits); every vector is
appended to ``out`` as one line the moment its chunk is done, through the same
append-only file a batch run writes (a crash leaves at most a torn last line, cut off on
resume). Running it again skips the ids already in ``out``. A record::

    {"v": 1, "id": "doc-7", "kind": "embedding", "dimensions": 1536,
     "embedding": "<base64 of the float32 values, little-endian>"}

:func:`vector` turns a record back into an ``array("f")``.

Its one wait is ``model.embed``'s, one chunk at a time: each batch's connect and idle
timeouts and retries; Ctrl-C cancels it (what was written stays). Test:
``test_a_stalled_embedding_ends_batch_embed_by_the_models_idle_timeout`` in
``tests/hostile/test_waits_are_bounded.py``.
"""

from __future__ import annotations

import base64
import sys
import time
from array import array
from collections.abc import Iterable, Iterator
from typing import Any, Optional, Union

import attrs

from .._codec import VERSION
from .._stream import ChatModel
from .._types import TokenUsage, Vector, immutable
from .results import PathLike, ResultsFile

__all__ = ["EmbedReport", "embed", "vector"]

#: Texts handed to ``model.embed`` at once: enough for several full batches in flight,
#: few enough that memory stays flat for any size of input.
CHUNK = 8192

_SWAP = sys.byteorder != "little"

EmbedItem = Union[str, "tuple[str, str]"]


@immutable
@attrs.frozen(kw_only=True)
class EmbedReport:
    """The counts of a finished (or interrupted) ``batch.embed``."""

    #: Texts embedded and written in this run.
    ok: int = 0
    #: Texts skipped because ``out`` already held their id.
    skipped: int = 0
    #: The tokens the provider reported, summed (None when it reported none).
    usage: Optional[TokenUsage] = None
    #: Seconds from start to end.
    elapsed: float = 0.0

    def __str__(self) -> str:
        tokens = f"; {self.usage.prompt_tokens} tokens" if self.usage is not None else ""
        return f"embed: {self.ok} embedded, {self.skipped} skipped in {self.elapsed:.1f} s{tokens}"


def _items(texts: Iterable[EmbedItem]) -> Iterator[tuple[str, str]]:
    for position, item in enumerate(texts):
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            item_id, text = item
        else:
            item_id, text = str(position), item
        if not isinstance(text, str):
            kind = type(text).__name__
            msg = f"embed item {item_id!r} is a {kind}: give texts, or (id, text) pairs"
            raise TypeError(msg)
        yield item_id, text


def _record(item_id: str, values: Vector) -> dict[str, Any]:
    packed = values if not _SWAP else array("f", values)
    if _SWAP:
        packed.byteswap()
    return {
        "v": VERSION,
        "id": item_id,
        "kind": "embedding",
        "dimensions": len(values),
        "embedding": base64.b64encode(packed.tobytes()).decode("ascii"),
    }


def vector(record: dict[str, Any]) -> Vector:
    """The ``array("f")`` of a record that :func:`embed` wrote (read with ``batch.read``)."""
    values = array("f")
    values.frombytes(base64.b64decode(record["embedding"], validate=True))
    if _SWAP:
        values.byteswap()
    return values


def embed(
    model: ChatModel,
    texts: Iterable[EmbedItem],
    *,
    out: PathLike,
    dimensions: Optional[int] = None,
    embedding_model: Optional[str] = None,
    concurrency: Optional[int] = None,
    chunk: int = CHUNK,
) -> EmbedReport:
    """Embed ``texts`` (texts, or ``(id, text)`` pairs) into the JSONL file ``out``.

    Resumable: ids already in ``out`` are skipped, so the same call after a crash or
    Ctrl-C does only what is left. The first error raises (what was written stays).
    Example::

        report = batch.embed(model, (doc.id, doc.text) for doc in docs), out="vectors.jsonl")
        vectors = {r["id"]: batch.vector(r) for r in batch.read("vectors.jsonl")}
    """
    if not isinstance(model, ChatModel):
        msg = f"batch.embed needs a model built by blazen.Providers, got {type(model).__name__}"
        raise TypeError(msg)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        msg = f"chunk must be a whole number of at least 1, got {chunk!r}"
        raise ValueError(msg)
    started = time.monotonic()
    results = ResultsFile(out, retry_failed=False)
    ok = skipped = 0
    usage: Optional[TokenUsage] = None
    try:
        pending: list[tuple[str, str]] = []
        items = _items(texts)
        while True:
            pending.clear()
            for item_id, text in items:
                if item_id in results.done:
                    skipped += 1
                    continue
                pending.append((item_id, text))
                if len(pending) >= chunk:
                    break
            if not pending:
                break
            resp = model.embed(
                [text for _, text in pending],
                dimensions=dimensions,
                model=embedding_model,
                concurrency=concurrency,
            )
            for (item_id, _), values in zip(pending, resp.vectors):
                results.append(_record(item_id, values))
            ok += len(pending)
            if resp.usage is not None:
                usage = resp.usage if usage is None else usage + resp.usage
    finally:
        results.close()
    return EmbedReport(ok=ok, skipped=skipped, usage=usage, elapsed=time.monotonic() - started)
