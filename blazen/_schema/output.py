"""Typed output: a class as the strict JSON schema of an answer, and the answer read back.

``Llm.completion_request(output=Weather)`` keeps an :class:`OutputSpec`; each wire format
sends its ``schema`` the way its provider takes a schema for the answer, and the stream
layer reads the finished text back with :func:`read_output` once, after the last chunk.

The schema is *strict* as OpenAI's Structured Outputs define it
(https://platform.openai.com/docs/guides/structured-outputs#supported-schemas): every
object lists all its properties in ``required`` and forbids others
(``additionalProperties: false``); a field that may be left out (one with a default) is
sent as "its type or null", and a null there gives the field its default back. What a
strict schema cannot say (free-form ``dict`` keys, ``Any``, fixed-length tuples) is
refused when the request is built, never by the provider after a round trip. No I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

import attrs

from .._frozen import by_value
from ..errors import OutputValidationError, RefusalError

__all__ = ["OutputSpec", "output_spec", "read_output"]

# Names OpenAI's json_schema.name and Anthropic's tool name both accept.
_NAME_BAD = r"[^a-zA-Z0-9_-]"
_NAME_MAX = 64


@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class OutputSpec:
    """What ``output=`` asked for: the class, its wire name and its strict JSON schema."""

    #: The attrs class, dataclass or ``TypedDict`` the answer becomes.
    type: Any
    #: The schema's name (OpenAI ``json_schema.name``, Anthropic's forced tool name).
    name: str
    #: The strict JSON schema of the answer (an object).
    schema: dict[str, Any]
    #: The class's docstring summary (also the schema's ``description``), or "".
    description: str = ""


def output_spec(cls: Any) -> OutputSpec:
    """The :class:`OutputSpec` of ``cls``; ``TypeError`` for a type a strict schema cannot be."""
    # The type-hint machinery (dataclasses, inspect, docstrings) loads with the first
    # output= asked for: `import blazen` does not pay for it.
    from .hints import is_record, schema_for

    if not is_record(cls):
        msg = (
            "output= must be an attrs class, a dataclass or a TypedDict (the answer is a JSON "
            f"object with named fields), got {cls!r}"
        )
        raise TypeError(msg)
    where = cls.__name__
    schema = _strict(schema_for(cls, where), where)
    description = schema.get("description", "")
    name = re.sub(_NAME_BAD, "_", cls.__name__)[:_NAME_MAX] or "output"
    return OutputSpec(type=cls, name=name, schema=schema, description=description)


def _strict(schema: dict[str, Any], where: str) -> dict[str, Any]:
    """``schema`` as a strict schema: closed objects, every property required."""
    if not schema:
        msg = f"{where}: a typed output cannot hold Any (a strict schema names every type)"
        raise TypeError(msg)
    out = dict(schema)
    if "anyOf" in out:
        out["anyOf"] = [_strict(arm, where) for arm in out["anyOf"]]
    if "prefixItems" in out:
        msg = f"{where}: a strict schema has no fixed-length tuples; use list[...] instead"
        raise TypeError(msg)
    if "items" in out:
        out["items"] = _strict(out["items"], f"{where}[]")
    if out.get("type") == "object":
        props = out.get("properties")
        if props is None:
            msg = (
                f"{where}: a strict schema has no free-form objects (dict[str, ...]); "
                "describe it as an attrs class, a dataclass or a TypedDict"
            )
            raise TypeError(msg)
        needed = set(out.get("required", ()))
        fixed: dict[str, Any] = {}
        for key, sub in props.items():
            sub = _strict(sub, f"{where}.{key}")
            if key not in needed and not _nullable(sub):
                sub = {"anyOf": [sub, {"type": "null"}]}
            fixed[key] = sub
        out["properties"] = fixed
        out["required"] = list(fixed)
        out["additionalProperties"] = False
    return out


def _nullable(schema: dict[str, Any]) -> bool:
    if schema.get("type") == "null":
        return True
    return any(_nullable(arm) for arm in schema.get("anyOf", ()))


def read_output(
    spec: OutputSpec, text: str, *, finish_reason: str, refusal: Optional[str]
) -> Any:
    """The answer ``text`` as a value of ``spec.type`` (a dict for a ``TypedDict``).

    Raises :class:`~blazen.RefusalError` for a refused answer (before any parsing: a
    refusal is words, not JSON), else :class:`~blazen.OutputValidationError` naming what
    was wrong, with ``text`` as its ``raw``.
    """
    from .check import schema_errors
    from .hints import Invalid, convert

    if refusal is not None or finish_reason == "content_filter":
        why = refusal or "a content filter stopped the answer"
        msg = (
            f"the model declined to answer as {spec.name}: {why} (the refusal is on "
            "err.refusal; rephrase the request or handle the refusal)"
        )
        raise RefusalError(msg, refusal=refusal or "", raw=text)
    cut = finish_reason == "length"
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, json.JSONDecodeError):
            detail = f"{exc.msg} at character {exc.pos}"
        else:
            detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        if cut:
            msg = (
                f"the answer was cut off by max_tokens before its JSON ended, so it is not a "
                f"{spec.name}; raise max_tokens (the text so far is on err.raw)"
            )
        elif not text.strip():
            msg = f"the model sent no text where a {spec.name} was due (err.raw is empty)"
        else:
            msg = (
                f"the answer is not JSON ({detail}), so it is not a "
                f"{spec.name}; the text is on err.raw (a model or server that ignores "
                "structured output can send prose)"
            )
        raise OutputValidationError(msg, raw=text) from None
    problems = schema_errors(value, spec.schema)
    if problems:
        msg = (
            f"the answer does not fit {spec.name}: {'; '.join(problems)} (the text is on "
            "err.raw; the model or server may not enforce the schema)"
        )
        raise OutputValidationError(msg, raw=text)
    try:
        return convert(value, spec.type, spec.name)
    except Invalid as exc:
        msg = f"the answer does not make a {spec.name}: {exc} (the text is on err.raw)"
        raise OutputValidationError(msg, raw=text) from None
    except Exception as exc:
        # The class's own validators or __post_init__ may raise anything: the answer
        # still is not a valid value, and the stream still ends in one blazen error.
        msg = (
            f"{spec.name} refused the answer's values ({type(exc).__name__}: {exc}); the "
            "text is on err.raw, and the class's exception is __cause__"
        )
        raise OutputValidationError(msg, raw=text) from exc
