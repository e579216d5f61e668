"""``via="provider"``: a batch run sent as the provider's own batches (about half the price).

:mod:`.run` drives it (reconcile, submit, collect), :mod:`.ledger` records beside ``out=``
what was sent so a rerun resumes, :mod:`.calls` makes the HTTP calls through the model's
pool, and :mod:`.openai`, :mod:`.anthropic` and :mod:`.gemini` speak each provider's batch
endpoints (:class:`~.api.BatchAPI`), encoding requests with the same wire code as streams.
"""

from __future__ import annotations

from .api import BatchAPI, BatchState, custom_id
from .choose import batch_api_for
from .ledger import ledger_path
from .run import run_via_provider

__all__ = [
    "BatchAPI",
    "BatchState",
    "batch_api_for",
    "custom_id",
    "ledger_path",
    "run_via_provider",
]
