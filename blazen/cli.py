"""The ``blazen`` command: ``blazen chat "prompt"`` streams a completion to the terminal.

``blazen batch PROMPTS.jsonl --out results.jsonl`` runs a file of prompts (see
:mod:`blazen.cli_batch`); it picks its model the same way.

Which model answers:

1. ``--provider NAME`` picks ``Providers.NAME`` (any provider of the registry,
   :data:`blazen.providers.PROVIDERS`), with ``--model`` and ``--base-url`` passed on;
   ``--provider local`` (or ``--gguf FILE``) runs a model on this machine.
2. ``--base-url URL`` alone means an OpenAI-compatible server at that URL (key, if it needs
   one, from ``OPENAI_COMPAT_API_KEY``).
3. Otherwise the first provider whose key is in the environment (``OPENAI_API_KEY``...), in
   the order of :data:`blazen.providers.PROVIDERS`.
4. Otherwise the local model (``blazen.local``); a line on stderr says so.

With ``--json``, stdout carries one JSON object per line: ``chunk`` events, then exactly one
``done`` or ``error``. Exit status: 0 after done, 1 after an error, 2 for bad arguments (an
empty prompt too: nothing is sent), 130 after Ctrl-C, 141 (128 + SIGPIPE, what a shell
shows for ``yes`` in ``yes | head``) when stdout's reader went away (``blazen chat ... |
head``): the stream is cancelled and nothing more is printed. What stdout's encoding cannot
show (emoji on an ASCII or Latin-1 terminal) is written as ``?`` in text and as ``\\uXXXX``
escapes in JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, Callable, Optional, TextIO

from . import cli_batch
from ._llm import Llm
from ._stream import ChatModel, Streaming
from ._types import StreamChunk, TokenUsage
from ._version import __version__
from .errors import BlazenError
from .providers import PROVIDERS, Providers, key_variables

__all__ = ["main"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
#: 128 + SIGPIPE, what a shell reports for ``yes | head -1``'s ``yes``.
EXIT_BROKEN_PIPE = 141
EXIT_STATUSES = (
    "exit status: 0 done, 1 error, 2 bad arguments (an empty prompt too), 130 Ctrl-C, "
    "141 stdout's reader went away (blazen chat ... | head): the stream is cancelled"
)

# Defaults for the bundled model when none are given. Gemma 3 270M is a base model, not an
# instruction-tuned one: it rambles on until stopped, and at llama-cpp-python's own
# temperature (0.2) it mostly repeats itself.
LOCAL_MAX_TOKENS = 128
LOCAL_TEMPERATURE = 0.7


class _UsageError(Exception):
    """A choice on the command line that cannot work (exit status 2)."""


def _factory(name: str) -> Callable[..., ChatModel]:
    info = PROVIDERS.get(name.replace("-", "_"))
    if info is None:
        names = ", ".join(["local", *sorted(PROVIDERS)])
        msg = f"unknown provider {name!r}; choose one of: {names}"
        raise _UsageError(msg)
    factory: Callable[..., ChatModel] = getattr(Providers, info.name)
    return factory


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="blazen",
        description="Stream LLM chat completions from the command line.",
        epilog=EXIT_STATUSES,
    )
    parser.add_argument("--version", action="version", version=f"blazen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    chat = sub.add_parser(
        "chat",
        help="stream one completion to stdout",
        description=(
            "Stream one completion to stdout. With no --provider and no API key in the "
            "environment, a model on this machine answers (pip install 'blazen[local]'). "
            "Text stdout's encoding cannot show is written as '?' (as \\uXXXX in --json)."
        ),
        epilog=EXIT_STATUSES,
    )
    chat.add_argument("prompt", nargs="?", default="-", help="the user message ('-': stdin)")
    chat.add_argument(
        "--provider",
        help="a Providers factory (openai, openai_compat, ...) or 'local' for this machine",
    )
    chat.add_argument("--model", help="the model id (default: the provider's default)")
    chat.add_argument("--base-url", help="the API's base URL (an OpenAI-compatible one alone)")
    chat.add_argument("--system", help="a system prompt")
    chat.add_argument("--max-tokens", type=int, help=f"local default: {LOCAL_MAX_TOKENS}")
    chat.add_argument("--temperature", type=float, help=f"local default: {LOCAL_TEMPERATURE}")
    chat.add_argument("--timeout", type=float, help="total seconds for the whole stream")
    chat.add_argument(
        "--json", action="store_true", help="print one JSON event per line (chunk/done/error)"
    )
    chat.add_argument("--gguf", help="local: a GGUF model file (default: bundled Gemma 3 270M)")
    chat.add_argument("--chat-format", help="local: llama-cpp-python's chat format")
    cli_batch.add_parser(sub)
    return parser


def _fits(text: str, stream: TextIO) -> bool:
    """Whether ``stream``'s encoding can write ``text`` as it is."""
    if text.isascii():
        return True
    try:
        text.encode(getattr(stream, "encoding", None) or "utf-8")
    except UnicodeEncodeError:
        return False
    except LookupError:
        return True  # an encoding Python does not know: let the stream itself decide
    return True


def _showable(text: str, stream: TextIO) -> str:
    """``text`` with what ``stream``'s encoding cannot write replaced by ``?``."""
    if _fits(text, stream):
        return text
    # An ASCII or Latin-1 terminal, or a lone surrogate from the server: show the rest.
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return text.encode(encoding, "replace").decode(encoding)


def _silence(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at the null device.

    Its buffer still holds what could not be written; without this, Python's flush at exit
    fails again and prints "Exception ignored ... BrokenPipeError" (the recipe of the Python
    docs' signal module page, "Note on SIGPIPE").
    """
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return  # not a file (a StringIO): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class _Output:
    """Writes what the stream delivers: text for people, or one JSON event per line.

    Every write to stdout goes through :meth:`_write`: when stdout's reader has gone away
    (``blazen chat ... | head``) it remembers so (exit status 141), stops writing, and raises
    :class:`BrokenPipeError` in :meth:`chunk`, which aborts the stream and closes its
    connection. What the encoding of stdout cannot show is replaced (text) or escaped (JSON).
    """

    def __init__(self, as_json: bool, out: TextIO, err: TextIO) -> None:
        self.as_json = as_json
        self.out = out
        self.err = err
        self.line_open = False
        #: Whether a done or error was reported.
        self.ended = False
        #: Set when stdout's reader went away (``blazen chat ... | head``).
        self.broken_pipe = False
        #: The refusal deltas so far (the model declining to answer).
        self.refusal: list[str] = []

    def _write(self, text: str) -> None:
        """Write to stdout now; raises BrokenPipeError once its reader has gone away."""
        if self.broken_pipe:
            raise BrokenPipeError(errno.EPIPE, "stdout's reader went away")
        try:
            self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            self.broken_pipe = True
            _silence(self.out)
            raise

    def _write_last(self, text: str) -> None:
        """Write a done or error to stdout; nobody to tell if its reader has gone."""
        with contextlib.suppress(BrokenPipeError):  # the exit status says so
            self._write(text)

    def _event(self, payload: dict[str, Any], last: bool = False) -> None:
        line = json.dumps(payload, ensure_ascii=False)
        if not _fits(line, self.out):
            line = json.dumps(payload)  # \uXXXX escapes: the same JSON, in ASCII
        (self._write_last if last else self._write)(line + "\n")

    def note(self, text: str) -> None:
        try:
            self.err.write(_showable(f"blazen: {text}\n", self.err))
            self.err.flush()
        except BrokenPipeError:
            _silence(self.err)  # ``2>&1 | head``: stderr's reader is gone too

    def chunk(self, chunk: StreamChunk) -> None:
        if self.as_json:
            self._event(
                {
                    "event": "chunk",
                    "content": chunk.content_delta,
                    "reasoning": chunk.reasoning_delta,
                    "tool_calls": [
                        {"id": t.id, "name": t.name, "arguments": t.arguments_json}
                        for t in chunk.tool_calls
                    ],
                    "is_final": chunk.is_final,
                    "refusal": chunk.refusal_delta,
                }
            )
        elif chunk.content_delta:
            self._write(_showable(chunk.content_delta, self.out))
            self.line_open = not chunk.content_delta.endswith("\n")
        refusal = chunk.refusal_delta
        if refusal:
            if not self.as_json:
                # The refusal is the model's answer too: on its own line after any text.
                start = "\n" if self.line_open and not self.refusal else ""
                self._write(_showable(start + refusal, self.out))
                self.line_open = not refusal.endswith("\n")
            self.refusal.append(refusal)

    def done(self, finish_reason: str, usage: Optional[TokenUsage]) -> None:
        self.ended = True
        if self.as_json:
            self._event(
                {
                    "event": "done",
                    "finish_reason": finish_reason,
                    "usage": None
                    if usage is None
                    else {
                        "prompt_tokens": usage.prompt_tokens,
                        "completion_tokens": usage.completion_tokens,
                        "total_tokens": usage.total_tokens,
                    },
                    "refusal": "".join(self.refusal) if self.refusal else None,
                },
                last=True,
            )
        else:
            self._end_line()
            if self.refusal:
                self.note(f"the model declined to answer (finish reason {finish_reason})")

    def error(self, err: BlazenError) -> None:
        if self.broken_pipe:
            # The stream was aborted because nobody reads stdout: nothing to report. (Not
            # "its cause is a BrokenPipeError": that may be the socket to the provider.)
            self.ended = True
            return
        self.failure(err.kind, type(err).__name__, err.message, err.provider, err.status)

    def failure(
        self,
        kind: str,
        type_name: str,
        message: str,
        provider: Optional[str] = None,
        status: Optional[int] = None,
    ) -> None:
        """Report how it failed: an ``error`` event, and a line on stderr."""
        self.ended = True
        if self.as_json:
            self._event(
                {
                    "event": "error",
                    "kind": kind,
                    "type": type_name,
                    "message": message,
                    "provider": provider,
                    "status": status,
                },
                last=True,
            )
        self._end_line()
        self.note("interrupted" if kind == "cancelled" else f"error: {message}")

    def _end_line(self) -> None:
        if self.line_open:
            self.line_open = False
            self._write_last("\n")


def _build_model(args: argparse.Namespace, output: _Output) -> tuple[ChatModel, Any]:
    """The model to stream from, and the local server to stop afterwards (or None)."""
    provider = args.provider
    local = provider == "local" or (provider is None and args.gguf is not None)
    if provider is None and not local and args.base_url is None:
        # The registry's order: the first provider whose key variable is set answers.
        for var, info in key_variables():
            if os.environ.get(var, "").strip():
                provider = info.name
                output.note(f"{var} is set: using {provider}")
                break
        else:
            local = True
            output.note(
                "no --provider and no API key in the environment: using the local model "
                "(llama-cpp-python on this machine)"
            )
    if local:
        return _start_local(args, output)
    if args.gguf is not None or args.chat_format is not None:
        msg = "--gguf and --chat-format apply only to --provider local"
        raise _UsageError(msg)
    if provider is None or provider.replace("-", "_") == "openai_compat":
        if args.base_url is None:
            msg = "--provider openai_compat needs --base-url"
            raise _UsageError(msg)
        return Providers.openai_compat("openai-compat", args.base_url, model=args.model), None
    factory = _factory(provider)
    kwargs = {"model": args.model, "base_url": args.base_url}
    return factory(**{k: v for k, v in kwargs.items() if v is not None}), None


def _start_local(args: argparse.Namespace, output: _Output) -> tuple[ChatModel, Any]:
    # Imported here: the subprocess machinery is not needed for remote providers.
    from . import local

    if args.base_url is not None:
        msg = "--base-url does not apply to the local model (it picks its own port)"
        raise _UsageError(msg)
    server = local.LocalServer(args.gguf, chat_format=args.chat_format)
    try:
        server.start()
    except ImportError as exc:
        if args.provider is None and args.gguf is None:
            msg = f"{exc}; or set an API key (OPENAI_API_KEY...) or pass --provider"
            raise ImportError(msg) from exc
        raise
    output.note(
        f"local model {server.alias} ready at {server.base_url} "
        f"(pid {server.pid}) in {server.startup_seconds:.1f} s"
    )
    if args.max_tokens is None:
        args.max_tokens = LOCAL_MAX_TOKENS
    if args.temperature is None:
        args.temperature = LOCAL_TEMPERATURE
    if args.system is not None and args.gguf is None and args.chat_format in (None, "gemma"):
        output.note("Gemma's chat format has no system role: the server ignores --system")
    return server.model, server


def _prompt(args: argparse.Namespace) -> str:
    if args.prompt != "-":
        prompt = str(args.prompt)
    elif sys.stdin is None or sys.stdin.isatty():
        msg = 'give a prompt: blazen chat "Say hi" (or pipe one in)'
        raise _UsageError(msg)
    else:
        prompt = sys.stdin.read()
    if not prompt.strip():
        source = " (stdin held nothing but whitespace)" if args.prompt == "-" else ""
        msg = f'the prompt is empty{source}; nothing was sent. Give one: blazen chat "Say hi"'
        raise _UsageError(msg)
    return prompt


def _chat(args: argparse.Namespace, output: _Output) -> int:
    server = None
    try:
        prompt = _prompt(args)
        model, server = _build_model(args, output)
        req = Llm.completion_request(
            [Llm.user(prompt)],
            system=args.system,
            max_tokens=args.max_tokens,
            temperature=args.temperature,
        )
        resp = Streaming.complete(
            model,
            req,
            on_chunk=output.chunk,
            on_done=output.done,
            on_error=output.error,
            timeout=args.timeout,
        )
        return EXIT_OK if resp is not None else EXIT_ERROR
    except KeyboardInterrupt:
        # Streaming.complete has reported a cancelled stream through on_error already; a
        # Ctrl-C before the stream started (say, while the local model loads) is told here.
        if not output.ended:
            output.failure("cancelled", "CancelledError", "interrupted by Ctrl-C")
        return EXIT_INTERRUPTED
    finally:
        if server is not None:
            server.stop()


def _batch(args: argparse.Namespace, output: _Output) -> int:
    server = None
    try:
        model, server = _build_model(args, output)
        return cli_batch.run(args, model, output.note)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED  # batch.run has printed its report and how to resume
    finally:
        if server is not None:
            server.stop()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``blazen`` command with ``argv`` (default: ``sys.argv[1:]``); return its status."""
    parser = _parser()
    args = parser.parse_args(argv)
    output = _Output(args.json, sys.stdout, sys.stderr)
    code = _run(parser, args, output)
    # Whatever else happened, stdout's reader went away first: say so as a shell would.
    return EXIT_BROKEN_PIPE if output.broken_pipe else code


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, output: _Output) -> int:
    try:
        return _batch(args, output) if args.command == "batch" else _chat(args, output)
    except _UsageError as exc:
        parser.print_usage(sys.stderr)
        output.note(f"error: {exc}")
        return EXIT_USAGE
    except (ValueError, TypeError) as exc:
        # A value blazen refused before anything started (a bad --base-url, --max-tokens 0).
        parser.print_usage(sys.stderr)
        output.note(f"error: {exc}")
        return EXIT_USAGE
    except BlazenError as exc:
        # Failures before the stream starts (no key, the local server did not start): one
        # error event for scripts, one message for people, as a failed stream gives.
        output.error(exc)
        return EXIT_ERROR
    except (ImportError, OSError) as exc:
        output.failure("unavailable", type(exc).__name__, str(exc))
        return EXIT_ERROR
