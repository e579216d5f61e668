"""``import blazen`` loads the streaming core only; everything else loads on first use.

Each test runs a fresh interpreter, since this process has long imported everything. The
checks are on which modules a fresh ``import blazen`` leaves unloaded, never on timings
(the figures are ``benchmarks`` scenario e); and on the lazily loaded names behaving as the
eagerly loaded ones did: each reports ``blazen`` as its module, whichever way it loaded.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import blazen

#: blazen's modules that only some users need: the workflow builder and engine, the
#: type-hint machinery of ``output=`` and tools, embeddings, fallbacks and OpenTelemetry.
LAZY_MODULES = {
    "blazen.workflow",
    "blazen.workflow.builder",
    "blazen.workflow.events",
    "blazen.workflow.validate",
    "blazen._schema.hints",
    "blazen._schema.check",
    "blazen._schema.docstrings",
    "blazen._stream.embedding",
    "blazen._kit.embedding",
    "blazen._stream.fallback",
    "blazen._telemetry",
    "blazen._types.embedding",
    "blazen._types.stream_events",
}

#: The standard library blazen needs only for those (prices, a model's unpickling, typed
#: output): checked against what requests, sseclient-py and attrs load themselves.
LAZY_STDLIB = {"decimal", "_decimal", "pickle", "_pickle", "dataclasses", "inspect"}

#: Every name ``import blazen`` resolves on first use (``blazen.batch`` is a module).
LAZY_NAMES = [
    "Agent",
    "AgentResult",
    "ChunkEvent",
    "Context",
    "DoneEvent",
    "EmbeddingResponse",
    "ErrorEvent",
    "Event",
    "Providers",
    "StepHandler",
    "StepOutput",
    "Tool",
    "ToolResult",
    "Workflow",
    "WorkflowResult",
    "capture_otel_content",
    "tool",
    "workflow",
]


def run(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def loaded_by(statement: str) -> set[str]:
    return set(ast.literal_eval(run(f"import sys; {statement}; print(sorted(sys.modules))")))


def test_import_blazen_leaves_what_only_some_users_need_unloaded():
    """Workflows, typed output, embeddings, fallbacks and telemetry wait for their first use."""
    modules = loaded_by("import blazen")
    assert "blazen._stream.streaming" in modules  # the check sees blazen's own modules
    assert sorted(LAZY_MODULES & modules) == []


def test_import_blazen_adds_no_stdlib_module_only_some_users_need():
    """decimal, pickle, dataclasses and inspect: none that the libraries below did not load."""
    reference = loaded_by("import requests, sseclient, attrs")
    modules = loaded_by("import blazen")
    assert sorted((LAZY_STDLIB & modules) - reference) == []


def test_every_lazy_name_resolves_and_reports_blazen():
    """Each name loads on first use and reports ``blazen``, as when it loaded eagerly."""
    assert set(LAZY_NAMES) | {"batch"} <= set(blazen.__all__)
    code = (
        "import blazen\n"
        f"for name in {LAZY_NAMES!r}:\n"
        "    value = getattr(blazen, name)\n"
        "    print(name, value.__module__, getattr(blazen, name) is value)\n"
        "print('batch', blazen.batch.__name__, callable(blazen.workflow))\n"
    )
    lines = run(code).splitlines()
    assert lines == [f"{name} blazen True" for name in LAZY_NAMES] + ["batch blazen.batch True"]


def test_a_subpackage_imported_directly_still_exports_under_blazen():
    """``from blazen.workflow import ...`` first: the classes report ``blazen``, and
    ``blazen.workflow`` stays the decorator, not the subpackage the import system binds."""
    code = (
        "import pickle, blazen\n"
        "from blazen.workflow import Context, Event, Workflow\n"
        "print(Event.__module__, Workflow.__module__, callable(blazen.workflow))\n"
        "print(pickle.loads(pickle.dumps(Event('e', '{}'))) == Event('e', '{}'))\n"
        "print(blazen.Context is Context, blazen.workflow is blazen.workflow)\n"
    )
    assert run(code).split() == ["blazen", "blazen", "True", "True", "True", "True"]


def test_dir_lists_every_exported_name_before_its_first_use():
    """``dir(blazen)`` shows the whole public API, loaded or not (PEP 562's ``__dir__``)."""
    code = "import blazen; print(sorted(set(blazen.__all__) - set(dir(blazen))))"
    assert run(code).strip() == "[]"


def test_the_lazy_internals_still_resolve_through_their_packages():
    """``blazen._stream.Fallback`` and ``blazen._kit.EmbeddingWire`` load when asked for."""
    code = (
        "import blazen, blazen._kit, blazen._stream\n"
        "print(blazen._stream.Fallback.__name__, blazen._stream.SwitchOn is not None)\n"
        "print(blazen._kit.EmbeddingBatch.__name__, blazen._kit.EmbeddingWire.__name__)\n"
    )
    assert run(code).split() == ["Fallback", "True", "EmbeddingBatch", "EmbeddingWire"]


def test_values_blazen_loads_for_itself_first_still_report_blazen():
    """A pull loop's events or an embedding loaded by blazen's own code before anyone asked
    ``blazen`` for them: they report ``blazen`` all the same, and pickle under that name."""
    code = (
        "import pickle, blazen\n"
        "from blazen._types import DoneEvent, EmbeddingResponse\n"
        "print(DoneEvent.__module__, EmbeddingResponse.__module__, blazen.DoneEvent is DoneEvent)\n"
        "event = DoneEvent('stop', None, None)\n"
        "print(pickle.loads(pickle.dumps(event)) == event, b'blazen._types' in pickle.dumps(event))\n"
    )
    assert run(code).split() == ["blazen", "blazen", "True", "True", "False"]


def test_lazy_values_leave_typing_and_the_stdlib_alone_and_stay_in_dir():
    """Loading ``StreamEvent`` (a typing alias, shared) or ``Vector`` changes no module of
    theirs, and ``dir(blazen._types)`` lists the lazily loaded names before their use."""
    code = (
        "import blazen, blazen._types as t\n"
        "print(sorted({'ChunkEvent', 'Vector', 'StreamEvent'} - set(dir(t))))\n"
        "print(t.StreamEvent.__module__, t.Vector.__module__, t.ChunkEvent.__module__)\n"
    )
    assert run(code).split() == ["[]", "typing", "array", "blazen"]
