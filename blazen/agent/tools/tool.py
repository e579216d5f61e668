"""``blazen.Tool`` and ``@blazen.tool``: a Python function the model may call. No I/O.

The JSON schema of a tool's arguments is built from the function's type hints and its
docstring (Google, NumPy or Sphinx style), so the function stays the one source of truth.
Arguments the model sends are checked against that schema and converted back to the Python
types the function declared (enums, attrs classes, dataclasses, tuples) before it runs.
"""

from __future__ import annotations

import enum
import functools
import inspect
import json
import re
import typing
from collections.abc import Mapping
from typing import Any, Callable, Optional, Union, overload

from ..._cancel import CancelToken
from ..._schema.check import schema_errors
from ..._schema.docstrings import parse_docstring
from ..._schema.hints import EMPTY, UNIONS, Invalid, convert, json_type, schema_for
from ..._types import ToolDefinition
from ...errors import ValidationError

__all__ = ["Tool", "tool"]

# OpenAI's rule for function names; the other providers accept a superset of it.
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")


def _is_cancel_token(hint: Any) -> bool:
    if typing.get_origin(hint) in UNIONS:
        return any(_is_cancel_token(a) for a in typing.get_args(hint) if a is not type(None))
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
        summary, notes = parse_docstring(inspect.getdoc(fn))
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
                if p.default is not EMPTY or p.kind is p.VAR_POSITIONAL:
                    continue  # never filled by the model
                msg = f"{where}: positional-only parameter {p.name!r} cannot take a named argument"
                raise TypeError(msg)
            if _is_cancel_token(hint):
                self._cancel_param = p.name
                continue
            self._hints[p.name] = hint
            schema = schema_for(hint, f"{where}, parameter {p.name!r}")
            if p.name in notes and "description" not in schema:
                schema["description"] = notes[p.name]
            if p.default is EMPTY:
                required.append(p.name)
            else:
                default = p.default.value if isinstance(p.default, enum.Enum) else p.default
                if json_type(default) is not None:
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
    def span_attributes(self) -> dict[str, Any]:
        """Extra attributes of this tool's ``execute_tool`` span (an MCP tool names its server)."""
        return {}

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
            return {k: convert(v, self._hints.get(k, EMPTY), k) for k, v in arguments.items()}
        except Invalid as exc:
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
