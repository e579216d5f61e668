"""Decoding one payload, and naming what was wrong with one a fold could not read. No I/O."""

from __future__ import annotations

import json
from typing import Any, Callable

from ..errors import ProviderError
from .errors import malformed

__all__ = ["SHAPE_ERRORS", "parse_json", "shape_error"]


# json.loads reaches the C scanner through two Python wrappers and two whitespace regexes,
# a third of its time on a small payload. Stream payloads are bare JSON: try the scanner on
# its own, and leave anything it declines (whitespace, trailing data, errors) to json.loads.
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def parse_json(provider: str, data: str) -> dict[str, Any]:
    """Decode one payload that must be a JSON object; a malformed-payload error if not."""
    try:
        obj, end = _scan_once(data, 0)
        if end != len(data):
            raise ValueError(end)
    except (StopIteration, ValueError):
        try:
            obj = json.loads(data)
        except ValueError as exc:
            raise malformed(provider, "not JSON", data) from exc
    if not isinstance(obj, dict):
        raise malformed(provider, "not a JSON object", data)
    return obj


#: What a payload of the wrong shape raises inside a fold: a missing key, a number where
#: text belongs, nesting deep enough to exhaust the recursion limit. The engine turns these
#: into :func:`shape_error`; anything else a fold raises is a bug, reported as one.
SHAPE_ERRORS: tuple[type[Exception], ...] = (
    LookupError,
    TypeError,
    AttributeError,
    ValueError,
    RecursionError,
)


def shape_error(provider: str, exc: BaseException, data: str) -> ProviderError:
    """The malformed-payload error for ``exc``, one of :data:`SHAPE_ERRORS`, raised on ``data``."""
    what = "nested too deeply" if isinstance(exc, RecursionError) else "unexpected shape"
    return malformed(provider, what, data)
