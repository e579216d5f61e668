"""Descriptions from docstrings: the summary, and each parameter's line. No I/O.

Google (``Args:``), NumPy (``Parameters`` underlined) and Sphinx (``:param x:``) styles are
read, since a model calls a tool better when it knows what each argument means.
"""

from __future__ import annotations

import inspect
import re
from typing import Optional

__all__ = ["parse_docstring"]

_SECTION_RE = re.compile(
    r"^(args|arguments|parameters|params|keyword args|returns?|yields?|raises|examples?|"
    r"notes?|see also|attributes|warnings?|references)\s*:?\s*$",
    re.IGNORECASE,
)
_PARAM_SECTIONS = ("args", "arguments", "parameters", "params", "keyword args")
_GOOGLE_RE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_RE = re.compile(r"^\*{0,2}(\w+)\s*(?::.*)?$")
_SPHINX_RE = re.compile(r"^:param\s+(?:[^:]*\s)?\*{0,2}(\w+)\s*:\s*(.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_docstring(doc: Optional[str]) -> tuple[str, dict[str, str]]:
    """``(description, {parameter: description})`` from a Google, NumPy or Sphinx docstring."""
    lines = inspect.cleandoc(doc or "").splitlines()
    params: dict[str, list[str]] = {}
    body: list[str] = []
    i = 0
    while i < len(lines) and not (
        _SECTION_RE.match(lines[i].strip()) or lines[i].lstrip().startswith(":")
    ):
        body.append(lines[i])
        i += 1
    current: Optional[list[str]] = None
    while i < len(lines):
        line = lines[i]
        head = _SECTION_RE.match(line.strip())
        if head:
            numpy = i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}
            i += 2 if numpy else 1
            if head.group(1).lower() in _PARAM_SECTIONS:
                i = _param_section(lines, i, numpy, params)
            continue
        sphinx = _SPHINX_RE.match(line.strip())
        if sphinx:
            current = params.setdefault(sphinx.group(1), [])
            current.append(sphinx.group(2))
        elif current is not None and line.strip() and not line.lstrip().startswith(":"):
            current.append(line.strip())
        else:
            current = None
        i += 1
    text = "\n".join(body).strip()
    # Join wrapped lines, keep paragraph breaks.
    text = "\n\n".join(" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip())
    return text, {k: " ".join(" ".join(v).split()) for k, v in params.items()}


def _param_section(lines: list[str], i: int, numpy: bool, params: dict[str, list[str]]) -> int:
    base: Optional[int] = None
    current: Optional[list[str]] = None
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if _SECTION_RE.match(line.strip()) or (base is not None and _indent(line) < base):
            break
        if base is None:
            base = _indent(line)
        if _indent(line) == base:
            match = (_NUMPY_RE if numpy else _GOOGLE_RE).match(line.strip())
            if match is None:
                break
            current = params.setdefault(match.group(1), [])
            if not numpy:
                current.append(match.group(2))
        elif current is not None:
            current.append(line.strip())
        i += 1
    return i
