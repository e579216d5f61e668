"""Check a JSON value against the subset of JSON Schema that tool parameters use. No I/O.

Models, small ones most of all, send arguments that do not match the schema they were given.
The agent checks them here before the tool runs, and sends the problems back to the model in
words it can act on. Keywords outside the subset (``$ref``, ``format``...) are ignored rather
than rejected: a schema written for a provider must never make a valid call fail.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["schema_errors"]

#: More problems than this are summarised: the model only needs enough to fix its call.
MAX_PROBLEMS = 5


def _is_type(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, dict)
    if isinstance(value, bool):
        return False
    if name == "integer":
        # JSON does not tell 3 from 3.0, and neither does JSON Schema.
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float))
    return True  # an unknown type name constrains nothing


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _at(path: str) -> str:
    return f"{path}: " if path else ""


def schema_errors(value: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Every way ``value`` breaks ``schema``, as short sentences naming where (empty: valid)."""
    problems: list[str] = []
    _check(value, schema, path, problems)
    if len(problems) > MAX_PROBLEMS:
        extra = len(problems) - MAX_PROBLEMS
        problems = [*problems[:MAX_PROBLEMS], f"and {extra} more problem(s)"]
    return problems


def _check(value: Any, schema: Mapping[str, Any], path: str, out: list[str]) -> None:
    if not isinstance(schema, Mapping):
        return
    if value is None and schema.get("nullable") is True:
        return  # OpenAPI's (and Gemini's) spelling of "or null"
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_is_type(value, t) for t in names):
            out.append(f"{_at(path)}expected {' or '.join(names)}, got {_describe(value)}")
            return
    if "const" in schema and value != schema["const"]:
        out.append(f"{_at(path)}must be {schema['const']!r}, got {_describe(value)}")
    enum = schema.get("enum")
    if isinstance(enum, list) and not any(_same(value, e) for e in enum):
        choices = ", ".join(repr(e) for e in enum)
        out.append(f"{_at(path)}must be one of {choices}; got {_describe(value)}")
    for key in ("anyOf", "oneOf"):
        arms = schema.get(key)
        if isinstance(arms, list) and arms:
            _check_any(value, arms, path, out)
    for sub in schema.get("allOf") or ():
        _check(value, sub, path, out)
    if isinstance(value, dict):
        _check_object(value, schema, path, out)
    elif isinstance(value, list):
        _check_array(value, schema, path, out)
    elif isinstance(value, str):
        _check_string(value, schema, path, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _check_number(value, schema, path, out)


def _same(a: Any, b: Any) -> bool:
    # In Python True == 1; in JSON they are different values.
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def _check_any(value: Any, arms: list[Any], path: str, out: list[str]) -> None:
    results = [schema_errors(value, a, path) for a in arms]
    if any(not r for r in results):
        return
    types = [a.get("type") for a in arms if isinstance(a, Mapping)]
    names = [t for t in types if isinstance(t, str)]
    if len(names) == len(arms) and not any(_is_type(value, t) for t in names):
        out.append(f"{_at(path)}expected {' or '.join(names)}, got {_describe(value)}")
        return
    # Otherwise report the arm that came closest, so the model sees a concrete fix.
    closest: list[str] = min(results, key=len)
    out.extend(closest)


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _check_object(
    value: dict[str, Any], schema: Mapping[str, Any], path: str, out: list[str]
) -> None:
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    for name in schema.get("required") or ():
        if name not in value:
            out.append(f"{_join(path, name)}: required but missing")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in props:
            _check(item, props[key], _join(path, key), out)
        elif extra is False:
            allowed = ", ".join(props) or "none"
            out.append(f"{_join(path, key)}: unexpected (allowed: {allowed})")
        elif isinstance(extra, Mapping):
            _check(item, extra, _join(path, key), out)


def _check_array(value: list[Any], schema: Mapping[str, Any], path: str, out: list[str]) -> None:
    prefix = schema.get("prefixItems")
    prefix = prefix if isinstance(prefix, list) else []
    for i, sub in enumerate(prefix[: len(value)]):
        _check(value[i], sub, _join(path, i), out)
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i in range(len(prefix), len(value)):
            _check(value[i], items, _join(path, i), out)
    low, high = schema.get("minItems"), schema.get("maxItems")
    if isinstance(low, int) and len(value) < low:
        out.append(f"{_at(path)}needs at least {low} item(s), got {len(value)}")
    if isinstance(high, int) and len(value) > high:
        out.append(f"{_at(path)}allows at most {high} item(s), got {len(value)}")


def _check_string(value: str, schema: Mapping[str, Any], path: str, out: list[str]) -> None:
    low, high = schema.get("minLength"), schema.get("maxLength")
    if isinstance(low, int) and len(value) < low:
        out.append(f"{_at(path)}needs at least {low} character(s)")
    if isinstance(high, int) and len(value) > high:
        out.append(f"{_at(path)}allows at most {high} character(s)")
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            matched = re.search(pattern, value) is not None
        except re.error:
            matched = True  # a pattern Python cannot compile constrains nothing here
        if not matched:
            out.append(f"{_at(path)}must match the pattern {pattern!r}")


def _check_number(value: float, schema: Mapping[str, Any], path: str, out: list[str]) -> None:
    for key, ok, words in (
        ("minimum", operator.ge, "at least"),
        ("maximum", operator.le, "at most"),
        ("exclusiveMinimum", operator.gt, "more than"),
        ("exclusiveMaximum", operator.lt, "less than"),
    ):
        bound = schema.get(key)
        if isinstance(bound, (int, float)) and not isinstance(bound, bool) and not ok(value, bound):
            out.append(f"{_at(path)}must be {words} {bound:g}, got {value:g}")
