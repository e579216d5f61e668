"""The SSE framer yields exactly the events sseclient-py yields, and raises exactly where it does.

The framer reads the plain form LLM servers send (``data: <line>``, or ``event: <name>``
then ``data: <line>``, then a blank line) itself and gives every other block to
sseclient-py. Here arbitrary byte streams (CR, CRLF, a BOM, comments, ``id:``/``retry:``/
``event:`` fields, multi-line data, huge events, invalid UTF-8), cut at arbitrary points,
go through the framer and through two oracles:

- ``through_sseclient``: sseclient-py alone over the whole stream, with the two changes
  blazen documents (the BOM dropped and every line ending made LF first, since sseclient-py
  mishandles both; an event completed only by end of stream dropped, as the SSE
  specification says);
- ``as_before``: blazen's pipeline before the shortcut, every event through sseclient-py,
  with its size cap, kept here verbatim.

Both must agree with the framer on every event and on the error, its place and its text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sseclient import SSEClient

from blazen._http.framing import SseFramer, _bad_utf8, _too_large
from blazen.errors import ProviderError

BOM = b"\xef\xbb\xbf"
BIG = 1 << 30

# -- the oracles ------------------------------------------------------------------------


class _Source:
    """Hands sseclient-py its chunks and notes when they ran out."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks = chunks
        self.eof = False

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        self.eof = True


def through_sseclient(chunks: list[bytes]) -> tuple[list[tuple[str, str]], str | None]:
    """sseclient-py over the whole stream (BOM dropped, line endings LF)."""
    blob = b"".join(chunks)
    if blob.startswith(BOM):
        blob = blob[len(BOM) :]
    blob = blob.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    source = _Source([blob])
    events = SSEClient(source).events()
    out = []
    while True:
        try:
            event = next(events)
        except StopIteration:
            return out, None
        except UnicodeDecodeError as exc:
            return out, str(_bad_utf8("p", exc))
        if source.eof:
            return out, None
        if event.data:
            out.append((event.event, event.data))


class _Counting:
    # blazen's framing before the plain-form shortcut (see the module docstring).
    def __init__(self, chunks: Iterable[bytes], cap: int) -> None:
        self._chunks, self._cap, self.pending, self.eof = chunks, cap, 0, False

    def feed(self) -> Iterator[bytes]:
        cap = self._cap
        ended_lf = False
        for chunk in _lf_lines(_without_bom(self._chunks)):
            end = chunk.rfind(b"\n\n")
            if end < 0 and ended_lf and chunk.startswith(b"\n"):
                end = 0
            ended_lf = chunk.endswith(b"\n")
            if end < 0:
                self.pending += len(chunk)
            else:
                if self.pending + end > cap and _largest(self.pending, chunk[:end]) > cap:
                    raise _too_large("p", cap)
                self.pending = len(chunk) - end
            if self.pending > cap:
                raise _too_large("p", cap)
            yield chunk
        self.eof = True


def _largest(carried: int, completed: bytes) -> int:
    sizes = [len(b) for b in re.split(rb"\n\n", completed)]
    sizes[0] += carried
    return max(sizes)


def _lf_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    pending_cr = False
    for chunk in chunks:
        if pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        pending_cr = False
        if b"\r" in chunk:
            pending_cr = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if chunk:
            yield chunk


def _without_bom(chunks: Iterable[bytes]) -> Iterator[bytes]:
    it = iter(chunks)
    head = b""
    for chunk in it:
        head += chunk
        if len(head) < len(BOM) and BOM.startswith(head):
            continue
        rest = head[len(BOM) :] if head.startswith(BOM) else head
        if rest:
            yield rest
        break
    yield from it


def as_before(chunks: list[bytes], cap: int) -> tuple[list[tuple[str, str]], str | None]:
    """Every event through sseclient-py, as blazen framed them before the shortcut."""
    source = _Counting(chunks, cap)
    events = SSEClient(source.feed()).events()
    out = []
    while True:
        try:
            event = next(events)
        except StopIteration:
            return out, None
        except UnicodeDecodeError as exc:
            return out, str(_bad_utf8("p", exc))
        except ProviderError as exc:
            return out, str(exc)
        if source.eof:
            return out, None
        if event.data:
            out.append((event.event, event.data))


def framed(chunks: list[bytes], cap: int = BIG) -> tuple[list[tuple[str, str]], str | None]:
    """The framer, read by read as the stream layer drives it."""
    framer = SseFramer("p", cap)
    out: list[tuple[str, str]] = []
    try:
        for chunk in chunks:
            out.extend(framer.feed(chunk))
        out.extend(framer.end())
    except ProviderError as exc:
        return out, str(exc)
    return out, None


# -- arbitrary streams --------------------------------------------------------------------

_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
    max_size=12,
).map(str.encode)
_name = st.sampled_from([b"message", b"ping", b"content_block_delta", b"", b"a:b", b" x"])
_line = st.one_of(
    st.builds(lambda t: b"data: " + t, _text),
    st.builds(lambda t: b"data:" + t, _text),
    st.builds(lambda n: b"event: " + n, _name),
    st.builds(lambda n: b"event:" + n, _name),
    st.sampled_from(
        [b"id: 7", b"id:", b"retry: 3000", b": keep-alive", b":", b"data", b"event", b"x: y"]
    ),
    st.builds(lambda t: b"unknown: " + t, _text),
    st.sampled_from([b"data: \xff\xfe", b"event: \xc3", b"data: caf\xc3\xa9", b"data: \xe2\x82"]),
    st.just(b"data: " + b"y" * 5000),
)
_event = st.one_of(
    # The plain forms, as servers send them, most of the time.
    st.builds(lambda t: [b"data: {" + t + b"}"], _text),
    st.builds(lambda n, t: [b"event: " + n, b"data: {" + t + b"}"], _name, _text),
    # Near the plain forms: data that may be empty, or fields that look alike.
    st.builds(lambda n, t: [b"event: " + n, b"data: " + t], _name, _text),
    st.builds(lambda t: [b"data: " + t], _text),
    st.lists(_line, min_size=0, max_size=4),
)
_ending = st.sampled_from([b"\n", b"\n", b"\r\n", b"\r"])


@st.composite
def streams(draw: st.DrawFn) -> list[bytes]:
    """A byte stream of events with mixed line endings, cut into reads anywhere."""
    parts = [BOM] if draw(st.booleans()) and draw(st.booleans()) else []
    for lines in draw(st.lists(_event, max_size=8)):
        for line in lines:
            parts += [line, draw(_ending)]
        parts.append(draw(_ending))  # the blank line that ends the event
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from([b"data: tail", b"data: cut\n", b"data: \xff"])))
    blob = b"".join(parts)
    cuts = sorted(draw(st.sets(st.integers(0, max(len(blob), 1)), max_size=10)))
    out, prev = [], 0
    for cut in [*cuts, len(blob)]:
        out.append(blob[prev:cut])  # empty reads too: a framer must take them
        prev = cut
    return out


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
@example([b"data: a\n\n", b"data: b\r", b"\n\r\n"])
@example([b"\xef", b"\xbb", b"\xbfdata: x\n\n"])
@example([b"event: e\ndata: \xff\n\ndata: ok\n\n"])
# A read that opens with a named event is read by the named-event loop, to its end.
@example([b"event: a\ndata: x\n\nevent: b\ndata: \n\nevent: \ndata: y\n\n"])
@example([b"event: a\ndata: x\n\n\n\ndata: z\n\nevent: c\n\n: ping\n\nevent: d\ndata: w\n"])
@example([b"data: ok\n\ndata: \xe2\x82"])
def test_the_framer_yields_and_raises_exactly_as_sseclient_py(chunks):
    """Events and the error (its place and its text) are sseclient-py's, cut anywhere."""
    assert framed(chunks) == through_sseclient(chunks) == as_before(chunks, BIG)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.sampled_from([16, 64, 300, 4096, 6000]))
def test_the_size_cap_stops_a_stream_where_it_did_before(chunks, cap):
    """With a small max_event_bytes the events and the error are the earlier pipeline's."""
    assert framed(chunks, cap) == as_before(chunks, cap)


@pytest.mark.parametrize(
    "chunks",
    [
        [b'data: {"a": 1}\n\n' * 3],
        [b'event: message_start\ndata: {"type": "x"}\n\n', b"event: ping\ndata: {}\n\n"],
        [b"data: [DONE]\n\n"],
    ],
)
def test_the_plain_form_gives_one_batch_per_read(chunks):
    """A read holding several plain events hands them all up at once, in order."""
    framer = SseFramer("p")
    batches = [framer.feed(c) for c in chunks]
    assert [len(b) for b in batches] == [c.count(b"\n\n") for c in chunks]
    assert [e for b in batches for e in b] == through_sseclient(chunks)[0]


def test_an_error_after_some_events_of_a_read_comes_after_them():
    """Bytes that are not UTF-8 after two good events: the two first, the error next call."""
    framer = SseFramer("p")
    assert framer.feed(b"data: a\n\ndata: b\n\ndata: \xff\n\ndata: c\n\n") == [
        ("message", "a"),
        ("message", "b"),
    ]
    with pytest.raises(ProviderError, match="not valid UTF-8") as info:
        framer.feed(b"data: d\n\n")
    assert info.value.error_type == "invalid_utf8"


def test_a_huge_event_in_small_reads_is_joined_once():
    """An 8 MB event in 4 KB reads costs linear time: its reads are kept, joined at its end."""
    import time

    payload = b"x" * (8 << 20)
    framer = SseFramer("p", 16 << 20)
    reads = [b"data: "] + [payload[i : i + 4096] for i in range(0, len(payload), 4096)]
    started = time.perf_counter()
    for piece in reads:
        assert framer.feed(piece) == []
    events = framer.feed(b"\n\n")
    elapsed = time.perf_counter() - started
    assert events == [("message", payload.decode())]
    assert elapsed < 30  # quadratic copying would be ~2,000 copies of up to 8 MB
