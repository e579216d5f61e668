"""Bytes to events: Server-Sent Events (through sseclient-py) and newline-delimited JSON.

This module knows no provider. It turns the chunks a socket delivers into complete events,
as soon as each one is complete, and enforces a size cap so that a hostile or broken server
cannot grow memory without bound. An event left incomplete at end of stream is discarded
(as the SSE specification requires), so a truncated stream never yields half an event.
"""

from __future__ import annotations

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
        """The chunks, raising once the pending event passes the cap."""
        cap = self._cap
        for chunk in self._chunks:
            self.pending += len(chunk)
            if self.pending > cap:
                raise _too_large(self._provider, cap)
            yield chunk
        self.eof = True


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
        source.pending = 0
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
