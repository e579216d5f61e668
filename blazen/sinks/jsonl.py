"""``JsonlSink``: a durable transcript, one JSON line per event; ``read_jsonl`` reads it back."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import IO, Any, Optional, Union

from .._codec import HandlerCall, decode, encode_chunk, encode_done, encode_error, line, loads
from .._types import StreamChunk, TokenUsage
from ..errors import BlazenError, ValidationError

__all__ = ["JsonlSink", "read_jsonl"]

PathLike = Union[str, "os.PathLike[str]"]


class JsonlSink:
    """Append every event to the file at ``path`` as one JSON line (see :mod:`.codec`).

    Any text is written so that it reads back the same (the writer policy of
    :mod:`blazen._codec`: a lone surrogate travels as a ``\\uXXXX`` escape). Each line is
    written whole and flushed before the callback returns, so a process
    killed mid-stream leaves every line it wrote readable; the terminal line is fsynced
    and the file closed. The file is opened (appended to, created if missing) at the
    first event. Read it back with :func:`read_jsonl`. Example::

        Streaming.complete(model, req, JsonlSink("transcript.jsonl"))
        for kind, args in read_jsonl("transcript.jsonl"): ...
    """

    __slots__ = ("_file", "path")

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        self._file: Optional[IO[bytes]] = None

    def __repr__(self) -> str:
        return f"JsonlSink({self.path!r})"

    def _write(self, obj: dict[str, Any]) -> IO[bytes]:
        f = self._file
        if f is None:
            f = self._file = open(self.path, "ab")  # noqa: SIM115
        # One write of the whole line: a kill between two writes cannot split a line.
        f.write(line(obj))
        f.flush()
        return f

    def _end(self, obj: dict[str, Any]) -> None:
        f = self._write(obj)
        self._file = None
        try:
            os.fsync(f.fileno())
        finally:
            f.close()

    def on_chunk(self, chunk: StreamChunk) -> None:
        """Write the chunk's line."""
        self._write(encode_chunk(chunk))

    def on_done(self, finish_reason: str, usage: Optional[TokenUsage]) -> None:
        """Write the done line, fsync and close."""
        self._end(encode_done(finish_reason, usage))

    def on_error(self, err: BlazenError) -> None:
        """Write the error line, fsync and close."""
        self._end(encode_error(err))


def read_jsonl(path: PathLike) -> Iterator[HandlerCall]:
    """Yield the ``(kind, args)`` a :class:`JsonlSink` wrote, with real values.

    Chunks come back as :class:`~blazen.StreamChunk`, usage as :class:`~blazen.TokenUsage`
    and an error as the same :class:`~blazen.BlazenError` subclass with its kind, message,
    status, ``retry_after`` and partial text. A last line cut short (the machine lost
    power mid-write, so it has no newline, and may end inside a character) is skipped; any
    other line that is not an event (bad UTF-8 or JSON, nested too deep, a field of the
    wrong type) raises :class:`~blazen.ValidationError` naming its number, and nothing
    else is ever raised for what the file holds.
    """
    name = os.fspath(path)
    with open(name, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                event = decode(loads(raw, "the line"))
            except ValidationError as exc:
                if not raw.endswith(b"\n"):
                    return  # the torn tail of an interrupted write
                msg = f"{name}, line {number}: {exc}"
                raise ValidationError(msg) from None
            yield event
