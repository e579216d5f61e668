"""``Providers.fallback``: the next model only before the first chunk, one terminal in all.

Every case runs over real sockets: one ``StreamServer`` per member, answering 429, 529,
refusing the connection, stalling before the first byte, or failing after a chunk.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import socket
import sys
import threading
import time

import pytest

import blazen
from blazen import CancelToken, Llm, Providers, Streaming, batch
from blazen.testing import Drop, Recorder, Reply, Stall, StreamServer, openai_sse

from .conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])
USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
OTHER_KEY = "sk-other-SECRET-9876543210"


def answer(*parts: str, model: str = "second-model") -> Reply:
    return Reply.sse(openai_sse(parts or ("Hi ", "there"), usage=USAGE, model=model))


def error(status: int, kind: str = "server_error", message: str = "no") -> Reply:
    return Reply.json({"error": {"message": message, "type": kind}}, status=status)


def member(server: StreamServer, key: str = KEY_FOR_TESTS, **options: object) -> blazen.ChatModel:
    return Providers.openai(api_key=key, base_url=server.base_url, max_retries=0, **options)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def servers():
    with StreamServer() as first, StreamServer() as second:
        yield first, second


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(error(429, "rate_limit_error", "slow down"), id="429"),
        pytest.param(error(529, "overloaded_error", "overloaded"), id="529"),
        pytest.param(error(503, "server_error", "unavailable"), id="503"),
    ],
)
def test_the_secondary_answers_when_the_primary_fails_first(servers, failure):
    """429, 529 or 5xx before any chunk: the same request goes to the next model."""
    first, second = servers
    first.add(failure)
    second.add(answer())
    model = Providers.fallback(member(first), member(second))
    rec = Recorder()
    resp = Streaming.complete(model, REQ, rec.handler)
    assert resp.content == "Hi there" and rec.text == "Hi there" and rec.terminals == 1
    assert resp.provider == "openai" and resp.model == "second-model"
    assert first.requests[0].json() == second.requests[0].json()  # the same request


def test_a_refused_connection_moves_on(servers):
    """Nothing listening at the primary's port: the secondary answers."""
    _, second = servers
    second.add(answer())
    dead = Providers.openai(api_key="k", base_url=f"http://127.0.0.1:{closed_port()}/v1", max_retries=0)
    resp = Streaming.complete(Providers.fallback(dead, member(second)), REQ)
    assert resp.content == "Hi there"


def test_a_primary_that_stalls_before_the_first_byte_moves_on(servers):
    """Headers never come: the primary's idle timeout ends it, and the secondary answers."""
    first, second = servers
    first.add(Reply(body=[Stall()], raw=True))
    second.add(answer())
    model = Providers.fallback(member(first, idle_timeout=0.5), member(second))
    start = time.monotonic()
    resp = Streaming.complete(model, REQ)
    assert resp.content == "Hi there" and time.monotonic() - start < 10
    assert first.wait_closed(5)


def test_a_failure_after_one_chunk_never_switches(servers):
    """One chunk shown, then the connection drops: one ConnectionError, no second request."""
    first, second = servers
    events = openai_sse(["Hel", "lo"], usage=USAGE)
    first.add(Reply.sse([events[0] + events[1], Drop()]))
    second.add(answer())
    rec = Recorder()
    Streaming.complete(Providers.fallback(member(first), member(second)), REQ, rec.handler)
    assert rec.kinds == ["chunk", "error"] and rec.text == "Hel"
    assert isinstance(rec.error, blazen.ConnectionError) and rec.error.partial == "Hel"
    assert second.requests == []


def test_a_failure_it_does_not_switch_on_is_the_error(servers):
    """A refused key is no reason to try elsewhere (by default): AuthError, one request."""
    first, second = servers
    first.add(error(401, "invalid_request_error", "bad key"))
    with pytest.raises(blazen.AuthError):
        Streaming.complete(Providers.fallback(member(first), member(second)), REQ)
    assert second.requests == []


def test_on_names_the_failures_that_switch(servers):
    """``on=(AuthError,)``: a 401 moves on; a 429 then does not."""
    first, second = servers
    first.add(error(401, "invalid_request_error", "bad key"), error(429, "rate_limit_error"))
    second.add(answer())
    model = Providers.fallback(member(first), member(second), on=(blazen.AuthError,))
    assert Streaming.complete(model, REQ).content == "Hi there"
    with pytest.raises(blazen.RateLimitError):
        Streaming.complete(model, REQ)


def test_every_member_failing_is_one_error_naming_each_attempt(servers):
    """429, then 503, then a refused connection: one error, each attempt named, no key."""
    first, second = servers
    first.add(error(429, "rate_limit_error", f"slow down {KEY_FOR_TESTS}"))
    second.add(error(503, "server_error", f"unavailable {OTHER_KEY}"))
    dead = Providers.mistral(api_key="k", base_url=f"http://127.0.0.1:{closed_port()}/v1", max_retries=0)
    model = Providers.fallback(member(first), Providers.groq(api_key=OTHER_KEY, base_url=second.base_url, max_retries=0), dead)
    rec = Recorder()
    Streaming.complete(model, REQ, rec.handler)
    assert rec.kinds == ["error"]
    err = rec.error
    assert isinstance(err, blazen.ConnectionError)
    assert [type(e).__name__ for e in err.attempts] == ["RateLimitError", "ProviderError", "ConnectionError"]
    for name in ("openai (gpt-4o-mini): RateLimitError", "groq (", "mistral ("):
        assert name in err.message
    shown = f"{err} {err!r} " + " ".join(f"{e} {e!r} {e.body}" for e in err.attempts)
    assert KEY_FOR_TESTS not in shown and OTHER_KEY not in shown


def test_cancel_during_the_primarys_retry_wait_never_reaches_the_secondary(servers):
    """Cancelled while the primary waits to retry: CancelledError, the secondary untouched."""
    first, second = servers
    first.add(Reply.json({"error": {"message": "slow"}}, status=429, headers={"Retry-After": "3"}))
    model = Providers.fallback(
        Providers.openai(api_key="k", base_url=first.base_url, max_retries=1), member(second)
    )
    token = CancelToken()
    threading.Timer(0.3, token.cancel).start()
    rec = Recorder()
    start = time.monotonic()
    Streaming.complete(model, REQ, rec.handler, cancel=token)
    assert rec.kinds == ["error"] and isinstance(rec.error, blazen.CancelledError)
    assert time.monotonic() - start < 2.5 and second.requests == []


def test_cancel_after_the_switch_closes_the_secondarys_connection(servers):
    """The primary failed, the secondary stalls: cancel ends it with one CancelledError."""
    first, second = servers
    first.add(error(429, "rate_limit_error"))
    second.add(Reply(body=[Stall()], raw=True))
    token = CancelToken()
    threading.Timer(0.5, token.cancel).start()
    rec = Recorder()
    Streaming.complete(Providers.fallback(member(first), member(second)), REQ, rec.handler, cancel=token)
    assert rec.kinds == ["error"] and isinstance(rec.error, blazen.CancelledError)
    assert len(second.requests) == 1 and second.wait_closed(5)


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_ctrl_c_during_the_switch_is_one_cancelled_error_then_keyboard_interrupt(servers):
    """SIGINT while the secondary stalls: on_error(CancelledError), then KeyboardInterrupt."""
    first, second = servers
    first.add(error(529, "overloaded_error"))
    second.add(Reply(body=[Stall()], raw=True))
    rec = Recorder()
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        Streaming.complete(Providers.fallback(member(first), member(second)), REQ, rec.handler)
    assert rec.kinds == ["error"] and isinstance(rec.error, blazen.CancelledError)
    assert second.wait_closed(5)


def test_a_fallback_goes_wherever_a_model_goes(servers, tmp_path):
    """Non-streamed, pull, handle, asyncio and batch runs all switch the same way."""
    first, second = servers
    model = Providers.fallback(member(first), member(second))
    whole = {"id": "c", "model": "m2", "choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"}, "finish_reason": "stop"}]}
    first.add(error(429, "rate_limit_error"))
    second.add(Reply.json(whole))
    assert model.complete(REQ).content == "whole"
    first.add(error(429, "rate_limit_error"))
    second.add(answer())
    with Streaming.stream(model, REQ) as chunks:
        assert "".join(c.content_delta or "" for c in chunks) == "Hi there"
    first.add(error(429, "rate_limit_error"))
    second.add(answer())
    assert Streaming.start(model, REQ).result(10).content == "Hi there"
    first.add(error(429, "rate_limit_error"))
    second.add(answer())
    assert asyncio.run(Streaming.complete_async(model, REQ)).content == "Hi there"
    first.add(*[error(429, "rate_limit_error")] * 3)
    second.add(*[answer()] * 3)
    report = batch.run(model, [REQ] * 3, concurrency=1, out=tmp_path / "out.jsonl")
    assert report.ok == 3 and report.failed == 0


def test_a_fallback_pickles_as_its_members():
    """A Dask worker rebuilds the chain from the members' factory calls."""
    model = Providers.fallback(Providers.openai(api_key="k"), Providers.groq(api_key="k2"), on=(blazen.RateLimitError,))
    back = pickle.loads(pickle.dumps(model))
    assert [m.provider for m in back.members] == ["openai", "groq"]
    assert back.switches(blazen.RateLimitError("x")) and not back.switches(blazen.OverloadedError("x"))


def test_a_fallback_needs_two_models():
    """One model, or something that is not a model: TypeError at once."""
    with pytest.raises(TypeError):
        Providers.fallback(Providers.openai(api_key="k"))
    with pytest.raises(TypeError):
        Providers.fallback(Providers.openai(api_key="k"), "groq")  # type: ignore[arg-type]


def test_blazen_chat_fallback_answers_from_the_next_provider(servers, monkeypatch, capsys):
    """``blazen chat --fallback openai``: the first server's 429 is answered by the second."""
    from blazen import cli

    first, second = servers
    first.add(*[error(429, "rate_limit_error")] * 3)
    second.add(answer("From ", "second"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY_FOR_TESTS)
    monkeypatch.setenv("OPENAI_BASE_URL", second.base_url)
    assert cli.main(["chat", "--base-url", first.base_url, "--fallback", "openai", "hi"]) == 0
    assert capsys.readouterr().out == "From second\n"
    assert len(second.requests) == 1


def test_blazen_batch_fallback_answers_from_the_next_provider(servers, monkeypatch, tmp_path):
    """``blazen batch --fallback openai``: items the first server rate-limits come from the
    second; with ``--via provider`` (one provider's batch cannot switch) it is a usage error."""
    import json

    from blazen import cli

    first, second = servers
    first.add(*[error(429, "rate_limit_error")] * 2)
    second.add(answer("From ", "second"), answer("From ", "second"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY_FOR_TESTS)
    monkeypatch.setenv("OPENAI_BASE_URL", second.base_url)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": "hi"}) + "\n" for i in range(2)))
    argv = ["batch", str(prompts), "--out", str(tmp_path / "r.jsonl"), "--provider", "openai"]
    argv += ["--base-url", first.base_url, "--fallback", "openai", "--concurrency", "1"]
    assert cli.main(argv) == 0
    assert [r["text"] for r in batch.read(tmp_path / "r.jsonl")] == ["From second"] * 2
    assert cli.main([*argv, "--via", "provider"]) == 2


def test_embeddings_never_fall_back(servers):
    """Vectors of two models cannot be mixed: embed goes to the primary, and its error stands."""
    first, second = servers
    first.add(error(429, "rate_limit_error"))
    with pytest.raises(blazen.RateLimitError):
        Providers.fallback(member(first), member(second)).embed(["a"])
    assert second.requests == [] and first.requests[0].path == "/v1/embeddings"


def test_an_agent_whose_turns_are_answered_by_different_models(servers):
    """Turn 1 from the secondary (the primary is rate-limited), turn 2 from the primary."""
    from blazen import Agent, tool
    from blazen.testing import openai_tool_sse

    @tool
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return f"sunny in {city}"

    first, second = servers
    first.add(error(429, "rate_limit_error"), answer("It is ", "sunny."))
    second.add(Reply.sse(openai_tool_sse([("call_1", "get_weather", {"city": "Oslo"})], usage=USAGE)))
    result = Agent(Providers.fallback(member(first), member(second)), tools=[get_weather]).run("Weather?")
    assert result.text == "It is sunny." and result.iterations == 2
    assert [r.output for r in result.tool_results] == ["sunny in Oslo"]
    # The second turn went to the primary, with the secondary's tool call and its result.
    messages = first.requests[1].json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]


def test_the_fallbacks_timeout_bounds_the_whole_chain(servers):
    """Both members stall: the chain's total timeout ends it, one TimeoutError, sockets closed."""
    first, second = servers
    first.add(Reply(body=[Stall()], raw=True))
    second.add(Reply(body=[Stall()], raw=True))
    model = Providers.fallback(member(first, idle_timeout=0.3), member(second), timeout=1.0)
    rec = Recorder()
    start = time.monotonic()
    Streaming.complete(model, REQ, rec.handler)
    assert rec.kinds == ["error"] and isinstance(rec.error, blazen.TimeoutError)
    assert rec.error.limit == "total" and time.monotonic() - start < 6
    assert first.wait_closed(5) and second.wait_closed(5)


def test_an_agent_served_by_two_wires_sends_reasoning_back_only_to_its_own(servers):
    """Turn 1 from Anthropic (OpenAI rate-limited), with signed thinking and a tool call;
    turn 2 from OpenAI gets the call and its result but no thinking; when OpenAI is
    rate-limited again, Anthropic gets its own thinking back with the signature."""
    from blazen import Agent, tool

    from .conftest import fixture_bytes
    from .test_reasoning_roundtrip import SIGNATURE, anthropic_answer

    @tool
    def get_weather(location: str) -> str:
        """Current weather at a location."""
        return "18 C and sunny in Paris"

    first, second = servers
    first.add(error(429, "rate_limit_error"), answer("It is ", "sunny."))
    second.add(Reply.sse(fixture_bytes("anthropic", "thinking_tool_use.sse")))
    openai = member(first)
    claude = Providers.anthropic(api_key=OTHER_KEY, base_url=second.url, max_retries=0)
    result = Agent(Providers.fallback(openai, claude), tools=[get_weather]).run("Weather?")
    assert result.text == "It is sunny." and result.iterations == 2
    sent = first.requests[1]
    assert [m["role"] for m in sent.json()["messages"]] == ["user", "assistant", "tool"]
    thought = "The user wants the weather in Paris"  # the fixture's thinking text
    assert SIGNATURE not in sent.body.decode() and thought not in sent.body.decode()

    # The same two turns with OpenAI rate-limited throughout: Claude's thinking returns to it.
    first.add(error(429, "rate_limit_error"), error(429, "rate_limit_error"))
    second.add(Reply.sse(fixture_bytes("anthropic", "thinking_tool_use.sse")), anthropic_answer())
    result = Agent(Providers.fallback(openai, claude), tools=[get_weather]).run("Weather?")
    assert result.text == "It is 18 C and sunny."
    turn = second.requests[2].json()["messages"][1]["content"]
    assert turn[0] == {"type": "thinking", "thinking": turn[0]["thinking"], "signature": SIGNATURE}


def test_a_switch_to_another_wire_says_who_answered_and_prices_it_as_them(servers):
    """OpenAI's 429, then Anthropic's answer: the response and its usage name Anthropic."""
    from .conftest import fixture_bytes

    first, second = servers
    first.add(error(429, "rate_limit_error"))
    second.add(Reply.sse(fixture_bytes("anthropic", "text.sse")))
    claude = Providers.anthropic(api_key=OTHER_KEY, base_url=second.url, max_retries=0)
    resp = Streaming.complete(Providers.fallback(member(first), claude), REQ)
    assert resp.provider == "anthropic" and resp.model.startswith("claude")
    assert resp.usage.provider == "anthropic" and resp.usage.model == resp.model
    assert second.requests[0].path == "/v1/messages"
