"""Framing without a socket: SSE through sseclient-py and NDJSON."""

from __future__ import annotations

import pytest

import blazen
from blazen._http.framing import iter_ndjson, iter_sse


def sse(chunks, cap=8 * 1024 * 1024):
    return list(iter_sse(iter(chunks), provider="p", max_event_bytes=cap))


def test_events_are_yielded_as_soon_as_complete():
    """A generator that would fail after the first event still yields the first one."""

    def chunks():
        yield b"data: one\n\n"
        raise AssertionError("read too far")

    it = iter_sse(chunks(), provider="p")
    assert next(it) == ("message", "one")


def test_incomplete_trailing_event_is_discarded():
    """An event without its blank line at EOF is not delivered (SSE spec)."""
    assert sse([b"data: one\n\ndata: tw"]) == [("message", "one")]


def test_event_names_and_multiline_data():
    assert sse([b"event: ping\ndata: {}\n\ndata: a\ndata: b\n\n"]) == [
        ("ping", "{}"),
        ("message", "a\nb"),
    ]


def test_cap_applies_to_one_event_not_the_stream():
    """Many small events pass; one large event is stopped."""
    small = [b"data: " + b"x" * 1000 + b"\n\n"] * 200
    assert len(sse(small, cap=4096)) == 200
    with pytest.raises(blazen.ProviderError, match="larger than 4096"):
        sse([b"data: " + b"x" * 3000, b"x" * 3000, b"\n\n"], cap=4096)


def test_ndjson_lines_split_anywhere():
    blob = b'{"a": 1}\n\n{"b": "\xc3\xa9"}\n{"c"'
    for cut in range(len(blob)):
        assert list(iter_ndjson(iter([blob[:cut], blob[cut:]]), provider="p")) == [
            '{"a": 1}',
            '{"b": "é"}',
        ]


def test_ndjson_cap_and_bad_utf8():
    with pytest.raises(blazen.ProviderError):
        list(iter_ndjson(iter([b"x" * 5000]), provider="p", max_line_bytes=4096))
    with pytest.raises(blazen.ProviderError, match="UTF-8"):
        list(iter_ndjson(iter([b"\xff\n"]), provider="p"))
