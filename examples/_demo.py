"""Shared by the examples: a real model when one is configured, else a canned local stream.

Set ``BLAZEN_BASE_URL`` (any OpenAI-compatible server, e.g. ``http://127.0.0.1:8080/v1``)
or ``OPENAI_API_KEY`` to talk to a real model. With neither, the example replays recorded
wire bytes from a ``blazen.testing.StreamServer`` on loopback, and says so on stderr.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Callable, Sequence

import blazen
from blazen.testing import Pause, RecordedRequest, Reply, StreamServer


def model_or_demo(
    replies: Sequence[Reply] = (),
    *,
    default: Reply | None = None,
    respond: Callable[[RecordedRequest], Reply] | None = None,
    **options: object,
) -> blazen.ChatModel:
    """A model from the environment, or one bound to a local server replaying ``replies``
    (then ``respond(request)``, or ``default``, for every further request)."""
    base_url = os.environ.get("BLAZEN_BASE_URL")
    if base_url:
        return blazen.Providers.openai_compat(
            "local", base_url, model=os.environ.get("BLAZEN_MODEL", "default"), **options
        )
    if os.environ.get("OPENAI_API_KEY"):
        return blazen.Providers.openai(
            model=os.environ.get("BLAZEN_MODEL", "gpt-4o-mini"), **options
        )
    server = StreamServer(replies, default=default, respond=respond).start()
    atexit.register(server.stop)
    print(
        f"[demo] no BLAZEN_BASE_URL or OPENAI_API_KEY: replaying a recorded stream from "
        f"{server.base_url}",
        file=sys.stderr,
    )
    return blazen.Providers.openai_compat("demo", server.base_url, **options)


RHYMES = {"cat": "Hat.", "tree": "Bee.", "day": "Play.", "light": "Night.", "moon": "Spoon."}


def rhyme(request: RecordedRequest) -> str:
    """The recorded answer to "... rhymes with WORD.": one per word, as a model would vary."""
    prompt = request.json()["messages"][-1]["content"]
    word = prompt.rstrip(".").split()[-1]
    return RHYMES.get(word, "Word.")


def paced(events: Sequence[bytes], seconds: float = 0.04) -> list[bytes | Pause]:
    """One write per event with a pause between them, as a model would produce tokens."""
    out: list[bytes | Pause] = []
    for event in events:
        out += [event, Pause(seconds)]
    return out
