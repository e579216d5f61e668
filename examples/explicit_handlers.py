"""The seeds' second example: named callbacks passed as keywords.

python examples/explicit_handlers.py
"""

from __future__ import annotations

import sys
from typing import Optional

from _demo import model_or_demo, paced

from blazen import BlazenError, Llm, StreamChunk, Streaming, TokenUsage
from blazen.testing import Reply, openai_sse

model = model_or_demo(
    [
        Reply.sse(
            paced(
                openai_sse(
                    ["Callbacks ", "keep ", "legacy ", "code ", "streaming."],
                    usage={"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14},
                )
            )
        )
    ]
)
req = Llm.completion_request(
    messages=[Llm.user("Say something about callbacks in five words.")], max_tokens=64
)


def on_chunk(chunk: StreamChunk) -> None:
    sys.stdout.write(chunk.content_delta or "")
    sys.stdout.flush()


def on_done(reason: str, usage: Optional[TokenUsage]) -> None:
    print(f"\n[done: {reason}; tokens={usage.total_tokens if usage else None}]")


def on_error(err: BlazenError) -> None:
    print(f"stream error ({err.kind}): {err.message}", file=sys.stderr)


response = Streaming.complete(model, req, on_chunk=on_chunk, on_done=on_done, on_error=on_error)
sys.exit(0 if response is not None else 1)
