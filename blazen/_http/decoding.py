"""Decoding a compressed body piece by piece, so every socket read stays blazen's to time.

blazen asks for ``identity``, but a server or a proxy may compress anyway. urllib3 can
decode as it reads, but then one of its reads keeps reading the socket until the decoder
has output, and a server that sends a gzip header a byte at a time (or empty deflate blocks
for ever) holds it as long as it likes, past every budget blazen sets between reads. Here
the raw bytes are read by blazen, one read at a time, and inflated here.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Optional

from urllib3.exceptions import DecodeError

__all__ = ["Inflater", "inflater_for"]

#: The most one step of decoding may produce: a small compressed piece cannot turn into
#: gigabytes in one call, so size caps still apply as the output grows.
_MAX_OUT = 256 * 1024


class Inflater:
    """gzip (several members too) or deflate (zlib-wrapped or raw, as servers differ)."""

    __slots__ = ("_gzip", "_obj", "_raw_tried", "_seen")

    def __init__(self, gzip: bool) -> None:
        self._gzip = gzip
        self._obj = self._new()
        self._raw_tried = False
        # deflate: what was read before the first output, to retry as raw deflate.
        self._seen: Optional[bytes] = None if gzip else b""

    def _new(self, raw: bool = False) -> zlib._Decompress:
        if self._gzip:
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        return zlib.decompressobj(-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces of ``data`` (none while a header is still arriving)."""
        if self._seen is not None:
            self._seen += data
        try:
            yield from self._inflate(data)
        except zlib.error as exc:
            if self._gzip or self._raw_tried or self._seen is None:
                msg = f"the body does not decode as {'gzip' if self._gzip else 'deflate'}"
                raise DecodeError(msg) from exc
            # Many servers send raw deflate under the name: start over that way.
            self._raw_tried = True
            self._obj = self._new(raw=True)
            seen, self._seen = self._seen, None
            yield from self.feed(seen)

    def _inflate(self, data: bytes) -> Iterator[bytes]:
        obj = self._obj
        while data:
            out = obj.decompress(data, _MAX_OUT)
            data = obj.unconsumed_tail
            if out:
                self._seen = None  # it decodes: no going back
                yield out
            if obj.eof:
                rest = obj.unused_data
                if not self._gzip or not rest.strip(b"\x00"):
                    return  # trailing padding after the last member
                obj = self._obj = self._new()  # the next gzip member
                data = rest


def inflater_for(encoding: str) -> Optional[Inflater]:
    """An :class:`Inflater` for a ``Content-Encoding`` blazen decodes itself, else None."""
    if encoding in ("gzip", "x-gzip"):
        return Inflater(gzip=True)
    if encoding == "deflate":
        return Inflater(gzip=False)
    return None
