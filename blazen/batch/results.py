"""One finished item, as a value and as one line of the ``out=`` JSONL file.

The file is append-only and written one whole line per ``os.write`` (``O_APPEND``), so a
crash (even ``kill -9``) can only leave a torn *last* line: :func:`read` skips it and
:class:`ResultsFile` cuts it off before appending, so the file never breaks a reader and
never holds an id twice.

A record (version ``"v": 1``) holds the done event's or the error event's fields in the
one JSON form of :mod:`blazen._codec` (the same as ``blazen chat --json`` and the sinks),
with the item's ``id`` and, on success, the assembled ``text`` and ``tool_calls``::

    {"v": 1, "id": "q1", "kind": "done", "text": "...", "finish_reason": "stop",
     "usage": {"prompt_tokens": 5, ...}, "tool_calls": [{"id", "name", "arguments"}]}
    {"v": 1, "id": "q2", "kind": "error", "error": {"type": "AuthError", "kind": "auth",
     "message": "...", "status": 401, ...}}

Files written before version 1 (no ``"v"`` nor ``"kind"``) are read as the same records.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional, Union

import attrs

from .._codec import VERSION, error_body, error_object, line, loads, usage_object
from .._types import CompletionResponse
from ..errors import BlazenError, ValidationError

__all__ = ["BatchResult", "ResultsFile", "read"]

PathLike = Union[str, "os.PathLike[str]"]


@attrs.frozen(kw_only=True)
class BatchResult:
    """One finished item: its ``id`` and either the ``response`` or the ``error``."""

    id: str
    response: Optional[CompletionResponse] = None
    error: Optional[BlazenError] = None

    @property
    def ok(self) -> bool:
        """True when the item succeeded."""
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        """The record written to ``out=``, as :func:`read` yields it back."""
        if self.error is not None:
            return {"v": VERSION, "id": self.id, "kind": "error", "error": error_body(self.error)}
        resp = self.response
        assert resp is not None
        return {
            "v": VERSION,
            "id": self.id,
            "kind": "done",
            "text": resp.content,
            "finish_reason": resp.finish_reason,
            "usage": usage_object(resp.usage),
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments_json} for c in resp.tool_calls
            ],
        }


def read(path: PathLike) -> Iterator[dict[str, Any]]:
    """Yield the records of an ``out=`` file, in the order they were written.

    Records come back in the current form (see the module doc), those of older files too.
    A torn last line (the process died while writing it) is skipped: that item was not
    finished and a resumed run does it again. Any other line that is not a record raises
    :class:`~blazen.ValidationError`. Example::

        failed = [r["id"] for r in batch.read("results.jsonl") if "error" in r]
    """
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                return  # torn by a crash mid-write
            try:
                record = loads(raw)
            except ValidationError:
                record = None
            if not isinstance(record, dict) or not isinstance(record.get("id"), str):
                msg = f"line {number} of {os.fspath(path)} is not a batch result record"
                raise ValidationError(msg)
            yield upgrade(record)


def upgrade(record: dict[str, Any]) -> dict[str, Any]:
    """A record of any version in the current form (version 0 had no ``v`` nor ``kind``)."""
    if record.get("v") == VERSION:
        return record
    if "error" in record:
        old = record["error"] if isinstance(record["error"], dict) else {}
        body = error_object(str(old.get("type", "BlazenError")), str(old.get("kind", "error")),
                            str(old.get("message", "")), status=old.get("status"))
        return {"v": VERSION, "id": record["id"], "kind": "error", "error": body}
    return {"v": VERSION, **record, "kind": "done"}


class ResultsFile:
    """The ``out=`` file of a run: the ids already done, then one appended line per item."""

    def __init__(self, path: PathLike, *, retry_failed: bool) -> None:
        self.path = Path(path)
        #: Ids a previous run finished (and, unless retry_failed, failed): skipped.
        self.done: set[str] = set()
        #: Failed records dropped from the file so their ids run again.
        self.dropped = 0
        if self.path.exists():
            self._scan(retry_failed)
        # O_APPEND: every write lands at the end as one piece, whatever else holds the file.
        self._fd: Optional[int] = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _scan(self, retry_failed: bool) -> None:
        keep = 0  # bytes of whole lines
        failed = False
        with open(self.path, "rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    break
                keep += len(raw)
        for record in read(self.path):
            if retry_failed and "error" in record:
                failed = True
                continue
            self.done.add(record["id"])
        if failed:
            self._rewrite_without_failures()
        elif keep != self.path.stat().st_size:
            os.truncate(self.path, keep)  # the torn line a crash left

    def _rewrite_without_failures(self) -> None:
        # A new file swapped in by rename: a crash now leaves the old file or the new one.
        tmp = self.path.with_name(self.path.name + ".rewrite")
        with open(self.path, "rb") as src, open(tmp, "wb") as dst:
            for raw in src:
                if not raw.endswith(b"\n"):
                    break
                if "error" in loads(raw):
                    self.dropped += 1
                    continue
                dst.write(raw)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, self.path)

    def write(self, result: BatchResult) -> None:
        """Append ``result`` as one line, in one write, straight to the OS."""
        self.append(result.to_json())

    def append(self, record: dict[str, Any]) -> None:
        """Append one record (with its ``id``) as one line, in one write."""
        assert self._fd is not None
        view = memoryview(line(record))
        while view:  # a regular file takes it whole; a short write only on a full disk
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        """Close the file (its lines are already with the OS)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
