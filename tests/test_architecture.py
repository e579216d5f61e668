"""The package's layers: imports run one way, no cycles, no reaching into private names.

Every module of ``blazen`` is parsed (not imported) and each import is resolved to the
blazen module it names. Imports under ``if TYPE_CHECKING:`` do not run and are skipped; an
import inside a function runs when the function does, so it counts like any other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import blazen

ROOT = Path(blazen.__file__).parent

#: Lowest first. A module may import from its own layer's package and from lower layers.
LAYERS: list[tuple[str, ...]] = [
    (
        "blazen._version",
        "blazen._schema",
        "blazen.errors",
        "blazen._json",
        "blazen._types",
        "blazen._codec",
        "blazen._attachments",
        "blazen._cancel",
        "blazen._llm",
        "blazen._telemetry",
        "blazen._pricing",
    ),
    ("blazen._http",),
    # The provider kit: what a wire format is made of (WireFormat, StreamState, error readers).
    ("blazen._kit",),
    ("blazen._stream",),
    ("blazen.providers",),
    ("blazen.sinks", "blazen.workflow", "blazen.agent", "blazen.batch"),
    ("blazen.testing",),
    ("blazen.local",),
    ("blazen.cli",),
    ("blazen", "blazen.__main__"),
]

#: Only the transport imports the HTTP stack.
HTTP_LIBRARIES = ("requests", "urllib3", "sseclient")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            yield from (i for n in node.orelse for i in _imports_in(n))
            continue
        yield from _imports_in(node)


def _imports_in(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    elif isinstance(node, ast.If) and _is_type_checking(node):
        yield from (i for n in node.orelse for i in _imports_in(n))
    else:
        for child in ast.iter_child_nodes(node):
            yield from _imports_in(child)


def _edges(modules: dict[str, Path]) -> Iterator[tuple[str, str, list[str], int]]:
    """(importer, imported blazen module, the names it takes, line) for every import."""
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield name, alias.name, [], node.lineno
                continue
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            # `from .pkg import module` imports the module itself (after pkg's __init__).
            names = []
            for alias in node.names:
                if f"{target}.{alias.name}" in modules:
                    yield name, f"{target}.{alias.name}", [], node.lineno
                else:
                    names.append(alias.name)
            if names or not node.names:
                yield name, target, names, node.lineno


def _layer(module: str) -> tuple[int, str]:
    """The layer of a module and the unit (package or module) that owns it."""
    best: tuple[int, str] | None = None
    for rank, units in enumerate(LAYERS):
        for unit in units:
            if (module == unit or module.startswith(unit + ".")) and (
                best is None or len(unit) > len(best[1])
            ):
                best = (rank, unit)
    assert best is not None, f"{module} belongs to no layer: add it to LAYERS"
    return best


MODULES = _modules()
EDGES = [e for e in _edges(MODULES) if e[1] == "blazen" or e[1].startswith("blazen.")]


def test_every_module_belongs_to_a_layer():
    for module in MODULES:
        _layer(module)


def test_imports_run_down_the_layers():
    """A module imports only from its own package or from a lower layer, never up or across."""
    wrong = []
    for importer, imported, _, line in EDGES:
        (rank_a, unit_a), (rank_b, unit_b) = _layer(importer), _layer(imported)
        if unit_a == unit_b:
            continue
        if rank_b > rank_a or (rank_b == rank_a and rank_a != 0):
            wrong.append(f"{importer}:{line} imports {imported} ({unit_a} -> {unit_b})")
    assert wrong == []


def test_no_import_cycle():
    """Between modules, counting every import that runs (not the TYPE_CHECKING ones)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for importer, imported, _, _ in EDGES:
        if imported in MODULES and imported != importer:
            # Importing a submodule runs its package's __init__ first, but that is the
            # package importing down into itself, not a cycle of this module's making.
            if importer.startswith(imported + "."):
                continue
            graph[importer].add(imported)
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_no_module_takes_another_modules_private_names():
    """A name with a leading underscore stays in its module: others get a public seam."""
    wrong = [
        f"{importer}:{line} takes {n} from {imported}"
        for importer, imported, names, line in EDGES
        for n in names
        if n.startswith("_") and not n.startswith("__") and imported != importer
    ]
    assert wrong == []


def test_only_the_transport_imports_the_http_stack():
    """requests, urllib3 and sseclient stay behind blazen._http's small response object."""
    wrong = []
    for name, path in MODULES.items():
        if name == "blazen._http" or name.startswith("blazen._http."):
            continue
        for node in _imports(ast.parse(path.read_text())):
            targets = (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            )
            for target in targets:
                if target and not getattr(node, "level", 0) and target.split(".")[0] in HTTP_LIBRARIES:
                    wrong.append(f"{name}:{node.lineno} imports {target}")
    assert wrong == []


def test_the_layer_checks_see_the_imports_they_judge():
    """The walk finds the imports it must: a check that saw nothing could not fail."""
    pairs = {(a, b) for a, b, _, _ in EDGES}
    assert ("blazen._stream.worker", "blazen._http") in pairs
    assert ("blazen._stream.worker", "blazen._kit") in pairs
    assert ("blazen.providers.openai", "blazen._kit") in pairs
    assert ("blazen.cli", "blazen.providers") in pairs
    assert _layer("blazen._kit.state") == (2, "blazen._kit")
    assert _layer("blazen._stream.worker") == (3, "blazen._stream")
    assert _layer("blazen.agent.tools.hints") == (5, "blazen.agent")


#: The providers' modules that bind wire formats to models (ChatModel is the engine's).
#: Every other module there is a wire format or its helpers: written on the provider kit
#: alone, as a third party's would be.
BINDING_MODULES = ("blazen.providers.factories", "blazen.providers.build")


def test_wire_formats_import_the_kit_not_the_stream_engine():
    """A wire format needs only the provider kit below it: the engine is not its business."""
    wrong = [
        f"{importer}:{line} imports {imported}"
        for importer, imported, _, line in EDGES
        if importer.startswith("blazen.providers.")
        and importer not in BINDING_MODULES
        and (imported == "blazen._stream" or imported.startswith("blazen._stream."))
    ]
    assert wrong == []
    binding = {a for a, b, _, _ in EDGES if b.startswith("blazen._stream")}
    assert set(BINDING_MODULES) <= binding  # the check sees the imports it lets through
