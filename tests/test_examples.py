"""examples/switch_provider.py runs end to end for every provider, offline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "switch_provider.py"
_spec = importlib.util.spec_from_file_location("switch_provider", EXAMPLE)
assert _spec is not None and _spec.loader is not None
switch_provider = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(switch_provider)


@pytest.mark.parametrize("provider", switch_provider.PROVIDERS)
def test_switch_provider_streams_the_same_request_through_every_provider(provider, capsys):
    """--offline replays that provider's recorded wire format and says so."""
    assert switch_provider.main(["--provider", provider, "--offline"]) == 0
    out = capsys.readouterr().out
    assert "replaying the recorded stream" in out
    assert "Why did the scarecrow win an award?" in out
    assert f"[{provider}: done, finish_reason='stop'" in out


def test_switch_provider_without_a_key_falls_back_and_names_the_variable(capsys):
    """With no key configured, the example tells the user which variable it looked for."""
    assert switch_provider.main(["--provider", "anthropic"]) == 0
    out = capsys.readouterr().out
    assert "ANTHROPIC_API_KEY" in out and "replaying" in out
