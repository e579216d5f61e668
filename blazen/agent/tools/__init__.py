"""Tools: a Python function's type hints and docstring become the schema the model sees.

:mod:`.tool` defines :class:`Tool` and ``@tool``; the type-hint schemas, the argument
checks and the docstring reading it uses live in :mod:`blazen._schema` (typed output
shares them).
"""

from __future__ import annotations

from .tool import Tool, tool

__all__ = ["Tool", "tool"]
