"""Python type hints as JSON schema, and JSON values back as the hinted Python values. No I/O.

The two directions live together because they must agree: every type :func:`schema_for`
can describe, :func:`convert` can rebuild (enums, attrs classes, dataclasses, tuples, sets).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import types
import typing
from typing import Any, Optional, Union

import attrs

from .docstrings import parse_docstring

__all__ = [
    "EMPTY",
    "UNIONS",
    "Invalid",
    "convert",
    "is_record",
    "is_typeddict",
    "json_type",
    "record_fields",
    "schema_for",
]

_NONE = type(None)
EMPTY = inspect.Parameter.empty
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
UNIONS: tuple[Any, ...] = (Union, types.UnionType)


class Invalid(Exception):
    """Arguments that cannot become the declared Python values; the message is for the model."""


# -- type hints -> JSON schema ---------------------------------------------------------


def json_type(value: Any) -> Optional[str]:
    """The JSON Schema type name of a scalar value, or None if it is not a JSON scalar."""
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
    kinds = {json_type(v) for v in values}
    if None in kinds:
        msg = f"{where}: choices must be str, int, float, bool or None, got {values!r}"
        raise TypeError(msg)
    schema: dict[str, Any] = {"enum": values}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), **schema}
    return schema


def _is_class_record(hint: Any) -> bool:
    return isinstance(hint, type) and (attrs.has(hint) or dataclasses.is_dataclass(hint))


def is_typeddict(hint: Any) -> bool:
    """Whether ``hint`` is a ``TypedDict`` class (``typing`` or ``typing_extensions``)."""
    return (
        isinstance(hint, type)
        and issubclass(hint, dict)
        and hasattr(hint, "__required_keys__")
        and hasattr(hint, "__total__")
    )


def is_record(hint: Any) -> bool:
    """Whether ``hint`` is an attrs class, a dataclass or a ``TypedDict``: named fields."""
    return _is_class_record(hint) or is_typeddict(hint)


def record_fields(cls: type) -> list[tuple[str, Any, bool]]:
    """``(name, type hint, required)`` of each field of an attrs class, dataclass or TypedDict."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out: list[tuple[str, Any, bool]] = []
    if attrs.has(cls):
        for a in attrs.fields(cls):
            if a.init:
                out.append((a.alias or a.name, hints.get(a.name, Any), a.default is attrs.NOTHING))
    elif is_typeddict(cls):
        needed = cls.__required_keys__  # type: ignore[attr-defined]
        for name, hint in hints.items():
            # Under string annotations (PEP 563) Python cannot see NotRequired itself.
            wrapper = getattr(typing.get_origin(hint), "_name", None)
            if wrapper in ("Required", "NotRequired"):
                required = wrapper == "Required"
            else:
                required = name in needed
            out.append((name, _unwrap_required(hint), required))
    else:
        for f in dataclasses.fields(cls):
            if f.init:
                required = f.default is dataclasses.MISSING and (
                    f.default_factory is dataclasses.MISSING
                )
                out.append((f.name, hints.get(f.name, Any), required))
    return out


def _unwrap_required(hint: Any) -> Any:
    # TypedDict's Required[X]/NotRequired[X] (3.11+) only say whether the key must be there.
    while getattr(typing.get_origin(hint), "_name", None) in ("Required", "NotRequired"):
        hint = typing.get_args(hint)[0]
    return hint


def _record_schema(cls: type, where: str, stack: tuple[type, ...]) -> dict[str, Any]:
    if cls in stack:
        msg = f"{where}: {cls.__name__} refers to itself; pass parameters= to describe it"
        raise TypeError(msg)
    props: dict[str, Any] = {}
    required: list[str] = []
    for name, hint, needed in record_fields(cls):
        props[name] = schema_for(hint, f"{where}.{name}", (*stack, cls))
        if needed:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    doc = "" if is_typeddict(cls) else inspect.getdoc(cls) or ""
    # dataclasses invent a docstring like "Point(x: int, y: int)"; that describes nothing.
    if doc and not doc.startswith(cls.__name__ + "("):
        schema["description"] = parse_docstring(doc)[0]
    return schema


def schema_for(hint: Any, where: str, stack: tuple[type, ...] = ()) -> dict[str, Any]:
    """The JSON schema of values of type ``hint``; ``TypeError`` for a type it cannot describe."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint in (Any, object, EMPTY):
        return {}
    if origin is typing.Annotated:
        schema = schema_for(args[0], where, stack)
        note = next((a for a in args[1:] if isinstance(a, str)), None)
        return {**schema, "description": note} if note else schema
    if hint is None or hint is _NONE:
        return {"type": "null"}
    for py, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if hint is py:
            return {"type": name}
    if origin in UNIONS:
        # Optional[X] is "X or null": None must stay a value the model may send.
        arms = [schema_for(a, where, stack) for a in args if a is not _NONE]
        if len(arms) < len(args):
            arms.append({"type": "null"})
        return arms[0] if len(arms) == 1 else {"anyOf": arms}
    if origin is typing.Literal:
        return _enum_schema(list(args), where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema([m.value for m in hint], where)
    if origin is tuple or hint is tuple:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            item = schema_for(args[0], where, stack) if args else {}
            return {"type": "array", "items": item}
        prefix = [schema_for(a, where, stack) for a in args]
        n = len(args)
        return {"type": "array", "prefixItems": prefix, "minItems": n, "maxItems": n}
    if origin in _ARRAYS or hint in _ARRAYS:
        return {"type": "array", "items": schema_for(args[0], where, stack) if args else {}}
    if origin in _MAPPINGS or hint in _MAPPINGS:
        if args and args[0] is not str:
            msg = f"{where}: JSON object keys are strings; use dict[str, ...] (got {hint!r})"
            raise TypeError(msg)
        if args:
            return {"type": "object", "additionalProperties": schema_for(args[1], where, stack)}
        return {"type": "object"}
    if is_record(hint):
        return _record_schema(hint, where, stack)
    msg = (
        f"{where}: blazen cannot describe {hint!r} as JSON schema (supported: str, int, float, "
        "bool, None, lists, tuples, dicts, Optional/Union, Literal, Enum, attrs classes, "
        "dataclasses and TypedDicts); pass parameters= to Tool.from_function"
    )
    raise TypeError(msg)


# -- JSON values -> the declared Python values -----------------------------------------


def convert(value: Any, hint: Any, where: str) -> Any:
    """``value`` (already checked against the schema) as an instance of ``hint``."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint in (Any, object, EMPTY):
        return value
    if origin is typing.Annotated:
        return convert(value, args[0], where)
    if hint is None or hint is _NONE:
        if value is not None:
            raise Invalid(f"{where}: expected null, got {value!r}")
        return None
    if hint is bool:
        if not isinstance(value, bool):
            raise Invalid(f"{where}: expected a boolean, got {value!r}")
        return value
    if hint is int:
        # JSON has one number type: a model may well write 3.0 for an int parameter.
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Invalid(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise Invalid(f"{where}: expected a string, got {value!r}")
        return value
    if origin in UNIONS:
        if value is None and _NONE in args:
            return None
        problems = []
        for arm in args:
            if arm is _NONE:
                continue
            try:
                return convert(value, arm, where)
            except Invalid as exc:
                problems.append(str(exc))
        raise Invalid(problems[0] if len(problems) == 1 else f"{where}: {value!r} fits no type")
    if origin is typing.Literal:
        return value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in hint)
            raise Invalid(f"{where}: must be one of {choices}; got {value!r}") from None
    if origin is tuple or hint is tuple:
        items = _array(value, where)
        if args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(items) != len(args):
                raise Invalid(f"{where}: expected {len(args)} items, got {len(items)}")
            pairs = enumerate(zip(items, args))
            return tuple(convert(v, a, f"{where}[{i}]") for i, (v, a) in pairs)
        item = args[0] if args else Any
        return tuple(convert(v, item, f"{where}[{i}]") for i, v in enumerate(items))
    if origin in _ARRAYS or hint in _ARRAYS:
        item = args[0] if args else Any
        out = [convert(v, item, f"{where}[{i}]") for i, v in enumerate(_array(value, where))]
        kind = origin or hint
        try:
            if kind in (set, collections.abc.MutableSet):
                return set(out)
            if kind in (frozenset, collections.abc.Set):
                return frozenset(out)
        except TypeError as exc:
            raise Invalid(f"{where}: items cannot form a set ({exc})") from None
        return out
    if origin in _MAPPINGS or hint in _MAPPINGS:
        if not isinstance(value, dict):
            raise Invalid(f"{where}: expected an object, got {value!r}")
        item = args[1] if args else Any
        return {k: convert(v, item, f"{where}.{k}") for k, v in value.items()}
    if is_record(hint):
        return _build_record(value, hint, where)
    return value


def _accepts_none(hint: Any) -> bool:
    if hint in (Any, object, EMPTY, None, _NONE):
        return True
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return _accepts_none(args[0])
    if origin is typing.Literal:
        return None in args
    return origin in UNIONS and _NONE in args


def _array(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise Invalid(f"{where}: expected an array, got {value!r}")
    return value


def _build_record(value: Any, cls: type, where: str) -> Any:
    if not isinstance(value, dict):
        raise Invalid(f"{where}: expected an object with the fields of {cls.__name__}")
    fields = {name: (hint, needed) for name, hint, needed in record_fields(cls)}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise Invalid(f"{where}: unexpected field(s) {', '.join(unknown)}")
    missing = [name for name, (_, needed) in fields.items() if needed and name not in value]
    if missing:
        raise Invalid(f"{where}: missing field(s) {', '.join(missing)}")
    kwargs = {
        k: convert(v, fields[k][0], f"{where}.{k}")
        for k, v in value.items()
        # A strict schema lists every field, a defaulted one as "or null" (see
        # .output): null there means "not given", so the default applies.
        if not (v is None and not fields[k][1] and not _accepts_none(fields[k][0]))
    }
    if is_typeddict(cls):
        return kwargs
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise Invalid(f"{where}: {exc}") from exc
