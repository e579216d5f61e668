"""JSON a request carries: copied so no caller can change it later, and checked before sending.

Tool schemas and response formats are plain dicts the caller built; a request keeps its own
copy, refuses what JSON cannot say (NaN, infinity), and refuses a schema no provider could
use, all when the request is built rather than after it was sent.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import ValidationError

__all__ = ["check_schema", "json_copy"]


def json_copy(value: Any, what: str) -> Any:
    """A deep copy of ``value`` through JSON: ``TypeError`` if it is not JSON at all,
    ``ValidationError`` if it holds NaN or infinity (which JSON has no words for, and which
    a provider would refuse as invalid JSON after the request was sent)."""
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError as exc:
        msg = f"{what} holds NaN or infinity, which JSON cannot carry: {exc}"
        raise ValidationError(msg) from None
    except TypeError as exc:
        msg = f"{what} must be JSON-serialisable: {exc}"
        raise TypeError(msg) from exc
    return json.loads(text)


_SCHEMA_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})


def check_schema(schema: Any, where: str) -> None:
    """``ValidationError`` for a JSON schema no provider could use (``"type": 5``, ...).

    Only the shape of the keywords blazen and the providers read: ``type``, ``required``,
    ``properties``, ``items``, ``enum`` and the combinators. It is not a full meta-schema.
    """
    if not isinstance(schema, dict):
        msg = f"{where} must be a JSON schema object, got {type(schema).__name__}"
        raise ValidationError(msg)
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    if not all(isinstance(k, str) and k in _SCHEMA_TYPES for k in kinds) or kind == []:
        msg = f"{where}: 'type' must be one of {sorted(_SCHEMA_TYPES)} or a list, got {kind!r}"
        raise ValidationError(msg)
    required = schema.get("required")
    if required is not None and not (
        isinstance(required, list) and all(isinstance(r, str) for r in required)
    ):
        msg = f"{where}: 'required' must be a list of property names, got {required!r}"
        raise ValidationError(msg)
    enum = schema.get("enum")
    if enum is not None and not isinstance(enum, list):
        msg = f"{where}: 'enum' must be a list, got {enum!r}"
        raise ValidationError(msg)
    properties = schema.get("properties")
    if properties is not None:
        if not isinstance(properties, dict):
            msg = f"{where}: 'properties' must map names to schemas, got {properties!r}"
            raise ValidationError(msg)
        for name, sub in properties.items():
            check_schema(sub, f"{where}.properties.{name}")
    items = schema.get("items")
    if items is not None and not isinstance(items, bool):
        for i, sub in enumerate(items if isinstance(items, list) else [items]):
            check_schema(sub, f"{where}.items" + (f"[{i}]" if isinstance(items, list) else ""))
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if options is not None:
            if not isinstance(options, list):
                msg = f"{where}: {key!r} must be a list of schemas, got {options!r}"
                raise ValidationError(msg)
            for i, sub in enumerate(options):
                check_schema(sub, f"{where}.{key}[{i}]")
