"""``blazen batch PROMPTS.jsonl --out results.jsonl``: :func:`blazen.batch.run` from a shell.

Each line of the input is ``{"id": ..., "prompt": "..."}`` or ``{"id": ..., "messages":
[{"role": ..., "content": ...}, ...]}``; without an ``id`` the line's position (from 0) is
the id. The input is read as the run goes, so its size does not matter. Running the same
command again resumes: ids already in ``--out`` are skipped. Exit status: 0 when every item
succeeded, 1 when some failed (their errors are in ``--out``), 2 for bad arguments or a bad
input line, 130 after Ctrl-C (the report and how to resume are on stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import Any, Callable, Optional, TextIO

from .. import batch
from .._codec import loads
from .._llm import Llm
from .._stream import ChatModel
from .._types import ChatMessage, CompletionRequest
from ..errors import ValidationError

__all__ = ["add_parser", "pending", "read_prompts", "run"]

EXIT_STATUSES = (
    "exit status: 0 all ok, 1 some items failed (see --out), 2 bad arguments or input, "
    "130 Ctrl-C (run the same command again to resume)"
)

_ROLES: dict[str, Callable[[str], ChatMessage]] = {
    "system": Llm.system,
    "user": Llm.user,
    "assistant": Llm.assistant,
}


def add_parser(sub: Any, *, provider_help: str, api_key_help: str) -> None:
    """Add the ``batch`` subcommand to the ``blazen`` parser's subparsers."""
    cmd = sub.add_parser(
        "batch",
        help="run a JSONL file of prompts, resumable, into a JSONL file of results",
        # The module doc is reST; --help shows it as plain text.
        description=__doc__.split("\n\n")[1].replace("\n", " ").replace("``", ""),
        epilog=EXIT_STATUSES,
    )
    cmd.add_argument("input", help='a JSONL file of {"id", "prompt"} or {"id", "messages"}')
    cmd.add_argument("--out", required=True, help="the JSONL file of results (resumed if there)")
    cmd.add_argument("--concurrency", type=int, default=32, help="items at once (default 32)")
    cmd.add_argument("--provider", help=provider_help)
    cmd.add_argument("--api-key", help=api_key_help)
    cmd.add_argument("--model", help="the model id (default: the provider's default)")
    cmd.add_argument(
        "--fallback",
        action="append",
        default=[],
        metavar="NAME",
        help="a Providers factory to try next when the model fails before its first chunk; "
        "repeat for a longer chain",
    )
    cmd.add_argument(
        "--base-url", help="the API's base URL; without --provider, an OpenAI-compatible server's"
    )
    cmd.add_argument(
        "--api",
        choices=("chat", "responses"),
        help="OpenAI-format providers: chat completions (default) or the Responses API",
    )
    cmd.add_argument("--system", help="a system prompt for every item")
    cmd.add_argument("--max-tokens", type=int, help="for every item")
    cmd.add_argument("--temperature", type=float, help="for every item")
    cmd.add_argument("--timeout", type=float, help="total seconds per item")
    cmd.add_argument("--max-attempts", type=int, default=6, help="tries of a rate-limited item")
    cmd.add_argument("--retry-failed", action="store_true", help="run failed ids again")
    cmd.add_argument(
        "--via",
        choices=("stream", "provider"),
        default="stream",
        help="stream each item (default), or send them as the provider's own batches "
        "(OpenAI, Anthropic, Gemini: about half the price, answers within 24 hours; "
        "run the same command again to collect them)",
    )
    cmd.add_argument(
        "--poll-interval",
        type=float,
        default=5.0,
        help="with --via provider: seconds between polls",
    )
    cmd.add_argument(
        "--cancel-on-interrupt",
        action="store_true",
        help="with --via provider: Ctrl-C cancels the provider's batches (default: they run on)",
    )
    cmd.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr (default: when stderr is a terminal)",
    )
    cmd.set_defaults(gguf=None, chat_format=None, json=False)


def _message(value: Any, where: str) -> ChatMessage:
    if not isinstance(value, dict) or not isinstance(value.get("content"), str):
        msg = f'{where}: each message must be {{"role": ..., "content": "..."}}'
        raise ValueError(msg)
    make = _ROLES.get(value.get("role", ""))
    if make is None:
        msg = f"{where}: role must be one of {', '.join(_ROLES)}, got {value.get('role')!r}"
        raise ValueError(msg)
    return make(value["content"])


def read_prompts(
    lines: TextIO,
    name: str,
    *,
    system: Optional[str],
    max_tokens: Optional[int],
    temperature: Optional[float],
) -> Iterator[tuple[str, CompletionRequest]]:
    """``(id, request)`` per non-blank line of ``lines``; ``ValueError`` naming a bad line."""
    position = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"line {number} of {name}"
        try:
            record = loads(line, where)
        except ValidationError:
            record = None
        if not isinstance(record, dict):
            msg = f"{where} is not a JSON object"
            raise ValueError(msg)
        item_id = record.get("id", str(position))
        if isinstance(item_id, int) and not isinstance(item_id, bool):
            item_id = str(item_id)
        if not isinstance(item_id, str):
            msg = f"{where}: id must be a string or an integer"
            raise ValueError(msg)
        if isinstance(record.get("prompt"), str):
            messages = [Llm.user(record["prompt"])]
        elif isinstance(record.get("messages"), list) and record["messages"]:
            messages = [_message(m, where) for m in record["messages"]]
        else:
            msg = f'{where}: give "prompt" (a string) or "messages" (a list)'
            raise ValueError(msg)
        position += 1
        yield (
            item_id,
            Llm.completion_request(
                messages, system=system, max_tokens=max_tokens, temperature=temperature
            ),
        )


def pending(args: argparse.Namespace) -> Optional[int]:
    """How many input items are still to run, or None when that cannot be told in advance.

    Reads the input once, as the run will (a bad line raises ``ValueError`` naming it, a
    file that cannot be read ``OSError``), and the ids already in ``--out``. Not for stdin,
    which can be read only once, nor for ``--via provider``, whose rerun collects batches.
    """
    if args.input == "-" or args.via != "stream":
        return None
    done: set[str] = set()
    with contextlib.suppress(FileNotFoundError):
        done = {r["id"] for r in batch.read(args.out)
                if not (args.retry_failed and r.get("kind") == "error")}
    with open(args.input, encoding="utf-8") as lines:
        items = read_prompts(lines, args.input, system=args.system,
                             max_tokens=args.max_tokens, temperature=args.temperature)
        return sum(1 for item_id, _ in items if item_id not in done)


def run(args: argparse.Namespace, model: ChatModel, note: Callable[[str], None]) -> int:
    """Run ``blazen batch`` with ``model``; the report goes to stderr; return the status."""
    name = "stdin" if args.input == "-" else args.input
    source = (
        open(args.input, encoding="utf-8")  # noqa: SIM115 - closed by the with below
        if args.input != "-"
        else contextlib.nullcontext(sys.stdin)
    )
    with source as lines:
        requests = read_prompts(
            lines,
            name,
            system=args.system,
            max_tokens=args.max_tokens,
            temperature=args.temperature,
        )
        if args.via == "provider":
            report = batch.run(
                model,
                requests,
                out=args.out,
                retry_failed=args.retry_failed,
                progress=args.progress,
                via="provider",
                poll_interval=args.poll_interval,
                max_poll_interval=max(60.0, args.poll_interval),
                cancel_on_interrupt=args.cancel_on_interrupt,
            )
        else:
            report = batch.run(
                model,
                requests,
                concurrency=args.concurrency,
                out=args.out,
                retry_failed=args.retry_failed,
                max_attempts=args.max_attempts,
                progress=args.progress,
                timeout=args.timeout,
            )
    note(str(report))
    return 0 if report.failed == 0 else 1
