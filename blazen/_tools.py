"""``blazen.Tool`` and ``@blazen.tool``: a Python function the model may call. No I/O.

The JSON schema of a tool's arguments is built from the function's type hints and its
docstring (Google, NumPy or Sphinx style), so the function stays the one source of truth.
Arguments the model sends are checked against that schema and converted back to the Python
types the function declared (enums, attrs classes, dataclasses, tuples) before it runs.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import inspect
import json
import re
import sys
import typing
from collections.abc import Mapping
from typing import Any, Callable, Optional, Union, overload

import attrs

from ._cancel import CancelToken
from ._schema import schema_errors
from ._types import ToolDefinition
from .errors import ValidationError

__all__ = ["Tool", "tool"]

_NONE = type(None)
_EMPTY = inspect.Parameter.empty
# OpenAI's rule for function names; the other providers accept a superset of it.
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ARRAYS = (
    list,
    set,
    frozenset,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Set,
    collections.abc.MutableSet,
    collections.abc.Iterable,
    collections.abc.Collection,
)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
if sys.version_info >= (3, 10):
    import types

    _UNIONS: tuple[Any, ...] = (Union, types.UnionType)
else:  # pragma: no cover - 3.9 has no ``X | Y`` at runtime
    _UNIONS = (Union,)


class _Invalid(Exception):
    """Arguments that cannot become the declared Python values; the message is for the model."""


# -- type hints -> JSON schema ---------------------------------------------------------


def _json_type(value: Any) -> Optional[str]:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return None


def _enum_schema(values: list[Any], where: str) -> dict[str, Any]:
    kinds = {_json_type(v) for v in values}
    if None in kinds:
        msg = f"{where}: choices must be str, int, float, bool or None, got {values!r}"
        raise TypeError(msg)
    schema: dict[str, Any] = {"enum": values}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), **schema}
    return schema


def _is_class_record(hint: Any) -> bool:
    return isinstance(hint, type) and (attrs.has(hint) or dataclasses.is_dataclass(hint))


def _record_fields(cls: type) -> list[tuple[str, Any, bool]]:
    """``(init name, type hint, required)`` of each constructor field of an attrs/dataclass."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out: list[tuple[str, Any, bool]] = []
    if attrs.has(cls):
        for a in attrs.fields(cls):
            if a.init:
                out.append((a.alias or a.name, hints.get(a.name, Any), a.default is attrs.NOTHING))
    else:
        for f in dataclasses.fields(cls):
            if f.init:
                required = f.default is dataclasses.MISSING and (
                    f.default_factory is dataclasses.MISSING
                )
                out.append((f.name, hints.get(f.name, Any), required))
    return out


def _record_schema(cls: type, where: str, stack: tuple[type, ...]) -> dict[str, Any]:
    if cls in stack:
        msg = f"{where}: {cls.__name__} refers to itself; pass parameters= to describe it"
        raise TypeError(msg)
    props: dict[str, Any] = {}
    required: list[str] = []
    for name, hint, needed in _record_fields(cls):
        props[name] = _schema_for(hint, f"{where}.{name}", (*stack, cls))
        if needed:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    doc = inspect.getdoc(cls) or ""
    # dataclasses invent a docstring like "Point(x: int, y: int)"; that describes nothing.
    if doc and not doc.startswith(cls.__name__ + "("):
        schema["description"] = _parse_doc(doc)[0]
    return schema


def _schema_for(hint: Any, where: str, stack: tuple[type, ...] = ()) -> dict[str, Any]:
    """The JSON schema of values of type ``hint``; ``TypeError`` for a type it cannot describe."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint in (Any, object, _EMPTY):
        return {}
    if origin is typing.Annotated:
        schema = _schema_for(args[0], where, stack)
        note = next((a for a in args[1:] if isinstance(a, str)), None)
        return {**schema, "description": note} if note else schema
    if hint is None or hint is _NONE:
        return {"type": "null"}
    for py, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if hint is py:
            return {"type": name}
    if origin in _UNIONS:
        arms = [_schema_for(a, where, stack) for a in args if a is not _NONE]
        if len(arms) < len(args):
            arms.append({"type": "null"})
        return arms[0] if len(arms) == 1 else {"anyOf": arms}
    if origin is typing.Literal:
        return _enum_schema(list(args), where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema([m.value for m in hint], where)
    if origin is tuple or hint is tuple:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            item = _schema_for(args[0], where, stack) if args else {}
            return {"type": "array", "items": item}
        prefix = [_schema_for(a, where, stack) for a in args]
        n = len(args)
        return {"type": "array", "prefixItems": prefix, "minItems": n, "maxItems": n}
    if origin in _ARRAYS or hint in _ARRAYS:
        return {"type": "array", "items": _schema_for(args[0], where, stack) if args else {}}
    if origin in _MAPPINGS or hint in _MAPPINGS:
        if args and args[0] is not str:
            msg = f"{where}: JSON object keys are strings; use dict[str, ...] (got {hint!r})"
            raise TypeError(msg)
        if args:
            return {"type": "object", "additionalProperties": _schema_for(args[1], where, stack)}
        return {"type": "object"}
    if _is_class_record(hint):
        return _record_schema(hint, where, stack)
    msg = (
        f"{where}: blazen cannot describe {hint!r} as JSON schema (supported: str, int, float, "
        "bool, None, lists, tuples, dicts, Optional/Union, Literal, Enum, attrs and "
        "dataclasses); pass parameters= to Tool.from_function"
    )
    raise TypeError(msg)


# -- JSON values -> the declared Python values -----------------------------------------


def _convert(value: Any, hint: Any, where: str) -> Any:
    """``value`` (already checked against the schema) as an instance of ``hint``."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint in (Any, object, _EMPTY):
        return value
    if origin is typing.Annotated:
        return _convert(value, args[0], where)
    if hint is None or hint is _NONE:
        if value is not None:
            raise _Invalid(f"{where}: expected null, got {value!r}")
        return None
    if hint is bool:
        if not isinstance(value, bool):
            raise _Invalid(f"{where}: expected a boolean, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Invalid(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Invalid(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise _Invalid(f"{where}: expected a string, got {value!r}")
        return value
    if origin in _UNIONS:
        if value is None and _NONE in args:
            return None
        problems = []
        for arm in args:
            if arm is _NONE:
                continue
            try:
                return _convert(value, arm, where)
            except _Invalid as exc:
                problems.append(str(exc))
        raise _Invalid(problems[0] if len(problems) == 1 else f"{where}: {value!r} fits no type")
    if origin is typing.Literal:
        return value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in hint)
            raise _Invalid(f"{where}: must be one of {choices}; got {value!r}") from None
    if origin is tuple or hint is tuple:
        items = _array(value, where)
        if args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(items) != len(args):
                raise _Invalid(f"{where}: expected {len(args)} items, got {len(items)}")
            pairs = enumerate(zip(items, args))
            return tuple(_convert(v, a, f"{where}[{i}]") for i, (v, a) in pairs)
        item = args[0] if args else Any
        return tuple(_convert(v, item, f"{where}[{i}]") for i, v in enumerate(items))
    if origin in _ARRAYS or hint in _ARRAYS:
        item = args[0] if args else Any
        out = [_convert(v, item, f"{where}[{i}]") for i, v in enumerate(_array(value, where))]
        kind = origin or hint
        try:
            if kind in (set, collections.abc.MutableSet):
                return set(out)
            if kind in (frozenset, collections.abc.Set):
                return frozenset(out)
        except TypeError as exc:
            raise _Invalid(f"{where}: items cannot form a set ({exc})") from None
        return out
    if origin in _MAPPINGS or hint in _MAPPINGS:
        if not isinstance(value, dict):
            raise _Invalid(f"{where}: expected an object, got {value!r}")
        item = args[1] if args else Any
        return {k: _convert(v, item, f"{where}.{k}") for k, v in value.items()}
    if _is_class_record(hint):
        return _build_record(value, hint, where)
    return value


def _array(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Invalid(f"{where}: expected an array, got {value!r}")
    return value


def _build_record(value: Any, cls: type, where: str) -> Any:
    if not isinstance(value, dict):
        raise _Invalid(f"{where}: expected an object with the fields of {cls.__name__}")
    fields = {name: hint for name, hint, _ in _record_fields(cls)}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise _Invalid(f"{where}: unexpected field(s) {', '.join(unknown)}")
    kwargs = {k: _convert(v, fields[k], f"{where}.{k}") for k, v in value.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise _Invalid(f"{where}: {exc}") from exc


# -- docstrings ------------------------------------------------------------------------

_SECTION_RE = re.compile(
    r"^(args|arguments|parameters|params|keyword args|returns?|yields?|raises|examples?|"
    r"notes?|see also|attributes|warnings?|references)\s*:?\s*$",
    re.IGNORECASE,
)
_PARAM_SECTIONS = ("args", "arguments", "parameters", "params", "keyword args")
_GOOGLE_RE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_RE = re.compile(r"^\*{0,2}(\w+)\s*(?::.*)?$")
_SPHINX_RE = re.compile(r"^:param\s+(?:[^:]*\s)?\*{0,2}(\w+)\s*:\s*(.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _parse_doc(doc: Optional[str]) -> tuple[str, dict[str, str]]:
    """``(description, {parameter: description})`` from a Google, NumPy or Sphinx docstring."""
    lines = inspect.cleandoc(doc or "").splitlines()
    params: dict[str, list[str]] = {}
    body: list[str] = []
    i = 0
    while i < len(lines) and not (
        _SECTION_RE.match(lines[i].strip()) or lines[i].lstrip().startswith(":")
    ):
        body.append(lines[i])
        i += 1
    current: Optional[list[str]] = None
    while i < len(lines):
        line = lines[i]
        head = _SECTION_RE.match(line.strip())
        if head:
            numpy = i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}
            i += 2 if numpy else 1
            if head.group(1).lower() in _PARAM_SECTIONS:
                i = _param_section(lines, i, numpy, params)
            continue
        sphinx = _SPHINX_RE.match(line.strip())
        if sphinx:
            current = params.setdefault(sphinx.group(1), [])
            current.append(sphinx.group(2))
        elif current is not None and line.strip() and not line.lstrip().startswith(":"):
            current.append(line.strip())
        else:
            current = None
        i += 1
    text = "\n".join(body).strip()
    # Join wrapped lines, keep paragraph breaks.
    text = "\n\n".join(" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip())
    return text, {k: " ".join(" ".join(v).split()) for k, v in params.items()}


def _param_section(lines: list[str], i: int, numpy: bool, params: dict[str, list[str]]) -> int:
    base: Optional[int] = None
    current: Optional[list[str]] = None
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if _SECTION_RE.match(line.strip()) or (base is not None and _indent(line) < base):
            break
        if base is None:
            base = _indent(line)
        if _indent(line) == base:
            match = (_NUMPY_RE if numpy else _GOOGLE_RE).match(line.strip())
            if match is None:
                break
            current = params.setdefault(match.group(1), [])
            if not numpy:
                current.append(match.group(2))
        elif current is not None:
            current.append(line.strip())
        i += 1
    return i


# -- Tool ------------------------------------------------------------------------------


def _is_cancel_token(hint: Any) -> bool:
    if typing.get_origin(hint) in _UNIONS:
        return any(_is_cancel_token(a) for a in typing.get_args(hint) if a is not _NONE)
    return hint is CancelToken


def _hints_of(fn: Callable[..., Any]) -> dict[str, Any]:
    # partials and callable objects keep their annotations on the function underneath.
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        target = target.__call__
    return typing.get_type_hints(target, include_extras=True)


def _is_async(fn: Callable[..., Any]) -> bool:
    call = getattr(fn, "__call__", None)  # noqa: B004 - async callable objects count too
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


class Tool:
    """A Python function the model may call, with the JSON schema of its arguments.

    The schema comes from the type hints (str, int, float, bool, lists, tuples, dicts,
    ``Optional``, ``Union``, ``Literal``, ``Enum``, attrs classes and dataclasses, and
    ``Annotated[T, "description"]``); the description and each parameter's description come
    from the docstring. ``name``, ``description`` and ``parameters`` override them. A
    parameter annotated :class:`~blazen.CancelToken` is not shown to the model: the agent
    passes the run's token there, so a long tool can stop when the run is cancelled.
    ``exit=True`` makes the tool end the run: its return value becomes the run's output.

    Example::

        def get_weather(city: str, unit: Literal["C", "F"] = "C") -> str:
            '''Current weather in a city.

            Args:
                city: The city's name, e.g. "Paris".
            '''
            return f"18 degrees {unit} in {city}"

        weather = Tool.from_function(get_weather)   # or decorate it with @blazen.tool
    """

    __slots__ = (
        "__wrapped__",
        "_cancel_param",
        "_extra_ok",
        "_hints",
        "definition",
        "exit",
        "fn",
        "is_async",
    )

    fn: Callable[..., Any]
    __wrapped__: Callable[..., Any]

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        parameters: Optional[dict[str, Any]] = None,
        exit: bool = False,
    ) -> None:
        if not callable(fn):
            msg = f"a tool must wrap a callable, got {type(fn).__name__}"
            raise TypeError(msg)
        if isinstance(fn, Tool):
            fn = fn.__wrapped__
        name = name if name is not None else getattr(fn, "__name__", "")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            msg = f"tool names are 1-64 letters, digits, _ or -; got {name!r} (pass name=...)"
            raise ValueError(msg)
        where = f"tool {name!r}"
        try:
            hints = _hints_of(fn)
        except Exception as exc:
            msg = f"{where}: its type hints cannot be resolved ({type(exc).__name__}: {exc})"
            if isinstance(exc, NameError):
                msg += "; types named in hints must be importable from the function's module"
            raise TypeError(msg) from exc
        summary, notes = _parse_doc(inspect.getdoc(fn))
        props: dict[str, Any] = {}
        required: list[str] = []
        #: Parameter name -> type hint, for converting arguments back to Python values.
        self._hints: dict[str, Any] = {}
        self._cancel_param: Optional[str] = None
        self._extra_ok = False
        for p in inspect.signature(fn).parameters.values():
            hint = hints.get(p.name, Any)
            if p.kind is p.VAR_KEYWORD:
                self._extra_ok = True
                continue
            if p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL):
                if p.default is not _EMPTY or p.kind is p.VAR_POSITIONAL:
                    continue  # never filled by the model
                msg = f"{where}: positional-only parameter {p.name!r} cannot take a named argument"
                raise TypeError(msg)
            if _is_cancel_token(hint):
                self._cancel_param = p.name
                continue
            self._hints[p.name] = hint
            schema = _schema_for(hint, f"{where}, parameter {p.name!r}")
            if p.name in notes and "description" not in schema:
                schema["description"] = notes[p.name]
            if p.default is _EMPTY:
                required.append(p.name)
            else:
                default = p.default.value if isinstance(p.default, enum.Enum) else p.default
                if _json_type(default) is not None:
                    schema["default"] = default
            props[p.name] = schema
        if parameters is None:
            parameters = {"type": "object", "properties": props}
            if required:
                parameters["required"] = required
        self.fn = fn
        self.__wrapped__ = fn
        #: The name, description and JSON-schema parameters sent to the model.
        self.definition = ToolDefinition(
            name=name,
            description=description if description is not None else summary,
            parameters=parameters,
        )
        #: Whether calling this tool ends the run, its return value becoming the output.
        self.exit = bool(exit)
        #: Whether the function is a coroutine function (awaited rather than called).
        self.is_async = _is_async(fn)

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        parameters: Optional[dict[str, Any]] = None,
        exit: bool = False,
    ) -> Tool:
        """A tool for ``fn``; the same as ``Tool(fn, ...)``."""
        return cls(fn, name=name, description=description, parameters=parameters, exit=exit)

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        return self.definition.name

    @property
    def description(self) -> str:
        """What the model is told the tool does."""
        return self.definition.description

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments (a copy: the tool's own stays unchanged)."""
        return json.loads(json.dumps(self.definition.parameters))  # type: ignore[no-any-return]

    @property
    def cancel_parameter(self) -> Optional[str]:
        """The parameter that receives the run's :class:`~blazen.CancelToken`, if any."""
        return self._cancel_param

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check the model's ``arguments`` and convert them to the function's keyword arguments.

        Raises :class:`blazen.ValidationError` with a message meant for the model (the agent
        sends it back as the tool's result, so the model can correct its call).
        """
        if not isinstance(arguments, Mapping):
            raise self._invalid([f"arguments must be a JSON object, got {arguments!r}"])
        problems = schema_errors(dict(arguments), self.definition.parameters)
        unknown = [k for k in arguments if k not in self._hints]
        if unknown and not self._extra_ok:
            expected = ", ".join(self._hints) or "none"
            problems.append(f"unexpected argument(s) {', '.join(unknown)} (expected: {expected})")
        if problems:
            raise self._invalid(problems)
        try:
            return {k: _convert(v, self._hints.get(k, _EMPTY), k) for k, v in arguments.items()}
        except _Invalid as exc:
            raise self._invalid([str(exc)]) from None

    def _invalid(self, problems: list[str]) -> ValidationError:
        return ValidationError(f"invalid arguments for tool {self.name!r}: " + "; ".join(problems))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function itself, as if it were not decorated."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        if not hasattr(self, "definition"):  # __init__ failed part-way
            return "Tool(<incomplete>)"
        return f"Tool(name={self.name!r}, exit={self.exit!r}, is_async={self.is_async!r})"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    parameters: Optional[dict[str, Any]] = None,
    exit: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Optional[Callable[..., Any]] = None,
    /,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    parameters: Optional[dict[str, Any]] = None,
    exit: bool = False,
) -> Union[Tool, Callable[[Callable[..., Any]], Tool]]:
    """Make a function a :class:`Tool`: ``@tool`` or ``@tool(name=..., exit=True)``.

    The decorated name is the :class:`Tool`; calling it still calls the function.

    Example::

        @blazen.tool
        def add(a: int, b: int) -> int:
            '''Add two integers.'''
            return a + b

        agent = blazen.Agent(model, tools=[add])
    """
    make = functools.partial(
        Tool, name=name, description=description, parameters=parameters, exit=exit
    )
    if fn is None:
        return make
    return make(fn)
