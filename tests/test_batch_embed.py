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


def test_blazen_embed_writes_a_vector_per_line_of_input(echo, tmp_path, capsys):  # noqa: F811
    """``blazen embed TEXTS --out OUT``: JSON lines and plain lines, ids kept, a report."""
    from blazen import cli

    texts = tmp_path / "texts.jsonl"
    texts.write_text('{"id": "a", "text": "t7"}\n\n{"text": "t8"}\n', encoding="utf-8")
    out = tmp_path / "vectors.jsonl"
    argv = ["embed", str(texts), "--out", str(out), "--provider", "openai", "--api-key", "k"]
    assert cli.main([*argv, "--base-url", _echo_url(echo)]) == 0
    records = list(batch.read(out))
    assert [(r["id"], batch.vector(r)[0]) for r in records] == [("a", 7.0), ("1", 8.0)]
    assert "2 embedded" in capsys.readouterr().err
    plain = tmp_path / "plain.txt"
    plain.write_text("t1\nt2\n", encoding="utf-8")
    out2 = tmp_path / "v2.jsonl"
    assert cli.main(["embed", str(plain), "--out", str(out2), "--provider", "openai", "--api-key", "k", "--base-url", _echo_url(echo)]) == 0
    assert [batch.vector(r)[0] for r in batch.read(out2)] == [1.0, 2.0]


def test_blazen_embed_refuses_a_bad_json_line(tmp_path, capsys):
    """A JSON line without "text": exit status 2, the line named, nothing sent."""
    from blazen import cli

    texts = tmp_path / "texts.jsonl"
    texts.write_text('{"id": "a", "prompt": "x"}\n', encoding="utf-8")
    code = cli.main(["embed", str(texts), "--out", str(tmp_path / "o.jsonl"), "--provider", "openai", "--api-key", "k", "--base-url", "http://127.0.0.1:9/v1"])
    assert code == 2 and "line 1" in capsys.readouterr().err
