"""The SSE framer gives exactly sseclient-py's events and errors, even at the body's edges.

The property test (tests/test_framing_oracle.py) draws whole events; these are the byte
streams found by a wider random search where the two disagreed: a body cut inside what
could still have been the byte order mark, so the framer never decided and dropped it.
"""

from __future__ import annotations

import pytest

from ..test_framing_oracle import as_before, framed, through_sseclient


@pytest.mark.parametrize(
    "chunks",
    [[b"\xef"], [b"\xef\xbb"], [b"\xef", b"\xbb"]],
    ids=["one-byte", "two-bytes", "two-reads"],
)
def test_a_body_cut_inside_a_byte_order_mark_is_the_invalid_utf8_sseclient_reports(chunks):
    """The first bytes of a BOM, then the end of the body: sseclient-py's invalid UTF-8 error."""
    events, error = framed(chunks)
    assert (events, error) == through_sseclient(chunks)
    assert error is not None and "not valid UTF-8" in error


def test_a_whole_byte_order_mark_alone_is_an_empty_body():
    """A whole BOM and nothing else: no events and no error, as sseclient-py reads it."""
    assert framed([b"\xef\xbb", b"\xbf"]) == through_sseclient([b"\xef\xbb\xbf"]) == ([], None)
    assert as_before([b"\xef\xbb\xbf"], 1 << 30) == ([], None)
