"""batch.run on a Dask LocalCluster with worker processes: the items run in other processes
and every result still lands, once, in the one out= file of the caller."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import blazen
from blazen import Llm, batch
from blazen.testing import Reply, StreamServer, openai_sse

distributed = pytest.importorskip("distributed")


def set_env(name: str, value: str | None) -> None:
    """Set (or, with None, unset) a variable in this process: run on every worker."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@pytest.fixture(scope="module")
def client() -> Iterator[distributed.Client]:
    # One cluster for the module: starting worker processes costs seconds. (The workers
    # are spawned with this process's sys.path: they import this checkout's blazen.)
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=4,
            processes=True,
            dashboard_address=None,
            silence_logs=40,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.wait_for_workers(2)
        yield client


def test_two_hundred_items_on_worker_processes_land_once_in_one_file(client, tmp_path, monkeypatch):
    ok = Reply.sse(openai_sse(["Hel", "lo"], usage={"prompt_tokens": 3, "completion_tokens": 2}))
    limited = Reply.json(
        {"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "0"}
    )
    # The key the workers use comes from their own environment, never from the pickle.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-SECRET-0123456789")
    client.run(set_env, "OPENAI_API_KEY", "sk-worker-SECRET-0123456789")
    with StreamServer([limited if i % 10 == 0 else ok for i in range(100)], default=ok) as server:
        model = blazen.Providers.openai(base_url=server.base_url, max_retries=0)
        reqs = ((f"q{i}", Llm.completion_request([Llm.user(f"item {i}")])) for i in range(200))
        out = tmp_path / "r.jsonl"
        report = batch.run(model, reqs, concurrency=16, out=out, executor=client.get_executor())
        keys = {r.header("Authorization") for r in server.requests}
    assert (report.ok, report.failed, report.rate_limited) == (200, 0, 10)
    ids = [r["id"] for r in batch.read(out)]
    assert sorted(ids) == sorted(f"q{i}" for i in range(200))
    assert keys == {"Bearer sk-worker-SECRET-0123456789"}


def test_on_chunk_cannot_stream_back_from_an_executor(client):
    model = blazen.Providers.openai(api_key="sk-x", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="on_chunk"):
        batch.run(model, [], executor=client.get_executor(), on_chunk=print)


def test_a_worker_without_the_key_fails_each_item_with_the_variable_to_set(
    client, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-SECRET-0123456789")
    client.run(set_env, "OPENAI_API_KEY", None)
    model = blazen.Providers.openai(base_url="http://127.0.0.1:9/v1")
    reqs = [Llm.completion_request([Llm.user("x")])] * 3
    report = batch.run(model, reqs, out=tmp_path / "r.jsonl", executor=client.get_executor())
    records = list(batch.read(tmp_path / "r.jsonl"))
    assert report.failed == 3
    assert {r["error"]["kind"] for r in records} == {"auth"}
    assert "OPENAI_API_KEY" in records[0]["error"]["message"]
