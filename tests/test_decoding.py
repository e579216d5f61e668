"""Compressed bodies are inflated piece by piece, whatever form the server picked."""

from __future__ import annotations

import gzip
import zlib

import pytest
from urllib3.exceptions import DecodeError

from blazen._http.decoding import inflater_for

TEXT = b'data: {"choices": [{"delta": {"content": "hello"}}]}\n\n' * 200


def _feed_bytewise(encoding: str, body: bytes) -> bytes:
    inflater = inflater_for(encoding)
    assert inflater is not None
    return b"".join(piece for i in range(len(body)) for piece in inflater.feed(body[i : i + 1]))


def _raw_deflate(data: bytes) -> bytes:
    obj = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return obj.compress(data) + obj.flush()


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("gzip", gzip.compress(TEXT)),
        ("x-gzip", gzip.compress(TEXT)),
        ("gzip", gzip.compress(TEXT[:500]) + gzip.compress(TEXT[500:])),  # two members
        ("deflate", zlib.compress(TEXT)),  # zlib-wrapped, as the RFC says
        ("deflate", _raw_deflate(TEXT)),  # raw, as many servers send it
    ],
    ids=["gzip", "x-gzip", "gzip-two-members", "deflate-zlib", "deflate-raw"],
)
def test_every_form_inflates_to_the_text_even_a_byte_at_a_time(encoding, body):
    """Fed one byte per read, each form gives back exactly the text."""
    assert _feed_bytewise(encoding, body) == TEXT


def test_a_body_that_is_not_what_it_claims_is_a_decode_error():
    """Garbage under Content-Encoding: gzip is urllib3's DecodeError, mapped like any other."""
    inflater = inflater_for("gzip")
    assert inflater is not None
    with pytest.raises(DecodeError):
        list(inflater.feed(b"this is not gzip at all"))


def test_one_small_piece_never_inflates_to_more_than_a_bounded_step():
    """A compression bomb comes out in bounded pieces, so size caps apply as it grows."""
    bomb = gzip.compress(b"\0" * 50_000_000)
    inflater = inflater_for("gzip")
    assert inflater is not None
    pieces = inflater.feed(bomb)
    first = next(pieces)
    assert len(first) <= 256 * 1024
    pieces.close()


def test_identity_needs_no_decoding_and_other_codings_are_refused_by_name():
    """identity (alone or in a list) is no coding; br and names blazen does not know are
    a decode error that names them, never bytes read as text."""
    assert inflater_for("identity") is None and inflater_for(" identity, identity ") is None
    assert inflater_for("") is None
    for refused in ("br", "zstd", "gzip, br", "compress"):
        inflater = inflater_for(refused)
        assert inflater is not None
        with pytest.raises(DecodeError, match="does not decode"):
            list(inflater.feed(b"anything"))
