"""Guards against typos in the wire fixtures of every provider."""

from __future__ import annotations

import json

import pytest

from .conftest import FIXTURES

SSE = sorted(FIXTURES.glob("*/*.sse"))
NDJSON = sorted(FIXTURES.glob("*/*.ndjson"))
BODIES = sorted(FIXTURES.glob("*/*.json"))


@pytest.mark.parametrize("path", SSE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sse_fixtures_hold_json_events_ended_by_a_blank_line(path):
    """Every data line is JSON or [DONE]; the last event is terminated (a real stream's is)."""
    raw = path.read_bytes()
    for line in raw.decode().splitlines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            json.loads(line[5:])
    if path.name != "truncated.sse":
        assert raw.endswith((b"\n\n", b"\r\n\r\n"))


@pytest.mark.parametrize("path", NDJSON, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_ndjson_fixtures_hold_one_json_object_per_line(path):
    """Every line is one JSON object, newline-terminated."""
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    for line in raw.decode().splitlines():
        assert isinstance(json.loads(line), dict)


@pytest.mark.parametrize("path", BODIES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_error_body_fixtures_are_json(path):
    """HTTP error bodies are JSON objects with an error in them."""
    assert "error" in json.loads(path.read_bytes())
