"""Non-blocking: start a stream, keep working, cancel it when the user changes their mind.

Streaming.start returns a StreamHandle at once; the callbacks run on a background thread.

    python examples/start_cancel.py
"""

from __future__ import annotations

import sys
import time

from _demo import model_or_demo, paced

from blazen import CancelledError, Llm, Streaming
from blazen.testing import Reply, openai_sse

model = model_or_demo([Reply.sse(paced(openai_sse([f"word{i} " for i in range(100)]), 0.02))])
req = Llm.completion_request([Llm.user("Write a very long story.")], max_tokens=2000)

handle = Streaming.start(
    model,
    req,
    on_chunk=lambda c: print(c.content_delta or "", end="", flush=True),
    on_error=lambda e: print(f"\n[stream ended: {type(e).__name__}: {e}]"),
)
print("[started; the main thread is free]", file=sys.stderr)
time.sleep(0.5)  # ... the user clicks "stop" ...
handle.cancel()
try:
    handle.result(timeout=5)
except CancelledError as err:
    print(f"[cancelled after {len(err.partial)} characters]")
handle.join()
