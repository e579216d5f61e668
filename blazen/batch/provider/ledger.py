"""The ledger beside ``out=``: which items went to which provider batch, so a rerun resumes.

One JSON line per step, appended and handed to the disk before the step it records is
relied on:

- ``{"v": 1, "op": "submit", "tag", "provider", "group", "ids"}`` before a batch is sent;
- ``{"v": 1, "op": "submitted", "tag", "batch"}`` once the provider named it;
- ``{"v": 1, "op": "collected", "tag"}`` once its results are all in ``out=``.

A run that dies between the first two lines leaves an *unconfirmed* submission: the next run
asks the provider for a batch carrying the tag (OpenAI's metadata, Gemini's display name)
and only sends the items again if there is none. A torn last line is cut off, as in
``out=`` (the next line appended would otherwise be glued to it and lost), and a row of
the wrong shape (a hand edit) is skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import attrs

__all__ = ["Entry", "Ledger", "ledger_path"]

VERSION = 1


def ledger_path(out: Any) -> Path:
    """Where the ledger of ``out=`` lives: ``results.jsonl`` -> ``results.jsonl.batches``."""
    path = Path(out)
    return path.with_name(path.name + ".batches")


@attrs.define(eq=False)
class Entry:
    """One provider batch this run (or an earlier one) sent."""

    tag: str
    provider: str
    group: str
    ids: list[str]
    batch: Optional[str] = None
    collected: bool = False


class Ledger:
    """The submissions recorded beside ``out=``, read at start and appended as they happen."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, Entry] = {}
        if path.exists():
            self._load()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _load(self) -> None:
        keep = 0
        with open(self.path, "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    break  # torn by a crash mid-write: that step did not happen
                keep += len(line)
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict) and row.get("v") == VERSION:
                    self._apply(row)
        if keep < self.path.stat().st_size:
            os.truncate(self.path, keep)

    def _apply(self, row: dict[str, Any]) -> None:
        tag, op = row.get("tag"), row.get("op")
        if not isinstance(tag, str):
            return
        if op == "submit":
            ids = row.get("ids")
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                return
            self.entries[tag] = Entry(
                tag=tag, provider=str(row.get("provider")), group=str(row.get("group")), ids=ids
            )
        elif tag in self.entries and op == "submitted" and isinstance(row.get("batch"), str):
            self.entries[tag].batch = row["batch"]
        elif tag in self.entries and op == "collected":
            self.entries[tag].collected = True

    def _write(self, row: dict[str, Any]) -> None:
        data = (json.dumps({"v": VERSION, **row}, ensure_ascii=False) + "\n").encode(
            "utf-8", "surrogatepass"
        )
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)
        self._apply(json.loads(data))

    def intend(self, tag: str, provider: str, group: str, ids: list[str]) -> Entry:
        """Record a batch about to be sent (before it is)."""
        self._write({"op": "submit", "tag": tag, "provider": provider, "group": group, "ids": ids})
        return self.entries[tag]

    def submitted(self, entry: Entry, batch_id: str) -> None:
        """Record the provider's id for ``entry``."""
        self._write({"op": "submitted", "tag": entry.tag, "batch": batch_id})

    def collected(self, entry: Entry) -> None:
        """Record that every result of ``entry`` is in ``out=`` (or was given up on)."""
        self._write({"op": "collected", "tag": entry.tag})

    def open_entries(self) -> list[Entry]:
        """Batches sent (or maybe sent) whose results are not all in yet."""
        return [e for e in self.entries.values() if not e.collected]

    def close(self) -> None:
        """Close the file (every line is already on disk)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
