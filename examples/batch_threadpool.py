"""A thread-pool job: 50 prompts streamed at once through one shared model.

One model is shared by every thread (its connection pool is sized by max_connections);
each worker calls the blocking Streaming.complete and gets its own callbacks on its own
thread. A progress line counts finished streams.

    python examples/batch_threadpool.py
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed

from _demo import model_or_demo, paced, rhyme

from blazen import BlazenError, Llm, Streaming
from blazen.testing import Reply, openai_sse

PROMPTS = [
    f"Give me one word that rhymes with {w}." for w in ["cat", "tree", "day", "light", "moon"] * 10
]

model = model_or_demo(
    respond=lambda request: Reply.sse(paced(openai_sse([rhyme(request)]), 0.05)),
    max_connections=16,
)
lock = threading.Lock()
finished = failed = 0


def one(prompt: str) -> str:
    global finished, failed
    req = Llm.completion_request([Llm.user(prompt)], max_tokens=16)
    parts: list[str] = []
    errors: list[BlazenError] = []
    Streaming.complete(
        model,
        req,
        on_chunk=lambda c: parts.append(c.content_delta or ""),
        on_error=errors.append,
        timeout=60,
    )
    with lock:
        finished += 1
        failed += bool(errors)
        print(
            f"\r[{finished}/{len(PROMPTS)} done, {failed} failed]",
            end="",
            file=sys.stderr,
            flush=True,
        )
    return "".join(parts) if not errors else f"<{errors[0].kind}: {errors[0].message}>"


with ThreadPoolExecutor(max_workers=16) as pool:
    futures = {pool.submit(one, p): p for p in PROMPTS}
    answers = {futures[f]: f.result() for f in as_completed(futures)}
print(file=sys.stderr)
for prompt in PROMPTS[:5]:
    print(f"{prompt} -> {answers[prompt]}")
sys.exit(1 if failed else 0)
