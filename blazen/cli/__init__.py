"""The ``blazen`` command: ``blazen chat "prompt"`` streams a completion to the terminal.

``blazen batch PROMPTS.jsonl --out results.jsonl`` runs a file of prompts (see
:mod:`blazen.cli.batch_command`); it picks its model the same way.

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

With no prompt on a terminal (stdin and stdout both), ``blazen chat`` is an interactive
session (:mod:`.session`): the conversation is kept across turns, ``--continue FILE``
resumes a saved one, ``--stats`` reports tokens and speed after each answer.

Every wait of the command and what bounds it:

| wait                                        | bounded by                                    |
|---------------------------------------------|-----------------------------------------------|
| the stream (one-shot, or one turn)          | ``--timeout``, the model's connect and idle   |
|                                             | timeouts; Ctrl-C cancels it (exit 130, or the |
|                                             | session goes on)                              |
| the local model starting                    | its ``startup_timeout`` (300 s); Ctrl-C       |
| a prompt or an input file read from stdin   | its writer's end of file; Ctrl-C (exit 130)   |
| the interactive prompt                      | the person: Ctrl-D or ``/exit`` leaves        |
| writing to stdout                           | its reader; a reader gone is exit 141         |
| ``blazen batch``, ``blazen embed``          | the tables of :mod:`blazen.batch.run` and     |
|                                             | :mod:`blazen.batch.embed`                     |

The tests, row by row: ``test_blazen_chat_timeout_bounds_a_stalled_stream`` (in
``tests/hostile/test_waits_are_bounded.py``) and
``test_ctrl_c_cancels_the_answer_closes_its_connection_and_keeps_the_session`` (in
``tests/test_chat_session.py``, which also leaves by Ctrl-D and ``/exit``);
``test_server_not_ready_in_time_raises_timeout_and_is_killed`` (``tests/test_local.py``);
``test_ctrl_c_while_the_command_waits_for_stdin_exits_130`` (in
``tests/hostile/test_waits_are_bounded.py``);
``test_reader_gone_before_the_last_write_exits_141_without_traceback`` (``tests/test_cli.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, Callable, Optional

from .._stream import ChatModel, Streaming
from .._types import StreamChunk
from .._version import __version__
from ..errors import AuthError, BlazenError
from ..providers import PROVIDERS, Providers, key_variables
from . import batch_command as cli_batch
from . import embed_command as cli_embed
from .output import Output as _Output
from .session import ChatSession, Conversation, Stats

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


#: ``--api`` of ``blazen chat`` and ``blazen batch``: which OpenAI-format API to speak.
API_CHOICES = ("chat", "responses")
API_HELP = "OpenAI-format providers: chat completions (default) or the Responses API"


BASE_URL_HELP = "the API's base URL; without --provider, an OpenAI-compatible server's"
PROVIDER_HELP = "one of: local (this machine), " + ", ".join(sorted(PROVIDERS))
API_KEY_HELP = (
    "the provider's API key (default: its variable, such as OPENAI_API_KEY; a key on the "
    "command line shows in the process list, so prefer the variable)"
)


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but a command stays whole on its line.

    textwrap breaks on hyphens by default, so a narrow terminal showed the install hint as
    ``pip install 'blazen-`` / ``stream[local]'``, which no longer pastes. Descriptions are
    filled paragraph by paragraph, and an indented paragraph (a command) is kept as written.
    """

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for paragraph in text.split("\n\n"):
            if paragraph.startswith(" "):
                paragraphs.append("\n".join(indent + line for line in paragraph.splitlines()))
                continue
            paragraphs.append(
                textwrap.fill(
                    " ".join(paragraph.split()),
                    width,
                    initial_indent=indent,
                    subsequent_indent=indent,
                    break_on_hyphens=False,
                )
            )
        return "\n\n".join(paragraphs)


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
        # Each command has its own exit statuses: chat's are not batch's.
        epilog="blazen COMMAND --help: a command's options and exit statuses",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"blazen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    chat = sub.add_parser(
        "chat",
        help="stream one completion to stdout",
        description=(
            "Stream one completion to stdout. Text stdout's encoding cannot show is written as "
            "'?' (as \\uXXXX in --json). With no --provider and no API key in the environment, "
            "a model on this machine answers; it needs the local extra:\n\n"
            "  pip install 'blazen-stream[local]'"
        ),
        epilog=EXIT_STATUSES,
    )
    chat.add_argument(
        "prompt",
        nargs="?",
        default="-",
        help="the user message ('-': stdin); none on a terminal: an interactive session",
    )
    chat.add_argument("--provider", help=PROVIDER_HELP)
    chat.add_argument("--api-key", help=API_KEY_HELP)
    chat.add_argument("--model", help="the model id (default: the provider's default)")
    chat.add_argument("--base-url", help=BASE_URL_HELP)
    chat.add_argument("--api", choices=API_CHOICES, help=API_HELP)
    chat.add_argument("--system", help="a system prompt")
    max_tokens_help = f"the answer's token limit (local default: {LOCAL_MAX_TOKENS})"
    chat.add_argument("--max-tokens", type=int, help=max_tokens_help)
    temperature_help = f"sampling temperature (local default: {LOCAL_TEMPERATURE})"
    chat.add_argument("--temperature", type=float, help=temperature_help)
    chat.add_argument("--timeout", type=float, help="total seconds for the whole stream")
    chat.add_argument(
        "--json", action="store_true", help="print one JSON event per line (chunk/done/error)"
    )
    chat.add_argument("--gguf", help="local: a GGUF model file (default: bundled Gemma 3 270M)")
    chat.add_argument("--chat-format", help="local: llama-cpp-python's chat format")
    chat.add_argument(
        "--continue",
        dest="continue_file",
        metavar="FILE",
        help="resume the conversation saved in FILE (JSON Lines, as /save writes)",
    )
    add_fallback_argument(chat)
    chat.add_argument(
        "--stats",
        action="store_true",
        help="after each answer: tokens, time to first token, tokens per second (stderr)",
    )
    cli_batch.add_parser(sub, provider_help=PROVIDER_HELP, api_key_help=API_KEY_HELP)
    cli_embed.add_parser(sub, provider_help=PROVIDER_HELP, api_key_help=API_KEY_HELP)
    for command in sub.choices.values():
        command.formatter_class = _HelpFormatter
        # A usage error shows the command's own usage line, not `blazen COMMAND ...`.
        command.set_defaults(command_parser=command)
    return parser


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
    api = getattr(args, "api", None)
    if local:
        if api is not None:
            msg = "--api applies to OpenAI-format providers, not to --provider local"
            raise _UsageError(msg)
        return _start_local(args, output)
    if args.gguf is not None or args.chat_format is not None:
        msg = "--gguf and --chat-format apply only to --provider local"
        raise _UsageError(msg)
    if provider is None or provider.replace("-", "_") == "openai_compat":
        if args.base_url is None:
            msg = "--provider openai_compat needs --base-url"
            raise _UsageError(msg)
        extra: dict[str, Any] = {"api": api} if api is not None else {}
        if getattr(args, "api_key", None):
            extra["api_key"] = args.api_key
        model = Providers.openai_compat("openai-compat", args.base_url, model=args.model, **extra)
        return model, None
    factory = _factory(provider)
    info = PROVIDERS[provider.replace("-", "_")]
    if api is not None and info.wire != "openai":
        msg = f"--api applies to OpenAI-format providers; {info.name} speaks its own API"
        raise _UsageError(msg)
    kwargs = {"model": args.model, "base_url": args.base_url, "api": api,
              "api_key": getattr(args, "api_key", None)}
    try:
        return factory(**{k: v for k, v in kwargs.items() if v is not None}), None
    except AuthError as exc:
        if exc.status is not None or not info.key_env:
            raise
        # The factory's message speaks to Python callers (api_key=): a shell user sets the
        # variable or passes --api-key.
        variables = " or ".join(info.key_env)
        msg = f"no API key for {info.name}: set {variables}, or pass --api-key"
        raise AuthError(msg, provider=info.name) from None


def add_fallback_argument(cmd: argparse.ArgumentParser) -> None:
    """``--fallback NAME`` (repeatable): the providers tried, in order, if the first fails."""
    cmd.add_argument(
        "--fallback",
        action="append",
        default=[],
        metavar="NAME",
        help="a Providers factory to try next when the model fails before its first chunk "
        "(rate limit, overload, connection, timeout, 5xx); repeat for a longer chain",
    )


def _with_fallbacks(model: ChatModel, args: argparse.Namespace) -> ChatModel:
    """``model``, or a fallback chain of it and each ``--fallback`` provider's default."""
    names = getattr(args, "fallback", None) or []
    if not names:
        return model
    return Providers.fallback(model, *(_factory(name)() for name in names))


def _start_local(args: argparse.Namespace, output: _Output) -> tuple[ChatModel, Any]:
    # Imported here: the subprocess machinery is not needed for remote providers.
    from .. import local

    if args.base_url is not None:
        msg = "--base-url does not apply to the local model (it picks its own port)"
        raise _UsageError(msg)
    server = local.LocalServer(
        args.gguf,
        chat_format=args.chat_format,
        embeddings=getattr(args, "command", None) == "embed",
    )
    name = os.path.basename(args.gguf) if args.gguf else "Gemma 3 270M (bundled)"
    output.note(f"starting the local model {name}...")
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
    if args.system is not None and _ignores_system(args, server):
        output.note("Gemma's chat format has no system role: the server ignores --system")
    return server.model, server


def _ignores_system(args: argparse.Namespace, server: Any) -> bool:
    """The bundled Gemma's chat format has no system role: llama-cpp-python drops it."""
    return server is not None and args.gguf is None and args.chat_format in (None, "gemma")


def _interactive(args: argparse.Namespace) -> bool:
    """No prompt, stdin and stdout terminals, plain text: the interactive session."""
    return (
        args.prompt == "-"
        and not args.json
        and sys.stdin is not None
        and sys.stdin.isatty()
        and sys.stdout.isatty()
    )


def _conversation(args: argparse.Namespace) -> Conversation:
    if args.continue_file is None:
        return Conversation(args.system)
    try:
        return Conversation.load(args.continue_file, args.system)
    except OSError as exc:
        msg = f"--continue: cannot read {args.continue_file}: {exc.strerror or exc}"
        raise _UsageError(msg) from exc
    except ValueError as exc:
        raise _UsageError(f"--continue: {exc}") from exc


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
        conversation = _conversation(args)
        interactive = _interactive(args)
        prompt = "" if interactive else _prompt(args)
        model, server = _build_model(args, output)
        model = _with_fallbacks(model, args)
        limits = {"max_tokens": args.max_tokens, "temperature": args.temperature}
        if interactive:
            session = ChatSession(
                model,
                conversation,
                out=sys.stdout,
                note=output.note,
                limits=limits,
                stats=args.stats,
                timeout=args.timeout,
                system_ignored=_ignores_system(args, server),
            )
            return session.run()
        req = conversation.request(prompt, **limits)
        stats = Stats()

        def on_chunk(chunk: StreamChunk) -> None:
            stats.chunk(chunk)
            output.chunk(chunk)

        resp = Streaming.complete(
            model,
            req,
            on_chunk=on_chunk if args.stats else output.chunk,
            on_done=output.done,
            on_error=output.error,
            timeout=args.timeout,
        )
        if resp is not None and args.stats:
            output.note(stats.line(resp.usage))
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


def _embed(args: argparse.Namespace, output: _Output) -> int:
    server = None
    try:
        # --model names the embedding model: the chat model is the provider's default.
        model, server = _build_model(argparse.Namespace(**{**vars(args), "model": None}), output)
        return cli_embed.run(args, model, output.note)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED  # the vectors written so far stay; the same command resumes
    finally:
        if server is not None:
            server.stop()


def _batch(args: argparse.Namespace, output: _Output) -> int:
    server = None
    try:
        # The input is checked, and the ids already done counted, before a model starts:
        # starting the local one takes seconds, and for nothing if the file is bad or done.
        pending = cli_batch.pending(args)
        if pending == 0:
            output.note(f"every item of {args.input} is already in {args.out}: nothing to run")
            return EXIT_OK
        model, server = _build_model(args, output)
        return cli_batch.run(args, _with_fallbacks(model, args), output.note)
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
    parser = getattr(args, "command_parser", parser)
    try:
        if args.command == "embed":
            return _embed(args, output)
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
