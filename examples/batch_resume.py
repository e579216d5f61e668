"""A batch job that survives a crash: 200 prompts into a JSONL file, resumed where it stopped.

The first run is cut short after 80 prompts (as a crash or Ctrl-C would); the second run,
with the same ``out=``, skips the 80 ids already in the file and does the other 120. Rate
limits along the way (the demo server answers some requests 429) lower the concurrency,
wait, and retry: they do not fail items.

    python examples/batch_resume.py [results.jsonl]
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile

from _demo import model_or_demo, paced

from blazen import Llm, batch
from blazen.testing import Reply, openai_sse

WORDS = ["cat", "tree", "day", "light", "moon"]
OK = Reply.sse(
    paced(openai_sse(["Hat", "."], usage={"prompt_tokens": 9, "completion_tokens": 2}), 0.01)
)
LIMITED = Reply.json(
    {"error": {"message": "Rate limit reached"}}, status=429, headers={"Retry-After": "0.2"}
)

# Demo replies: a 429 for one request in ten at first, then every answer is fine.
model = model_or_demo(
    [LIMITED if i % 10 == 0 else OK for i in range(60)], default=OK, max_retries=0
)
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "results.jsonl")


def prompts():
    """(id, request) pairs, made as the run asks for them: a generator of any length."""
    for i in range(200):
        word = WORDS[i % len(WORDS)]
        req = Llm.completion_request(
            [Llm.user(f"One word that rhymes with {word}.")], max_tokens=16
        )
        yield f"prompt-{i}", req


# The first run "crashes" after 80 prompts: only those are in the file.
print("first run: ", batch.run(model, itertools.islice(prompts(), 80), concurrency=16, out=out))
# The same call again: the 80 finished ids are skipped, the rest are done.
report = batch.run(model, prompts(), concurrency=16, out=out)
print("second run:", report)

records = list(batch.read(out))
print(f"{len(records)} results in {out}, {len({r['id'] for r in records})} distinct ids")
for record in records[:3]:
    print(f"  {record['id']}: {record.get('text', record.get('error'))}")
sys.exit(0 if report.failed == 0 and len(records) == 200 else 1)
