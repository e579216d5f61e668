"""Bytes to events: Server-Sent Events (through sseclient-py) and newline-delimited JSON.

This module knows no provider. A framer takes each socket read as it lands
(:meth:`SseFramer.feed`) and returns the batch of events that read completed, so the stream
layer folds and hands up one batch per read. It enforces a size cap so that a hostile or
broken server cannot grow memory without bound. An event left incomplete at end of stream
is discarded (as the SSE specification requires), so a truncated stream never yields half
an event.

sseclient-py is the SSE parser of record. The one shortcut: an event in the plain form
LLM servers send (``data: <line>``, optionally after ``event: <name>``, then a blank line)
is read here directly; ``tests/test_framing_oracle.py`` shows for arbitrary byte streams cut
anywhere that the events and errors are exactly sseclient-py's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Optional, Union

from sseclient import SSEClient

from ..errors import ProviderError

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "Frame",
    "Framer",
    "NdjsonFramer",
    "SseFramer",
    "framer",
    "iter_ndjson",
    "iter_sse",
]

DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024

#: ``(event name, data)``: ``"message"`` for an SSE event without a name, ``""`` for an
#: NDJSON line.
Frame = tuple[str, str]
Framer = Union["SseFramer", "NdjsonFramer"]


def framer(kind: str, *, provider: str, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> Framer:
    """A fresh framer for one body: ``kind`` is ``"sse"`` or ``"ndjson"``."""
    if kind == "sse":
        return SseFramer(provider, max_event_bytes)
    return NdjsonFramer(provider, max_event_bytes)


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


_BOM = b"\xef\xbb\xbf"
# Compiled on first use (re keeps it): only an event near the size cap needs it.
_BLANK_LINE = rb"\n\n"


_NAMED: Optional[Callable[[bytes, int], Optional[re.Match[bytes]]]] = None


def _named_match() -> Callable[[bytes, int], Optional[re.Match[bytes]]]:
    """``match(buf, pos)`` of a plain named event, compiled on first use."""
    global _NAMED
    if _NAMED is None:
        # One "event: N" line, one "data: X" line with X not empty, then the blank line
        # (line endings are LF by now).
        _NAMED = re.compile(rb"event: ([^\n]*)\ndata: ([^\n]+)\n\n").match
    return _NAMED


def _largest_block(carried: int, completed: bytes) -> int:
    """The largest of the blocks ``completed`` ends, the first one ``carried`` bytes longer."""
    sizes = [len(block) for block in re.split(_BLANK_LINE, completed)]
    sizes[0] += carried
    return max(sizes)


class SseFramer:
    """One SSE body, read by read: :meth:`feed` each read, :meth:`end` at end of body.

    Before parsing, a read loses the UTF-8 byte order mark the specification lets a stream
    open with (sseclient-py would keep it in the first field's name, and lose that event)
    and has every line ending (CRLF, CR or LF, even mixed) made LF (sseclient-py only ends
    an event at a blank line written with one kind). Then each block up to a blank line is
    one event: in the plain form read here, else by sseclient-py.

    An error (too large an event, bytes that are not UTF-8) found after some events of a
    read is raised by the next call, once those events have been handed up.
    """

    __slots__ = (
        "_cap",
        "_carry",
        "_ended_lf",
        "_error",
        "_head",
        "_pending",
        "_pending_cr",
        "provider",
    )

    def __init__(self, provider: str, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.provider = provider
        self._cap = max_event_bytes
        # The opening bytes while they may still be a byte order mark; None once decided.
        self._head: Optional[bytes] = b""
        self._pending_cr = False  # the last read ended with CR: an LF now is the same break
        self._ended_lf = False  # the last read ended a line: an LF now would end an event
        self._pending = 0  # bytes since the last blank line (the event being received)
        # The normalised bytes of the event not yet complete, in the reads that brought them
        # (joined once its blank line comes: an 8 MB event in small reads is copied once).
        self._carry: list[bytes] = []
        self._error: Optional[ProviderError] = None

    def feed(self, data: bytes) -> list[Frame]:
        """The events this read completes, in order (events without data are skipped)."""
        if self._error is not None:
            raise self._error
        if self._head is not None:
            head = self._head + data
            if len(head) < len(_BOM) and _BOM.startswith(head):
                self._head = head
                return []  # too short to tell yet
            self._head = None
            data = head[len(_BOM) :] if head.startswith(_BOM) else head
        if self._pending_cr and data.startswith(b"\n"):
            data = data[1:]
        self._pending_cr = False
        if b"\r" in data:
            self._pending_cr = data.endswith(b"\r")
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if not data:
            return []
        if not self._count(data):
            self._carry.append(data)  # no blank line in this read: no event completes
            return []
        out: list[Frame] = []
        carry = self._carry
        if carry:
            carry.append(data)
            data = b"".join(carry)
            carry.clear()
        try:
            self._cut(data, out)
        except ProviderError as exc:
            if not out:
                raise
            self._error = exc
        return out

    def end(self) -> list[Frame]:
        """At end of body: nothing more, since an event without its blank line is dropped.

        Its bytes are still decoded as sseclient-py would, which raises on invalid UTF-8.
        """
        if self._error is not None:
            raise self._error
        head, self._head = self._head, None
        if head:
            # The body ended inside what could still have been a byte order mark: those
            # bytes are a broken UTF-8 sequence, and sseclient-py says so.
            self._slow(head, [])
        carry = b"".join(self._carry)
        self._carry.clear()
        if carry.strip(b"\n"):
            self._slow(carry, [])
        return []

    def _count(self, chunk: bytes) -> bool:
        """Count ``chunk`` against the cap; whether a blank line ends in it."""
        # Only the bytes since the last blank line count: keep-alive comments between events
        # end with one, so a long quiet stream of pings never adds up to an "event".
        cap = self._cap
        end = chunk.rfind(b"\n\n")
        if end < 0 and self._ended_lf and chunk.startswith(b"\n"):
            end = 0  # the blank line began in the last read
        self._ended_lf = chunk.endswith(b"\n")
        if end < 0:
            self._pending += len(chunk)
        else:
            # Blocks completed in this chunk: only when together they pass the cap is it
            # worth measuring them one by one (a run of pings is many small blocks).
            if self._pending + end > cap and _largest_block(self._pending, chunk[:end]) > cap:
                raise _too_large(self.provider, cap)
            self._pending = len(chunk) - end
        if self._pending > cap:
            raise _too_large(self.provider, cap)
        return end >= 0

    def _cut(self, buf: bytes, out: list[Frame]) -> None:
        # A read cut here begins where a block begins. Blocks in a plain form ("data: X",
        # or "event: N" then "data: X", then a blank line) are read here, each form by the
        # loop fastest for it, chosen by how the read begins (a stream sends one form);
        # any other block, in either loop, goes to sseclient-py.
        if buf.startswith(b"event: "):
            self._cut_named(buf, out)
        else:
            self._cut_data(buf, out)

    def _cut_data(self, buf: bytes, out: list[Frame]) -> None:
        # Blocks are found line by line: a one-byte find is memchr, several times faster
        # than searching for the two-byte blank line, and the plain forms have one or two
        # lines. Anything else falls back to that search and to sseclient-py.
        find = buf.find
        startswith = buf.startswith
        add = out.append
        size = len(buf)
        pos = 0
        try:
            while True:
                nl = find(b"\n", pos)
                if nl < 0 or nl + 1 >= size:
                    break  # no whole line, or no byte yet after the last one
                if nl == pos:
                    pos += 1  # a blank line before any field dispatches nothing
                    continue
                if buf[nl + 1] == 10:
                    # One line, then the blank line: "data: X".
                    if startswith(b"data: ", pos) and nl > pos + 6:
                        try:
                            add(("message", buf[pos + 6 : nl].decode()))
                            pos = nl + 2
                            continue
                        except UnicodeDecodeError:
                            pass  # sseclient-py reports it, exactly as it would
                    end = nl
                else:
                    end = find(b"\n\n", nl + 1)
                    if end < 0:
                        break
                self._slow(buf[pos : end + 2], out)
                pos = end + 2
        finally:
            if pos < size:
                self._carry.append(buf[pos:])

    def _cut_named(self, buf: bytes, out: list[Frame]) -> None:
        # "event: N", "data: X", the blank line: one pattern anchored where the last block
        # ended (one C call per event). Anything else: its blank line, then sseclient-py.
        match = _named_match()
        find = buf.find
        add = out.append
        size = len(buf)
        pos = 0
        try:
            while pos < size:
                named = match(buf, pos)
                if named is not None:
                    name, data = named.groups()
                    try:
                        add((name.decode() or "message", data.decode()))
                        pos = named.end()
                        continue
                    except UnicodeDecodeError:
                        pass  # sseclient-py reports it, exactly as it would
                elif buf[pos] == 10:
                    pos += 1  # a blank line before any field dispatches nothing
                    continue
                end = find(b"\n\n", pos)
                if end < 0:
                    break  # the block's blank line has not come yet
                self._slow(buf[pos : end + 2], out)
                pos = end + 2
        finally:
            if pos < size:
                self._carry.append(buf[pos:])

    def _slow(self, block: bytes, out: list[Frame]) -> None:
        # Every other block, sseclient-py reads: comments, id:/retry:, several data lines,
        # fields without a space, blank lines before the event.
        try:
            for event in SSEClient(iter((block,))).events():
                if event.data:
                    out.append((event.event, event.data))
        except UnicodeDecodeError as exc:
            raise _bad_utf8(self.provider, exc) from exc


class NdjsonFramer:
    """One newline-delimited JSON body, read by read: each complete, non-blank line.

    As with :class:`SseFramer`, an error found after some lines of a read is raised by the
    next call.
    """

    __slots__ = ("_buf", "_cap", "_error", "provider")

    def __init__(self, provider: str, max_line_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.provider = provider
        self._cap = max_line_bytes
        self._buf = bytearray()
        self._error: Optional[ProviderError] = None

    def feed(self, data: bytes) -> list[Frame]:
        """``("", line)`` for each line this read completes."""
        if self._error is not None:
            raise self._error
        out: list[Frame] = []
        buf = self._buf
        # What is already buffered holds no newline: search only the new bytes.
        scan = len(buf)
        buf += data
        begin = 0
        try:
            while True:
                nl = buf.find(b"\n", scan)
                if nl < 0:
                    break
                line = bytes(buf[begin:nl])
                begin = scan = nl + 1
                if line.strip():
                    try:
                        out.append(("", line.decode("utf-8")))
                    except UnicodeDecodeError as exc:
                        raise _bad_utf8(self.provider, exc) from exc
            if begin:
                del buf[:begin]
            if len(buf) > self._cap:
                raise _too_large(self.provider, self._cap)
        except ProviderError as exc:
            if not out:
                raise
            self._error = exc
        return out

    def end(self) -> list[Frame]:
        """A last line the server did not end with a newline, if it is whole JSON.

        JSON Lines allows it; a fragment cut off mid-value is dropped, as an SSE event
        without its blank line is, and the wire format then sees no end signal.
        """
        if self._error is not None:
            raise self._error
        tail = bytes(self._buf).strip()
        self._buf = bytearray()
        if tail:
            try:
                text = tail.decode("utf-8")
                json.loads(text)
            except ValueError:
                return []
            return [("", text)]
        return []


def _frames(chunks: Iterable[bytes], framing: Framer) -> Iterator[Frame]:
    for chunk in chunks:
        yield from framing.feed(chunk)
    yield from framing.end()


def iter_sse(
    chunks: Iterable[bytes], *, provider: str, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
) -> Iterator[Frame]:
    """Yield ``(event_name, data)`` for each complete SSE event with non-empty data.

    Comment lines (keep-alives), events without data and unknown fields are skipped; an
    event with no ``event:`` field is named ``"message"``.
    """
    return _frames(chunks, SseFramer(provider, max_event_bytes))


def iter_ndjson(
    chunks: Iterable[bytes], *, provider: str, max_line_bytes: int = DEFAULT_MAX_EVENT_BYTES
) -> Iterator[str]:
    """Yield each complete, non-blank line of a newline-delimited JSON stream as text."""
    return (line for _, line in _frames(chunks, NdjsonFramer(provider, max_line_bytes)))
