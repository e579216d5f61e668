"""Immutable values: messages, requests, tool calls, chunks, usage and responses.

Every value here is an attrs frozen class with slots (finished by :func:`immutable`;
no ``__weakref__`` slot, as nothing refers to a value weakly), so one
request may be reused for any number of calls from any number of threads. Containers are
stored as tuples; JSON-like dicts (tool parameters, response formats) are deep-copied on
construction and never mutated afterwards.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Callable, Optional, TypeVar, Union, overload

import attrs

from ._json import check_schema, json_copy

_C = TypeVar("_C", bound=type)


class FrozenInstanceError(attrs.exceptions.FrozenInstanceError):
    """A blazen value was changed after it was built; build a new one instead."""

    def __init__(self, message: str) -> None:
        AttributeError.__init__(self, message)
        self.msg = message


def _refuse_set(self: object, name: str, _value: Any) -> None:
    msg = f"{type(self).__name__} is immutable: cannot set {name!r}; build a new value"
    raise FrozenInstanceError(msg)


def _refuse_delete(self: object, name: str) -> None:
    msg = f"{type(self).__name__} is immutable: cannot delete {name!r}"
    raise FrozenInstanceError(msg)


def _replace(self: Any, **changes: Any) -> Any:
    known = {a.alias for a in attrs.fields(type(self))}
    unknown = sorted(set(changes) - known)
    if unknown:
        msg = f"{type(self).__name__} has no field(s) {', '.join(unknown)}"
        raise TypeError(msg)
    return attrs.evolve(self, **changes)


def immutable(cls: _C) -> _C:
    """Finish an ``@attrs.frozen`` class the way every blazen value is finished.

    Besides what attrs gives (slots, value equality and hashing, pickling), an assignment
    names the class and says what to do instead, and ``__replace__`` (what ``copy.replace``
    calls on Python 3.13+) is there on every Python: an ``attrs.evolve`` that names a
    misspelt field.
    """
    built: Any = cls
    built.__setattr__ = _refuse_set
    built.__delattr__ = _refuse_delete
    built.__replace__ = _replace
    return cls


_set = object.__setattr__


class ArgumentFragments:
    """The first ``n`` argument fragments of a tool call still being streamed.

    Snapshots share one growing list, so building a snapshot costs O(1) per call no matter
    how long the arguments are; the text is joined only when someone reads it.
    """

    __slots__ = ("n", "parts")

    def __init__(self, parts: list[str], n: int) -> None:
        self.parts = parts
        self.n = n

    def text(self) -> str:
        """The arguments so far, joined."""
        return "".join(self.parts[: self.n])

    def __reduce__(self) -> tuple[Any, ...]:
        # A pickled or copied snapshot carries its text, not the shared list behind it.
        return (str, (self.text(),))


def _arguments_text(args: Union[str, ArgumentFragments]) -> str:
    return args if isinstance(args, str) else args.text()


def _check_str(owner: str) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(_self: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, str):
            msg = f"{owner} {attribute.name} must be a str, got {type(value).__name__}"
            raise TypeError(msg)

    return check


@immutable
@attrs.frozen(repr=False, match_args=False, weakref_slot=False)
class ToolCall:
    """One tool call the model asked for: ``ToolCall(id, name, arguments_json)``."""

    __match_args__ = ("id", "name", "arguments_json")

    id: str = attrs.field(validator=_check_str("ToolCall"))
    name: str = attrs.field(validator=_check_str("ToolCall"))
    # Equality and hashing compare the text, however it is held.
    _args: Union[str, ArgumentFragments] = attrs.field(
        default="", alias="arguments_json", eq=_arguments_text
    )

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
        parsed = json.loads(raw)
        if not isinstance(parsed, dict):
            msg = f"tool call {self.name!r} arguments are not a JSON object: {raw[:200]!r}"
            raise ValueError(msg)
        return parsed

    def __repr__(self) -> str:
        args = self.arguments_json
        return f"ToolCall(id={self.id!r}, name={self.name!r}, arguments_json={args!r})"


_new = object.__new__
_set_id = ToolCall.__dict__["id"].__set__
_set_name = ToolCall.__dict__["name"].__set__
_set_args = ToolCall.__dict__["_args"].__set__


def tool_call_snapshot(call_id: str, name: str, args: ArgumentFragments) -> ToolCall:
    """``ToolCall(call_id, name, args)`` for the hot path: one per changed call per event.

    The stream state has already checked the id and name; a test checks this builds the
    same value as the constructor.
    """
    call = _new(ToolCall)
    _set_id(call, call_id)
    _set_name(call, name)
    _set_args(call, args)
    return call


class ToolCalls(Sequence[ToolCall]):
    """A stream's tool calls as they stood at one chunk: an immutable sequence.

    It behaves as the tuple of its calls (indexing, slicing, ``len``, iteration, and it
    compares and hashes equal to that tuple), but consecutive snapshots share their calls:
    the calls before the ones still changing sit in one list that only grows, and each
    snapshot records how much of it is its own. So a stream of 20,000 tool calls builds
    its 20,000 snapshots in linear time and memory, where tuples would copy every call
    into every snapshot. ``tuple(snapshot)`` gives a plain tuple. A stream's snapshots are
    plain tuples while it has a few calls; past eight, they are ``ToolCalls``.
    """

    __slots__ = ("_base", "_n", "_tail")

    def __init__(self, base: list[ToolCall], n: int, tail: tuple[ToolCall, ...]) -> None:
        # base[:n] never changes once a snapshot refers to it (see StreamState).
        self._base = base
        self._n = n
        self._tail = tail

    def __len__(self) -> int:
        return self._n + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> ToolCall: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[ToolCall, ...]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[ToolCall, tuple[ToolCall, ...]]:
        if isinstance(index, slice):
            return tuple(self)[index]
        n = self._n
        size = n + len(self._tail)
        if index < 0:
            index += size
        if not 0 <= index < size:
            msg = "tool call index out of range"
            raise IndexError(msg)
        return self._base[index] if index < n else self._tail[index - n]

    def __iter__(self) -> Iterator[ToolCall]:
        return itertools.chain(itertools.islice(self._base, self._n), self._tail)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, ToolCalls)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(tuple(self))

    # Arithmetic and ordering as the tuple of its calls would do them.
    def __add__(self, other: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
        if not isinstance(other, (tuple, ToolCalls)):
            return NotImplemented
        return tuple(self) + tuple(other)

    def __radd__(self, other: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
        if not isinstance(other, tuple):
            return NotImplemented
        return other + tuple(self)

    def __mul__(self, times: int) -> tuple[ToolCall, ...]:
        return tuple(self) * times

    __rmul__ = __mul__

    def __lt__(self, other: Sequence[ToolCall]) -> bool:
        return bool(_tuple(self) < _tuple(other))

    def __le__(self, other: Sequence[ToolCall]) -> bool:
        return bool(_tuple(self) <= _tuple(other))

    def __gt__(self, other: Sequence[ToolCall]) -> bool:
        return bool(_tuple(self) > _tuple(other))

    def __ge__(self, other: Sequence[ToolCall]) -> bool:
        return bool(_tuple(self) >= _tuple(other))

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled or copied, a snapshot is the plain tuple of its calls.
        return (tuple, (tuple(self),))

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, "_tail"):
            msg = "ToolCalls is immutable"
            raise AttributeError(msg)
        object.__setattr__(self, name, value)


def _tuple(calls: Any) -> Any:
    return tuple(calls) if isinstance(calls, ToolCalls) else calls


_set_base = ToolCalls.__dict__["_base"].__set__
_set_n = ToolCalls.__dict__["_n"].__set__
_set_tail = ToolCalls.__dict__["_tail"].__set__


def tool_calls_view(base: list[ToolCall], n: int, tail: tuple[ToolCall, ...]) -> ToolCalls:
    """``ToolCalls(base, n, tail)`` for the hot path: slots filled directly."""
    view = _new(ToolCalls)
    _set_base(view, base)
    _set_n(view, n)
    _set_tail(view, tail)
    return view


@immutable
@attrs.frozen(kw_only=True, init=False, weakref_slot=False)
class ToolDefinition:
    """A function the model may call: name, description and JSON-schema parameters."""

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
        # A copy, so that the caller changing its dict later cannot change the tool.
        parameters = json_copy(parameters, f"parameters of tool {name!r}")
        check_schema(parameters, f"parameters of tool {name!r}")
        self.__attrs_init__(name=name, description=description, parameters=parameters)


@immutable
@attrs.frozen(kw_only=True, weakref_slot=False)
class TextPart:
    """Text inside a multimodal message."""

    text: str


def _one_image_source(image: ImagePart, _attribute: Any, _value: Any) -> None:
    if (image.url is None) == (image.data is None):
        msg = "an image needs exactly one of url= or data= (base64)"
        raise ValueError(msg)


@immutable
@attrs.frozen(kw_only=True, weakref_slot=False)
class ImagePart:
    """An image inside a user message, by ``url`` or by base64 ``data`` with ``media_type``."""

    url: Optional[str] = None
    data: Optional[str] = None
    media_type: str = attrs.field(default="image/png", validator=_one_image_source)

    def as_data_url(self) -> str:
        """The image as a URL: the given one, or a ``data:`` URL built from the base64."""
        if self.url is not None:
            return self.url
        return f"data:{self.media_type};base64,{self.data}"


ContentPart = Union[TextPart, ImagePart]

_REASONING_KINDS = ("thinking", "redacted", "signature")


def _check_reasoning_kind(part: ReasoningPart, _attribute: Any, kind: Any) -> None:
    if kind not in _REASONING_KINDS:
        msg = f"reasoning part kind must be one of {', '.join(_REASONING_KINDS)}; got {kind!r}"
        raise ValueError(msg)
    for name in ("text", "signature", "data", "tool_call_id", "provider"):
        value = getattr(part, name)
        if value is not None and not isinstance(value, str):
            msg = f"reasoning part {name} must be a string, got {type(value).__name__}"
            raise TypeError(msg)
    if kind == "redacted" and not part.data:
        msg = "a redacted reasoning part needs its data (the provider's encrypted thinking)"
        raise ValueError(msg)
    if kind == "signature" and not part.signature:
        msg = "a signature reasoning part needs its signature"
        raise ValueError(msg)


@immutable
@attrs.frozen(kw_only=True, weakref_slot=False)
class ReasoningPart:
    """A piece of a model's reasoning as its provider sent it, kept to be sent back.

    Reasoning models prove their earlier thinking with opaque tokens that must come back
    unchanged on the next turn (Anthropic's thinking ``signature`` and
    ``redacted_thinking`` data, Gemini's ``thoughtSignature``); some OpenAI-compatible
    servers want the reasoning text back (DeepSeek's ``reasoning_content``).
    ``CompletionResponse.message`` carries them, so appending it to the conversation is all
    a caller does. ``kind`` is

    - ``"thinking"``: reasoning ``text``, with the provider's ``signature`` if it gave one;
    - ``"redacted"``: thinking the provider encrypted (Anthropic), in ``data``;
    - ``"signature"``: a bare ``signature`` that rides on another part: on the tool call
      ``tool_call_id`` names, or on the answer's text when that is None (Gemini).

    ``provider`` is the wire format that made it (``"anthropic"``, ``"gemini"``), or None
    for plain reasoning text; a signed part is sent back only on its own wire format.
    """

    kind: str = attrs.field(default="thinking", validator=_check_reasoning_kind)
    text: str = ""
    signature: Optional[str] = None
    data: Optional[str] = None
    tool_call_id: Optional[str] = None
    provider: Optional[str] = None

_ROLES = ("system", "user", "assistant", "tool")


def _check_role(_self: Any, _attribute: Any, role: Any) -> None:
    if role not in _ROLES:
        msg = f"message role must be one of {', '.join(_ROLES)}; got {role!r}"
        raise ValueError(msg)


def _check_content(_self: Any, _attribute: Any, content: Any) -> None:
    if content is not None and not isinstance(content, str):
        msg = f"message content must be a string, got {type(content).__name__}"
        raise TypeError(msg)


def _check_cache(_self: Any, _attribute: Any, cache: Any) -> None:
    if type(cache) is not bool:
        msg = f"message cache must be True or False, got {cache!r}"
        raise TypeError(msg)


# OpenAI answers a name with any of these with a 400 ("does not match '^[^\\s<|\\\\/>]+$'"): refused
# here instead, when the message is built.
_BAD_NAME_CHARS = frozenset("<|\\/>")


def _check_name(_self: Any, _attribute: Any, name: Any) -> None:
    if name is None:
        return
    if not isinstance(name, str):
        msg = f"message name must be a string or None, got {type(name).__name__}"
        raise TypeError(msg)
    if not name or any(c.isspace() or c in _BAD_NAME_CHARS for c in name):
        msg = f"message name must be non-empty, without whitespace or any of <|\\/>; got {name!r}"
        raise ValueError(msg)


def _parts_tuple(parts: Iterable[ReasoningPart]) -> tuple[ReasoningPart, ...]:
    return tuple(parts)


def _check_reasoning_parts(message: Any, _attribute: Any, parts: tuple[Any, ...]) -> None:
    for part in parts:
        if not isinstance(part, ReasoningPart):
            msg = f"reasoning_parts must hold ReasoningPart values, got {type(part).__name__}"
            raise TypeError(msg)
    if parts and message.role != "assistant":
        # Sent back in a user or tool turn, the provider would refuse the whole request.
        msg = f"only an assistant turn has reasoning_parts, not a {message.role} message"
        raise ValueError(msg)


def _check_is_error(message: ChatMessage, _attribute: Any, is_error: Any) -> None:
    if type(is_error) is not bool:
        msg = f"message is_error must be True or False, got {is_error!r}"
        raise TypeError(msg)
    if is_error and message.role != "tool":
        msg = "only a tool result (Llm.tool_result) can be an error"
        raise ValueError(msg)


@immutable
@attrs.frozen(kw_only=True, weakref_slot=False)
class ChatMessage:
    """One message of a conversation. Build them with ``Llm.system/user/assistant/tool_result``.

    ``name`` tells participants of the same role apart (the Kotlin seed's ``name``):
    OpenAI-format wires send it on system, user and assistant messages; Anthropic, Gemini
    and Ollama have no such field and leave it out.
    """

    role: str = attrs.field(validator=_check_role)
    content: Optional[str] = attrs.field(default=None, validator=_check_content)
    images: tuple[ImagePart, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: Optional[str] = None
    #: A prompt-cache breakpoint after this message (Anthropic's ``cache_control``; other
    #: providers cache by themselves and ignore it).
    cache: bool = attrs.field(default=False, validator=_check_cache)
    name: Optional[str] = attrs.field(default=None, validator=_check_name)
    #: The provider's reasoning of an assistant turn, with its signatures, to be sent back
    #: as it came (see :class:`ReasoningPart`).
    reasoning_parts: tuple[ReasoningPart, ...] = attrs.field(
        default=(), converter=_parts_tuple, validator=_check_reasoning_parts
    )
    #: A tool result that reports a failure (Anthropic ``is_error``, Gemini ``error``).
    is_error: bool = attrs.field(default=False, validator=_check_is_error)


@immutable
@attrs.frozen(kw_only=True, weakref_slot=False)
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
    #: ``"low"``, ``"medium"`` or ``"high"``: how hard a reasoning model thinks.
    reasoning_effort: Optional[str] = None
    #: Tokens a reasoning model may spend thinking (Anthropic, Gemini).
    reasoning_budget: Optional[int] = None


def _count(value: Any) -> int:
    # A whole float (5.0, as some servers send) is accepted as the int it is.
    if type(value) is float and value.is_integer() and value >= 0:
        return int(value)
    if type(value) is not int or value < 0:
        msg = f"a token count must be a whole number of at least 0, got {value!r}"
        raise TypeError(msg)
    return value


@immutable
@attrs.frozen(kw_only=True, weakref_slot=False)
class TokenUsage:
    """Token counts as the provider reported them (0 where it reported none).

    Each is a whole number of at least 0; a count that is not (``"5"``, ``-1``, ``NaN``)
    raises ``TypeError``, which makes a stream that carries one a malformed payload.
    ``prompt_tokens`` counts every input token, ``cached_tokens`` (read from the
    provider's prompt cache) and ``cache_write_tokens`` (written to it) included.
    """

    prompt_tokens: int = attrs.field(default=0, converter=_count)
    completion_tokens: int = attrs.field(default=0, converter=_count)
    total_tokens: int = attrs.field(default=0, converter=_count)
    cached_tokens: int = attrs.field(default=0, converter=_count)
    cache_write_tokens: int = attrs.field(default=0, converter=_count)
    reasoning_tokens: int = attrs.field(default=0, converter=_count)

    def __add__(self, other: TokenUsage) -> TokenUsage:
        """The counts of two completions added, each by each (an agent run's total)."""
        if not isinstance(other, TokenUsage):
            return NotImplemented
        return TokenUsage(
            **{a.name: getattr(self, a.name) + getattr(other, a.name) for a in _USAGE_FIELDS}
        )

    @property
    def input_tokens(self) -> int:
        """Alias of :attr:`prompt_tokens`."""
        return self.prompt_tokens

    @property
    def output_tokens(self) -> int:
        """Alias of :attr:`completion_tokens`."""
        return self.completion_tokens

    @property
    def cached_input_tokens(self) -> int:
        """Alias of :attr:`cached_tokens` (its earlier name)."""
        return self.cached_tokens


_USAGE_FIELDS = attrs.fields(TokenUsage)


@immutable
@attrs.frozen(kw_only=True, weakref_slot=False)
class StreamChunk:
    """One step of a stream.

    ``tool_calls`` is the cumulative snapshot of every tool call so far: replace your state
    with it, never append. ``is_final`` is True only on the last chunk of a successful stream:
    that chunk comes right before done, carries no new text and repeats the final snapshot.
    ``refusal_delta`` is text of the model declining to answer (OpenAI's ``refusal``, the
    reason of Anthropic's ``refusal`` stop), or None; a refused answer ends ``content_filter``.
    """

    content_delta: Optional[str] = None
    reasoning_delta: Optional[str] = None
    tool_calls: Sequence[ToolCall] = ()
    is_final: bool = False
    refusal_delta: Optional[str] = None


_set_content = StreamChunk.__dict__["content_delta"].__set__
_set_reasoning = StreamChunk.__dict__["reasoning_delta"].__set__
_set_tool_calls = StreamChunk.__dict__["tool_calls"].__set__
_set_is_final = StreamChunk.__dict__["is_final"].__set__
_set_refusal = StreamChunk.__dict__["refusal_delta"].__set__


def stream_chunk(
    content_delta: Optional[str],
    reasoning_delta: Optional[str],
    tool_calls: Sequence[ToolCall],
    refusal_delta: Optional[str] = None,
) -> StreamChunk:
    """``StreamChunk(...)`` for the hot path: one per streamed event.

    Fills the slots directly, which costs half of the keyword ``__init__`` (StreamChunk
    has nothing to validate). A test checks it builds the same value as the constructor, so
    a field added to StreamChunk cannot be missed here.
    """
    chunk = _new(StreamChunk)
    _set_content(chunk, content_delta)
    _set_reasoning(chunk, reasoning_delta)
    _set_tool_calls(chunk, tool_calls)
    _set_is_final(chunk, False)
    _set_refusal(chunk, refusal_delta)
    return chunk


@immutable
@attrs.frozen(kw_only=True, weakref_slot=False)
class CompletionResponse:
    """The assembled result of a completion, streamed or not.

    ``refusal`` is the model's explanation when it declined to answer (every
    ``refusal_delta`` joined), else None; a refused answer's ``finish_reason`` is
    ``content_filter`` whatever the provider said (its word stays in ``raw_finish_reason``).
    """

    content: str
    reasoning: Optional[str] = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = ""
    raw_finish_reason: Optional[str] = None
    usage: Optional[TokenUsage] = None
    model: Optional[str] = None
    refusal: Optional[str] = None
    #: The reasoning as the provider sent it, signatures included (see :class:`ReasoningPart`).
    reasoning_parts: tuple[ReasoningPart, ...] = ()

    @property
    def message(self) -> ChatMessage:
        """This answer as the assistant turn to append to the conversation.

        It carries the text, the tool calls and the provider's reasoning with its
        signatures, which reasoning models (Claude with thinking, Gemini 2.5 and 3,
        DeepSeek) require back on the next turn::

            resp = model.complete(req)
            messages = [*req.messages, resp.message, Llm.user("And then?")]
        """
        # A refused answer's turn holds the refusal: the conversation reads as it went.
        text = self.content or self.refusal or ""
        return ChatMessage(
            role="assistant",
            content=text if text or not self.tool_calls else None,
            tool_calls=self.tool_calls,
            reasoning_parts=self.reasoning_parts,
        )
