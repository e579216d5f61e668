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

import pytest

import blazen
from blazen import Llm, Streaming
from blazen._http.decoding import inflater_for
from blazen.testing import Pause, Recorder, Reply, StreamServer, openai_sse

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
