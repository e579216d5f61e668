"""The progress bar: ``tqdm`` on stderr, from the optional extra ``blazen-stream[progress]``."""

from __future__ import annotations

import importlib
import sys
import time
from typing import Any, Optional

from ..errors import UnsupportedError

__all__ = ["Progress", "open_progress"]

#: Seconds between refreshes of the bar's counters (tqdm redraws at its own pace).
REFRESH = 0.25


class Progress:
    """A ``tqdm`` bar counting items, with ok/failed, tokens/s and the concurrency."""

    def __init__(self, bar: Any) -> None:
        self._bar = bar
        self._start = time.monotonic()
        self._shown = 0.0
        self._postfix: dict[str, Any] = {}

    def update(
        self, *, ok: int, failed: int, tokens: int, concurrency: int, force: bool = False
    ) -> None:
        """One more item finished."""
        self._bar.update(1)
        now = time.monotonic()
        rate = tokens / max(now - self._start, 1e-9)
        self._postfix = {
            "ok": ok,
            "failed": failed,
            "tok_s": f"{rate:.0f}",
            "concurrency": concurrency,
        }
        if force or now - self._shown >= REFRESH:
            self._shown = now
            self._bar.set_postfix(self._postfix, refresh=False)

    def skip(self) -> None:
        """One item skipped: ``out=`` already held it."""
        self._bar.update(1)

    def close(self) -> None:
        """Draw the bar one last time, with the final counts, and leave the line."""
        if self._postfix:
            self._bar.set_postfix(self._postfix, refresh=False)
        self._bar.close()


def open_progress(asked: Optional[bool], total: Optional[int]) -> Optional[Progress]:
    """The bar, or None: ``None`` means on when stderr is a terminal and tqdm is there."""
    if asked is False:
        return None
    try:
        tqdm = importlib.import_module("tqdm").tqdm  # optional: no stubs needed
    except ImportError:
        if asked:
            msg = "progress=True needs tqdm: pip install 'blazen-stream[progress]'"
            raise UnsupportedError(msg) from None
        return None
    if asked is None and not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        return None
    return Progress(tqdm(total=total, unit="item", file=sys.stderr, dynamic_ncols=True))
