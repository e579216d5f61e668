"""Tools from plain functions: the JSON schema from type hints and docstrings, and the
checking and conversion of the arguments a model sends."""

from __future__ import annotations

import dataclasses
import enum
import functools
import typing
from typing import Annotated, Any, Literal, Optional, Union

import attrs
import pytest

import blazen
from blazen import CancelToken, Tool, tool
from blazen._schema.check import schema_errors


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Point:
    """A point on the map."""

    x: float
    y: float = 0.0


@dataclasses.dataclass
class Stop:
    name: str
    minutes: int = 0


def schema_of(hint: Any) -> dict[str, Any]:
    """The schema of a one-parameter function's parameter ``v`` of type ``hint``."""

    def fn(v):  # type: ignore[no-untyped-def]
        return v

    fn.__annotations__ = {"v": hint}
    props = Tool(fn).parameters["properties"]
    return props["v"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        # The old typing spellings, which users still write:
        (typing.List[int], {"type": "array", "items": {"type": "integer"}}),  # noqa: UP006
        (typing.Sequence[float], {"type": "array", "items": {"type": "number"}}),
        (set[str], {"type": "array", "items": {"type": "string"}}),
        (list, {"type": "array", "items": {}}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (
            typing.Tuple[int, str],  # noqa: UP006
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (typing.Dict[str, Any], {"type": "object", "additionalProperties": {}}),  # noqa: UP006
        (dict, {"type": "object"}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, "x"], {"enum": [1, "x"]}),
        (Unit, {"type": "string", "enum": ["celsius", "fahrenheit"]}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (Any, {}),
        (Annotated[str, "The city's name"], {"type": "string", "description": "The city's name"}),
        (
            Point,
            {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x"],
                "description": "A point on the map.",
            },
        ),
        (
            list[Stop],
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "minutes": {"type": "integer"}},
                    "required": ["name"],
                },
            },
        ),
    ],
    ids=repr,
)
def test_each_supported_type_hint_has_its_json_schema(hint: Any, schema: dict[str, Any]) -> None:
    """Every supported parameter type becomes the JSON schema a model understands."""
    assert schema_of(hint) == schema


def test_function_schema_has_required_defaults_and_docstring_descriptions() -> None:
    """Parameters without defaults are required; defaults and Google-style docs are kept."""

    @tool
    def get_weather(city: str, unit: Unit = Unit.CELSIUS, days: int = 1) -> str:
        """Current weather in a city.

        Looks the city up in a
        weather service.

        Args:
            city: The city's name,
                such as "Paris".
            days (int): How many days.

        Returns:
            A sentence.
        """
        return city

    assert get_weather.name == "get_weather"
    assert get_weather.description == (
        "Current weather in a city.\n\nLooks the city up in a weather service."
    )
    assert get_weather.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": 'The city\'s name, such as "Paris".'},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
            "days": {"type": "integer", "description": "How many days.", "default": 1},
        },
        "required": ["city"],
    }
    assert get_weather.definition == blazen.Llm.tool(
        "get_weather", get_weather.description, get_weather.parameters
    )


def test_numpy_and_sphinx_docstrings_describe_parameters() -> None:
    """NumPy sections and Sphinx :param: fields are read as well as Google's Args."""

    def numpy_style(a: int, b: int) -> int:
        """Add two numbers.

        Parameters
        ----------
        a : int
            The first
            number.
        b : int
            The second.
        """
        return a + b

    def sphinx_style(a: int, b: int) -> int:
        """Add two numbers.

        :param a: The first number.
        :param int b: The second.
        :returns: the sum
        """
        return a + b

    for fn in (numpy_style, sphinx_style):
        t = Tool.from_function(fn)
        assert t.description == "Add two numbers."
        props = t.parameters["properties"]
        assert props["a"]["description"] == "The first number."
        assert props["b"]["description"] == "The second."


def test_name_description_and_parameters_can_be_given_explicitly() -> None:
    """Explicit name, description and parameters override what the function says."""
    schema = {"type": "object", "properties": {"q": {"type": "string", "minLength": 2}}}

    @tool(name="search-docs", description="Search the docs.", parameters=schema)
    def search(q):  # type: ignore[no-untyped-def]
        """Ignored."""
        return q

    assert (search.name, search.description, search.parameters) == (
        "search-docs",
        "Search the docs.",
        schema,
    )
    with pytest.raises(blazen.ValidationError, match="at least 2 character"):
        search.validate({"q": "x"})


def test_decorated_tool_is_still_callable_and_knows_if_it_is_async() -> None:
    """@tool returns a Tool that calls the function; coroutine functions are recognised."""

    @tool
    def double(n: int) -> int:
        return n * 2

    @tool(exit=True)
    async def finish(answer: str) -> str:
        return answer

    assert double(4) == 8
    assert isinstance(double, Tool) and not double.is_async and not double.exit
    assert finish.is_async and finish.exit
    assert repr(double) == "Tool(name='double', exit=False, is_async=False)"


def test_partials_methods_and_callable_objects_are_described() -> None:
    """Hints are read through functools.partial, bound methods and __call__."""

    def scale(factor: float, value: float) -> float:
        return factor * value

    class Greeter:
        def greet(self, name: str) -> str:
            return "hi " + name

        def __call__(self, times: int) -> int:
            return times

    assert Tool(functools.partial(scale, 2.0), name="scale").parameters["required"] == ["value"]
    assert Tool(Greeter().greet).parameters["properties"] == {"name": {"type": "string"}}
    assert Tool(Greeter(), name="count").parameters["properties"] == {"times": {"type": "integer"}}


def test_cancel_token_parameter_is_hidden_from_the_model() -> None:
    """A CancelToken parameter is filled by the agent, not described to the model."""

    def slow(n: int, cancel: Optional[CancelToken] = None) -> int:
        return n

    t = Tool(slow)
    assert list(t.parameters["properties"]) == ["n"]
    assert t.cancel_parameter == "cancel"


@pytest.mark.parametrize(
    ("hint", "match"),
    [
        (bytes, "cannot describe"),
        (dict[int, str], "keys are strings"),
        (Literal[b"x"], "choices must be"),
    ],
)
def test_types_without_a_json_schema_fail_at_definition_naming_the_parameter(
    hint: Any, match: str
) -> None:
    """A type blazen cannot describe is a TypeError naming the tool and parameter."""
    with pytest.raises(TypeError, match=match) as info:
        schema_of(hint)
    assert "parameter 'v'" in str(info.value)


@dataclasses.dataclass
class Node:
    child: Optional[Node] = None


@attrs.frozen
class Positive:
    n: int = attrs.field(validator=attrs.validators.gt(0))


def test_bad_names_positional_only_and_self_reference_are_rejected() -> None:
    """Names must suit every provider; positional-only and recursive types cannot work."""

    def node(n: Node) -> None:
        pass

    def positional(a: int, /) -> int:
        return a

    with pytest.raises(ValueError, match="pass name="):
        Tool(lambda: None)
    with pytest.raises(ValueError, match="pass name="):
        Tool(len, name="has space")
    with pytest.raises(ValueError, match="pass name="):
        Tool(len, name="get_weather\n")  # a pattern's $ matches before a final newline
    with pytest.raises(TypeError, match="positional-only"):
        Tool(positional)
    with pytest.raises(TypeError, match="refers to itself"):
        Tool(node)
    with pytest.raises(TypeError, match="callable"):
        Tool("not a function")  # type: ignore[arg-type]


def test_unresolvable_hints_are_a_clear_type_error() -> None:
    """A hint naming a type that does not exist is reported, not a NameError later."""

    def broken(x: DoesNotExist) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    with pytest.raises(TypeError, match=r"cannot be resolved.*importable from"):
        Tool(broken)


# -- arguments ---------------------------------------------------------------------------


def trip(
    start: Point,
    stops: list[Stop],
    unit: Unit = Unit.CELSIUS,
    pair: tuple[int, str] = (0, ""),
    tags: frozenset[str] = frozenset(),
    speed: float = 1.0,
    count: int = 1,
    note: Optional[str] = None,
) -> None:
    """Plan a trip."""


def test_valid_arguments_are_converted_to_the_declared_python_types() -> None:
    """Enums, attrs classes, dataclasses, tuples and sets come back as themselves."""
    kwargs = Tool(trip).validate(
        {
            "start": {"x": 1, "y": 2.5},
            "stops": [{"name": "Lyon", "minutes": 30}],
            "unit": "fahrenheit",
            "pair": [3, "b"],
            "tags": ["a", "b", "a"],
            "speed": 2,
            "count": 3.0,
            "note": None,
        }
    )
    assert kwargs == {
        "start": Point(1.0, 2.5),
        "stops": [Stop("Lyon", 30)],
        "unit": Unit.FAHRENHEIT,
        "pair": (3, "b"),
        "tags": frozenset({"a", "b"}),
        "speed": 2.0,
        "count": 3,
        "note": None,
    }
    assert type(kwargs["speed"]) is float and type(kwargs["count"]) is int


@pytest.mark.parametrize(
    ("arguments", "problems"),
    [
        ({}, ["start: required but missing", "stops: required but missing"]),
        ({"start": {"x": "1"}, "stops": []}, ["start.x: expected number, got '1'"]),
        ({"start": {"x": 1}, "stops": [{}]}, ["stops[0].name: required but missing"]),
        (
            {"start": {"x": 1}, "stops": [], "unit": "kelvin"},
            ["unit: must be one of 'celsius', 'fahrenheit'; got 'kelvin'"],
        ),
        ({"start": {"x": 1}, "stops": [], "count": True}, ["count: expected integer, got True"]),
        ({"start": {"x": 1}, "stops": [], "count": 1.5}, ["count: expected integer, got 1.5"]),
        (
            {"start": {"x": 1}, "stops": [], "pair": [1]},
            ["pair: needs at least 2 item(s), got 1"],
        ),
        ({"start": {"x": 1}, "stops": [], "note": 3}, ["note: expected string or null, got 3"]),
        (
            {"start": {"x": 1}, "stops": [], "city": "Paris"},
            [
                "unexpected argument(s) city (expected: start, stops, unit, pair, tags, speed, "
                "count, note)"
            ],
        ),
        ({"start": {"x": 1, "z": 0}, "stops": []}, ["start: unexpected field(s) z"]),
    ],
)
def test_invalid_arguments_raise_validation_error_with_every_problem(
    arguments: dict[str, Any], problems: list[str]
) -> None:
    """Each problem names where it is, so a model can correct its call."""
    with pytest.raises(blazen.ValidationError) as info:
        Tool(trip).validate(arguments)
    assert info.value.message == "invalid arguments for tool 'trip': " + "; ".join(problems)


def test_keyword_catch_all_accepts_extra_arguments() -> None:
    """A function with **kwargs takes arguments its schema does not list."""

    def flexible(a: int, **rest: Any) -> None:
        pass

    assert Tool(flexible).validate({"a": 1, "b": [2]}) == {"a": 1, "b": [2]}


def test_attrs_validators_reject_arguments_as_validation_errors() -> None:
    """A value the class itself refuses is an argument problem, not a crash."""

    def take(p: Positive) -> None:
        pass

    with pytest.raises(blazen.ValidationError, match="p: "):
        Tool(take).validate({"p": {"n": -1}})


# -- the schema checker ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "schema", "problems"),
    [
        (None, {"type": "string", "nullable": True}, []),
        (5, {"type": "integer", "minimum": 1, "maximum": 3}, ["must be at most 3, got 5"]),
        (1, {"type": "number", "exclusiveMinimum": 1}, ["must be more than 1, got 1"]),
        ("abc", {"type": "string", "pattern": "^[0-9]+$"}, ["must match the pattern '^[0-9]+$'"]),
        ("abc", {"type": "string", "maxLength": 2}, ["allows at most 2 character(s)"]),
        (
            {"a": 1},
            {"type": "object", "additionalProperties": False},
            ["a: unexpected (allowed: none)"],
        ),
        (True, {"enum": [1, 2]}, ["must be one of 1, 2; got True"]),
        (2, {"const": 3}, ["must be 3, got 2"]),
        (
            [1, "x"],
            {"type": "array", "items": {"type": "integer"}},
            ["[1]: expected integer, got 'x'"],
        ),
        (
            "x",
            {"oneOf": [{"type": "string", "enum": ["y"]}, {"type": "integer"}]},
            ["must be one of 'y'; got 'x'"],
        ),
        ("x", {"type": ["integer", "null"]}, ["expected integer or null, got 'x'"]),
        ({"k": "v"}, {"$ref": "#/defs/thing", "format": "uri"}, []),
        (
            list(range(9)),
            {"type": "array", "items": {"type": "string"}},
            [f"[{i}]: expected string, got {i}" for i in range(5)] + ["and 4 more problem(s)"],
        ),
    ],
)
def test_schema_checker_keywords(value: Any, schema: dict[str, Any], problems: list[str]) -> None:
    """The checker knows the keywords tool schemas use and ignores the ones it does not."""
    assert schema_errors(value, schema) == problems
