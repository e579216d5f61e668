"""Key scrubbing: a model's secrets masked in every text and error it reports.

A :class:`Masks` holds (secret, shown instead) pairs: the API keys of credential length
and the passwords in the base URL and the proxy URL, in every form they take. Every error,
log line and repr a model reports passes through it; ``ChatModel`` holds one.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..errors import BlazenError, RedactedError, safe_str

__all__ = ["Masks"]


class Masks:
    """What a model masks: ``pairs`` of (secret, shown instead)."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: tuple[tuple[str, str], ...]) -> None:
        self.pairs = pairs

    def redact(self, text: str) -> str:
        """``text`` with the secrets and passwords masked: every message passes here."""
        for secret, shown in self.pairs:
            if secret in text:
                text = text.replace(secret, shown)
        return text

    def scrub(self, err: BlazenError) -> BlazenError:
        """Mask the secrets everywhere in ``err``, whatever path built it.

        Its own fields, and every exception of its ``__cause__``/``__context__`` chain: one
        that holds a key anywhere (its text, its arguments, a field such as a decode
        error's document) is replaced by a :class:`~blazen.errors.RedactedError` that keeps
        its class name and masked text.
        """
        if not self.pairs:
            return err
        err.message = self.redact(err.message)
        err.args = (err.message,)
        for name in ("body", "error_type", "request_id"):
            value = getattr(err, name)
            if value:
                setattr(err, name, self.redact(value))
        err.partial = self.redact(err.partial)
        err.partial_reasoning = self.redact(err.partial_reasoning)
        for name in ("raw", "refusal"):  # a typed-output error's model text
            value = getattr(err, name, None)
            if isinstance(value, str) and value:
                setattr(err, name, self.redact(value))
        # An agent's error holds the conversation so far (AgentError.result): a key the
        # server echoed into an answer, a signature or a tool's error is masked there too.
        result = getattr(err, "result", None)
        if result is not None and self._mentions_secret(result):
            setattr(err, "result", self._masked(result))  # noqa: B010 (AgentError only)
        # A fallback's error holds the error of each model it tried.
        for attempt in err.attempts:
            if attempt is not err:
                self.scrub(attempt)
        # Every exception reachable through __cause__ and __context__, both branches.
        stack: list[BaseException] = [err]
        seen: set[int] = set()
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            for link in ("__cause__", "__context__"):
                inner = getattr(node, link)
                if inner is None:
                    continue
                if self._holds_secret(inner):
                    inner = RedactedError.standing_in_for(inner, self.redact)
                    setattr(node, link, inner)
                stack.append(inner)
        return err

    def _mentions_secret(self, value: object) -> bool:
        try:
            text = repr(value)
        except Exception:
            return True
        return any(secret in text for secret, _ in self.pairs)

    def _masked(self, value: Any) -> Any:
        """``value`` with every secret masked: text, tuples of values, attrs values (as
        copies), exceptions (as stand-ins); anything else is the caller's own, kept as is."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, BaseException):
            if self._holds_secret(value):
                return RedactedError.standing_in_for(value, self.redact)
            return value
        if type(value) is tuple:
            return tuple(self._masked(v) for v in value)
        if attrs.has(type(value)) and self._mentions_secret(value):
            changes = {}
            for field in attrs.fields(type(value)):
                if field.init:
                    # A private field is read through its public name (ToolCall's text).
                    current = getattr(value, field.alias, getattr(value, field.name))
                    changes[field.alias] = self._masked(current)
            return attrs.evolve(value, **changes)
        return value

    def _holds_secret(self, exc: BaseException) -> bool:
        try:
            text = f"{exc!r} {safe_str(exc)} {exc.args!r} {vars(exc)!r}"
        except Exception:
            return True  # what cannot be read cannot be vouched for
        return any(secret in text for secret, _ in self.pairs)
