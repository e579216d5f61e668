"""Every name in ``blazen.__all__`` reports ``blazen`` as its module, as httpx's names do.

Reprs, pickles, tracebacks and the docs then name what users import (``blazen.StreamChunk``),
never the private module that defines it, and ``typing.get_type_hints`` still resolves
the annotations of every exported class.
"""

from __future__ import annotations

import inspect
import pickle
import subprocess
import sys
import traceback
import typing

import pytest

import blazen

NAMES = [n for n in blazen.__all__ if n not in ("__version__", "batch")]


@pytest.mark.parametrize("name", NAMES)
def test_an_exported_name_reports_blazen_as_its_module(name):
    """Its ``__module__`` is ``blazen``, its repr says so, and pickle finds it there."""
    value = getattr(blazen, name)
    assert value.__module__ == "blazen"
    assert pickle.loads(pickle.dumps(value)) is value
    if inspect.isclass(value):
        assert repr(value) == f"<class 'blazen.{value.__qualname__}'>"
        assert inspect.getmodule(value) is blazen


@pytest.mark.parametrize("name", [n for n in NAMES if inspect.isclass(getattr(blazen, n))])
def test_an_exported_class_still_resolves_its_type_hints(name):
    """The annotations a class wrote as strings resolve, though it now reports ``blazen``."""
    hints = typing.get_type_hints(getattr(blazen, name))
    assert all(not isinstance(h, (str, typing.ForwardRef)) for h in hints.values()), hints


def test_values_and_errors_pickle_and_print_under_blazen():
    """Instances round-trip through pickle; a raised error's traceback names ``blazen.AuthError``."""
    chunk = blazen.StreamChunk(content_delta="a")
    event = blazen.ChunkEvent(chunk)
    assert pickle.loads(pickle.dumps(chunk)) == chunk
    assert pickle.loads(pickle.dumps(event)) == event
    err = blazen.RateLimitError("slow down", retry_after=3.0)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is blazen.RateLimitError and back.retry_after == 3.0
    try:
        raise blazen.AuthError("no key")
    except blazen.AuthError as exc:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    assert "blazen.AuthError: no key" in text


def test_a_lazily_loaded_name_reports_blazen_too():
    """``blazen.Agent`` and ``blazen.Providers`` load on first use, and report ``blazen`` then."""
    code = (
        "import blazen, sys; "
        "assert 'blazen.agent' not in sys.modules; "
        "print(blazen.Agent.__module__, blazen.Providers.__module__, blazen.tool.__module__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["blazen", "blazen", "blazen"]
