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
import threading

from _demo import model_or_demo, paced, rhyme

from blazen import Llm, batch
from blazen.testing import RecordedRequest, Reply, openai_sse

WORDS = ["cat", "tree", "day", "light", "moon"]
LIMITED = Reply.json(
    {"error": {"message": "Rate limit reached"}}, status=429, headers={"Retry-After": "0.2"}
)
served = itertools.count()
served_lock = threading.Lock()  # the demo server answers each connection on its own thread


def demo_reply(request: RecordedRequest) -> Reply:
    """A 429 for one request in ten of the first 60, else the rhyme the prompt asks for."""
    with served_lock:
        n = next(served)
    if n < 60 and n % 10 == 0:
        return LIMITED
    usage = {"prompt_tokens": 9, "completion_tokens": 2}
    return Reply.sse(paced(openai_sse([rhyme(request)], usage=usage), 0.01))


model = model_or_demo(respond=demo_reply, max_retries=0)
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
