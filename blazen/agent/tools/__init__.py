"""Tools: a Python function's type hints and docstring become the schema the model sees.

:mod:`.tool` defines :class:`Tool` and ``@tool``; :mod:`.hints` maps type hints to JSON
schema and converts arguments back; :mod:`.schema` checks arguments against a schema;
:mod:`.docstrings` reads parameter descriptions from Google, NumPy and Sphinx docstrings.
"""

from __future__ import annotations

from .tool import Tool, tool

__all__ = ["Tool", "tool"]
