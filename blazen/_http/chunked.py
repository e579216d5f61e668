"""Chunked transfer decoding that cuts a whole socket read into its chunks at once.

http.client returns one chunk per ``read1`` and parses each size line with ``readline``;
providers send one event per chunk, so that costs more per event than the event's JSON.
"""

from __future__ import annotations

import http.client
import socket
from typing import Callable, Optional

import requests

from .hooks import http_response
from .source import BodySource

__all__ = ["ChunkedBody", "chunked_body"]

_READ_SIZE = 65536
_MAX_LINE = 65536


def chunked_body(
    resp: requests.Response, sock: Optional[socket.socket] = None
) -> Optional[ChunkedBody]:
    """A reader for ``resp``'s chunked body, if it has one that http.client has not started.

    It gives the body's bytes as sent: whoever reads them undoes any content coding. With
    ``sock`` (the connection's socket, still its own), the body is read from it directly
    once http.client's buffer is drained (see :mod:`.source`).

    Call it once per response and keep the reader with the response (no map from responses
    to readers: a weak map whose value holds its key never lets an entry go).
    """
    inner = http_response(resp.raw)
    if inner is None:
        return None
    if (
        inner.chunked
        and inner.chunk_left is None  # http.client has read none of the body
        and inner.fp is not None
    ):
        return ChunkedBody(inner, sock)
    return None


class ChunkedBody:
    """The data of a chunked body, one piece per socket read however many chunks it holds.

    http.client returns one chunk per ``read1`` and parses each size line with ``readline``;
    providers send one event per chunk, so that costs more per event than the event's JSON.
    Here the socket's buffer is read in blocks and the chunks are cut out of it. At the end
    the response is closed as http.client closes it, so the connection can be pooled again;
    a body cut short raises ``IncompleteRead``, as http.client does.
    """

    __slots__ = (
        "_broken",
        "_buf",
        "_ended",
        "_inner",
        "_left",
        "_skip",
        "_source",
        "_trailer",
        "before_read",
        "done",
    )

    def __init__(
        self, inner: http.client.HTTPResponse, sock: Optional[socket.socket] = None
    ) -> None:
        assert inner.fp is not None
        self._inner = inner
        self._source = BodySource(inner.fp, sock)
        self._buf = b""
        self._left = 0  # bytes of the current chunk's data still to come
        self._skip = 0  # bytes of the CRLF that ends a chunk's data still to come
        self._broken: Optional[http.client.HTTPException] = None
        self._trailer = b""  # what followed the last chunk: trailer fields, read at the end
        self._ended = False
        #: Called before every socket read: the drain sets its budget here.
        self.before_read: Optional[Callable[[], None]] = None
        self.done = False

    def read(self) -> bytes:
        """The data of every chunk in the next socket read; ``b""`` at the end of the body.

        A broken framing line raises, but only after the data cut before it has been
        returned: the text that arrived intact reaches the caller (and ``err.partial``).
        """
        if self._broken is not None:
            raise self._broken
        out: list[bytes] = []
        while not out and not self.done:
            data = self._read(_READ_SIZE)
            if not data:
                raise http.client.IncompleteRead(b"")
            self._into(data, out)
        if not out:
            self._end()
            return b""
        return out[0] if len(out) == 1 else b"".join(out)

    @property
    def shared_socket(self) -> Optional[socket.socket]:
        """The socket another thread may read this body from and :meth:`push` here, or None.

        Only while the body is read straight from the standard library's socket (plain TCP
        or TLS), and only the plain reads: not once it ended or broke, nor under a drain's
        budget.
        """
        if self.done or self._broken is not None or self.before_read is not None:
            return None
        return self._source.own_socket

    def push(self, data: bytes) -> bytes:
        """The data of every chunk that ``data`` (one read of the socket, made elsewhere)
        completes, as :meth:`read` returns it; ``b""`` when it completes none.

        At the last chunk :attr:`done` is set: the trailer is left for :meth:`read`.
        """
        if self._broken is not None:
            raise self._broken
        out: list[bytes] = []
        self._into(data, out)
        return out[0] if len(out) == 1 else b"".join(out)

    def _into(self, data: bytes, out: list[bytes]) -> None:
        # One read's bytes cut into ``out``. A broken framing line raises, unless data was
        # cut before it: then it is kept for the next read to raise.
        try:
            self._cut(self._buf + data if self._buf else data, out)
        except http.client.HTTPException as exc:
            if not out:
                raise
            self._broken = exc

    def _read(self, size: int) -> bytes:
        if self.before_read is not None:
            self.before_read()
        return self._source.read1(size)

    def _end(self) -> None:
        # The trailer is read only now, after the last data went out: a server trickling
        # trailer lines cannot hold back the answer, and the drain's budget bounds it.
        if self._ended:
            return
        self._ended = True
        _discard_trailer(self._trailer, self._read)
        self._source.restore()  # before the connection can be pooled again
        self._inner.close()

    def _cut(self, buf: bytes, out: list[bytes]) -> None:
        pos = 0
        end = len(buf)
        left = self._left
        skip = self._skip
        find = buf.find
        add = out.append
        while pos < end:
            if not left and not skip:
                # The usual case, a whole chunk in the buffer: its size line (a one-byte
                # find, then int() as http.client reads it), its data, its CRLF. Anything
                # else (a chunk cut by the read, extensions, the last chunk) is left to the
                # general steps below, which come back here once that chunk is done.
                while True:
                    nl = find(b"\n", pos)
                    if nl < 0:
                        break
                    try:
                        size = int(buf[pos:nl], 16)
                    except ValueError:
                        break
                    stop = nl + 1 + size
                    if size <= 0 or stop + 2 > end:
                        break
                    add(buf[nl + 1 : stop])
                    pos = stop + 2
                if pos >= end:
                    break
                nl = find(b"\n", pos)
                if nl < 0:
                    if end - pos > _MAX_LINE:
                        raise http.client.LineTooLong("chunk size")
                    break
                size = _chunk_size(buf[pos:nl])
                pos = nl + 1
                if size == 0:
                    self._trailer = buf[pos:]
                    pos = end
                    self.done = True
                    break
                left = size
                continue  # its data may be in the next read
            if left:
                stop = pos + left
                if stop > end:
                    add(buf[pos:] if pos else buf)
                    left = stop - end
                    pos = end
                    break
                add(buf[pos:stop])
                pos = stop
                left = 0
                skip = 2
            if skip:
                step = min(skip, end - pos)
                pos += step
                skip -= step
                if skip:
                    break
        self._buf = buf[pos:] if pos < end else b""
        self._left = left
        self._skip = skip


def _chunk_size(line: bytes) -> int:
    # As http.client reads it (up to the LF, whitespace such as the CR ignored by int()):
    # extensions after ";" ignored, anything unreadable is a cut body.
    try:
        size = int(line.split(b";", 1)[0], 16)
    except ValueError:
        raise http.client.IncompleteRead(b"") from None
    if size < 0:
        raise http.client.IncompleteRead(b"")
    return size


def _discard_trailer(rest: bytes, read1: Callable[[int], bytes]) -> None:
    # Trailer fields up to the empty line; like http.client, EOF instead of it is accepted.
    while True:
        nl = rest.find(b"\n")
        if nl < 0:
            if len(rest) > _MAX_LINE:
                raise http.client.LineTooLong("trailer line")
            data = read1(_READ_SIZE)
            if not data:
                return
            rest += data
            continue
        line, rest = rest[: nl + 1], rest[nl + 1 :]
        if line in (b"\r\n", b"\n"):
            return
