"""Tool calls as the model asks for them, their streamed snapshots, and tool definitions."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional, Union, overload

import attrs

from .._json import check_schema, json_copy
from .frozen import builder_class, by_value, immutable

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


def _caller(value: Any) -> Optional[dict[str, Any]]:
    # The provider's object as JSON: a copy nobody else holds, so the call stays what it was.
    return None if value is None else json_copy(value, "caller")


def _check_arguments(_self: Any, _attribute: attrs.Attribute[Any], value: Any) -> None:
    # Text, or the snapshot's fragments: anything else would build a value whose
    # arguments_json, ==, hash and repr all fail later, far from the mistake.
    if not isinstance(value, (str, ArgumentFragments)):
        msg = f"ToolCall arguments_json must be a str, got {type(value).__name__}"
        raise TypeError(msg)


@immutable
@by_value
@attrs.frozen(repr=False, eq=False, match_args=False, weakref_slot=False)
class ToolCall:
    """One tool call the model asked for: ``ToolCall(id, name, arguments_json)``.

    ``caller`` is who made the call when it was not the model itself, as the provider said
    it (Anthropic's programmatic tool calling: ``{"type": "code_execution_20260120",
    "tool_id": ...}``, the code-execution run whose code called the tool), else None; it
    goes back with the call on the next turn.
    """

    __match_args__ = ("id", "name", "arguments_json")

    id: str = attrs.field(validator=_check_str("ToolCall"))
    name: str = attrs.field(validator=_check_str("ToolCall"))
    # Equality and hashing compare the text, however it is held.
    _args: Union[str, ArgumentFragments] = attrs.field(
        default="", alias="arguments_json", eq=_arguments_text, validator=_check_arguments
    )
    # Compared, not hashed: a JSON object is no dict key, and equal calls still hash equal.
    caller: Optional[dict[str, Any]] = attrs.field(
        default=None, kw_only=True, hash=False, converter=_caller
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
        shown = f"ToolCall(id={self.id!r}, name={self.name!r}, arguments_json={args!r}"
        return shown + (")" if self.caller is None else f", caller={self.caller!r})")


_new = object.__new__
_CallBuild = builder_class(ToolCall)


def tool_call_snapshot(
    call_id: str, name: str, args: ArgumentFragments, caller: Optional[dict[str, Any]] = None
) -> ToolCall:
    """``ToolCall(call_id, name, args)`` for the hot path: one per changed call per event.

    The stream state has already checked the id and name; a test checks this builds the
    same value as the constructor.
    """
    call = _new(_CallBuild)
    call.id = call_id
    call.name = name
    call._args = args
    call.caller = caller
    call.__class__ = ToolCall
    return call  # type: ignore[no-any-return]


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
@by_value
@attrs.frozen(kw_only=True, init=False, weakref_slot=False, repr=False, eq=False)
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
