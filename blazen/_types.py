"""Immutable values: messages, requests, tool calls, chunks, usage and responses.

Every value here is frozen, so one request may be reused for any number of calls from any
number of threads. Containers are stored as tuples; JSON-like dicts (tool parameters,
response formats) are deep-copied on construction and never mutated afterwards.
"""

from __future__ import annotations

import json
from typing import Any, Optional, Union

import attrs

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


@attrs.frozen(eq=False, repr=False)
class ToolCall:
    """One tool call the model asked for: ``ToolCall(id, name, arguments_json)``."""

    id: str = attrs.field(validator=attrs.validators.instance_of(str))
    name: str = attrs.field(validator=attrs.validators.instance_of(str))
    _args: Union[str, _Fragments] = attrs.field(default="", alias="arguments_json")

    @property
    def arguments_json(self) -> str:
        """The arguments as the model sent them: a JSON object in text (may be ``""``)."""
        args = self._args
        if isinstance(args, str):
            return args
        text = args.text()
        object.__setattr__(self, "_args", text)
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

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolCall):
            return NotImplemented
        return (self.id, self.name, self.arguments_json) == (
            other.id,
            other.name,
            other.arguments_json,
        )

    def __hash__(self) -> int:
        return hash((self.id, self.name, self.arguments_json))

    def __repr__(self) -> str:
        return (
            f"ToolCall(id={self.id!r}, name={self.name!r}, arguments_json={self.arguments_json!r})"
        )


def _json_copy(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        msg = f"{what} must be JSON-serialisable: {exc}"
        raise TypeError(msg) from exc


@attrs.frozen(kw_only=True)
class ToolDefinition:
    """A function the model may call: name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = attrs.field(factory=lambda: {"type": "object", "properties": {}})

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            msg = f"tool name must be a non-empty string, got {self.name!r}"
            raise ValueError(msg)
        if not isinstance(self.description, str):
            msg = f"tool description must be a string, got {type(self.description).__name__}"
            raise TypeError(msg)
        if not isinstance(self.parameters, dict):
            msg = (
                f"tool parameters must be a JSON-schema dict, got {type(self.parameters).__name__}"
            )
            raise TypeError(msg)
        object.__setattr__(
            self, "parameters", _json_copy(self.parameters, f"parameters of tool {self.name!r}")
        )


@attrs.frozen(kw_only=True)
class TextPart:
    """Text inside a multimodal message."""

    text: str


@attrs.frozen(kw_only=True)
class ImagePart:
    """An image inside a user message, by ``url`` or by base64 ``data`` with ``media_type``."""

    url: Optional[str] = None
    data: Optional[str] = None
    media_type: str = "image/png"

    def __attrs_post_init__(self) -> None:
        if (self.url is None) == (self.data is None):
            msg = "an image needs exactly one of url= or data= (base64)"
            raise ValueError(msg)

    def as_data_url(self) -> str:
        """The image as a URL: the given one, or a ``data:`` URL built from the base64."""
        if self.url is not None:
            return self.url
        return f"data:{self.media_type};base64,{self.data}"


ContentPart = Union[TextPart, ImagePart]

_ROLES = ("system", "user", "assistant", "tool")


@attrs.frozen(kw_only=True)
class ChatMessage:
    """One message of a conversation. Build them with ``Llm.system/user/assistant/tool_result``."""

    role: str
    content: Optional[str] = None
    images: tuple[ImagePart, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: Optional[str] = None

    def __attrs_post_init__(self) -> None:
        if self.role not in _ROLES:
            msg = f"message role must be one of {', '.join(_ROLES)}; got {self.role!r}"
            raise ValueError(msg)
        if self.content is not None and not isinstance(self.content, str):
            msg = f"message content must be a string, got {type(self.content).__name__}"
            raise TypeError(msg)


@attrs.frozen(kw_only=True)
class CompletionRequest:
    """Everything one completion needs except the model. Immutable and reusable."""

    messages: tuple[ChatMessage, ...]
    max_tokens: Optional[int] = None
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    stop: tuple[str, ...] = ()
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: Optional[str] = None
    response_format: Optional[dict[str, Any]] = None
    model: Optional[str] = None
    system: Optional[str] = None


@attrs.frozen(kw_only=True)
class TokenUsage:
    """Token counts as the provider reported them (0 where it reported none)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def input_tokens(self) -> int:
        """Alias of :attr:`prompt_tokens`."""
        return self.prompt_tokens

    @property
    def output_tokens(self) -> int:
        """Alias of :attr:`completion_tokens`."""
        return self.completion_tokens


@attrs.frozen(kw_only=True)
class StreamChunk:
    """One step of a stream.

    ``tool_calls`` is the cumulative snapshot of every tool call so far: replace your state
    with it, never append. ``is_final`` is True only on the last chunk of a successful stream:
    that chunk comes right before done, carries no new text and repeats the final snapshot.
    """

    content_delta: Optional[str] = None
    reasoning_delta: Optional[str] = None
    tool_calls: tuple[ToolCall, ...] = ()
    is_final: bool = False


_new = object.__new__
_set_content = StreamChunk.__dict__["content_delta"].__set__
_set_reasoning = StreamChunk.__dict__["reasoning_delta"].__set__
_set_tool_calls = StreamChunk.__dict__["tool_calls"].__set__
_set_is_final = StreamChunk.__dict__["is_final"].__set__


def _stream_chunk(
    content_delta: Optional[str], reasoning_delta: Optional[str], tool_calls: tuple[ToolCall, ...]
) -> StreamChunk:
    """``StreamChunk(...)`` for the hot path: one per streamed event.

    Fills the slots directly, which costs half of the generated keyword ``__init__``
    (StreamChunk has no validators or converters to skip). A test checks it builds the
    same value as the constructor, so a field added to StreamChunk cannot be missed here.
    """
    chunk = _new(StreamChunk)
    _set_content(chunk, content_delta)
    _set_reasoning(chunk, reasoning_delta)
    _set_tool_calls(chunk, tool_calls)
    _set_is_final(chunk, False)
    return chunk


@attrs.frozen(kw_only=True)
class CompletionResponse:
    """The assembled result of a completion, streamed or not."""

    content: str
    reasoning: Optional[str] = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = ""
    raw_finish_reason: Optional[str] = None
    usage: Optional[TokenUsage] = None
    model: Optional[str] = None
