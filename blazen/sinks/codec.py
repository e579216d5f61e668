"""Events as JSON objects and back, losslessly: the one format of transcripts and Redis.

The format, its version field and the writer policy are documented once, in
:mod:`blazen._codec`: the same JSON that ``blazen chat --json`` prints and batch ``out=``
files hold. This module is its public name for sink users.
"""

from __future__ import annotations

from .._codec import (
    VERSION,
    HandlerCall,
    decode,
    decode_error,
    dumps,
    encode,
    encode_chunk,
    encode_done,
    encode_error,
    line,
    loads,
)

__all__ = [
    "VERSION",
    "Event",
    "HandlerCall",
    "decode",
    "decode_error",
    "dumps",
    "encode",
    "encode_chunk",
    "encode_done",
    "encode_error",
    "line",
    "loads",
]

#: The old name of :data:`HandlerCall`, kept for code that imports it.
Event = HandlerCall
