"""``blazen embed TEXTS.jsonl --out vectors.jsonl``: :func:`blazen.batch.embed` from a shell.

Each line of the input is ``{"id": ..., "text": "..."}`` (without an ``id``, the line's
position from 0 is the id) or, in a file that is not JSON Lines, one text a line. The
input is read as the run goes. Running the same command again resumes: ids already in
``--out`` are skipped. Exit status: 0 when every text was embedded, 1 after an error (the
vectors written so far stay), 2 for bad arguments or a bad input line, 130 after Ctrl-C.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, Callable, TextIO

from .. import batch
from .._codec import loads
from .._stream import ChatModel
from ..errors import ValidationError

__all__ = ["add_parser", "read_texts", "run"]


def add_parser(sub: Any, *, provider_help: str, api_key_help: str) -> None:
    """Add the ``embed`` subcommand to the ``blazen`` parser's subparsers."""
    cmd = sub.add_parser(
        "embed",
        help="embed a JSONL file of texts, resumable, into a JSONL file of vectors",
        description=__doc__.split("\n\n")[1].replace("\n", " ").replace("``", ""),
    )
    cmd.add_argument("input", help='{"id", "text"} JSON Lines (or one text a line); - is stdin')
    cmd.add_argument("--out", required=True, help="the JSONL file of vectors (resumed if there)")
    cmd.add_argument("--provider", help=provider_help)
    cmd.add_argument("--api-key", help=api_key_help)
    cmd.add_argument("--model", help="the embedding model (default: the provider's default)")
    cmd.add_argument(
        "--base-url", help="the API's base URL; without --provider, an OpenAI-compatible server's"
    )
    cmd.add_argument("--dimensions", type=int, help="shorter vectors, where the model can")
    cmd.add_argument("--concurrency", type=int, help="requests in flight at once (default 4)")
    cmd.set_defaults(gguf=None, chat_format=None, json=False, api=None, fallback=[])


def read_texts(lines: TextIO, name: str) -> Iterator[tuple[str, str]]:
    """``(id, text)`` per non-blank line; ``ValueError`` naming a bad JSON line."""
    position = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"line {number} of {name}"
        if line.lstrip().startswith("{"):
            try:
                record = loads(line, where)
            except ValidationError:
                record = None
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                msg = f'{where}: give {{"id": ..., "text": "..."}}'
                raise ValueError(msg)
            item_id = record.get("id", str(position))
            if isinstance(item_id, int) and not isinstance(item_id, bool):
                item_id = str(item_id)
            if not isinstance(item_id, str):
                msg = f"{where}: id must be a string or an integer"
                raise ValueError(msg)
            text = record["text"]
        else:
            item_id, text = str(position), line.rstrip("\r\n")
        position += 1
        yield item_id, text


def run(args: Any, model: ChatModel, note: Callable[[str], None]) -> int:
    """Run ``blazen embed`` with ``model``; the report goes to stderr; return the status."""
    name = "stdin" if args.input == "-" else args.input
    source = (
        open(args.input, encoding="utf-8")  # noqa: SIM115 - closed by the with below
        if args.input != "-"
        else contextlib.nullcontext(sys.stdin)
    )
    with source as lines:
        report = batch.embed(
            model,
            read_texts(lines, name),
            out=args.out,
            dimensions=args.dimensions,
            embedding_model=args.model,
            concurrency=args.concurrency,
        )
    note(str(report))
    return 0
