"""What ``blazen chat`` writes: text for people or one JSON event per line, safely.

stdout's reader may go away (``| head``) and its encoding may not show every character: every
write goes through :class:`Output`, which handles both.
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import Any, Optional, TextIO

from .._codec import VERSION, dumps, encode_chunk, encode_done, encode_error, error_object
from .._types import StreamChunk, TokenUsage
from ..errors import BlazenError

__all__ = ["CUT_OFF", "Output", "fits", "showable"]

#: Said on stderr when an answer stopped at ``max_tokens``: text mode shows no other mark.
CUT_OFF = "the answer was cut off at the token limit (finish reason length): raise --max-tokens"


def fits(text: str, stream: TextIO) -> bool:
    """Whether ``stream``'s encoding can write ``text`` as it is."""
    if text.isascii():
        return True
    try:
        text.encode(getattr(stream, "encoding", None) or "utf-8")
    except UnicodeEncodeError:
        return False
    except LookupError:
        return True  # an encoding Python does not know: let the stream itself decide
    return True


def showable(text: str, stream: TextIO) -> str:
    """``text`` with what ``stream``'s encoding cannot write replaced by ``?``.

    The writer policy for people (see :mod:`blazen._codec`): a terminal that cannot show a
    character (an emoji on an ASCII or Latin-1 terminal, a lone surrogate anywhere) shows
    ``?`` in its place, one per character, and the rest as it is; it never raises.
    """
    if fits(text, stream):
        return text
    # An ASCII or Latin-1 terminal, or a lone surrogate from the server: show the rest.
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return text.encode(encoding, "replace").decode(encoding)


def _silence(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at the null device.

    Its buffer still holds what could not be written; without this, Python's flush at exit
    fails again and prints "Exception ignored ... BrokenPipeError" (the recipe of the Python
    docs' signal module page, "Note on SIGPIPE").
    """
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return  # not a file (a StringIO): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class Output:
    """Writes what the stream delivers: text for people, or one JSON event per line.

    Every write to stdout goes through :meth:`_write`: when stdout's reader has gone away
    (``blazen chat ... | head``) it remembers so (exit status 141), stops writing, and raises
    :class:`BrokenPipeError` in :meth:`chunk`, which aborts the stream and closes its
    connection. What the encoding of stdout cannot show is replaced (text) or escaped (JSON).
    """

    def __init__(self, as_json: bool, out: TextIO, err: TextIO) -> None:
        self.as_json = as_json
        self.out = out
        self.err = err
        self.line_open = False
        #: Whether a done or error was reported.
        self.ended = False
        #: Set when stdout's reader went away (``blazen chat ... | head``).
        self.broken_pipe = False
        #: The refusal deltas so far (the model declining to answer).
        self.refusal: list[str] = []

    def _write(self, text: str) -> None:
        """Write to stdout now; raises BrokenPipeError once its reader has gone away."""
        if self.broken_pipe:
            raise BrokenPipeError(errno.EPIPE, "stdout's reader went away")
        try:
            self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            self.broken_pipe = True
            _silence(self.out)
            raise

    def _write_last(self, text: str) -> None:
        """Write a done or error to stdout; nobody to tell if its reader has gone."""
        with contextlib.suppress(BrokenPipeError):  # the exit status says so
            self._write(text)

    def _event(self, payload: dict[str, Any], last: bool = False) -> None:
        line = dumps(payload)
        if not fits(line, self.out):
            line = dumps(payload, ascii_only=True)  # \uXXXX escapes: the same JSON, in ASCII
        (self._write_last if last else self._write)(line + "\n")

    def note(self, text: str) -> None:
        """One line on stderr, prefixed ``blazen:``."""
        try:
            self.err.write(showable(f"blazen: {text}\n", self.err))
            self.err.flush()
        except BrokenPipeError:
            _silence(self.err)  # ``2>&1 | head``: stderr's reader is gone too

    def chunk(self, chunk: StreamChunk) -> None:
        if self.as_json:
            self._event(encode_chunk(chunk))
        elif chunk.content_delta:
            self._write(showable(chunk.content_delta, self.out))
            self.line_open = not chunk.content_delta.endswith("\n")
        refusal = chunk.refusal_delta
        if refusal:
            if not self.as_json:
                # The refusal is the model's answer too: on its own line after any text.
                start = "\n" if self.line_open and not self.refusal else ""
                self._write(showable(start + refusal, self.out))
                self.line_open = not refusal.endswith("\n")
            self.refusal.append(refusal)

    def done(self, finish_reason: str, usage: Optional[TokenUsage]) -> None:
        self.ended = True
        if self.as_json:
            self._event(encode_done(finish_reason, usage), last=True)
        else:
            self._end_line()
            if self.refusal:
                self.note(f"the model declined to answer (finish reason {finish_reason})")
            elif finish_reason == "length":
                self.note(CUT_OFF)

    def error(self, err: BlazenError) -> None:
        if self.broken_pipe:
            # The stream was aborted because nobody reads stdout: nothing to report. (Not
            # "its cause is a BrokenPipeError": that may be the socket to the provider.)
            self.ended = True
            return
        self._report(encode_error(err), err.kind, err.message)

    def failure(self, kind: str, type_name: str, message: str) -> None:
        """Report a failure that is no stream's error (a Ctrl-C before it, a missing import)."""
        body = error_object(type_name, kind, message)
        self._report({"v": VERSION, "kind": "error", "error": body}, kind, message)

    def _report(self, event: dict[str, Any], kind: str, message: str) -> None:
        """Report how it failed: an ``error`` event, and a line on stderr."""
        self.ended = True
        if self.as_json:
            self._event(event, last=True)
        self._end_line()
        self.note("interrupted" if kind == "cancelled" else f"error: {message}")

    def _end_line(self) -> None:
        if self.line_open:
            self.line_open = False
            self._write_last("\n")
