"""batch.run against the loopback replay server: results, resume, rate limits, callbacks."""

from __future__ import annotations

import collections
import contextlib
import gc
import json
import pickle
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

import blazen
from blazen import Llm, batch
from blazen.testing import Drop, Reply, StreamServer, openai_sse

OK = Reply.sse(openai_sse(["Hel", "lo"], usage={"prompt_tokens": 3, "completion_tokens": 2}))


def rate_limited(retry_after: str | None) -> Reply:
    headers = {"Retry-After": retry_after} if retry_after is not None else None
    body = {"error": {"type": "rate_limit_exceeded", "message": "slow down"}}
    return Reply.json(body, status=429, headers=headers)


def requests(n: int, start: int = 0):
    return ((f"q{i}", Llm.completion_request([Llm.user(f"item {i}")])) for i in range(start, n))


def prompt_of(recorded) -> str:
    return recorded.json()["messages"][-1]["content"]


@pytest.fixture
def fast(server: StreamServer) -> blazen.ChatModel:
    """A model whose own retries are off: every 429 reaches the batch run."""
    server._default = OK
    return blazen.Providers.openai(
        api_key="sk-test-SECRET-0123456789", base_url=server.base_url, max_retries=0
    )


def test_every_item_is_written_once_as_a_jsonl_line(fast, tmp_path: Path):
    out = tmp_path / "r.jsonl"
    report = batch.run(fast, requests(40), concurrency=8, out=out)
    records = list(batch.read(out))
    assert sorted(r["id"] for r in records) == sorted(f"q{i}" for i in range(40))
    assert records[0]["text"] == "Hello" and records[0]["finish_reason"] == "stop"
    assert records[0]["usage"]["prompt_tokens"] == 3 and records[0]["tool_calls"] == []
    assert (report.ok, report.failed, report.skipped) == (40, 0, 0)
    assert (report.input_tokens, report.output_tokens) == (120, 80)
    assert "40 ok" in str(report)


def test_positions_are_the_ids_of_bare_requests(fast, tmp_path: Path):
    reqs = [Llm.completion_request([Llm.user("hi")])] * 3
    batch.run(fast, reqs, out=tmp_path / "r.jsonl")
    assert sorted(r["id"] for r in batch.read(tmp_path / "r.jsonl")) == ["0", "1", "2"]


def test_errors_are_recorded_and_the_run_goes_on(server, fast, tmp_path: Path):
    server.add(Reply.json({"error": {"message": "bad key sk-test-SECRET-0123456789"}}, status=401))
    report = batch.run(fast, requests(5), concurrency=1, out=tmp_path / "r.jsonl")
    failed = [r for r in batch.read(tmp_path / "r.jsonl") if "error" in r]
    assert (report.ok, report.failed) == (4, 1)
    assert failed[0]["error"]["type"] == "AuthError" and failed[0]["error"]["status"] == 401
    assert failed[0]["error"]["kind"] == "auth"
    assert "SECRET" not in (tmp_path / "r.jsonl").read_text()


def test_a_second_run_skips_done_ids_and_retry_failed_reruns_failures(server, fast, tmp_path):
    out = tmp_path / "r.jsonl"
    server.add(Reply.json({"error": {"message": "boom"}}, status=400))
    batch.run(fast, requests(6), concurrency=1, out=out)
    again = batch.run(fast, requests(6), out=out)
    assert (again.ok, again.skipped) == (0, 6)
    retried = batch.run(fast, requests(6), out=out, retry_failed=True)
    assert (retried.ok, retried.skipped) == (1, 5)
    ids = [r["id"] for r in batch.read(out)]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 6
    assert all("error" not in r for r in batch.read(out))


def test_a_torn_last_line_is_skipped_by_read_and_cut_off_by_resume(fast, tmp_path: Path):
    out = tmp_path / "r.jsonl"
    out.write_text('{"id": "q0", "text": "x"}\n{"id": "q1", "te')
    assert [r["id"] for r in batch.read(out)] == ["q0"]
    report = batch.run(fast, requests(3), out=out)
    assert (report.ok, report.skipped) == (2, 1)
    assert sorted(r["id"] for r in batch.read(out)) == ["q0", "q1", "q2"]
    assert all(json.loads(line) for line in out.read_text().splitlines())


def test_a_corrupt_line_in_the_middle_is_a_validation_error(tmp_path: Path):
    out = tmp_path / "r.jsonl"
    out.write_text('{"id": "q0"}\nnot json\n{"id": "q2"}\n')
    with pytest.raises(blazen.ValidationError, match="line 2"):
        list(batch.read(out))


@pytest.mark.parametrize("retry_after", ["0.02", None])
def test_a_429_storm_lowers_concurrency_then_every_item_ends_ok(
    server, fast, tmp_path, retry_after
):
    # 500 items, 10% of the answers 429, all in the first half: the storm, then recovery.
    server.add(*[rate_limited(retry_after) if i % 5 == 0 else OK for i in range(250)])
    out = tmp_path / "r.jsonl"
    report = batch.run(fast, requests(500), concurrency=32, out=out)
    assert (report.ok, report.failed, report.rate_limited) == (500, 0, 50)
    assert report.lowest_concurrency < 32
    assert report.final_concurrency > report.lowest_concurrency
    ids = [r["id"] for r in batch.read(out)]
    assert len(ids) == len(set(ids)) == 500


def test_rate_limits_past_max_attempts_are_recorded_as_failures(server, fast, tmp_path):
    server.add(*[rate_limited("0") for _ in range(3)])
    report = batch.run(fast, requests(1), max_attempts=3, out=tmp_path / "r.jsonl")
    (record,) = batch.read(tmp_path / "r.jsonl")
    assert report.failed == 1 and record["error"]["kind"] == "rate_limit"
    assert len(server.requests) == 3


def test_callbacks_run_on_the_calling_thread_one_at_a_time(fast):
    caller = threading.get_ident()
    seen: list[tuple[str, int]] = []
    chunks: collections.Counter[str] = collections.Counter()

    def on_chunk(item_id, chunk):
        seen.append(("chunk", threading.get_ident()))
        chunks[item_id] += bool(chunk.content_delta)

    def on_result(result):
        seen.append(("result", threading.get_ident()))
        assert result.ok and result.response.content == "Hello"

    batch.run(fast, requests(20), concurrency=4, on_chunk=on_chunk, on_result=on_result)
    assert {t for _, t in seen} == {caller}
    assert sum(kind == "result" for kind, _ in seen) == 20
    assert chunks == {f"q{i}": 2 for i in range(20)}


def test_a_raising_on_result_stops_the_run_with_a_callback_error(fast, tmp_path):
    def on_result(result):
        raise RuntimeError("mine")

    with pytest.raises(blazen.CallbackError, match="on_result raised RuntimeError"):
        batch.run(fast, requests(50), concurrency=4, on_result=on_result, out=tmp_path / "r")
    # The pool was shut down: none of its threads outlives the run (other tests' server
    # threads may still be winding down, so the count of all threads says nothing).
    deadline = time.monotonic() + 5
    while _pool_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _pool_threads()


def _pool_threads():
    return [t for t in threading.enumerate() if t.name.startswith("blazen-batch")]


def test_the_input_is_pulled_only_as_slots_free_up(fast):
    # Memory is bounded by concurrency: the run never reads far ahead of what finished.
    pulled = finished = ahead = 0

    def source():
        nonlocal pulled, ahead
        for i in range(1000):
            pulled += 1
            ahead = max(ahead, pulled - finished)
            yield Llm.completion_request([Llm.user(f"item {i}")])

    def on_result(result):
        nonlocal finished
        finished += 1

    report = batch.run(fast, source(), concurrency=8, on_result=on_result)
    assert report.ok == 1000 and ahead <= 8 + 1


def test_bad_arguments_are_refused_before_anything_runs(fast, tmp_path):
    with pytest.raises(TypeError, match="CompletionRequest"):
        batch.run(fast, ["hello"])
    with pytest.raises(TypeError, match="ids must be strings"):
        batch.run(fast, [(1, Llm.completion_request([Llm.user("x")]))])
    with pytest.raises(ValueError, match="concurrency"):
        batch.run(fast, [], concurrency=0)
    with pytest.raises(ValueError, match="retry_failed"):
        batch.run(fast, [], retry_failed=True)
    with pytest.raises(TypeError, match="model"):
        batch.run(object(), [])  # type: ignore[arg-type]


def test_progress_false_and_a_non_tty_stderr_show_no_bar(fast, capsys):
    batch.run(fast, requests(3))
    batch.run(fast, requests(3), progress=False)
    assert capsys.readouterr().err == ""


def test_progress_true_draws_a_tqdm_bar_on_stderr(fast, capsys):
    batch.run(fast, list(requests(3)), progress=True)
    err = capsys.readouterr().err
    assert "3/3" in err and "ok=3" in err


def test_a_model_with_its_key_from_the_environment_pickles_without_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-SECRET-abcdefghijklmnop")
    model = blazen.Providers.openai(base_url="http://127.0.0.1:9/v1", max_retries=1)
    data = pickle.dumps(model)
    assert b"SECRET" not in data and b"abcdefghijklmnop" not in data
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker-OWN-0123456789")
    again = pickle.loads(data)
    assert again.options.max_retries == 1 and again.base_url == model.base_url
    assert again.redact("sk-worker-OWN-0123456789") == "***"  # the worker's own key


def test_requests_and_results_pickle(fast):
    req = Llm.completion_request([Llm.user("hi")], max_tokens=5)
    assert pickle.loads(pickle.dumps(req)) == req
    results: list[batch.BatchResult] = []
    batch.run(fast, requests(1), on_result=results.append)
    assert pickle.loads(pickle.dumps(results[0])) == results[0]


def test_a_model_not_built_by_providers_says_it_cannot_pickle(fast):
    fast.recipe = None
    with pytest.raises(TypeError, match=r"only models built by blazen\.Providers"):
        pickle.dumps(fast)


def test_a_raising_on_chunk_stops_the_run_with_a_callback_error(fast):
    def on_chunk(item_id, chunk):
        raise ValueError("mine")

    with pytest.raises(blazen.CallbackError, match="on_chunk raised ValueError: mine"):
        batch.run(fast, requests(20), concurrency=4, on_chunk=on_chunk)


def test_a_dropped_connection_is_recorded_as_a_connection_error(server, fast, tmp_path):
    server.add(Reply.sse([openai_sse(["Hel"])[0], Drop()]))
    report = batch.run(fast, requests(3), concurrency=1, out=tmp_path / "r.jsonl")
    kinds = sorted(r["error"]["kind"] for r in batch.read(tmp_path / "r.jsonl") if "error" in r)
    assert (report.ok, report.failed, kinds) == (2, 1, ["connection"])


def test_memory_does_not_grow_with_the_number_of_items(fast, server):
    # Measured once with 100,000 items: resident memory 38 MiB at 10,000 and 39 at 100,000.
    samples: dict[int, int] = {}
    done = 0

    def on_result(result):
        nonlocal done
        done += 1
        if done in (500, 2000):
            server.requests.clear()  # the test server's own record of every request
            gc.collect()
            samples[done] = tracemalloc.get_traced_memory()[0]

    # The price table loads on the first cost summed: loaded under the trace, it took a
    # minute (when no earlier test had loaded it), and its import is not what is measured.
    with contextlib.suppress(ImportError):
        import genai_prices.data  # noqa: F401

    tracemalloc.start()
    try:
        batch.run(fast, requests(2000), concurrency=8, on_result=on_result)
    finally:
        tracemalloc.stop()
    assert samples[2000] - samples[500] < 64 * 1024, samples


def test_a_models_recipe_never_shows_an_explicit_key(fast):
    assert "SECRET" not in repr(fast.recipe)
    assert repr(fast.recipe) == "Recipe(Providers.openai(...))"


def test_an_interrupted_run_waits_for_items_that_never_come_back_at_most_drain_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """Ctrl-C with items an executor never finishes: the run gives up on them after DRAIN_TIMEOUT."""
    import _thread
    import concurrent.futures
    import importlib
    import time

    run_module = importlib.import_module("blazen.batch.run")  # the module, not run()

    class NeverDone(concurrent.futures.Executor):
        """An executor whose tasks start and never finish (a lost cluster)."""

        def __init__(self) -> None:
            self.submitted = threading.Event()

        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
            future: concurrent.futures.Future[object] = concurrent.futures.Future()
            future.set_running_or_notify_cancel()  # running: cancel() cannot take it back
            self.submitted.set()
            return future

    monkeypatch.setattr(run_module, "DRAIN_TIMEOUT", 0.5)
    executor = NeverDone()
    model = blazen.Providers.openai(api_key="sk-test-0123456789", base_url="http://127.0.0.1:9")

    def interrupt() -> None:
        executor.submitted.wait(30)
        time.sleep(0.1)
        _thread.interrupt_main()

    threading.Thread(target=interrupt, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        batch.run(model, requests(3), out=tmp_path / "r.jsonl", executor=executor)
    assert time.monotonic() - started < 10
