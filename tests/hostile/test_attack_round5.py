"""Round five: a lying batch API, a broken download, a torn ledger, a lost create answer.

Each test is a break found by attacking ``batch.run(..., via="provider")`` (and the surfaces
that landed beside it) with real sockets and processes; it failed before its fix.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import blazen
from blazen import Llm, batch
from blazen.batch.provider import custom_id, ledger_path
from blazen.testing import BatchServer

KEY = "sk-test-SECRET-round5-0123456789"


def model_for(provider: str, server: BatchServer, **kw: Any) -> blazen.ChatModel:
    """A model of ``provider`` whose base_url is the fake."""
    if provider == "openai":
        return blazen.Providers.openai(api_key=KEY, base_url=server.url + "/v1", **kw)
    if provider == "anthropic":
        return blazen.Providers.anthropic(api_key=KEY, base_url=server.url, **kw)
    return blazen.Providers.gemini(api_key=KEY, base_url=server.url + "/v1beta", **kw)


def items(n: int) -> list[tuple[str, blazen.CompletionRequest]]:
    return [(f"q{i}", Llm.completion_request([Llm.user(f"item {i}")])) for i in range(n)]


def run(model: blazen.ChatModel, reqs: Any, out: Path, **kw: Any) -> batch.BatchReport:
    kw.setdefault("poll_interval", 0.01)
    kw.setdefault("max_poll_interval", 0.05)
    return batch.run(model, reqs, out=out, via="provider", **kw)


def records(out: Path) -> dict[str, dict[str, Any]]:
    rows = list(batch.read(out))
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), f"an id written twice: {collections.Counter(ids)}"
    return {r["id"]: r for r in rows}


def _no_key(err: BaseException) -> None:
    seen = err
    while seen is not None:
        assert KEY not in str(seen) and KEY not in repr(getattr(seen, "__dict__", {}))
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]


# -- a batch API that lies ---------------------------------------------------------------


def _lies(provider: str, lines: list[bytes]) -> list[bytes]:
    """Keep q0 and q1 (q1 twice), add an id never sent, garbage, and lines naming no one."""
    keep = [line for line in lines if json.loads(line)["custom_id"] in ("q0", "q1")]
    q1 = next(line for line in keep if json.loads(line)["custom_id"] == "q1")
    stranger = json.loads(q1)
    stranger["custom_id"] = "never-sent"
    return [
        b"{this is not json",
        b"[1, 2, 3]",
        b'{"result": {"type": "succeeded"}, "response": null}',
        b'{"custom_id": "q2", "result": "odd", "response": "odd", "error": "odd"}',
        json.dumps(stranger).encode(),
        *keep,
        q1,
        b'"just a string"',
    ]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_result_lines_that_lie_never_stop_the_run_and_each_id_is_written_once(
    provider: str, tmp_path: Path
):
    """Garbage, foreign and doubled result lines leave every item exactly one typed record."""
    out = tmp_path / "out.jsonl"
    with BatchServer(lines=_lies) as server:
        report = run(model_for(provider, server), items(4), out)
    got = records(out)
    assert sorted(got) == ["q0", "q1", "q2", "q3"]
    assert got["q0"]["text"] == "answer to q0: item 0"
    assert got["q1"]["text"] == "answer to q1: item 1"
    # q2's line names it but says nothing readable; q3 has no line at all.
    assert got["q2"]["error"]["kind"] == "provider"
    assert got["q3"]["error"]["kind"] == "provider"
    assert "without a result" in got["q3"]["error"]["message"]
    assert (report.ok, report.failed) == (2, 2)


def test_gemini_answers_that_are_not_objects_fail_only_their_items(tmp_path: Path):
    """Inlined responses of the wrong shape are those items' typed errors, not a crash."""
    out = tmp_path / "out.jsonl"
    with BatchServer() as server:
        original = server.handle

        def lie(method, path, headers, body):  # type: ignore[no-untyped-def]
            status, ctype, data = original(method, path, headers, body)
            view = json.loads(data)
            answers = ((view.get("response") or {}).get("inlinedResponses") or {}).get(
                "inlinedResponses"
            )
            if answers:
                answers[1] = "not an object"
                answers[2] = {"response": "not an object either"}
                data = json.dumps(view).encode()
            return status, ctype, data

        server.handle = lie  # type: ignore[method-assign]
        report = run(model_for("gemini", server), items(3), out)
    got = records(out)
    assert sorted(got) == ["q0", "q1", "q2"]
    assert got["q0"]["text"] == "answer to q0: item 0"
    assert got["q1"]["error"]["kind"] == "provider"
    assert got["q2"]["error"]["kind"] == "provider"
    assert report.failed == 2


@pytest.mark.parametrize(
    "view",
    [
        {"status": "failed", "errors": ["not", "objects"]},
        {"status": "in_progress", "request_counts": {"completed": "many"}},
        ["a", "list"],
        {"status": "completed", "request_counts": "all of them"},
    ],
)
def test_a_batch_object_of_the_wrong_shape_is_one_typed_error(tmp_path: Path, view: Any):
    """A status answer whose fields have the wrong types ends the run with a ProviderError."""
    out = tmp_path / "out.jsonl"
    with BatchServer() as server:
        original = server.handle

        def lie(method, path, headers, body):  # type: ignore[no-untyped-def]
            status, ctype, data = original(method, path, headers, body)
            if method == "GET" and "/batches/" in path:
                return 200, "application/json", json.dumps(view).encode()
            return status, ctype, data

        server.handle = lie  # type: ignore[method-assign]
        with pytest.raises(blazen.ProviderError) as info:
            run(model_for("openai", server, max_retries=0), items(2), out)
    assert info.value.error_type == "malformed_payload"
    assert "openai" in info.value.message
    _no_key(info.value)


# -- a download that breaks ----------------------------------------------------------------


@pytest.mark.parametrize("fault", ["drop", "cut"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_results_download_cut_half_way_is_a_typed_error_and_a_rerun_finishes(
    provider: str, fault: str, tmp_path: Path
):
    """A download that closes early (sized or not) is one typed error; the rerun writes the rest."""
    out = tmp_path / "out.jsonl"
    reqs = items(40)
    with BatchServer(download=fault) as server:
        model = model_for(provider, server)
        with pytest.raises(blazen.BlazenError) as info:
            run(model, reqs, out)
        assert isinstance(info.value, (blazen.ConnectionError, blazen.ProviderError))
        _no_key(info.value)
        written = records(out) if out.exists() else {}
        assert 0 < len(written) < 40
        assert all("text" in r for r in written.values()), "no item may be failed for a cut"
        server.download = ""
        report = run(model, reqs, out)
        assert len(server.batches) == 1, "nothing may be sent twice"
    got = records(out)
    assert sorted(got) == sorted(f"q{i}" for i in range(40))
    assert all("text" in r for r in got.values())
    assert report.skipped == len(written)


def test_a_stalled_results_download_is_bounded_by_the_idle_timeout(tmp_path: Path):
    """A download that stops sending ends with a TimeoutError: each try waits idle_timeout,
    and the run gives up after MAX_POLL_FAILURES of them (the waits table of
    blazen.batch.provider.run)."""
    out = tmp_path / "out.jsonl"
    with BatchServer(download="stall") as server:
        model = model_for("openai", server, idle_timeout=0.1)
        started = time.monotonic()
        with pytest.raises(blazen.TimeoutError) as info:
            run(model, items(40), out)
        assert time.monotonic() - started < 30
    _no_key(info.value)


def test_an_output_file_that_is_gone_is_one_typed_error(tmp_path: Path):
    """A completed batch whose output file 404s ends the run with a typed error, no key in it."""
    out = tmp_path / "out.jsonl"
    with BatchServer() as server:
        original = server.handle

        def gone(method, path, headers, body):  # type: ignore[no-untyped-def]
            if "/content" in path:
                return 404, "application/json", b'{"error": {"message": "No such File"}}'
            return original(method, path, headers, body)

        server.handle = gone  # type: ignore[method-assign]
        with pytest.raises(blazen.BlazenError) as info:
            run(model_for("openai", server), items(2), out)
    assert info.value.status == 404  # type: ignore[attr-defined]
    _no_key(info.value)
    assert ledger_path(out).read_text().count('"collected"') == 0, "a rerun must try again"


# -- a create whose answer is lost ---------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_a_create_whose_answer_is_lost_is_found_by_its_tag_not_sent_again(
    provider: str, tmp_path: Path
):
    """The provider made the batch but its answer never came: no second batch is made."""
    out = tmp_path / "out.jsonl"
    with BatchServer(lose_creates=1) as server:
        model = model_for(provider, server)
        try:
            run(model, items(3), out)
        except blazen.BlazenError as err:  # stopping is allowed; sending twice is not
            _no_key(err)
            run(model, items(3), out)
        assert len(server.batches) == 1, "the lost answer's batch was made a second time"
    got = records(out)
    assert sorted(got) == ["q0", "q1", "q2"] and all("text" in r for r in got.values())


def test_a_lost_anthropic_create_is_not_retried_into_a_second_batch(tmp_path: Path):
    """Anthropic batches carry no tag: a lost answer stops the run, saying it may exist."""
    out = tmp_path / "out.jsonl"
    with BatchServer(lose_creates=1) as server:
        with pytest.raises(blazen.BlazenError) as info:
            run(model_for("anthropic", server), items(3), out)
        assert len(server.batches) == 1, "a create was retried blind"
    assert "console" in info.value.message
    _no_key(info.value)


# -- the ledger ----------------------------------------------------------------------------


def test_a_torn_ledger_line_does_not_swallow_the_next_runs_record(tmp_path: Path):
    """After a crash tore the ledger's last line, the next run's batch is still on record."""
    out = tmp_path / "out.jsonl"
    ledger_path(out).write_bytes(b'{"v": 1, "op": "submit", "tag": "dead", "provider": "op')
    with BatchServer() as server:
        model = model_for("openai", server)
        with pytest.raises(blazen.CallbackError):
            # Stopped at its first result, as a kill would (its batch is on record).
            run(model, items(3), out, on_result=_raise)
        run(model, items(3), out)
        assert server.submitted_ids() == ["q0", "q1", "q2"], "an item was sent twice"
    assert sorted(records(out)) == ["q0", "q1", "q2"]


def _raise(result: batch.BatchResult) -> None:
    raise RuntimeError("stop")


def test_a_ledger_edited_by_hand_is_read_without_crashing(tmp_path: Path):
    """Rows of the wrong shape in the ledger are skipped; what is valid is still honoured."""
    out = tmp_path / "out.jsonl"
    rows = [
        b"[1, 2]",
        b'"text"',
        b'{"v": 1, "op": "submit", "tag": "t1", "provider": "openai", "ids": 7}',
        b'{"v": 1, "op": "submit", "tag": "t2", "provider": "openai", "ids": "q0"}',
        b'{"v": 1, "op": "submitted", "tag": "t2", "batch": null}',
        b'{"v": 1, "op": "submit", "provider": "openai", "group": "", "ids": ["q1"]}',
    ]
    ledger_path(out).write_bytes(b"\n".join(rows) + b"\n")
    with BatchServer() as server:
        report = run(model_for("openai", server), items(3), out)
        assert sorted(server.submitted_ids()) == ["q0", "q1", "q2"]
    assert sorted(records(out)) == ["q0", "q1", "q2"] and report.ok == 3


def test_ids_that_look_like_digests_never_collide_with_one(tmp_path: Path):
    """An id spelled like another id's digest goes out under a different custom id."""
    plain = "needs a digest!"
    lookalike = custom_id(plain)
    out = tmp_path / "out.jsonl"
    reqs = [(i, Llm.completion_request([Llm.user(i)])) for i in (plain, lookalike, "h_")]
    with BatchServer() as server:
        run(model_for("anthropic", server), reqs, out)
        sent = server.submitted_ids()
    assert len(set(sent)) == 3
    got = records(out)
    assert got[plain]["text"].endswith(plain) and got[lookalike]["text"].endswith(lookalike)


# -- kill -9 and Ctrl-C in the download ------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys
    import blazen
    from blazen import Llm, batch

    provider, url, out, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    key = "sk-test-SECRET-round5-0123456789"
    if provider == "openai":
        model = blazen.Providers.openai(api_key=key, base_url=url + "/v1", idle_timeout=120)
    else:
        model = blazen.Providers.anthropic(api_key=key, base_url=url, idle_timeout=120)
    reqs = [(f"q{i}", Llm.completion_request([Llm.user(f"item {i}")])) for i in range(n)]
    batch.run(model, reqs, out=out, via="provider", poll_interval=0.02, max_poll_interval=0.05)
    """
)


def _child(
    provider: str, server: BatchServer, out: Path, n: int, stderr: Any = subprocess.DEVNULL
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, provider, server.url, str(out), str(n)],
        env={**os.environ, "PYTHONPATH": str(Path(blazen.__file__).parent.parent)},
        stderr=stderr,
    )


def _wait_for_results(out: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.stat().st_size > 0:
            time.sleep(0.3)  # the rest of the first half, then the stall
            return
        time.sleep(0.02)
    pytest.fail("the child never wrote a result")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_sigkill_in_the_middle_of_a_download_then_resume_writes_each_id_once(
    provider: str, tmp_path: Path
):
    """A run killed -9 half-way through its results: the rerun writes the rest, each id once."""
    out = tmp_path / "out.jsonl"
    with BatchServer(download="stall") as server:
        proc = _child(provider, server, out, 60)
        try:
            _wait_for_results(out, proc)
        finally:
            proc.kill()
            proc.wait(30)
        half = records(out)
        assert 0 < len(half) < 60
        server.download = ""
        report = run(model_for(provider, server), items(60), out)
        assert len(server.batches) == 1
    assert sorted(records(out)) == sorted(f"q{i}" for i in range(60))
    assert report.skipped == len(half) and report.ok == 60 - len(half)


def test_ctrl_c_in_a_stalled_download_stops_at_once_and_says_how_to_resume(tmp_path: Path):
    """SIGINT while the results download is stalled ends the run within seconds, not idle_timeout."""
    out = tmp_path / "out.jsonl"
    with BatchServer(download="stall") as server:
        proc = _child("openai", server, out, 60, subprocess.PIPE)
        try:
            _wait_for_results(out, proc)
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
    text = err.decode()
    assert "KeyboardInterrupt" in text and "run again with the same out=" in text
    assert KEY not in text
    assert took < 20, f"Ctrl-C took {took:.1f} s"


# -- the Responses wire: events out of order, reused indexes, wrong types, deep payloads ------

RESPONSES_REQ = Llm.completion_request([Llm.user("hi")])


def _responses(*events: bytes, **options: Any) -> tuple[Any, Any]:
    from blazen.testing import Recorder, Reply, StreamServer

    options.setdefault("max_retries", 0)
    with StreamServer([Reply.sse(list(events))]) as server:
        model = blazen.Providers.openai_compat(
            "test", server.base_url, api_key=KEY, api="responses", **options
        )
        rec = Recorder()
        resp = blazen.Streaming.complete(model, RESPONSES_REQ, rec.handler)
    assert rec.terminals == 1
    return rec, resp


def _ev(kind: str, **fields: Any) -> bytes:
    from blazen.testing import sse_event

    return sse_event({"type": kind, "sequence_number": 0, **fields}, kind)


def _created() -> bytes:
    return _ev(
        "response.created", response={"id": "resp_1", "model": "gpt-5", "status": "in_progress"}
    )


def _completed(**response: Any) -> bytes:
    body = {"id": "resp_1", "status": "completed", "model": "gpt-5", **response}
    return _ev("response.completed", response=body)


def _call_item(call_id: str, name: str, arguments: str = "") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def _malformed(rec: Any, resp: Any) -> None:
    assert resp is None and rec.kinds[-1] == "error"
    assert isinstance(rec.error, blazen.ProviderError), repr(rec.error)
    assert rec.error.error_type == "malformed_payload"
    assert KEY not in str(rec.error)


def test_a_call_delta_before_its_item_is_announced_is_read_from_the_finished_item():
    """Arguments streamed before output_item.added are not lost: the done item supplies them."""
    rec, resp = _responses(
        _created(),
        _ev("response.function_call_arguments.delta", output_index=0, item_id="fc_a", delta='{"x"'),
        _ev("response.output_item.added", output_index=0, item=_call_item("a", "f")),
        _ev("response.function_call_arguments.delta", output_index=0, item_id="fc_a", delta=": 1}"),
        _ev("response.output_item.done", output_index=0, item=_call_item("a", "f", '{"x": 1}')),
        _completed(),
    )
    assert resp is not None and [t.arguments_json for t in resp.tool_calls] == ['{"x": 1}']
    # The snapshot the callbacks saw last is the finished call, not the tail that streamed.
    assert [t.arguments_json for t in rec.chunks[-1].tool_calls] == ['{"x": 1}']


def test_a_done_for_an_item_never_announced_is_taken_whole_once():
    """A finished message no event announced gives its text once, then done."""
    item = {
        "type": "message",
        "id": "m1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "hello", "annotations": []}],
    }
    rec, resp = _responses(
        _created(), _ev("response.output_item.done", output_index=3, item=item), _completed()
    )
    assert resp is not None and resp.content == "hello" and rec.done[0] == "stop"


def test_an_output_index_reused_by_a_second_call_never_merges_two_calls():
    """Two function calls announced at one output_index: never one call with both names."""
    rec, resp = _responses(
        _created(),
        _ev("response.output_item.added", output_index=0, item=_call_item("a", "first")),
        _ev("response.function_call_arguments.delta", output_index=0, delta="{}"),
        _ev("response.output_item.done", output_index=0, item=_call_item("a", "first", "{}")),
        _ev("response.output_item.added", output_index=0, item=_call_item("b", "second")),
        _ev("response.function_call_arguments.delta", output_index=0, delta="{}"),
        _ev("response.output_item.done", output_index=0, item=_call_item("b", "second", "{}")),
        _completed(),
    )
    if resp is None:
        _malformed(rec, resp)
        return
    names = [t.name for t in resp.tool_calls]
    assert "firstsecond" not in names and all(t.arguments_json == "{}" for t in resp.tool_calls)
    assert len({t.id for t in resp.tool_calls}) == len(resp.tool_calls)


def test_a_failed_response_after_text_is_one_typed_error_with_the_text_kept():
    """response.failed after deltas: the typed error, never a done; the partial text on it."""
    rec, resp = _responses(
        _created(),
        _ev("response.output_text.delta", output_index=0, content_index=0, delta="Hel"),
        _ev(
            "response.failed",
            response={
                "id": "resp_1",
                "status": "failed",
                "error": {"code": "server_error", "message": "boom"},
            },
        ),
    )
    assert resp is None and not rec.done and isinstance(rec.error, blazen.ProviderError)
    assert "boom" in rec.error.message


@pytest.mark.parametrize(
    "usage",
    [
        "lots",
        ["a"],
        {"input_tokens": "ten", "output_tokens": 2},
        {"input_tokens": 1, "output_tokens": 2, "output_tokens_details": "x"},
        {"input_tokens": 1.5, "output_tokens": None, "total_tokens": True},
    ],
)
def test_usage_of_the_wrong_type_is_never_a_crash_nor_a_wrong_number(usage: Any):
    """A final usage of the wrong shape: malformed payload or no usage, never a raw TypeError."""
    rec, resp = _responses(
        _created(),
        _ev("response.output_text.delta", output_index=0, content_index=0, delta="hi"),
        _completed(usage=usage),
    )
    if resp is None:
        _malformed(rec, resp)
        return
    u = resp.usage
    assert u is None or all(
        type(getattr(u, f)) is int for f in ("prompt_tokens", "completion_tokens", "total_tokens")
    ), u


@pytest.mark.parametrize(
    "event",
    [
        _ev("response.output_item.added", output_index=0, item="a string"),
        _ev("response.output_item.done", output_index=0, item=["a", "list"]),
        _ev(
            "response.output_item.done",
            output_index=0,
            item={"type": "message", "content": ["not", "parts"]},
        ),
        _ev(
            "response.output_item.done", output_index=0, item={"type": "message", "content": "text"}
        ),
        _ev("response.completed", response="done"),
        _ev("response.incomplete", response={"status": "incomplete", "incomplete_details": "x"}),
        _ev("response.created", response=["x"]),
        _ev("response.failed", response="failed"),
    ],
    ids=[
        "added-str",
        "done-list",
        "parts-str",
        "content-str",
        "completed-str",
        "incomplete-details-str",
        "created-list",
        "failed-str",
    ],
)
def test_an_event_whose_fields_have_the_wrong_shape_is_one_typed_error(event: bytes):
    """An item or response that is not an object: one ProviderError, never an AttributeError."""
    rec, resp = _responses(_created(), event, _completed())
    assert rec.kinds[-1] in ("error", "done")
    if resp is None:
        assert isinstance(rec.error, blazen.ProviderError), repr(rec.error)
        assert not isinstance(rec.error, blazen.InternalError)


def test_a_payload_nested_too_deep_is_one_malformed_payload_error():
    """JSON nested past the parser's recursion limit: a malformed payload, not a RecursionError."""
    deep = "[" * 100_000 + "]" * 100_000
    data = (
        '{"type": "response.output_text.delta", "output_index": 0, "delta": "x", "n": ' + deep + "}"
    )
    rec, resp = _responses(
        _created(), b"event: response.output_text.delta\ndata: " + data.encode() + b"\n\n"
    )
    _malformed(rec, resp)


def test_a_huge_event_is_refused_with_one_typed_error_and_bounded_memory():
    """A single event larger than the framing cap: one typed error, not a process-sized buffer."""
    big = _ev("response.output_text.delta", output_index=0, content_index=0, delta="x" * (64 << 20))
    rec, resp = _responses(_created(), big)
    assert resp is None and isinstance(rec.error, blazen.BlazenError)
    assert not isinstance(rec.error, blazen.InternalError), repr(rec.error)


# -- embeddings: vectors that lie ---------------------------------------------------------


def _embed_answer(data: list[dict[str, Any]]) -> Any:
    from blazen.testing import Reply

    return Reply.json(
        {
            "object": "list",
            "data": data,
            "model": "e",
            "usage": {"prompt_tokens": 3, "total_tokens": 3},
        }
    )


def _embed(*replies: Any, texts: Any = ("a", "b", "c"), **kw: Any) -> Any:
    from blazen.testing import StreamServer

    with StreamServer(list(replies)) as server:
        model = blazen.Providers.openai(api_key=KEY, base_url=server.base_url, max_retries=0)
        return model.embed(list(texts), **kw)


@pytest.mark.parametrize(
    "indexes", [[0, 0, 1], [0, 1, 5], [2, 2, 2], [0, 1, None], ["0", "1", "x"]]
)
def test_vectors_whose_indexes_are_not_each_input_once_are_a_malformed_payload(indexes: Any):
    """Two vectors claiming one index (or one off the end): never a silently shuffled list."""
    data = [
        {"object": "embedding", "index": i, "embedding": [float(n), 1.0]}
        for n, i in enumerate(indexes)
    ]
    with pytest.raises(blazen.ProviderError) as info:
        _embed(_embed_answer(data))
    assert info.value.error_type == "malformed_payload"
    assert KEY not in str(info.value)


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
def test_a_vector_holding_nan_or_infinity_is_a_malformed_payload(bad: str):
    """A non-finite number in an embedding is refused, never handed on to a vector index."""
    from blazen.testing import Reply

    body = (
        '{"object": "list", "model": "e", "data": ['
        '{"index": 0, "embedding": [0.5, 0.25]}, '
        '{"index": 1, "embedding": [0.5, ' + bad + "]}]}"
    )
    with pytest.raises(blazen.ProviderError) as info:
        _embed(
            Reply(
                status=200,
                headers={"Content-Type": "application/json"},
                body=[body.encode()],
                transfer="length",
            ),
            texts=("a", "b"),
        )
    assert info.value.error_type == "malformed_payload"


def test_vectors_of_different_widths_are_a_malformed_payload():
    """One answer whose vectors differ in length: refused, not a ragged list."""
    data = [
        {"index": 0, "embedding": [1.0, 2.0, 3.0]},
        {"index": 1, "embedding": [1.0, 2.0]},
    ]
    with pytest.raises(blazen.ProviderError) as info:
        _embed(_embed_answer(data), texts=("a", "b"))
    assert info.value.error_type == "malformed_payload"


def test_vectors_of_the_wrong_dimensions_are_a_malformed_payload():
    """dimensions=2 asked, three numbers each came back: refused, saying so."""
    data = [{"index": i, "embedding": [1.0, 2.0, 3.0]} for i in range(2)]
    with pytest.raises(blazen.ProviderError, match="dimensions") as info:
        _embed(_embed_answer(data), texts=("a", "b"), dimensions=2)
    assert info.value.error_type == "malformed_payload"


def test_batches_of_different_widths_in_one_call_are_a_malformed_payload():
    """Two batches of one call answered with vectors of different lengths: refused."""
    first = [{"index": 0, "embedding": [1.0, 2.0]}]
    second = [{"index": 0, "embedding": [1.0, 2.0, 3.0]}]
    with pytest.raises(blazen.ProviderError) as info:
        _embed(
            _embed_answer(first),
            _embed_answer(second),
            texts=("a", "b"),
            batch_size=1,
            concurrency=1,
        )
    assert info.value.error_type == "malformed_payload"


def test_a_batch_failing_half_way_is_one_typed_error_and_nothing_partial_is_returned():
    """The second of three batches answers 400: the call raises that error, no short list."""
    from blazen.testing import Reply

    ok = [{"index": 0, "embedding": [1.0, 2.0]}]
    bad = Reply.json(
        {"error": {"message": "bad input", "type": "invalid_request_error"}}, status=400
    )
    with pytest.raises(blazen.InvalidRequestError) as info:
        _embed(
            _embed_answer(ok),
            bad,
            _embed_answer(ok),
            texts=("a", "b", "c"),
            batch_size=1,
            concurrency=1,
        )
    assert KEY not in str(info.value)


# -- Providers.fallback ----------------------------------------------------------------------


def test_an_on_rule_that_raises_is_one_typed_error_and_nothing_is_switched_to():
    """A user's on= predicate that raises ends the stream with one CallbackError, cause kept."""
    from blazen.testing import Recorder, Reply, StreamServer, openai_sse

    def rule(err: blazen.BlazenError) -> bool:
        raise LookupError("my rule broke")

    failing = Reply.json({"error": {"message": "no", "type": "server_error"}}, status=503)
    with (
        StreamServer([failing]) as first,
        StreamServer([Reply.sse(openai_sse(("never",)))]) as second,
    ):
        chain = blazen.Providers.fallback(
            blazen.Providers.openai(api_key=KEY, base_url=first.base_url, max_retries=0),
            blazen.Providers.openai(api_key=KEY, base_url=second.base_url, max_retries=0),
            on=rule,
        )
        rec = Recorder()
        resp = blazen.Streaming.complete(chain, RESPONSES_REQ, rec.handler)
        assert second.requests == []
    assert resp is None and rec.terminals == 1 and rec.chunks == []
    assert isinstance(rec.error, blazen.CallbackError), repr(rec.error)
    assert isinstance(rec.error.__cause__, LookupError)
    assert KEY not in str(rec.error)


# -- MCP: a server that floods its stdout, never answers, or sends one endless line ---------

_RAW_MCP = textwrap.dedent(
    """
    import json, sys, time
    out = sys.stdout.buffer

    def send(obj):
        out.write(json.dumps(obj).encode() + b"\\n")
        out.flush()

    TOOLS = [{"name": n, "description": n, "inputSchema": {"type": "object"}}
             for n in ("flood", "endless_line", "echo")]
    for raw in sys.stdin.buffer:
        msg = json.loads(raw)
        method, mid = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            name = msg["params"]["name"]
            if name == "echo":
                send({"jsonrpc": "2.0", "id": mid,
                      "result": {"content": [{"type": "text", "text": "echo"}]}})
            elif name == "flood":
                end = time.monotonic() + 60
                while time.monotonic() < end:  # garbage lines, never the answer
                    out.write(b"not json at all " * 4096 + b"\\n")
                    out.flush()
            elif name == "endless_line":
                end = time.monotonic() + 60
                while time.monotonic() < end:  # one line that never ends
                    out.write(b"x" * 65536)
                    out.flush()
    """
)


@pytest.mark.parametrize("tool", ["flood", "endless_line"])
def test_an_mcp_server_that_floods_its_stdout_is_bounded_by_the_call_timeout(
    tool: str, tmp_path: Path
):
    """A tool call answered by a flood of garbage ends at its timeout; the session closes."""
    pytest.importorskip("mcp")
    from blazen.agent import mcp

    script = tmp_path / "raw_mcp.py"
    script.write_text(_RAW_MCP)
    started = time.monotonic()
    with open(tmp_path / "log", "w") as log:
        session = mcp.stdio([sys.executable, str(script)], stderr=log, protocol="legacy")
        with session:
            assert session.call("echo", {}) is not None
            with pytest.raises(blazen.TimeoutError):
                session.call(tool, {}, timeout=2)
    assert time.monotonic() - started < 40, "closing a flooding server must not hang"


def test_a_batch_whose_status_goes_back_after_completed_is_read_once_it_ends_again(
    tmp_path: Path,
):
    """completed, then in_progress with no files, then completed: every answer, none failed."""
    out = tmp_path / "out.jsonl"
    with BatchServer() as server:
        original = server.handle
        seen = {"completed": 0}

        def wobble(method, path, headers, body):  # type: ignore[no-untyped-def]
            status, ctype, data = original(method, path, headers, body)
            if method == "GET" and path.startswith("/v1/batches/"):
                view = json.loads(data)
                if view.get("status") == "completed":
                    seen["completed"] += 1
                    if seen["completed"] == 2:  # the look the results download takes
                        view.update(status="in_progress", output_file_id=None)
                        return status, ctype, json.dumps(view).encode()
            return status, ctype, data

        server.handle = wobble  # type: ignore[method-assign]
        report = run(model_for("openai", server), items(3), out)
    got = records(out)
    assert sorted(got) == ["q0", "q1", "q2"] and all("text" in r for r in got.values())
    assert report.ok == 3 and report.failed == 0
