"""``batch.embed``: texts into a JSONL file of vectors, resumable, in bounded chunks."""

from __future__ import annotations

import pytest

from blazen import Providers, batch
from blazen.testing import Reply, StreamServer

from .test_embeddings import _Echo, _echo_url, echo  # noqa: F401 (the fixture)


def test_every_text_becomes_one_record_that_reads_back_as_its_vector(echo, tmp_path):  # noqa: F811
    """Ids and vectors in order, through chunks smaller than the input."""
    model = Providers.openai(api_key="k", base_url=_echo_url(echo))
    out = tmp_path / "vectors.jsonl"
    report = batch.embed(model, ((f"doc{i}", f"t{i}") for i in range(25)), out=out, chunk=10)
    records = list(batch.read(out))
    assert (report.ok, report.skipped) == (25, 0) and sorted(_Echo.batches) == [5, 10, 10]
    assert [r["id"] for r in records] == [f"doc{i}" for i in range(25)]
    assert [batch.vector(r)[0] for r in records] == [float(i) for i in range(25)]
    assert all(r["kind"] == "embedding" and r["dimensions"] == 2 for r in records)


def test_a_second_run_skips_what_the_first_wrote(echo, tmp_path):  # noqa: F811
    """Resume: ids already in out are not sent again."""
    model = Providers.openai(api_key="k", base_url=_echo_url(echo))
    out = tmp_path / "vectors.jsonl"
    batch.embed(model, [f"t{i}" for i in range(6)], out=out)
    _Echo.batches.clear()
    report = batch.embed(model, [f"t{i}" for i in range(10)], out=out)
    assert (report.ok, report.skipped) == (4, 6) and _Echo.batches == [4]
    assert len(list(batch.read(out))) == 10


def test_a_failing_chunk_raises_and_keeps_what_was_written(tmp_path):
    """The second chunk's 401: AuthError, the first chunk's lines stay for the resume."""
    ok = {"object": "list", "data": [{"index": i, "embedding": [0.5]} for i in range(2)], "model": "m"}
    with StreamServer([Reply.json(ok), Reply.json({"error": {"message": "no"}}, status=401)]) as server:
        model = Providers.openai(api_key="k", base_url=server.base_url, max_retries=0)
        out = tmp_path / "vectors.jsonl"
        with pytest.raises(Exception, match="401"):
            batch.embed(model, ["a", "b", "c", "d"], out=out, chunk=2)
    assert [r["id"] for r in batch.read(out)] == ["0", "1"]
