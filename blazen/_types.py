"""Immutable values: messages, requests, tool calls, chunks, usage and responses.

Every value here is frozen, so one request may be reused for any number of calls from any
number of threads. Containers are stored as tuples; JSON-like dicts (tool parameters,
response formats) are deep-copied on construction and never mutated afterwards.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Optional, Union

from ._frozen import Frozen

_set = object.__setattr__

__all__ = [
    "ChatMessage",
    "CompletionRequest",
    "CompletionResponse",
    "ImagePart",
    "StreamChunk",
    "TextPart",
    "TokenUsage",
    "ToolCall",
    "ToolDefinition",
]


class _Fragments:
    """The first ``n`` argument fragments of a tool call still being streamed.

    Snapshots share one growing list, so building a snapshot costs O(1) per call no matter
    how long the arguments are; the text is joined only when someone reads it.
    """

    __slots__ = ("n", "parts")

    def __init__(self, parts: list[str], n: int) -> None:
        self.parts = parts
        self.n = n

    def text(self) -> str:
        return "".join(self.parts[: self.n])


class ToolCall(Frozen):
    """One tool call the model asked for: ``ToolCall(id, name, arguments_json)``."""

    __slots__ = ("_args", "id", "name")
    __match_args__ = ("id", "name", "arguments_json")
    _aliases: ClassVar[dict[str, str]] = {"_args": "arguments_json"}

    id: str
    name: str
    _args: Union[str, _Fragments]

    def __init__(self, id: str, name: str, arguments_json: Union[str, _Fragments] = "") -> None:
        if not isinstance(id, str) or not isinstance(name, str):
            bad = "id" if not isinstance(id, str) else "name"
            value = id if bad == "id" else name
            msg = f"ToolCall {bad} must be a str, got {type(value).__name__}"
            raise TypeError(msg)
        # Written out, not _fill: a snapshot of a streamed call is built per event.
        _set(self, "id", id)
        _set(self, "name", name)
        _set(self, "_args", arguments_json)

    @property
    def arguments_json(self) -> str:
        """The arguments as the model sent them: a JSON object in text (may be ``""``)."""
        args = self._args
        if isinstance(args, str):
            return args
        text = args.text()
        _set(self, "_args", text)
        return text

    def arguments(self) -> dict[str, Any]:
        """Parse :attr:`arguments_json` (``""`` means ``{}``); ``ValueError`` if not an object."""
        raw = self.arguments_json
        if not raw.strip():
            return {}
        value = json.loads(raw)
        if not isinstance(value, dict):
            msg = f"tool call {self.name!r} arguments are not a JSON object: {raw[:200]!r}"
            raise ValueError(msg)
        return value

    def _values(self) -> tuple[Any, ...]:
        # The arguments as text, joined from the streamed fragments if need be: equality,
        # hashing, repr and pickling all go through here.
        return (self.id, self.name, self.arguments_json)


def _json_copy(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        msg = f"{what} must be JSON-serialisable: {exc}"
        raise TypeError(msg) from exc


class ToolDefinition(Frozen):
    """A function the model may call: name, description and JSON-schema parameters."""

    __slots__ = ("description", "name", "parameters")

    name: str
    description: str
    parameters: dict[str, Any]

    def __init__(
        self, *, name: str, description: str = "", parameters: Optional[dict[str, Any]] = None
    ) -> None:
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        if not isinstance(name, str) or not name:
            msg = f"tool name must be a non-empty string, got {name!r}"
            raise ValueError(msg)
        if not isinstance(description, str):
            msg = f"tool description must be a string, got {type(description).__name__}"
            raise TypeError(msg)
        if not isinstance(parameters, dict):
            msg = f"tool parameters must be a JSON-schema dict, got {type(parameters).__name__}"
            raise TypeError(msg)
        parameters = _json_copy(parameters, f"parameters of tool {name!r}")
        self._fill(locals())


class TextPart(Frozen):
    """Text inside a multimodal message."""

    __slots__ = ("text",)

    text: str

    def __init__(self, *, text: str) -> None:
        _set(self, "text", text)


class ImagePart(Frozen):
    """An image inside a user message, by ``url`` or by base64 ``data`` with ``media_type``."""

    __slots__ = ("data", "media_type", "url")

    url: Optional[str]
    data: Optional[str]
    media_type: str

    def __init__(
        self,
        *,
        url: Optional[str] = None,
        data: Optional[str] = None,
        media_type: str = "image/png",
    ) -> None:
        if (url is None) == (data is None):
            msg = "an image needs exactly one of url= or data= (base64)"
            raise ValueError(msg)
        self._fill(locals())

    def as_data_url(self) -> str:
        """The image as a URL: the given one, or a ``data:`` URL built from the base64."""
        if self.url is not None:
            return self.url
        return f"data:{self.media_type};base64,{self.data}"


ContentPart = Union[TextPart, ImagePart]

_ROLES = ("system", "user", "assistant", "tool")


class ChatMessage(Frozen):
    """One message of a conversation. Build them with ``Llm.system/user/assistant/tool_result``."""

    __slots__ = ("content", "images", "role", "tool_call_id", "tool_calls")

    role: str
    content: Optional[str]
    images: tuple[ImagePart, ...]
    tool_calls: tuple[ToolCall, ...]
    tool_call_id: Optional[str]

    def __init__(
        self,
        *,
        role: str,
        content: Optional[str] = None,
        images: tuple[ImagePart, ...] = (),
        tool_calls: tuple[ToolCall, ...] = (),
        tool_call_id: Optional[str] = None,
    ) -> None:
        if role not in _ROLES:
            msg = f"message role must be one of {', '.join(_ROLES)}; got {role!r}"
            raise ValueError(msg)
        if content is not None and not isinstance(content, str):
            msg = f"message content must be a string, got {type(content).__name__}"
            raise TypeError(msg)
        self._fill(locals())


class CompletionRequest(Frozen):
    """Everything one completion needs except the model. Immutable and reusable."""

    __slots__ = (
        "max_tokens",
        "messages",
        "model",
        "response_format",
        "stop",
        "system",
        "temperature",
        "tool_choice",
        "tools",
        "top_p",
    )

    messages: tuple[ChatMessage, ...]
    max_tokens: Optional[int]
    temperature: Optional[float]
    top_p: Optional[float]
    stop: tuple[str, ...]
    tools: tuple[ToolDefinition, ...]
    tool_choice: Optional[str]
    response_format: Optional[dict[str, Any]]
    model: Optional[str]
    system: Optional[str]

    def __init__(
        self,
        *,
        messages: tuple[ChatMessage, ...],
        max_tokens: Optional[int] = None,
        temperature: Optional[float] = None,
        top_p: Optional[float] = None,
        stop: tuple[str, ...] = (),
        tools: tuple[ToolDefinition, ...] = (),
        tool_choice: Optional[str] = None,
        response_format: Optional[dict[str, Any]] = None,
        model: Optional[str] = None,
        system: Optional[str] = None,
    ) -> None:
        self._fill(locals())


class TokenUsage(Frozen):
    """Token counts as the provider reported them (0 where it reported none)."""

    __slots__ = (
        "cached_input_tokens",
        "completion_tokens",
        "prompt_tokens",
        "reasoning_tokens",
        "total_tokens",
    )

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_input_tokens: int
    reasoning_tokens: int

    def __init__(
        self,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        total_tokens: int = 0,
        cached_input_tokens: int = 0,
        reasoning_tokens: int = 0,
    ) -> None:
        self._fill(locals())

    @property
    def input_tokens(self) -> int:
        """Alias of :attr:`prompt_tokens`."""
        return self.prompt_tokens

    @property
    def output_tokens(self) -> int:
        """Alias of :attr:`completion_tokens`."""
        return self.completion_tokens


class StreamChunk(Frozen):
    """One step of a stream.

    ``tool_calls`` is the cumulative snapshot of every tool call so far: replace your state
    with it, never append. ``is_final`` is True only on the last chunk of a successful stream:
    that chunk comes right before done, carries no new text and repeats the final snapshot.
    """

    __slots__ = ("content_delta", "is_final", "reasoning_delta", "tool_calls")

    content_delta: Optional[str]
    reasoning_delta: Optional[str]
    tool_calls: tuple[ToolCall, ...]
    is_final: bool

    def __init__(
        self,
        *,
        content_delta: Optional[str] = None,
        reasoning_delta: Optional[str] = None,
        tool_calls: tuple[ToolCall, ...] = (),
        is_final: bool = False,
    ) -> None:
        self._fill(locals())


_new = object.__new__
_set_content = StreamChunk.__dict__["content_delta"].__set__
_set_reasoning = StreamChunk.__dict__["reasoning_delta"].__set__
_set_tool_calls = StreamChunk.__dict__["tool_calls"].__set__
_set_is_final = StreamChunk.__dict__["is_final"].__set__


def _stream_chunk(
    content_delta: Optional[str], reasoning_delta: Optional[str], tool_calls: tuple[ToolCall, ...]
) -> StreamChunk:
    """``StreamChunk(...)`` for the hot path: one per streamed event.

    Fills the slots directly, which costs half of the keyword ``__init__`` (StreamChunk
    has nothing to validate). A test checks it builds the
    same value as the constructor, so a field added to StreamChunk cannot be missed here.
    """
    chunk = _new(StreamChunk)
    _set_content(chunk, content_delta)
    _set_reasoning(chunk, reasoning_delta)
    _set_tool_calls(chunk, tool_calls)
    _set_is_final(chunk, False)
    return chunk


class CompletionResponse(Frozen):
    """The assembled result of a completion, streamed or not."""

    __slots__ = (
        "content",
        "finish_reason",
        "model",
        "raw_finish_reason",
        "reasoning",
        "tool_calls",
        "usage",
    )

    content: str
    reasoning: Optional[str]
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str
    raw_finish_reason: Optional[str]
    usage: Optional[TokenUsage]
    model: Optional[str]

    def __init__(
        self,
        *,
        content: str,
        reasoning: Optional[str] = None,
        tool_calls: tuple[ToolCall, ...] = (),
        finish_reason: str = "",
        raw_finish_reason: Optional[str] = None,
        usage: Optional[TokenUsage] = None,
        model: Optional[str] = None,
    ) -> None:
        self._fill(locals())
