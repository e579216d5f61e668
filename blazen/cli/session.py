"""``blazen chat`` kept open: a conversation at the terminal, its files, and its figures.

The interactive session starts when ``blazen chat`` gets no prompt on a terminal. Each line
is a turn; the answer streams as it comes; the conversation is kept across turns. Commands:
``/reset``, ``/system TEXT``, ``/model NAME``, ``/save FILE``, ``/exit``. Ctrl-C cancels the
answer being streamed (its connection is closed) and keeps the session; Ctrl-D leaves.

Conversation files (``/save FILE``, ``--continue FILE``) are JSON Lines, one message per
line, in order: ``{"role": "system" | "user" | "assistant", "content": "..."}``. A
``system`` line sets the system prompt (the last one wins); blank lines are skipped.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Callable, Optional, TextIO

from .._codec import line as json_line
from .._codec import loads
from .._llm import Llm
from .._stream import ChatModel, Streaming
from .._types import ChatMessage, StreamChunk, TokenUsage
from ..errors import ValidationError
from .output import CUT_OFF, showable

__all__ = ["ChatSession", "Conversation", "Stats"]

#: Dim text on and off (ANSI SGR 2 and 0): reasoning shown apart from the answer.
DIM, RESET = "\x1b[2m", "\x1b[0m"
PROMPT = ">>> "
HELP = "commands: /reset, /system TEXT, /model NAME, /save FILE, /exit (Ctrl-D)"


class Conversation:
    """The messages so far, the system prompt, and the model asked for (None: the default)."""

    def __init__(self, system: Optional[str] = None, model: Optional[str] = None) -> None:
        self.system = system
        self.model = model
        self.messages: list[ChatMessage] = []

    @classmethod
    def load(cls, path: str, system: Optional[str] = None) -> Conversation:
        """Read a conversation file; ValueError names the line that is not a message."""
        conv = cls(system)
        for number, raw in enumerate(Path(path).read_bytes().splitlines(), 1):
            if not raw.strip():
                continue
            try:
                item = loads(raw, "the line")
                if not isinstance(item, dict):
                    raise TypeError(type(item).__name__)
                role, content = item.get("role"), item.get("content")
                if role not in ("system", "user", "assistant") or not isinstance(content, str):
                    raise TypeError(role)
            except (ValidationError, TypeError) as exc:
                msg = (
                    f"{path}:{number} is not a message line "
                    '({"role": "user"|"assistant"|"system", "content": "..."})'
                )
                raise ValueError(msg) from exc
            if role == "system":
                conv.system = content if system is None else system
            else:
                conv.messages.append(ChatMessage(role=role, content=content))
        return conv

    def save(self, path: str) -> None:
        """Write the conversation file (system prompt first)."""
        lines = []
        if self.system is not None:
            lines.append({"role": "system", "content": self.system})
        lines.extend({"role": m.role, "content": m.content or ""} for m in self.messages)
        # The writer policy of blazen._codec: any text the model sent reads back the same.
        Path(path).write_bytes(b"".join(json_line(item) for item in lines))

    def request(self, prompt: str, **limits: Any) -> Any:
        """The request for the next turn: the conversation so far, then ``prompt``."""
        return Llm.completion_request(
            [*self.messages, Llm.user(prompt)], system=self.system, model=self.model, **limits
        )


class Stats:
    """Tokens, time to the first token and tokens per second of one answer (``--stats``)."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.first: Optional[float] = None

    def chunk(self, chunk: StreamChunk) -> None:
        """Called with every chunk: notes when the first text arrived."""
        if self.first is None and (chunk.content_delta or chunk.reasoning_delta):
            self.first = time.monotonic()

    def line(self, usage: Optional[TokenUsage]) -> str:
        """The summary line, e.g. ``12 tokens in, 40 out; first token 0.21 s; 85.3 tokens/s``."""
        end = time.monotonic()
        parts = []
        if usage is not None:
            parts.append(f"{usage.prompt_tokens} tokens in, {usage.completion_tokens} out")
            cost = usage.cost
            if cost is not None:
                parts.append(f"${cost:.6f}")
        else:
            parts.append("tokens unknown (the server reported no usage)")
        if self.first is not None:
            parts.append(f"first token {self.first - self.start:.2f} s")
            if usage is not None and end > self.first:
                parts.append(f"{usage.completion_tokens / (end - self.first):.1f} tokens/s")
        parts.append(f"{end - self.start:.2f} s in all")
        return "; ".join(parts)


class ChatSession:
    """The interactive loop: read a line, stream the answer, keep the exchange."""

    def __init__(
        self,
        model: ChatModel,
        conversation: Conversation,
        *,
        out: TextIO,
        note: Callable[[str], None],
        limits: dict[str, Any],
        stats: bool = False,
        timeout: Optional[float] = None,
        read: Callable[[str], str] = input,
        system_ignored: bool = False,
    ) -> None:
        self.model = model
        self.conv = conversation
        self.out = out
        self.note = note
        self.limits = limits
        self.stats = stats
        self.timeout = timeout
        self.read = read
        self.system_ignored = system_ignored
        self._dim = False  # inside dimmed reasoning text
        self._line_open = False

    def run(self) -> int:
        """Until ``/exit`` or Ctrl-D; returns the exit status (0)."""
        # Line editing and history for input(); Windows without it: plain input still works.
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401
        if self.conv.messages:
            self.note(f"continuing a conversation of {len(self.conv.messages)} messages")
        self.note(HELP)
        while True:
            try:
                line = self.read(PROMPT)
            except EOFError:  # Ctrl-D
                self._write("\n")
                return 0
            except KeyboardInterrupt:  # Ctrl-C at the prompt: a fresh line, as a shell does
                self._write("\n")
                continue
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if self._command(line):
                    return 0
                continue
            self.turn(line)

    def _command(self, line: str) -> bool:
        """Carry out a /command; True for /exit."""
        name, _, arg = line.partition(" ")
        arg = arg.strip()
        if name in ("/exit", "/quit"):
            return True
        if name == "/reset":
            self.conv.messages.clear()
            self.note("the conversation was cleared")
        elif name == "/system":
            self.conv.system = arg or None
            if arg and self.system_ignored:
                self.note("system prompt kept, but this model's chat format has no system "
                          "role: the server ignores it")
            else:
                self.note("system prompt set" if arg else "system prompt removed")
        elif name == "/model":
            if not arg:
                self.note(f"model: {self.conv.model or self.model.model}")
            else:
                self.conv.model = arg
                self.note(f"model: {arg}")
        elif name == "/save":
            if not arg:
                self.note("give a file: /save chat.jsonl")
            else:
                try:
                    self.conv.save(arg)
                except OSError as exc:
                    self.note(f"could not save: {exc}")
                else:
                    self.note(f"saved {len(self.conv.messages)} messages to {arg}")
        else:
            self.note(f"unknown command {name}; {HELP}")
        return False

    def turn(self, prompt: str) -> None:
        """One exchange: stream the answer; keep it if it finished (not on Ctrl-C or error)."""
        req = self.conv.request(prompt, **self.limits)
        stats = Stats()
        failure: list[str] = []

        def on_chunk(chunk: StreamChunk) -> None:
            stats.chunk(chunk)
            if chunk.reasoning_delta:
                if not self._dim:
                    self._dim = True
                    self._write(DIM)
                self._write(chunk.reasoning_delta)
            text = chunk.content_delta or chunk.refusal_delta
            if text:
                if self._dim:
                    self._undim("\n\n")  # the answer apart from the reasoning
                self._write(text)

        def on_error(err: Any) -> None:
            failure.append("interrupted" if err.kind == "cancelled" else f"error: {err.message}")

        try:
            resp = Streaming.complete(
                self.model, req, on_chunk=on_chunk, on_error=on_error, timeout=self.timeout
            )
        except KeyboardInterrupt:
            resp = None  # the stream was cancelled and its connection closed
        self._undim("")
        if self._line_open:
            self._write("\n")
        if resp is None:
            # Not kept: the next turn does not carry it, and /save leaves it out.
            why = failure[0] if failure else "interrupted"
            self.note(f"{why}; this turn is not kept in the conversation (nor in /save)")
            return
        self.conv.messages.append(Llm.user(prompt))
        self.conv.messages.append(Llm.assistant(resp.content or resp.refusal or ""))
        if resp.finish_reason == "length":
            self.note(CUT_OFF)
        if self.stats:
            self.note(stats.line(resp.usage))

    def _undim(self, gap: str) -> None:
        if self._dim:
            self._dim = False
            self._write(RESET + gap)

    def _write(self, text: str) -> None:
        # What the terminal's encoding cannot show becomes ``?``, as in the one-shot command.
        text = showable(text, self.out)
        self.out.write(text)
        self.out.flush()
        if text:
            self._line_open = not text.endswith("\n")
