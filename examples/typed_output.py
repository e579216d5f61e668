"""Typed output: ask for a Weather, get a validated Weather back (or one clear error).

python examples/typed_output.py
"""

from __future__ import annotations

import enum
import sys
from typing import Literal, Optional

import attrs
from _demo import model_or_demo, paced

import blazen
from blazen import Llm, Streaming
from blazen.testing import Reply, openai_sse


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


@attrs.frozen
class Wind:
    speed_kmh: float
    direction: Literal["N", "E", "S", "W"]


@attrs.frozen
class Weather:
    """The current weather in one city."""

    city: str
    temperature: float
    unit: Unit
    wind: Optional[Wind]
    summary: str


ANSWER = [
    '{"city": "Paris", ',
    '"temperature": 18.5, "unit": "celsius", ',
    '"wind": {"speed_kmh": 12, "direction": "W"}, ',
    '"summary": "Mild and cloudy."}',
]

blazen.init()
model = model_or_demo([Reply.sse(paced(openai_sse(ANSWER)))])
req = Llm.completion_request(
    [Llm.user("What is the weather in Paris right now? Make it up if you must.")],
    output=Weather,
    max_tokens=300,
)
try:
    # The JSON streams through on_chunk as usual; the response carries the typed answer.
    resp = Streaming.complete(model, req, on_chunk=lambda c: print(c.content_delta or "", end=""))
except blazen.RefusalError as err:
    print(f"\nThe model declined: {err.refusal}", file=sys.stderr)
    sys.exit(1)
except blazen.OutputValidationError as err:
    print(f"\nNot a Weather: {err}", file=sys.stderr)
    sys.exit(1)
finally:
    blazen.shutdown()
weather: Weather = resp.output
print(f"\n{weather.city}: {weather.temperature} {weather.unit.value}, {weather.summary}")
if weather.wind is not None:
    print(f"wind {weather.wind.speed_kmh} km/h from the {weather.wind.direction}")
