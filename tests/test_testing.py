"""blazen.testing is a thin facade over independent modules of frozen attrs values."""

from __future__ import annotations

import ast
import copy
import importlib
import pickle
import sys
from pathlib import Path

import attrs
import pytest

import blazen.testing
from blazen.testing import ConnectionRecord, Drop, Pause, RecordedRequest, Reply, Stall

PACKAGE = Path(blazen.testing.__file__).parent
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


def _imports(module: str) -> list[tuple[int, str, list[str]]]:
    """``(level, module, names)`` for every import statement of a module of the package."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    found: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(0, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or "", [a.name for a in node.names]))
    return found


@pytest.mark.skipif(sys.version_info < (3, 10), reason="sys.stdlib_module_names is 3.10+")
@pytest.mark.parametrize("module", MODULES)
def test_testing_modules_import_only_the_standard_library_attrs_and_each_other(module):
    """The fake server never depends on the client it tests, nor on another's private names."""
    for level, name, names in _imports(module):
        if level:
            assert level == 1 and name in MODULES, (module, name)
            assert not any(n.startswith("_") for n in names), (module, name, names)
        else:
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names or top in ("attrs", "__future__"), name


def test_facade_exports_every_public_name_of_its_modules_sorted():
    """``__all__`` is sorted and is exactly the union of the modules' own ``__all__``."""
    exported = blazen.testing.__all__
    assert exported == sorted(exported)
    names = {n for m in MODULES for n in importlib.import_module(f"blazen.testing.{m}").__all__}
    assert set(exported) == names
    assert all(getattr(blazen.testing, n) is not None for n in exported)


@pytest.mark.parametrize(
    "value",
    [
        Pause(0.5),
        Stall(),
        Drop(),
        Reply.sse(b"data: x\n\n"),
        RecordedRequest(method="POST", path="/v1", headers={"A": "b"}, body=b"{}"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_testing_values_are_frozen_and_compare_copy_and_pickle_by_their_fields(value):
    """Replies and records can be shared between tests and threads without being changed."""
    assert attrs.has(type(value))
    for again in (copy.copy(value), copy.deepcopy(value), pickle.loads(pickle.dumps(value))):
        assert again == value and repr(again) == repr(value)
    with pytest.raises(AttributeError):
        value.other = 1


def test_pause_is_built_and_matched_positionally_and_replies_by_keyword():
    """``Pause(0.5)`` as before; ``Reply`` and ``RecordedRequest`` take keywords only."""
    assert Pause(0.5) == Pause(seconds=0.5) and Pause(0.5) != Pause(1)
    assert Pause.__match_args__ == ("seconds",)
    assert hash(Stall()) == hash(Stall()) and Stall() != Drop()
    with pytest.raises(TypeError):
        Reply(200)  # type: ignore[misc]
    with pytest.raises(TypeError):
        RecordedRequest("GET", "/", {}, b"")  # type: ignore[misc]


def test_reply_without_headers_gets_its_own_empty_dict():
    """``headers=None`` (or none given) is an empty dict, never one shared between replies."""
    assert Reply().headers == {} == Reply(headers=None).headers
    assert Reply().headers is not Reply().headers
    assert repr(Reply()) == (
        "Reply(status=200, headers={}, body=(), transfer='chunked', raw=False, close=False, "
        "version='HTTP/1.1', encoding=None, length=None)"
    )


def test_connection_record_is_filled_in_by_the_server_and_compared_by_identity():
    """A record starts open; the serving thread sets how it ended."""
    record = ConnectionRecord(1.0)
    assert (record.closed_at, record.closed_by, record.requests) == (None, None, 0)
    record.closed_at, record.closed_by = 2.0, "client"
    assert repr(record) == (
        "ConnectionRecord(opened_at=1.0, closed_at=2.0, closed_by='client', requests=0)"
    )
    assert record != ConnectionRecord(1.0) and len({record, record}) == 1
