"""``python -m blazen``: the same as the ``blazen`` command."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
