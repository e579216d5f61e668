"""An embedding: one packed vector of floats per input, in input order."""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Optional

import attrs

from .completion import TokenUsage
from .frozen import by_value, immutable

__all__ = ["EmbeddingResponse", "Vector"]

#: One embedding: an ``array.array("f")`` of 32-bit floats, the precision embedding models
#: produce and OpenAI's base64 encoding carries. A sequence of Python floats on access,
#: four bytes a number at rest (a list of floats costs eight times that), and a buffer that
#: ``numpy.frombuffer(v, dtype="float32")`` reads without a copy.
if TYPE_CHECKING:
    Vector = array[float]
else:  # array is subscriptable only from Python 3.12
    Vector = array


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class EmbeddingResponse:
    """What ``model.embed(texts)`` returns: ``vectors[i]`` embeds ``texts[i]``.

    ``usage`` is the tokens the provider reported over every batch (None when it reports
    none, as Gemini's ``batchEmbedContents`` does); ``model`` the model it said it used.
    Treat the vectors as read-only: they are shared with whoever holds this response.
    """

    vectors: tuple[Vector, ...]
    usage: Optional[TokenUsage] = None
    model: Optional[str] = None

    def __len__(self) -> int:
        """How many vectors (one per input)."""
        return len(self.vectors)

    @property
    def dimensions(self) -> int:
        """The length of each vector (0 when there are none)."""
        return len(self.vectors[0]) if self.vectors else 0
