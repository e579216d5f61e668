"""batch.run(via="provider") against a fake of OpenAI's, Anthropic's and Gemini's batch APIs."""

from __future__ import annotations

import _thread
import collections
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import blazen
from blazen import Llm, batch
from blazen.batch.provider import custom_id, ledger_path
from blazen.testing import BatchServer

KEY = "sk-test-SECRET-0123456789abcdef"
PROVIDERS = ["openai", "anthropic", "gemini"]


def model_for(provider: str, server: BatchServer, **kw: Any) -> blazen.ChatModel:
    """A model of ``provider`` whose base_url is the fake."""
    if provider == "openai":
        return blazen.Providers.openai(api_key=KEY, base_url=server.url + "/v1", **kw)
    if provider == "anthropic":
        return blazen.Providers.anthropic(api_key=KEY, base_url=server.url, **kw)
    return blazen.Providers.gemini(api_key=KEY, base_url=server.url + "/v1beta", **kw)


def items(n: int, prefix: str = "q") -> list[tuple[str, blazen.CompletionRequest]]:
    return [
        (f"{prefix}{i}", Llm.completion_request([Llm.user(f"item {i}")], max_tokens=32))
        for i in range(n)
    ]


def run(model: blazen.ChatModel, reqs: Any, out: Path, **kw: Any) -> batch.BatchReport:
    kw.setdefault("poll_interval", 0.01)
    kw.setdefault("max_poll_interval", 0.05)
    return batch.run(model, reqs, out=out, via="provider", **kw)


def records(out: Path) -> dict[str, dict[str, Any]]:
    rows = list(batch.read(out))
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), f"an id written twice: {collections.Counter(ids)}"
    return {r["id"]: r for r in rows}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_item_comes_back_once_from_the_providers_batch(provider: str, tmp_path: Path):
    """Items go out as one provider batch and each answer is written once, in the same records."""
    out = tmp_path / "out.jsonl"
    with BatchServer(polls=2) as server:
        report = run(model_for(provider, server), items(5), out)
        assert len(server.batches) == 1 and len(server.batches[0].items) == 5
    got = records(out)
    assert sorted(got) == [f"q{i}" for i in range(5)]
    assert got["q3"]["text"] == "answer to q3: item 3"
    assert got["q3"]["finish_reason"] == "stop"
    assert got["q3"]["usage"]["prompt_tokens"] == 10
    assert (report.ok, report.failed, report.batches) == (5, 0, 1)
    assert (report.input_tokens, report.output_tokens) == (50, 25)
    assert "1 provider batch" in str(report)


def test_openai_lines_are_the_wires_own_non_streaming_bodies(tmp_path: Path):
    """The uploaded file holds one POST line per item whose body is the chat request, unstreamed."""
    req = Llm.completion_request(
        [Llm.system("Be terse."), Llm.user("hi")], max_tokens=9, temperature=0.5
    )
    with BatchServer() as server:
        model = model_for("openai", server)
        run(model, [("a", req)], tmp_path / "out.jsonl")
        upload = next(r for r in server.requests if r.path == "/v1/files")
        create = next(r for r in server.requests if r.path == "/v1/batches")
    assert upload.header("authorization") == f"Bearer {KEY}"
    assert "multipart/form-data" in (upload.header("content-type") or "")
    assert b'name="purpose"\r\n\r\nbatch\r\n' in upload.body
    body = create.json()
    assert body["endpoint"] == "/v1/chat/completions" and body["completion_window"] == "24h"
    ((cid, line_body),) = server.batches[0].items
    assert cid == "a"
    expected = json.loads(model.wire.build(req, stream=False).body)
    assert line_body == expected and "stream" not in line_body


def test_request_bodies_match_the_official_sdks_batch_types(tmp_path: Path):
    """What blazen sends validates against the openai and anthropic SDKs' batch request types
    (chat completions, Responses and Messages bodies), with no key those types do not name."""
    pydantic = pytest.importorskip("pydantic")
    from anthropic.types.messages.batch_create_params import BatchCreateParams as AnthropicBatch
    from openai.types.batch_create_params import BatchCreateParams as OpenAIBatch
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

    tool = Llm.tool("lookup", "Look a word up.", {"type": "object", "properties": {}})
    req = Llm.completion_request(
        [Llm.system("Be terse."), Llm.user("define sky")], tools=[tool], max_tokens=50
    )

    def check(kind: Any, body: Any) -> None:
        # Valid, and nothing the type does not name: TypedDict validation alone would let
        # an unknown key through, so what the type keeps must be the whole body.
        adapter = pydantic.TypeAdapter(kind)
        kept = json.loads(adapter.dump_json(adapter.validate_python(body), exclude_unset=True))
        assert kept == body, f"{kind.__name__} does not know all of {body}"

    with BatchServer() as server:
        run(model_for("openai", server), [("a", req)], tmp_path / "o.jsonl")
        run(model_for("anthropic", server), [("a", req)], tmp_path / "a.jsonl")
        bodies = {r.path: r.json() for r in server.requests if r.path.endswith("batches")}
        lines = {b.provider: b.items for b in server.batches}
        responses = blazen.Providers.openai(
            api_key=KEY, base_url=server.url + "/v1", api="responses"
        )
        run(responses, [("a", req)], tmp_path / "r.jsonl")
        ((_cid, responses_body),) = server.batches[-1].items
    check(OpenAIBatch, bodies["/v1/batches"])
    for _cid, body in lines["openai"]:
        check(CompletionCreateParamsNonStreaming, body)
    check(ResponseCreateParamsNonStreaming, responses_body)
    anthropic_body = bodies["/v1/messages/batches"]
    check(AnthropicBatch, anthropic_body)
    assert anthropic_body["requests"][0]["params"]["tools"][0]["name"] == "lookup"


def test_the_fake_answers_as_the_sdks_parse_it(tmp_path: Path):
    """The fake's batch objects and result lines parse with the official SDKs' own models."""
    import anthropic
    import openai

    with BatchServer(polls=0) as server:
        run(model_for("openai", server), items(2), tmp_path / "o.jsonl")
        run(model_for("anthropic", server), items(2), tmp_path / "a.jsonl")
        client = openai.OpenAI(api_key=KEY, base_url=server.url + "/v1", max_retries=0)
        done = client.batches.retrieve(server.batches[0].id)
        assert done.status == "completed" and done.output_file_id
        lines = client.files.content(done.output_file_id).text.splitlines()
        assert json.loads(lines[0])["response"]["status_code"] == 200
        claude = anthropic.Anthropic(api_key=KEY, base_url=server.url, max_retries=0)
        ended = claude.messages.batches.retrieve(server.batches[1].id)
        assert ended.processing_status == "ended"
        results = list(claude.messages.batches.results(server.batches[1].id))
        assert {r.result.type for r in results} == {"succeeded"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rejected_items_are_written_as_their_typed_errors(provider: str, tmp_path: Path):
    """A request the provider rejects is that item's error; the others still succeed."""
    out = tmp_path / "out.jsonl"
    with BatchServer(reject={"q1", "q3"}) as server:
        report = run(model_for(provider, server), items(4), out)
    got = records(out)
    assert got["q0"]["text"].startswith("answer to q0")
    for bad in ("q1", "q3"):
        assert "text" not in got[bad]
        assert got[bad]["error"]["kind"] == "invalid_request", got[bad]
        assert f"rejected {bad}" in got[bad]["error"]["message"]
    assert (report.ok, report.failed) == (2, 2)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_expired_batch_fails_the_rest_and_retry_failed_sends_them_again(
    provider: str, tmp_path: Path
):
    """Items an expired batch never reached are errors; retry_failed=True sends just those."""
    out = tmp_path / "out.jsonl"
    with BatchServer(expire=True) as server:
        model = model_for(provider, server)
        first = run(model, items(6), out)
        if provider == "gemini":
            # An expired Gemini batch returns no inlined responses at all.
            assert first.failed == 6
        else:
            assert (first.ok, first.failed) == (3, 3)
        failed = {i for i, r in records(out).items() if "error" in r}
        assert all("expire" in records(out)[i]["error"]["message"] for i in failed)
        server.expire = False
        second = run(model, items(6), out, retry_failed=True)
        assert second.ok == len(failed) and second.skipped == 6 - len(failed)
        resent = [cid for cid, _ in server.batches[1].items]
    assert sorted(resent) == sorted(failed)
    assert all("text" in r for r in records(out).values())


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_results_out_of_order_reach_their_own_ids(provider: str, tmp_path: Path):
    """Shuffled result lines are matched by custom id, never by position."""
    out = tmp_path / "out.jsonl"
    with BatchServer(shuffle=True, seed=7) as server:
        run(model_for(provider, server), items(30), out)
    for item_id, row in records(out).items():
        assert row["text"] == f"answer to {item_id}: item {item_id[1:]}"


def test_ids_a_provider_refuses_go_under_a_digest_and_come_back(tmp_path: Path):
    """Ids with spaces, slashes or over 64 characters are sent as digests and mapped back."""
    odd = ["with space", "a/b", "x" * 80, "ünïcode", "h_" + "0" * 40, "line\n"]
    reqs = [(i, Llm.completion_request([Llm.user(i)])) for i in odd]
    out = tmp_path / "out.jsonl"
    with BatchServer() as server:
        run(model_for("anthropic", server), reqs, out)
        sent = [cid for cid, _ in server.batches[0].items]
    assert sent == [custom_id(i) for i in odd] and len(set(sent)) == len(odd)
    assert all(cid.startswith("h_") for cid in sent)  # "line\n" too: no $ before a newline
    assert sorted(records(out)) == sorted(odd)
    assert records(out)["a/b"]["text"].endswith(": a/b")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_status_check_answered_500_is_polled_again(provider: str, tmp_path: Path):
    """A poll that fails with a server error does not end the run; the next poll goes on."""
    out = tmp_path / "out.jsonl"
    with BatchServer(poll_failures=4) as server:
        report = run(model_for(provider, server, max_retries=0), items(3), out)
        assert server.poll_failures == 0
    assert report.ok == 3


def test_polls_back_off_from_poll_interval_to_max_poll_interval(tmp_path: Path):
    """Quiet polls wait half as long again each round, from poll_interval up to the cap."""
    times: list[float] = []
    with BatchServer(polls=8) as server:
        original = server.handle

        def timed(method, path, headers, body):  # type: ignore[no-untyped-def]
            if method == "GET" and path.startswith("/v1/batches/"):
                times.append(time.monotonic())
            return original(method, path, headers, body)

        server.handle = timed  # type: ignore[method-assign]
        run(
            model_for("openai", server),
            items(2),
            tmp_path / "out.jsonl",
            poll_interval=0.1,
            max_poll_interval=0.3,
        )
    gaps = [b - a for a, b in zip(times, times[1:])]
    # 0.1 (the first round saw a new state), 0.15, 0.225, then 0.3 while nothing changes.
    assert 0.09 < gaps[0] < 0.2 and gaps[1] > 0.14 and gaps[2] > 0.21, gaps
    # Capped: uncapped, they would be 0.34, 0.51, 0.76 (one slow round is allowed for).
    assert all(g > 0.29 for g in gaps[3:7]) and sorted(gaps[3:7])[2] < 0.45, gaps


def test_a_poll_refused_for_good_stops_the_run_with_its_error(tmp_path: Path):
    """An error that waiting cannot fix (a revoked key) ends the run with that typed error."""
    out = tmp_path / "out.jsonl"
    with BatchServer(polls=5) as server:
        model = model_for("anthropic", server)
        original = server.handle

        def revoke(method, path, headers, body):  # type: ignore[no-untyped-def]
            if method == "GET":
                headers = {k: v for k, v in headers.items() if k.lower() != "x-api-key"}
            return original(method, path, headers, body)

        server.handle = revoke  # type: ignore[method-assign]
        with pytest.raises(blazen.AuthError) as info:
            run(model, items(2), out)
    assert KEY not in str(info.value) and KEY not in repr(info.value.__dict__)
    # The batch was recorded: a later run collects it instead of sending it again.
    lines = ledger_path(out).read_text().splitlines()
    assert [json.loads(line)["op"] for line in lines] == ["submit", "submitted"]


def test_items_are_split_at_the_providers_limits(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """More items than one batch may hold go out as several batches, none over the limit."""
    from blazen.batch.provider.openai import OpenAIBatches

    monkeypatch.setattr(OpenAIBatches, "max_items", 4)
    out = tmp_path / "out.jsonl"
    with BatchServer() as server:
        report = run(model_for("openai", server), items(10), out)
        sizes = [len(b.items) for b in server.batches]
    assert sizes == [4, 4, 2] and report.batches == 3 and len(records(out)) == 10


def test_items_are_split_at_the_providers_byte_limit_and_one_too_big_fails_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """No batch over max_bytes; an item bigger than a whole batch may be is its own error."""
    from blazen.batch.provider.anthropic import AnthropicBatches

    monkeypatch.setattr(AnthropicBatches, "max_bytes", 400)
    reqs = [*items(5), ("huge", Llm.completion_request([Llm.user("x" * 500)]))]
    out = tmp_path / "out.jsonl"
    with BatchServer() as server:
        report = run(model_for("anthropic", server), reqs, out)
        sizes = [len(r.body) for r in server.requests if r.path == "/v1/messages/batches"]
        counts = [len(b.items) for b in server.batches]
    assert sum(counts) == 5 and len(counts) > 1 and max(sizes) <= 400 + len('{"requests":[]}')
    assert records(out)["huge"]["error"]["kind"] == "invalid_request"
    assert (report.ok, report.failed) == (5, 1)


def test_requests_for_two_models_go_in_two_batches(tmp_path: Path):
    """OpenAI and Gemini batches hold one model each: a mixed run is split by model."""
    reqs = [
        (f"q{i}", Llm.completion_request([Llm.user("hi")], model=m))
        for i, m in enumerate(["gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.5-flash"])
    ]
    with BatchServer() as server:
        run(model_for("gemini", server), reqs, tmp_path / "out.jsonl")
        made = sorted((b.metadata["model"], len(b.items)) for b in server.batches)
    assert made == [("models/gemini-2.5-flash", 2), ("models/gemini-2.5-pro", 1)]


def test_typed_output_is_validated_when_results_arrive(tmp_path: Path):
    """output= is checked as each answer arrives: valid JSON is .output, anything else an error."""
    import attrs

    @attrs.frozen
    class Word:
        word: str

    def answer(provider: str, cid: str, body: Any) -> str:
        return '{"word": "sky"}' if cid == "good" else "not json"

    reqs = [
        (cid, Llm.completion_request([Llm.user("a word")], output=Word)) for cid in ("good", "bad")
    ]
    seen: list[batch.BatchResult] = []
    with BatchServer(answer=answer) as server:
        run(model_for("openai", server), reqs, tmp_path / "out.jsonl", on_result=seen.append)
    by_id = {r.id: r for r in seen}
    assert by_id["good"].response is not None and by_id["good"].response.output == Word("sky")
    assert isinstance(by_id["bad"].error, blazen.OutputValidationError)


def test_a_request_the_wire_cannot_send_fails_alone_before_anything_is_sent(tmp_path: Path):
    """An item the wire refuses (audio to Anthropic) is its own error; the rest go out."""
    audio = Llm.audio(b"RIFF0000WAVEfmt ", format="wav")
    reqs = [
        ("ok", Llm.completion_request([Llm.user("hi")])),
        ("audio", Llm.completion_request([Llm.user("listen", attachments=[audio])])),
    ]
    out = tmp_path / "out.jsonl"
    with BatchServer() as server:
        report = run(model_for("anthropic", server), reqs, out)
        assert [cid for cid, _ in server.batches[0].items] == ["ok"]
    assert records(out)["audio"]["error"]["kind"] == "unsupported"
    assert (report.ok, report.failed) == (1, 1)


def test_arguments_only_a_stream_can_use_are_refused_before_anything_runs(tmp_path: Path):
    """via='provider' refuses on_chunk, executor, timeout, a missing out= and a fallback
    chain (a provider's batch cannot switch providers) by name."""
    with BatchServer() as server:
        model = model_for("openai", server)
        with pytest.raises(ValueError, match="needs out="):
            batch.run(model, items(1), via="provider")
        with pytest.raises(ValueError, match="on_chunk"):
            run(model, items(1), tmp_path / "o.jsonl", on_chunk=lambda i, c: None)
        with pytest.raises(ValueError, match="timeout"):
            run(model, items(1), tmp_path / "o.jsonl", timeout=5)
        with pytest.raises(ValueError, match="via must be"):
            batch.run(model, items(1), out=tmp_path / "o.jsonl", via="bulk")
        with pytest.raises(ValueError, match="poll_interval"):
            run(model, items(1), tmp_path / "o.jsonl", poll_interval=0)
        chain = blazen.Providers.fallback(model, model_for("anthropic", server))
        with pytest.raises(ValueError, match="cannot switch"):
            run(chain, items(1), tmp_path / "o.jsonl")
        assert server.requests == []


def test_a_wire_without_a_batch_api_is_refused_by_name(tmp_path: Path):
    """Ollama has no batch API: UnsupportedError saying what to use instead, nothing sent."""
    model = blazen.Providers.ollama(base_url="http://127.0.0.1:9")
    with pytest.raises(blazen.UnsupportedError, match="via='stream'"):
        run(model, items(1), tmp_path / "o.jsonl")


def test_ctrl_c_leaves_the_batch_running_and_a_rerun_collects_it(tmp_path: Path, capsys):
    """Ctrl-C while waiting says how to resume; the batch is not cancelled; a rerun collects it."""
    out = tmp_path / "out.jsonl"
    with BatchServer(polls=10_000) as server:
        model = model_for("openai", server)
        _interrupt_once_a_batch_exists(server)
        with pytest.raises(KeyboardInterrupt):
            run(model, items(3), out)
        assert "run again with the same out=" in capsys.readouterr().err
        assert not server.batches[0].cancelled
        server.polls = 0
        report = run(model, items(3), out)
        assert len(server.batches) == 1, "nothing may be sent twice"
    assert report.ok == 3 and report.batches == 1 and sorted(records(out)) == ["q0", "q1", "q2"]


def test_ctrl_c_with_cancel_on_interrupt_cancels_the_batch(tmp_path: Path):
    """cancel_on_interrupt=True asks the provider to stop; a rerun writes the items cancelled."""
    out = tmp_path / "out.jsonl"
    with BatchServer(polls=10_000) as server:
        model = model_for("anthropic", server)
        _interrupt_once_a_batch_exists(server)
        with pytest.raises(KeyboardInterrupt):
            run(model, items(2), out, cancel_on_interrupt=True)
        assert server.batches[0].cancelled
        run(model, items(2), out)
    assert {r["error"]["kind"] for r in records(out).values()} == {"cancelled"}


def _interrupt_once_a_batch_exists(server: BatchServer) -> None:
    def watch() -> None:
        deadline = time.monotonic() + 30
        while not server.batches and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
        _thread.interrupt_main()

    threading.Thread(target=watch, daemon=True).start()


_KILLED_RUN = textwrap.dedent(
    """
    import sys
    # Prices are not what this measures, and genai-prices' arithmetic is about half the
    # run's time: the report sums no cost (blazen prices nothing without the package).
    sys.modules["genai_prices"] = None
    import blazen
    from blazen import Llm, batch

    provider, url, out = sys.argv[1:4]
    if provider == "openai":
        model = blazen.Providers.openai(api_key="sk-test-0123456789", base_url=url + "/v1")
    elif provider == "anthropic":
        model = blazen.Providers.anthropic(api_key="sk-test-0123456789", base_url=url)
    else:
        model = blazen.Providers.gemini(api_key="sk-test-0123456789", base_url=url + "/v1beta")
    reqs = [(f"q{i}", Llm.completion_request([Llm.user(f"item {i}")])) for i in range(int(sys.argv[4]))]
    batch.run(model, reqs, out=out, via="provider", poll_interval=0.05, max_poll_interval=0.05)
    """
)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_sigkill_between_submit_and_download_then_resume_sends_nothing_twice(
    provider: str, tmp_path: Path
):
    """A run killed -9 while its batches run is resumed: every id once, no item sent twice."""
    out = tmp_path / "out.jsonl"
    with BatchServer(polls=10_000) as server:
        from blazen.batch.provider.openai import OpenAIBatches

        del OpenAIBatches  # (the limit is lowered in the child through the environment)
        proc = subprocess.Popen(
            [sys.executable, "-c", _KILLED_RUN, provider, server.url, str(out), "7"],
            env={**os.environ, "PYTHONPATH": str(Path(blazen.__file__).parent.parent)},
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if ledger_path(out).exists() and "submitted" in ledger_path(out).read_text():
                    break
                time.sleep(0.02)
            else:
                pytest.fail("the child never recorded its batch")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        assert not out.exists() or out.read_text() == ""
        server.polls = 0
        report = run(model_for(provider, server), items(7), out)
        sent = server.submitted_ids()
    assert sorted(sent) == sorted(f"q{i}" for i in range(7)), "an item was sent twice"
    assert sorted(records(out)) == sorted(f"q{i}" for i in range(7))
    assert report.ok == 7 and report.batches == 1


def test_a_kill_between_the_providers_answer_and_the_ledger_finds_the_batch_by_tag(
    tmp_path: Path,
):
    """A submission with no recorded id is looked up by its tag (OpenAI metadata), not re-sent."""
    out = tmp_path / "out.jsonl"
    with BatchServer(polls=10_000) as server:
        model = model_for("openai", server)
        _interrupt_once_a_batch_exists(server)
        with pytest.raises(KeyboardInterrupt):
            run(model, items(3), out)
        # As if the process had died before writing the provider's id down.
        lines = ledger_path(out).read_text().splitlines()
        ledger_path(out).write_text(lines[0] + "\n")
        server.polls = 0
        report = run(model, items(3), out)
        assert len(server.batches) == 1
    assert report.ok == 3 and sorted(records(out)) == ["q0", "q1", "q2"]


def test_the_command_line_sends_a_provider_batch_and_a_rerun_collects_it(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
):
    """`blazen batch FILE --via provider` sends one batch and shows its progress on stderr."""
    from blazen import cli

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "".join(json.dumps({"id": f"p{i}", "prompt": f"x{i}"}) + "\n" for i in range(3))
    )
    out = tmp_path / "r.jsonl"
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with BatchServer(polls=1) as server:
        argv = ["batch", str(prompts), "--out", str(out), "--provider", "anthropic"]
        argv += ["--base-url", server.url, "--via", "provider", "--poll-interval", "0.01"]
        assert cli.main([*argv, "--progress"]) == 0
        assert len(server.batches) == 1
    err = capsys.readouterr().err
    assert "blazen batch (anthropic): sent batch msgbatch_" in err
    assert "3 ok, 0 failed" in err and KEY not in err
    assert sorted(records(out)) == ["p0", "p1", "p2"]


def test_progress_shows_items_submitted_the_providers_status_and_done_counts(
    tmp_path: Path, capsys
):
    """One line a change: items submitted, batches in progress with the provider's own
    status and counts, results so far; a poll round that changed nothing prints nothing."""
    with BatchServer(polls=4) as server:
        run(model_for("openai", server), items(3), tmp_path / "out.jsonl", progress=True)
    lines = capsys.readouterr().err.splitlines()
    waiting = "3 items submitted in 1 batch; 1 in progress (in_progress 0/3); 0 ok, 0 failed"
    assert [line.split(": ", 1)[1] for line in lines if "items submitted" in line] == [
        waiting,
        "3 items submitted in 1 batch; 0 in progress; 3 ok, 0 failed",
    ]
    assert any("finished (completed): 3 results" in line for line in lines)


def test_answers_of_a_provider_batch_are_priced_at_its_batch_rates(tmp_path: Path):
    """usage.cost of a provider batch answer is the table's batch price, half the streamed
    one, and the run's report carries the sum."""
    genai_prices = pytest.importorskip("genai_prices")
    seen: list[batch.BatchResult] = []
    with BatchServer() as server:
        model = model_for("anthropic", server, model="claude-sonnet-4-6")
        report = run(model, items(1), tmp_path / "out.jsonl", on_result=seen.append)
    (result,) = seen
    assert result.response is not None and result.response.usage is not None
    usage = result.response.usage
    assert usage.batch and usage.model == "claude-sonnet-4-6"
    standard = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=10, output_tokens=5),
        "claude-sonnet-4-6",
        provider_id="anthropic",
    ).total_price
    assert usage.cost is not None and usage.cost == standard / 2
    # The report sums it, as a streamed run's does.
    assert report.cost == usage.cost and f"${usage.cost:.4f}" in str(report)
    assert usage.priced_as("anthropic", "claude-sonnet-4-6").cost == standard


def test_a_responses_api_model_batches_on_the_responses_endpoint(tmp_path: Path):
    """api='responses' goes as a /v1/responses batch of the wire's own bodies, read back whole."""
    out = tmp_path / "out.jsonl"
    req = Llm.completion_request([Llm.user("hi")], max_tokens=20)
    with BatchServer() as server:
        model = blazen.Providers.openai(api_key=KEY, base_url=server.url + "/v1", api="responses")
        report = run(model, [("r1", req)], out)
        create = next(r for r in server.requests if r.path == "/v1/batches")
        ((cid, body),) = server.batches[0].items
    assert create.json()["endpoint"] == "/v1/responses"
    assert body == json.loads(model.wire.build(req, stream=False).body) and "stream" not in body
    assert records(out)["r1"]["text"] == "answer to r1: hi"
    assert report.ok == 1 and report.input_tokens == 10


_MEASURED_RUN = textwrap.dedent(
    """
    import sys
    # Prices are not what this measures, and genai-prices' arithmetic is about half the
    # run's time: the report sums no cost (blazen prices nothing without the package).
    sys.modules["genai_prices"] = None
    import blazen
    from blazen import Llm, batch

    provider, url, out, n, poll = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    key = "sk-test-0123456789"
    if provider == "openai":
        model = blazen.Providers.openai(api_key=key, base_url=url + "/v1", idle_timeout=120)
    elif provider == "anthropic":
        model = blazen.Providers.anthropic(api_key=key, base_url=url, idle_timeout=120)
    else:
        model = blazen.Providers.gemini(api_key=key, base_url=url + "/v1beta", idle_timeout=120)
    # A generator: the caller's own list of 100,000 requests is not blazen's memory.
    reqs = ((f"q{i}", Llm.completion_request([Llm.user(f"item {i}")], max_tokens=16)) for i in range(n))
    report = batch.run(model, reqs, out=out, via="provider", poll_interval=poll, max_poll_interval=poll)
    # VmHWM: this process's own peak (ru_maxrss also counts the parent's size at the fork).
    status = open("/proc/self/status").read().split("VmHWM:")[1]
    print(report.ok, report.failed, report.batches, int(status.split()[0]) // 1024)
    """
)


def _measured(
    provider: str, server: BatchServer, out: Path, n: int, poll: float
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _MEASURED_RUN, provider, server.url, str(out), str(n), str(poll)],
        env={**os.environ, "PYTHONPATH": str(Path(blazen.__file__).parent.parent)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM in /proc")
@pytest.mark.timeout(300)
@pytest.mark.parametrize("provider", ["gemini"])
def test_a_run_of_100000_items_stays_within_bounded_memory(provider: str, tmp_path: Path):
    """100,000 items: the process's peak memory stays far below what holding them all takes.

    Measured peaks (interpreter and blazen alone: about 34 MiB): Anthropic 99 MiB (one batch
    of 100,000, its lines held while it is sent: the largest batch of the three), Gemini
    81 MiB (inline batches of 10,000: its answers come back as one JSON document a batch,
    read whole; 353 MiB when all 100,000 were one batch). OpenAI, measured the same way,
    106 MiB (two batches of 50,000). Only Gemini runs here, to keep the suite short (each
    run takes half a minute): its answers are the ones read whole, where the peak grew with
    the run before batches were capped; Anthropic's and OpenAI's lines are held one batch
    at a time, bounded by the provider's own batch limits. (Those figures were read with
    genai-prices loaded; the run here goes without it, which halves its time: Gemini 84 MiB.)
    """
    out = tmp_path / "out.jsonl"
    with BatchServer(polls=1) as server:
        proc = _measured(provider, server, out, 100_000, 0.05)
        stdout, stderr = proc.communicate(timeout=280)
    assert proc.returncode == 0, stderr[-2000:]
    ok, failed, _batches, peak_mib = map(int, stdout.split())
    assert (ok, failed) == (100_000, 0)
    assert peak_mib < 150, f"peak resident memory {peak_mib} MiB"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc/PID/stat")
def test_waiting_for_a_provider_batch_costs_no_cpu_worth_measuring(tmp_path: Path):
    """Five polls a second for two seconds: the waiting process uses under 5% of one core."""
    out = tmp_path / "out.jsonl"
    with BatchServer(polls=10_000) as server:
        proc = _measured("openai", server, out, 100, 0.2)
        try:
            deadline = time.monotonic() + 60
            while "submitted" not in (
                ledger_path(out).read_text() if ledger_path(out).exists() else ""
            ):
                assert time.monotonic() < deadline and proc.poll() is None, "never submitted"
                time.sleep(0.02)
            polls = lambda: sum(r.method == "GET" for r in server.requests)  # noqa: E731
            before, polled = _cpu_seconds(proc.pid), polls()
            time.sleep(2.0)
            used, polled = _cpu_seconds(proc.pid) - before, polls() - polled
        finally:
            proc.kill()
            proc.communicate(timeout=30)
    assert polled >= 5, f"only {polled} polls in two seconds"
    assert used < 0.1, f"{used:.3f} s of CPU in two seconds of waiting"
