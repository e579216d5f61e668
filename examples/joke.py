"""The seeds' first example: one block-form handler streams a joke to the terminal.

python examples/joke.py
"""

from __future__ import annotations

import sys

from _demo import model_or_demo, paced

import blazen
from blazen import Llm, Streaming
from blazen.testing import Reply, openai_sse

JOKE = [
    "Why ",
    "do ",
    "Python ",
    "programmers ",
    "prefer ",
    "callbacks? ",
    "Because ",
    "they ",
    "never ",
    "block ",
    "on ",
    "a ",
    "punchline.",
]

blazen.init()
model = model_or_demo(
    [
        Reply.sse(
            paced(
                openai_sse(
                    JOKE, usage={"prompt_tokens": 21, "completion_tokens": 13, "total_tokens": 34}
                )
            )
        )
    ]
)
req = Llm.completion_request(
    messages=[
        Llm.system("You are a helpful assistant."),
        Llm.user("Tell me a short joke about Python callbacks."),
    ],
    max_tokens=256,
)


def handler(kind: str, *args: object) -> None:
    if kind == "chunk":
        chunk = args[0]
        assert isinstance(chunk, blazen.StreamChunk)
        print(chunk.content_delta or "", end="", flush=True)
    elif kind == "done":
        reason, usage = args
        tokens = usage.completion_tokens if isinstance(usage, blazen.TokenUsage) else "?"
        print(f"\nFinished: {reason} ({tokens} tokens)")
    elif kind == "error":
        err = args[0]
        print(f"\nStream failed: {type(err).__name__}: {err}", file=sys.stderr)


response = Streaming.complete(model, req, handler)
blazen.shutdown()
sys.exit(0 if response is not None else 1)
