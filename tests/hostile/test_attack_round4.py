"""Round 4 attacks on 69bb224 (reasoning round trips, refusals, the inflater, unstarted tasks).

Each test was written to break a promise (one typed terminal, never hang, keys never
shown, nothing that grows) as a hostile server or a careless caller would.
"""

from __future__ import annotations

import gzip
import json
import struct
import time
import tracemalloc
import zlib
from typing import Callable

import pytest

import blazen
from blazen import Llm, Streaming
from blazen._http.decoding import inflater_for
from blazen.testing import Pause, Recorder, Reply, StreamServer, openai_sse, sse, sse_event

from ..conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])


def _model(base_url: str, **options: object) -> blazen.ChatModel:
    options.setdefault("max_retries", 0)
    return blazen.Providers.openai_compat("test", base_url, api_key=KEY_FOR_TESTS, **options)


# -- Content-Encoding lists: blazen decodes them itself, or refuses them by name ----------


def _gzip_with_a_trickled_comment(payload: bytes, pieces: int, gap: float) -> list[object]:
    # A gzip member whose header carries a comment: it decodes to nothing while it lasts.
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = deflate.compress(payload) + deflate.flush()
    header = b"\x1f\x8b\x08\x10" + b"\x00\x00\x00\x00" + b"\x00\xff"
    trailer = struct.pack("<II", zlib.crc32(payload) & 0xFFFFFFFF, len(payload))
    comment = [part for _ in range(pieces) for part in (b"c", Pause(gap))]
    return [header, *comment, b"\x00" + body + trailer]


_COMPLETION = json.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
    }
).encode()


@pytest.mark.parametrize("encoding", ["identity, gzip", "gzip, identity"])
def test_a_gzip_body_named_in_a_list_cannot_trickle_past_the_idle_timeout(encoding):
    """``Content-Encoding: identity, gzip`` went to urllib3, whose read loops until output.

    Before, the trickled header held model.complete() for the whole 8 s trickle
    ("identity, gzip") or failed to decode a valid body ("gzip, identity").
    """
    reply = Reply(
        headers={"Content-Type": "application/json", "Content-Encoding": encoding},
        body=_gzip_with_a_trickled_comment(_COMPLETION, 40, 0.2),  # about 8 s
        transfer="close",
    )
    with StreamServer([reply]) as server:
        start = time.monotonic()
        with pytest.raises(blazen.TimeoutError) as info:
            _model(server.base_url, idle_timeout=0.6).complete(REQ)
        took = time.monotonic() - start
    assert took < 4, f"the trickled gzip body held the call for {took:.1f} s"
    assert info.value.limit == "idle"


_PLAIN = b"".join(openai_sse(["Hel", "lo"]))


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("gzip, identity", gzip.compress(_PLAIN)),
        ("identity, gzip", gzip.compress(_PLAIN)),
        ("gzip,", gzip.compress(_PLAIN)),
        ("gzip, gzip", gzip.compress(gzip.compress(_PLAIN))),
        ("deflate, gzip", gzip.compress(zlib.compress(_PLAIN))),
        (" GZIP ", gzip.compress(_PLAIN)),
        ("identity, identity", _PLAIN),
    ],
)
@pytest.mark.parametrize("transfer", ["close", "chunked"])
def test_every_list_of_gzip_and_deflate_codings_is_decoded(encoding, body, transfer):
    """A coding list is undone in the reverse order it was applied; identity is no coding."""
    reply = Reply(
        headers={"Content-Type": "text/event-stream", "Content-Encoding": encoding},
        body=[body[:7], Pause(0.01), body[7:]],
        transfer=transfer,
    )
    with StreamServer([reply]) as server:
        rec = Recorder()
        resp = Streaming.complete(_model(server.base_url), REQ, rec.handler, timeout=5)
    assert resp is not None and resp.content == "Hello", rec.error
    assert rec.terminals == 1


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "gzip, br", "x-unknown"])
def test_a_coding_blazen_cannot_decode_is_an_error_that_names_it(encoding):
    """br (no brotli), zstd, anything unknown: not "not valid UTF-8" but the coding's name."""
    reply = Reply(
        headers={"Content-Type": "text/event-stream", "Content-Encoding": encoding},
        body=[b"\x8b\x03\x80\x28\xb5\x2f\xfd" * 20],
    )
    with StreamServer([reply]) as server:
        rec = Recorder()
        resp = Streaming.complete(_model(server.base_url), REQ, rec.handler, timeout=5)
    assert resp is None and rec.kinds == ["error"]
    assert isinstance(rec.error, blazen.ProviderError)
    assert repr(encoding.strip()) in rec.error.message and "does not decode" in rec.error.message


def test_an_error_body_under_a_coding_list_is_decoded_for_its_message():
    """A 400 whose JSON is gzipped under ``gzip, identity`` still says what the server said."""
    err = {"error": {"message": "max_tokens is too large", "type": "invalid_request_error"}}
    reply = Reply(
        status=400,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip, identity"},
        body=[gzip.compress(json.dumps(err).encode())],
    )
    with StreamServer([reply]) as server:
        rec = Recorder()
        Streaming.complete(_model(server.base_url), REQ, rec.handler, timeout=5)
    assert rec.kinds == ["error"]
    assert "max_tokens is too large" in rec.error.message


def test_deflate_that_decodes_to_nothing_keeps_no_growing_copy_of_itself():
    """A zlib header then endless empty blocks: what is kept to retry as raw stays small.

    Before, every byte read before the first output was kept (and copied on every read):
    memory grew with the body for as long as the server kept sending empty blocks.
    """
    inflater = inflater_for("deflate")
    assert inflater is not None
    empty_blocks = b"\x00\x00\x00\xff\xff" * 13_000  # 64 KiB that decode to nothing
    assert list(inflater.feed(b"\x78\x9c")) == []
    tracemalloc.start()
    try:
        for _ in range(128):  # 8 MiB of body
            assert list(inflater.feed(empty_blocks)) == []
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024, f"{peak} bytes held for a body that decoded to nothing"


def test_a_gzip_bomb_in_one_event_ends_at_the_event_cap_with_bounded_memory():
    """60 KiB of gzip inflating to 64 MiB without a newline: the event cap stops it."""
    bomb = gzip.compress(b"data: " + b"a" * (64 * 1024 * 1024), 9)
    assert len(bomb) < 128 * 1024
    reply = Reply(
        headers={"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}, body=[bomb]
    )
    with StreamServer([reply]) as server:
        rec = Recorder()
        tracemalloc.start()
        try:
            Streaming.complete(
                _model(server.base_url, max_event_bytes=1024 * 1024), REQ, rec.handler, timeout=10
            )
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert rec.kinds == ["error"]
    assert isinstance(rec.error, blazen.ProviderError)
    assert "max_event_bytes" in rec.error.message
    assert peak < 16 * 1024 * 1024, f"{peak} bytes held for a 1 MiB event cap"


# -- reasoning round trips: hostile servers and careless callers ---------------------------


@blazen.tool
def get_weather(location: str) -> str:
    """Current weather at a location."""
    return f"sunny in {location}"


def _gemini_reply(parts: list[dict[str, object]]) -> Reply:
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
    return Reply.sse([sse_event({"candidates": [candidate], "modelVersion": "g"})])


def _call(call_id: str, location: str, signature: str) -> dict[str, object]:
    call = {"id": call_id, "name": "get_weather", "args": {"location": location}}
    return {"functionCall": call, "thoughtSignature": signature}


def test_two_gemini_calls_that_share_an_id_stay_two_calls_each_with_its_signature():
    """Gemini sends every call whole: two with one id are two calls, not one merged call.

    Before, their arguments were joined into ``{...}{...}`` and the agent's next turn was
    a ValidationError; each call's thoughtSignature must come back on its own part.
    """
    replies = [
        _gemini_reply([_call("dup", "Paris", "SIG_A"), _call("dup", "Rome", "SIG_B")]),
        _gemini_reply([{"text": "done"}]),
    ]
    with StreamServer(replies) as server:
        model = blazen.Providers.gemini(
            api_key=KEY_FOR_TESTS, base_url=server.url + "/v1beta", max_retries=0
        )
        result = blazen.Agent(model, tools=[get_weather]).run("weather?")
        second = server.requests[1].json()["contents"]
    assert result.text == "done"
    assert second[1]["parts"] == [
        {
            "functionCall": {"name": "get_weather", "args": {"location": "Paris"}},
            "thoughtSignature": "SIG_A",
        },
        {
            "functionCall": {"name": "get_weather", "args": {"location": "Rome"}},
            "thoughtSignature": "SIG_B",
        },
    ]
    answers = [p["functionResponse"]["response"]["result"] for p in second[2]["parts"]]
    assert answers == ["sunny in Paris", "sunny in Rome"]


@pytest.mark.parametrize("role", ["user", "system", "tool"])
def test_reasoning_parts_on_a_turn_that_is_not_the_assistants_are_refused_at_once(role):
    """A user turn carrying thinking blocks would be sent as one (Anthropic, Gemini and
    DeepSeek refuse the request): a programming mistake, raised when the message is built."""
    extra = {"tool_call_id": "c1"} if role == "tool" else {}
    part = blazen.ReasoningPart(text="t", signature="s", provider="anthropic")
    with pytest.raises(ValueError, match="only an assistant turn"):
        blazen.ChatMessage(role=role, content="x", reasoning_parts=[part], **extra)


_START = {"type": "message_start", "message": {"id": "m", "model": "c", "usage": {}}}
_END = [
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}},
    {"type": "message_stop"},
]
_THINKING = {"type": "thinking", "thinking": "", "signature": ""}


def _block(index: object, block: object) -> dict[str, object]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _bdelta(index: object, delta: object) -> dict[str, object]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _thinking(index: object, text: str) -> dict[str, object]:
    return _bdelta(index, {"type": "thinking_delta", "thinking": text})


def _signature(index: object, signature: object) -> dict[str, object]:
    return _bdelta(index, {"type": "signature_delta", "signature": signature})


def _stop(index: object) -> dict[str, object]:
    return {"type": "content_block_stop", "index": index}


def _anthropic_run(
    events: list[dict[str, object]], timeout: float = 5
) -> tuple[Recorder, object]:
    payloads = [_START, *events, *_END]
    with StreamServer([Reply.sse([sse_event(e, str(e["type"])) for e in payloads])]) as server:
        rec = Recorder()
        model = blazen.Providers.anthropic(
            api_key=KEY_FOR_TESTS, base_url=server.base_url, max_retries=0
        )
        resp = Streaming.complete(model, REQ, rec.handler, timeout=timeout)
    assert rec.terminals == 1, rec.kinds
    return rec, resp


ANTHROPIC_MALFORMED = {
    "thinking_delta without an index": [
        _block(0, _THINKING),
        {"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": "x"}},
    ],
    "signature_delta without an index": [
        _block(0, _THINKING),
        {"type": "content_block_delta", "delta": {"type": "signature_delta", "signature": "x"}},
    ],
    "a thinking block at a list index": [_block([1], _THINKING)],
    "a thinking delta at a list index": [_block(0, _THINKING), _thinking([0], "x")],
    "a block stop at an object index": [_block(0, _THINKING), _stop({})],
    "redacted_thinking data is a number": [_block(0, {"type": "redacted_thinking", "data": 5})],
    "redacted_thinking without data": [_block(0, {"type": "redacted_thinking"})],
    "thinking text is a list": [_block(0, {"type": "thinking", "thinking": ["a"]})],
}


@pytest.mark.parametrize("case", list(ANTHROPIC_MALFORMED))
def test_a_thinking_block_of_the_wrong_shape_is_one_malformed_payload_error(case):
    rec, resp = _anthropic_run(ANTHROPIC_MALFORMED[case])
    assert resp is None and rec.kinds[-1] == "error"
    assert isinstance(rec.error, blazen.ProviderError)
    assert rec.error.error_type == "malformed_payload"


@pytest.mark.parametrize("signature", [{"x": 1}, [1], 5, ""])
def test_a_signature_that_is_not_text_is_never_sent_back(signature):
    """An unsigned thinking block is kept as text; Claude would refuse a made-up signature."""
    rec, resp = _anthropic_run(
        [_block(0, _THINKING), _thinking(0, "a"), _signature(0, signature), _stop(0)]
    )
    assert resp is not None and rec.kinds[-1] == "done"
    (part,) = resp.reasoning_parts
    assert part.text == "a" and part.signature is None
    assert resp.message.reasoning_parts == (part,)


def test_signatures_for_blocks_never_started_and_reused_indexes_stay_with_their_blocks():
    """A signature for an index that never started signs nothing; an index used twice
    makes two blocks, each with its own signature, in order."""
    rec, resp = _anthropic_run(
        [
            _signature(7, "STRAY"),
            _block(0, _THINKING),
            _thinking(0, "a"),
            _signature(0, "S1"),
            _stop(0),
            _block(0, _THINKING),
            _thinking(0, "b"),
            _signature(0, "S2"),
            _stop(0),
        ]
    )
    assert resp is not None
    assert [(p.text, p.signature) for p in resp.reasoning_parts] == [("a", "S1"), ("b", "S2")]


def test_many_thinking_blocks_fold_in_linear_time():
    """20,000 signed thinking blocks: the fold is linear (this would take minutes if not)."""
    events: list[dict[str, object]] = []
    for i in range(20_000):
        events += [_block(i, _THINKING), _thinking(i, "t"), _signature(i, f"S{i}"), _stop(i)]
    # About 5 s here, most of it the test server writing 80,000 events one by one (it
    # failed at the old 5 s bound on Python 3.10 in CI); a quadratic fold takes minutes.
    rec, resp = _anthropic_run(events, timeout=60)
    assert resp is not None and len(resp.reasoning_parts) == 20_000
    assert resp.reasoning_parts[-1].signature == "S19999"


# -- OpenAI: refusals and choices --------------------------------------------------------


def _choice(index: object, delta: dict[str, object], finish: object = None) -> dict[str, object]:
    return {
        "id": "x",
        "model": "m",
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }


@pytest.mark.parametrize("index", [1, -1, "0", "first"])
def test_a_stream_that_never_sends_choice_0_is_an_error_not_an_empty_answer(index):
    """blazen follows choice 0; a server numbering its only choice otherwise used to give
    an empty ``done`` with no finish reason: the text was silently dropped."""
    payloads = [_choice(index, {"content": "hi"}), _choice(index, {}, "stop")]
    with StreamServer([Reply.sse(sse(*payloads))]) as server:
        rec = Recorder()
        resp = Streaming.complete(_model(server.base_url), REQ, rec.handler, timeout=5)
    assert resp is None and rec.kinds == ["error"]
    assert isinstance(rec.error, blazen.ProviderError)
    assert f"choice {index!r}" in rec.error.message and "never as choice 0" in rec.error.message


def test_interleaved_choices_with_refusals_follow_choice_0_alone():
    """Choice 1's refusal and text never leak into choice 0's answer."""
    payloads = [
        _choice(0, {"refusal": "I can"}),
        _choice(1, {"refusal": "OTHER"}),
        _choice(0, {"refusal": "not."}),
        _choice(1, {"content": "leak"}, "stop"),
        _choice(0, {}, "stop"),
    ]
    with StreamServer([Reply.sse(sse(*payloads))]) as server:
        rec = Recorder()
        resp = Streaming.complete(_model(server.base_url), REQ, rec.handler, timeout=5)
    assert resp is not None, rec.error
    assert resp.refusal == "I cannot." and resp.content == ""
    assert resp.finish_reason == "content_filter"
    assert [c.refusal_delta for c in rec.chunks if c.refusal_delta] == ["I can", "not."]


@pytest.mark.parametrize("refusal", [5, ["no"], True])
def test_a_refusal_that_is_not_text_is_a_malformed_payload(refusal):
    payloads = [_choice(0, {"refusal": refusal}), _choice(0, {}, "stop")]
    with StreamServer([Reply.sse(sse(*payloads))]) as server:
        rec = Recorder()
        Streaming.complete(_model(server.base_url), REQ, rec.handler, timeout=5)
    assert rec.kinds == ["error"] and rec.error.error_type == "malformed_payload"


# -- keys: an agent's error holds the conversation, and the server may have echoed a key --


_ECHOED_KEY = "sk-ant-hostile-0123456789abcdefXYZ"


def _echoing_turn() -> list[bytes]:
    key = _ECHOED_KEY
    call = {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"location": key}}
    events = [
        _START,
        _block(0, _THINKING),
        _thinking(0, f"thinking about {key}"),
        _signature(0, f"SIG{key}"),
        _stop(0),
        _block(1, {"type": "redacted_thinking", "data": f"RED{key}"}),
        _stop(1),
        _block(2, {"type": "text", "text": f"your key is {key}"}),
        _stop(2),
        _block(3, call),
        _stop(3),
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return [sse_event(e, str(e["type"])) for e in events]


@blazen.tool(name="get_weather")
def _failing_weather(location: str) -> str:
    """Current weather at a location (its backend echoes what it was given)."""
    raise RuntimeError(f"backend refused {location}")


def _quoting_callback(call: blazen.ToolCall) -> None:
    raise RuntimeError(f"cannot show {call.arguments_json}")


@pytest.mark.parametrize("limit", ["tool error", "max_iterations", "callback"])
def test_an_agent_error_shows_no_key_the_server_echoed_into_its_conversation(limit, caplog):
    """ToolError and MaxIterationsError carry ``result`` (the conversation) and the tool's
    exception: a key echoed into thinking, a signature, redacted data, the answer, a tool's
    arguments or its error text is masked there, as in every other error."""
    from .texts import everything_about

    with StreamServer([Reply.sse(_echoing_turn())]) as server:
        model = blazen.Providers.anthropic(
            api_key=_ECHOED_KEY, base_url=server.base_url, max_retries=0
        )
        if limit == "tool error":
            agent = blazen.Agent(model, tools=[_failing_weather], stop_on_tool_error=True)
        else:
            agent = blazen.Agent(model, tools=[get_weather], max_iterations=1)
        on_tool_call = _quoting_callback if limit == "callback" else None
        with pytest.raises(blazen.BlazenError) as info:
            agent.run("weather?", on_tool_call=on_tool_call)
    err = info.value
    assert _ECHOED_KEY not in everything_about(err)
    assert _ECHOED_KEY not in caplog.text
    if limit == "callback":
        assert isinstance(err, blazen.CallbackError)
        return
    assert _ECHOED_KEY not in repr(err.result)
    turn = err.result.messages[1]
    assert turn.role == "assistant" and "***" in (turn.content or "")
    assert [p.kind for p in turn.reasoning_parts] == ["thinking", "redacted"]


# -- asyncio: tasks cancelled before they ran ----------------------------------------------


def test_a_hundred_stream_tasks_cancelled_before_they_ran_send_nothing_and_end_once_each():
    """Each gets exactly on_error(CancelledError), the task raises CancelledError, and the
    server never sees a connection: not one request for an answer nobody will read."""
    import asyncio

    with StreamServer([Reply.sse(openai_sse(["x"])) for _ in range(3)]) as server:
        model = _model(server.base_url)
        recs = [Recorder() for _ in range(100)]

        async def main() -> list[object]:
            tasks = [
                asyncio.create_task(Streaming.complete_async(model, REQ, rec.handler))
                for rec in recs
            ]
            for task in tasks:
                task.cancel()
            return await asyncio.gather(*tasks, return_exceptions=True)

        outcomes = asyncio.run(main())
        # A stream that slipped through would have connected before its terminal.
        assert not server.connections and not server.requests
        # The flag is the unstarted task's alone: the next stream is sent as usual.
        assert asyncio.run(Streaming.complete_async(model, REQ)).content == "x"
    assert all(isinstance(o, asyncio.CancelledError) for o in outcomes)
    assert all(rec.kinds == ["error"] for rec in recs)
    assert all(isinstance(rec.error, blazen.CancelledError) for rec in recs)


def test_an_agent_task_or_a_zero_wait_for_cancelled_unstarted_sends_nothing_and_ends_once():
    import asyncio

    with StreamServer([Reply.sse(openai_sse(["x"]))]) as server:
        model = _model(server.base_url)
        agent_ends: list[object] = []
        rec = Recorder()

        async def main() -> tuple[str, str]:
            task = asyncio.create_task(
                blazen.Agent(model).run_async(
                    "hi", on_done=agent_ends.append, on_error=agent_ends.append
                )
            )
            task.cancel()
            (outcome,) = await asyncio.gather(task, return_exceptions=True)
            agent = type(outcome).__name__
            try:
                await asyncio.wait_for(Streaming.complete_async(model, REQ, rec.handler), 0)
            except BaseException as exc:
                return agent, type(exc).__name__
            return agent, "returned"

        agent, waited = asyncio.run(main())
        assert not server.connections
    assert (agent, waited) == ("CancelledError", "TimeoutError")
    assert [type(e) for e in agent_ends] == [blazen.CancelledError]
    assert rec.kinds == ["error"] and isinstance(rec.error, blazen.CancelledError)


# -- model.complete(): a body of the wrong shape is the server's fault, not blazen's -------


def _anthropic_message(content: object) -> dict[str, object]:
    return {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "c",
        "content": content,
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def _gemini_body(parts: object) -> dict[str, object]:
    content = {"role": "model", "parts": parts}
    return {"candidates": [{"content": content, "finishReason": "STOP", "index": 0}]}


NON_STREAMING_MALFORMED = {
    "anthropic: redacted_thinking with empty data": (
        "anthropic",
        _anthropic_message([{"type": "redacted_thinking", "data": ""}]),
    ),
    "anthropic: redacted_thinking data is a number": (
        "anthropic",
        _anthropic_message([{"type": "redacted_thinking", "data": 5}]),
    ),
    "anthropic: thinking is a number": (
        "anthropic",
        _anthropic_message([{"type": "thinking", "thinking": 5, "signature": "S"}]),
    ),
    "anthropic: a content block is text": ("anthropic", _anthropic_message(["abc"])),
    "gemini: functionCall is text": ("gemini", _gemini_body([{"functionCall": "x"}])),
    "gemini: a call id is a list": (
        "gemini",
        _gemini_body([{"functionCall": {"id": [1], "name": "f", "args": {}}}]),
    ),
    "gemini: parts is an object": ("gemini", _gemini_body({"a": 1})),
}


@pytest.mark.parametrize("case", list(NON_STREAMING_MALFORMED))
def test_a_non_streamed_body_of_the_wrong_shape_is_a_malformed_payload_not_an_internal_error(
    case,
):
    """Streamed, these are ProviderError(malformed_payload); model.complete() called them
    InternalError ("unexpected TypeError talking to ..."), a blazen bug, which they are not."""
    provider, body = NON_STREAMING_MALFORMED[case]
    with StreamServer([Reply.json(body)]) as server:
        if provider == "anthropic":
            model = blazen.Providers.anthropic(
                api_key=KEY_FOR_TESTS, base_url=server.base_url, max_retries=0
            )
        else:
            model = blazen.Providers.gemini(
                api_key=KEY_FOR_TESTS, base_url=server.url + "/v1beta", max_retries=0
            )
        with pytest.raises(blazen.BlazenError) as info:
            model.complete(REQ)
    assert type(info.value) is blazen.ProviderError, repr(info.value)
    assert info.value.error_type == "malformed_payload"


@pytest.mark.parametrize("field", ["content", "role", "tool_calls", "name", "tool_call_id"])
def test_a_reasoning_field_that_would_overwrite_a_message_field_is_refused(field):
    """reasoning_field="content" replaced every assistant turn's text with its reasoning."""
    with pytest.raises(ValueError, match="would overwrite"):
        blazen.Providers.openai_compat(
            "test", "http://127.0.0.1:9/v1", api_key=KEY_FOR_TESTS, reasoning_field=field
        )


# -- Ctrl-C twice: the second lands anywhere in the handling of the first ----------------


def _second_interrupt_at(n: int) -> tuple[Callable[[blazen.StreamChunk], None], list[int]]:
    """An on_chunk that raises KeyboardInterrupt (Ctrl-C landing in it), and arranges for a
    second one to land at the ``n``-th place a signal handler could run while it is handled.

    A signal handler runs when a Python function starts and when a call into C returns:
    the profile events ``call`` and ``c_return``, here those of blazen's own code. A profile function that raises there is
    what a signal handler raising there would be; Python then stops profiling, so there
    is exactly one more interrupt.
    """
    import os
    import sys

    seen = [0]
    package = os.path.dirname(blazen.__file__)

    def profile(frame, event, arg):
        # blazen's own code: inside the standard library a signal can land between a
        # lock's acquire and its with-block, which no caller can guard against.
        if event in ("call", "c_return") and frame.f_code.co_filename.startswith(package):
            seen[0] += 1
            if seen[0] == n:
                raise KeyboardInterrupt("pressed again")

    def on_chunk(chunk: blazen.StreamChunk) -> None:
        sys.setprofile(profile)
        raise KeyboardInterrupt("pressed")

    return on_chunk, seen


# One place is a generator's close as it is collected: Python itself reports an interrupt
# there as unraisable and goes on; it never reached blazen.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_second_ctrl_c_anywhere_in_the_first_ones_handling_still_leaves_one_terminal():
    """The handler retried its steps when the second interrupt landed inside them, but its
    own loop (``for _ in range(...)``) ran outside them: an interrupt landing on that call
    skipped the terminal altogether (the round 3 signal test failed now and then for it).

    Every place is tried in turn, until the handling is over before the n-th. The
    callbacks are C methods, as in that test: a signal cannot land inside them.
    """
    import sys

    with StreamServer(default=Reply.sse(openai_sse(["a", "b"]))) as server:
        model = _model(server.base_url)
        for n in range(1, 2000):
            on_chunk, seen = _second_interrupt_at(n)
            errors: list[object] = []
            dones: dict[object, object] = {}
            try:
                with pytest.raises(KeyboardInterrupt):
                    Streaming.complete(
                        model,
                        REQ,
                        on_chunk=on_chunk,
                        on_done=dones.__setitem__,
                        on_error=errors.append,
                    )
            finally:
                sys.setprofile(None)
            assert len(errors) + len(dones) == 1, (
                f"interrupted again at place {n}: {errors} {dones}"
            )
            assert isinstance(errors[0], blazen.CancelledError)
            if seen[0] < n:
                assert n > 20, f"only {n} places: the interrupt was never handled"
                break  # the handling was over before the n-th place: all were tried
        else:
            pytest.fail("the handling of one interrupt never ended")
