"""How every value here is finished: :mod:`blazen._frozen`, one layer down.

The finishing helpers sit below the values (and below ``_schema``, whose ``OutputSpec`` is
finished the same way), so that importing them never runs this package's ``__init__``.
"""

from __future__ import annotations

from .._frozen import FrozenInstanceError, builder_class, by_value, immutable

__all__ = ["FrozenInstanceError", "builder_class", "by_value", "immutable"]
