"""Batch runs: many requests through one model, bounded, resumable and rate-limit aware.

:func:`run` pulls requests as slots free up (:mod:`.run`), halves its concurrency on a
rate limit and grows it back (:mod:`.limiter`), appends each finished item to a JSONL file
that :func:`read` reads back and a rerun resumes from (:mod:`.results`), and runs each item
on any ``concurrent.futures.Executor`` (:mod:`.work`). Example::

    from blazen import batch

    report = batch.run(model, requests, concurrency=32, out="results.jsonl")
    print(report)

:func:`embed` does the same for embeddings (:mod:`.embed`): texts in, one vector a line
out, resumable.
"""

from __future__ import annotations

from .embed import EmbedReport, embed, vector
from .report import BatchReport
from .results import BatchResult, read
from .run import run

__all__ = ["BatchReport", "BatchResult", "EmbedReport", "embed", "read", "run", "vector"]
