"""The same request through any provider: switching is one command-line flag.

    python examples/switch_provider.py --provider anthropic "Tell me a joke."
    python examples/switch_provider.py --provider gemini --model gemini-2.5-pro
    python examples/switch_provider.py --provider ollama --offline

Keys come from each provider's usual environment variable (OPENAI_API_KEY,
ANTHROPIC_API_KEY, GEMINI_API_KEY, ...). When none is set, or with ``--offline``, or when
a local server (Ollama, LM Studio, vLLM, llama.cpp) is not running, the script says so and
replays a recorded stream of that provider's wire format from ``tests/fixtures`` on a
local :class:`blazen.testing.StreamServer`: the code path is the real one, only the bytes
are canned.
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlsplit

import blazen
import blazen.providers
from blazen import Llm, Providers, Streaming
from blazen.testing import Reply, StreamServer

# Every provider of blazen's one registry that this demo can stand up a local replay for
# (openai_compat needs a base URL of your own: see examples/joke.py).
PROVIDERS = tuple(name for name in blazen.providers.PROVIDERS if name != "openai_compat")
LOCAL = tuple(
    name
    for name, info in blazen.providers.PROVIDERS.items()
    if not info.key_required and name != "openai_compat"
)
FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def recorded_reply(provider: str) -> tuple[Reply, str]:
    """A recorded answer in ``provider``'s wire format, and where it came from."""
    wire = blazen.providers.PROVIDERS[provider].wire
    if wire == "ollama":
        path = FIXTURES / "ollama" / "text.ndjson"
        reply = Reply(headers={"Content-Type": "application/x-ndjson"}, body=[path.read_bytes()])
    else:
        path = FIXTURES / wire / "text.sse"
        reply = Reply.sse(path.read_bytes())
    return reply, str(path.relative_to(FIXTURES.parent.parent))


def replay_model(provider: str, server: StreamServer, model: Optional[str]) -> blazen.ChatModel:
    """``Providers.<provider>`` pointed at the local replay server."""
    base = {"gemini": server.url + "/v1beta"}.get(provider, server.url)
    if provider not in ("anthropic", "gemini", "ollama", "azure"):
        base = server.base_url
    factory = getattr(Providers, provider)
    return factory(api_key="offline-demo-key", model=model, base_url=base)  # type: ignore[no-any-return]


def server_is_up(base_url: str) -> bool:
    """Whether something listens at ``base_url`` (for local servers)."""
    parts = urlsplit(base_url)
    try:
        with socket.create_connection((parts.hostname or "localhost", parts.port or 80), 0.5):
            return True
    except OSError:
        return False


def run(provider: str, prompt: str, model_name: Optional[str], offline: bool) -> int:
    """Stream ``prompt`` from ``provider``; return a process exit status."""
    req = Llm.completion_request([Llm.system("You are terse."), Llm.user(prompt)], max_tokens=256)
    reason = "--offline was given" if offline else ""
    model: Optional[blazen.ChatModel] = None
    if not offline:
        try:
            model = getattr(Providers, provider)(model=model_name)
        except (blazen.AuthError, blazen.ValidationError) as exc:
            reason = str(exc)
        if model is not None and provider in LOCAL and not server_is_up(model.base_url):
            reason = f"no {provider} server answers at {model.base_url}"
            model = None

    def handler(kind: str, *args: Any) -> None:
        if kind == "chunk":
            print(args[0].content_delta or "", end="", flush=True)
        elif kind == "done":
            finish, usage = args
            tokens = f", {usage.total_tokens} tokens" if usage else ""
            print(f"\n[{provider}: done, finish_reason={finish!r}{tokens}]")
        else:
            print(f"\n[{provider}: {args[0].kind} error: {args[0]}]", file=sys.stderr)

    if model is not None:
        print(f"[{provider}: streaming from {model.base_url} with model {model.model}]",
              file=sys.stderr)
        return 0 if Streaming.complete(model, req, handler) is not None else 1
    reply, source = recorded_reply(provider)
    print(f"[{provider}: {reason}; replaying the recorded stream {source} on a local test server]",
          file=sys.stderr)
    with StreamServer([reply]) as server:
        model = replay_model(provider, server, model_name)
        ok = Streaming.complete(model, req, handler) is not None
    return 0 if ok else 1


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse the command line and stream once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt", nargs="?", default="Tell me a joke.")
    parser.add_argument("--provider", choices=PROVIDERS, default="openai")
    parser.add_argument("--model", default=None, help="the provider's model id (or deployment)")
    parser.add_argument(
        "--offline", action="store_true", help="replay a recorded stream instead of calling out"
    )
    args = parser.parse_args(argv)
    return run(args.provider, args.prompt, args.model, args.offline)


if __name__ == "__main__":
    sys.exit(main())
