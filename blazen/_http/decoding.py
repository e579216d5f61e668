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
from typing import Optional, Union

from urllib3.exceptions import DecodeError

__all__ = ["Inflater", "inflater_for"]

#: The most one step of decoding may produce: a small compressed piece cannot turn into
#: gigabytes in one call, so size caps still apply as the output grows.
_MAX_OUT = 256 * 1024
#: How much of a deflate body is kept to try again as raw deflate: a wrong zlib header
#: fails at its second byte, so a body that gets this far without output is not raw.
_MAX_SEEN = 64 * 1024
#: The most codings one body may stack (``gzip, gzip``...); urllib3 allows five.
_MAX_CODINGS = 5
_INFLATED = frozenset({"gzip", "x-gzip", "deflate"})


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
            # Empty deflate blocks decode to nothing: what is kept must not grow with them.
            self._seen = self._seen + data if len(self._seen) < _MAX_SEEN else None
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


class _Chain:
    """Codings stacked on one body (``Content-Encoding: deflate, gzip``), undone in turn."""

    __slots__ = ("_stages",)

    def __init__(self, stages: list[Inflater]) -> None:
        self._stages = stages  # the coding applied last comes first

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces of ``data``, each stage's output fed to the next piece by piece."""
        return self._through(0, data)

    def _through(self, stage: int, data: bytes) -> Iterator[bytes]:
        if stage == len(self._stages):
            yield data
            return
        for piece in self._stages[stage].feed(data):
            yield from self._through(stage + 1, piece)


class _Refused:
    """A body in a coding blazen does not decode: reading it is a decode error, said plainly."""

    __slots__ = ("_encoding",)

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Raise urllib3's ``DecodeError`` naming the coding (blazen asked for identity)."""
        msg = (
            f"the body is encoded as {self._encoding!r}, which blazen does not decode (it "
            "asks for identity; gzip and deflate are decoded)"
        )
        raise DecodeError(msg)


def inflater_for(encoding: str) -> Optional[Union[Inflater, _Chain, _Refused]]:
    """What decodes a body with this ``Content-Encoding`` header, or None for identity.

    The header is a list, in the order the codings were applied; ``identity`` in it means
    nothing. blazen decodes gzip and deflate itself (urllib3 would read the socket as long
    as a decoder has no output, and it takes any name it does not know for deflate);
    anything else is refused with an error that names it, rather than read as text.
    """
    codings = [c.strip().lower() for c in encoding.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return None
    if len(codings) > _MAX_CODINGS or not _INFLATED.issuperset(codings):
        return _Refused(encoding.strip())
    stages = [Inflater(gzip=c != "deflate") for c in reversed(codings)]
    return stages[0] if len(stages) == 1 else _Chain(stages)
