"""Bytes to events: Server-Sent Events (through sseclient-py) and newline-delimited JSON.

This module knows no provider. It turns the chunks a socket delivers into complete events,
as soon as each one is complete, and enforces a size cap so that a hostile or broken server
cannot grow memory without bound. An event left incomplete at end of stream is discarded
(as the SSE specification requires), so a truncated stream never yields half an event.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

from sseclient import SSEClient

from ..errors import ProviderError

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "iter_ndjson", "iter_sse"]

DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024


def _too_large(provider: str, cap: int) -> ProviderError:
    return ProviderError(
        f"{provider} sent a single event larger than {cap} bytes; the stream was stopped "
        "(raise max_event_bytes if this server really sends events that large)",
        provider=provider,
        error_type="event_too_large",
    )


def _bad_utf8(provider: str, exc: UnicodeDecodeError) -> ProviderError:
    err = ProviderError(
        f"{provider} sent bytes that are not valid UTF-8 ({exc.reason} at byte {exc.start} "
        "of an event); the stream was stopped",
        provider=provider,
        error_type="invalid_utf8",
    )
    err.__cause__ = exc
    return err


class _CountingSource:
    """Hands byte chunks to sseclient-py while counting the bytes of the pending event."""

    __slots__ = ("_cap", "_chunks", "_provider", "eof", "pending")

    def __init__(self, chunks: Iterable[bytes], cap: int, provider: str) -> None:
        self._chunks = chunks
        self._cap = cap
        self._provider = provider
        self.pending = 0
        self.eof = False

    def feed(self) -> Iterator[bytes]:
        """The chunks without a leading BOM, raising once the pending event passes the cap.

        Only the bytes since the last blank line count: keep-alive comments between
        events end with one, so a long quiet stream of pings never adds up to an "event".
        """
        cap = self._cap
        ended_lf = False  # the last read ended a line: an LF now would end an event
        for chunk in _lf_lines(_without_bom(self._chunks)):
            end = chunk.rfind(b"\n\n")
            if end < 0 and ended_lf and chunk.startswith(b"\n"):
                end = 0  # the blank line began in the last read
            ended_lf = chunk.endswith(b"\n")
            if end < 0:
                self.pending += len(chunk)
            else:
                # Blocks completed in this chunk: only when together they pass the cap is
                # it worth measuring them one by one (a run of pings is many small blocks).
                if self.pending + end > cap and _largest_block(self.pending, chunk[:end]) > cap:
                    raise _too_large(self._provider, cap)
                self.pending = len(chunk) - end
            if self.pending > cap:
                raise _too_large(self._provider, cap)
            yield chunk
        self.eof = True


_BLANK_LINE = re.compile(rb"\n\n")


def _largest_block(carried: int, completed: bytes) -> int:
    """The largest of the blocks ``completed`` ends, the first one ``carried`` bytes longer."""
    sizes = [len(block) for block in _BLANK_LINE.split(completed)]
    sizes[0] += carried
    return max(sizes)


def _lf_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """``chunks`` with every line ending (CRLF, CR or LF, even mixed) as LF.

    The SSE specification allows all three, in any mix; sseclient-py only ends an event at
    a blank line written with one kind, and would join an ``\\n`` line and a ``\\r\\n``
    blank line into one event. A CR at the end of one read may pair with an LF at the
    start of the next. Streams without CR (nearly all) pass through untouched.
    """
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


_BOM = b"\xef\xbb\xbf"


def _without_bom(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """``chunks`` without the UTF-8 byte order mark the SSE specification lets a stream open with.

    sseclient-py would keep it as part of the first field's name, and so lose the first event.
    """
    it = iter(chunks)
    head = b""
    for chunk in it:
        head += chunk
        if len(head) < len(_BOM) and _BOM.startswith(head):
            continue  # too short to tell yet
        rest = head[len(_BOM) :] if head.startswith(_BOM) else head
        if rest:
            yield rest
        break
    yield from it

def iter_sse(
    chunks: Iterable[bytes], *, provider: str, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
) -> Iterator[tuple[str, str]]:
    """Yield ``(event_name, data)`` for each complete SSE event with non-empty data.

    Comment lines (keep-alives), events without data and unknown fields are skipped; an
    event with no ``event:`` field is named ``"message"``.
    """
    source = _CountingSource(chunks, max_event_bytes, provider)
    events = SSEClient(source.feed()).events()
    while True:
        try:
            event = next(events)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise _bad_utf8(provider, exc) from exc
        if source.eof:
            # Completed only by end of stream: the blank line that ends an event never came.
            return
        data = event.data
        if data:
            yield event.event, data


def iter_ndjson(
    chunks: Iterable[bytes], *, provider: str, max_line_bytes: int = DEFAULT_MAX_EVENT_BYTES
) -> Iterator[str]:
    """Yield each complete, non-blank line of a newline-delimited JSON stream as text."""
    buf = bytearray()
    for chunk in chunks:
        # What is already buffered holds no newline: search only the new bytes.
        scan = len(buf)
        buf += chunk
        begin = 0
        while True:
            nl = buf.find(b"\n", scan)
            if nl < 0:
                break
            line = bytes(buf[begin:nl])
            begin = scan = nl + 1
            if line.strip():
                try:
                    yield line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise _bad_utf8(provider, exc) from exc
        if begin:
            del buf[:begin]
        if len(buf) > max_line_bytes:
            raise _too_large(provider, max_line_bytes)
    # A last line the server did not end with a newline is still a line when it is whole
    # JSON (JSON Lines allows it); a fragment cut off mid-value is dropped, as an SSE event
    # without its blank line is, and the wire format then sees no end signal.
    tail = bytes(buf).strip()
    if tail:
        try:
            text = tail.decode("utf-8")
            json.loads(text)
        except ValueError:
            return
        yield text
