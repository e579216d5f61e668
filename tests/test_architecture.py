"""The package's layers: imports run one way, no cycles, no reaching into private names.

The layer order is the tables of ``docs/architecture.md``, read here, so the picture and the
rule cannot drift apart. Every module of ``blazen`` is parsed (not imported) and every import
statement counts: at the top, inside a function, under ``if TYPE_CHECKING:`` (a type-only
import still ties two modules together), and ``importlib.import_module`` of a literal name.
Importing ``a.b.c`` runs ``a/b/__init__.py`` first, so it counts as importing ``a.b`` too.
A failure prints each import line that breaks the rule.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

import blazen

ROOT = Path(blazen.__file__).parent
DOC = ROOT.parent / "docs" / "architecture.md"

#: Only the transport imports the HTTP stack.
HTTP_LIBRARIES = ("requests", "urllib3", "sseclient")


class Import(NamedTuple):
    """One import of one blazen module by another, and the statement that makes it."""

    importer: str
    imported: str
    #: The names taken (``from x import a, b``); empty for a module imported whole.
    names: tuple[str, ...]
    #: The importing file, as ``blazen/errors.py``.
    file: str
    line: int
    statement: str
    #: Set when the import reaches ``imported`` only as the package of this submodule.
    via: str = ""

    def where(self) -> str:
        """``blazen/errors.py:48: from ._types import TokenUsage``."""
        extra = f"  (runs {self.imported}, the package of {self.via})" if self.via else ""
        return f"{self.file}:{self.line}: {self.statement}{extra}"


class Table(NamedTuple):
    """One layer table of the doc: the units of each row, lowest row first."""

    #: The folder (relative to the package) the table orders, "" for the package itself.
    scope: str
    rows: list[list[str]]


def read_layers(doc: Path = DOC) -> list[Table]:
    """The doc's layer tables: each whose header's first cell says ``lowest first``.

    A unit is a module (``errors.py``) or a folder (``_stream/``), relative to the package
    in the main table and to the folder named in the header (``_stream/``) in another.
    """
    tables = []
    lines = doc.read_text().splitlines()
    for i, line in enumerate(lines[:-1]):
        if not (line.startswith("|") and "lowest first" in line.split("|")[1]):
            continue
        assert set(lines[i + 1]) <= set("|-: "), f"{doc}:{i + 2}: a table's header rule"
        scope = "".join(re.findall(r"`([^`]+/)`", line.split("|")[1])[:1])
        rows = []
        for row in lines[i + 2 :]:
            if not row.startswith("|"):
                break
            rows.append([scope + unit for unit in re.findall(r"`([^`]+)`", row.split("|")[1])])
        tables.append(Table(scope, rows))
    return tables


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name."""
    return {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _resolve(anchor: str, level: int, name: str) -> str:
    base = anchor.split(".")
    base = base[: len(base) - level + 1] if level else []
    return ".".join([*base, name] if name else base)


def _targets(
    node: ast.AST, name: str, package: str, known: dict[str, Path]
) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(module, names taken) for each module ``node`` imports, absolute and relative."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, ()
    elif isinstance(node, ast.ImportFrom):
        target = _resolve(package, node.level, node.module or "")
        names = []
        for alias in node.names:
            # `from .pkg import module` imports the module itself (after pkg's __init__).
            if f"{target}.{alias.name}" in known:
                yield f"{target}.{alias.name}", ()
            else:
                names.append(alias.name)
        if names:
            yield target, tuple(names)
    elif (
        isinstance(node, ast.Call)
        and (ast.unparse(node.func) in ("importlib.import_module", "import_module"))
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        # A lazy import is an import all the same: it may not hide a cycle. Its anchor is
        # `__name__` (this module) or a literal package name.
        wanted = node.args[0].value
        level = len(wanted) - len(wanted.lstrip("."))
        anchor = node.args[1] if len(node.args) > 1 else None
        if isinstance(anchor, ast.Constant) and isinstance(anchor.value, str):
            yield _resolve(anchor.value, level, wanted[level:]), ()
        elif not level or (isinstance(anchor, ast.Name) and anchor.id == "__name__"):
            yield _resolve(name, level, wanted[level:]), ()


def imports(root: Path = ROOT) -> list[Import]:
    """Every import, by any statement anywhere in a module, of one blazen module by another."""
    known = modules(root)
    found = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        file = path.relative_to(root.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target, names in _targets(node, name, package, known):
                if target not in known:
                    continue  # not blazen's (or a name the import system would refuse)
                statement = " ".join(ast.unparse(node).split())
                line = node.lineno
                found.append(Import(name, target, names, file, line, statement))
                # Importing a.b.c runs a.b's __init__ first, unless a.b is the importer's
                # own package (already running) or the package everything is in.
                parts = target.split(".")
                for n in range(2, len(parts)):
                    ancestor = ".".join(parts[:n])
                    if ancestor in known and not (
                        name == ancestor or name.startswith(ancestor + ".")
                    ):
                        found.append(Import(name, ancestor, (), file, line, statement, target))
    return found


def _relative(module: str, known: dict[str, Path], root: Path) -> str:
    """``_stream/worker.py`` for ``blazen._stream.worker``, ``__init__.py`` for ``blazen``."""
    return known[module].relative_to(root).as_posix()


def _unit(table: Table, rel: str) -> tuple[int, str] | None:
    """(row, unit) of the table's longest unit that holds ``rel``, or None."""
    best: tuple[int, str] | None = None
    for rank, units in enumerate(table.rows):
        for unit in units:
            holds = rel.startswith(unit) if unit.endswith("/") else rel == unit
            if holds and (best is None or len(unit) > len(best[1])):
                best = (rank, unit)
    return best


def placement_problems(root: Path = ROOT, tables: list[Table] | None = None) -> list[str]:
    """A module in no row of a table that should hold it; a unit the doc names that is gone."""
    tables = read_layers() if tables is None else tables
    known = modules(root)
    rels = [_relative(m, known, root) for m in known]
    wrong = []
    for table in tables:
        for rel in rels:
            if rel.startswith(table.scope) and _unit(table, rel) is None:
                wrong.append(f"blazen/{rel} is in no row of the {table.scope or 'package'} table")
        for units in table.rows:
            for unit in units:
                if not any(
                    rel.startswith(unit) if unit.endswith("/") else rel == unit for rel in rels
                ):
                    wrong.append(f"docs/architecture.md names `{unit}`, which is no module")
    return wrong


def layer_problems(root: Path = ROOT, tables: list[Table] | None = None) -> list[str]:
    """Each import from a lower row into a higher one, or across to another unit of a row.

    An import is judged by the outermost table where the two modules fall in different
    units; within one unit, by the table of that unit's folder, if the doc has one.
    """
    tables = read_layers() if tables is None else tables
    known = modules(root)
    wrong = []
    for imp in imports(root):
        mine = _relative(imp.importer, known, root)
        theirs = _relative(imp.imported, known, root)
        for table in tables:
            if not (mine.startswith(table.scope) and theirs.startswith(table.scope)):
                continue
            a, b = _unit(table, mine), _unit(table, theirs)
            if a is None or b is None or a[1] == b[1]:
                continue
            if b[0] >= a[0]:
                how = "up to" if b[0] > a[0] else "across to"
                wrong.append(
                    f"{imp.where()}\n    `{a[1]}` (row {a[0] + 1}) imports {how} "
                    f"`{b[1]}` (row {b[0] + 1})"
                )
            break
    return wrong


def cycle_problems(root: Path = ROOT) -> list[str]:
    """Each import cycle between modules (a strongly connected set), with its import lines."""
    found = [i for i in imports(root) if i.imported != i.importer]
    graph: dict[str, set[str]] = {m: set() for m in modules(root)}
    for imp in found:
        graph[imp.importer].add(imp.imported)
    # Tarjan's strongly connected components, iteratively (the graph is a few hundred nodes).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    wrong = []
    for component in sorted(components):
        members = set(component)
        lines = sorted(
            {i.where() for i in found if i.importer in members and i.imported in members}
        )
        wrong.append(
            f"import cycle of {len(component)} modules: {', '.join(component)}\n    "
            + "\n    ".join(lines)
        )
    return wrong


MODULES = modules()
EDGES = imports()


def test_every_module_is_in_one_row_of_the_doc():
    """Each module sits in a row of docs/architecture.md, and each name there is a module."""
    wrong = placement_problems()
    assert not wrong, "\n".join(wrong)


def test_imports_run_down_the_layers():
    """A module imports only from its own unit or from a lower row, never up or across."""
    wrong = layer_problems()
    assert not wrong, "imports against the order of docs/architecture.md:\n" + "\n".join(wrong)


def test_no_import_cycle():
    """No two modules import each other, by any chain of import statements of any kind."""
    wrong = cycle_problems()
    assert not wrong, "\n".join(wrong)


def test_no_module_takes_another_modules_private_names():
    """A name with a leading underscore stays in its module: others get a public seam."""
    wrong = [
        f"{imp.where()} takes {n}"
        for imp in EDGES
        for n in imp.names
        if n.startswith("_") and not n.startswith("__") and imp.imported != imp.importer
    ]
    assert wrong == []


def test_only_the_transport_imports_the_http_stack():
    """requests, urllib3 and sseclient stay behind blazen._http's small response object."""
    wrong = []
    for name, path in MODULES.items():
        if name == "blazen._http" or name.startswith("blazen._http."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                targets = [node.module or ""]
            else:
                continue
            for target in targets:
                if target.split(".")[0] in HTTP_LIBRARIES:
                    wrong.append(f"{name}:{node.lineno} imports {target}")
    assert wrong == []


def test_the_layer_checks_see_the_imports_they_judge():
    """The walk finds the imports it must: a check that saw nothing could not fail."""
    pairs = {(i.importer, i.imported) for i in EDGES}
    assert ("blazen._stream.worker", "blazen._http") in pairs
    assert ("blazen.providers.openai", "blazen._kit") in pairs
    assert ("blazen.cli", "blazen.providers") in pairs
    # Under TYPE_CHECKING, inside a function, by importlib, and a package run by its module.
    assert ("blazen", "blazen.providers") in pairs
    assert ("blazen._schema.output", "blazen._schema.hints") in pairs
    assert ("blazen._kit", "blazen._kit.embedding") in pairs
    assert any(
        (i.importer, i.imported, i.via)
        == ("blazen._http.urls", "blazen._types", "blazen._types.frozen")
        for i in EDGES
    )
    tables = read_layers()
    assert [t.scope for t in tables] == ["", "_stream/"]
    assert _unit(tables[0], "errors.py") == (0, "errors.py")
    assert _unit(tables[0], "agent/tools/hints.py") == (10, "agent/")
    assert _unit(tables[1], "_stream/model.py") == (1, "_stream/model.py")


#: The providers' modules that bind wire formats to models (ChatModel is the engine's).
#: Every other module there is a wire format or its helpers: written on the provider kit
#: alone, as a third party's would be.
BINDING_MODULES = ("blazen.providers.factories", "blazen.providers.build")


def test_wire_formats_import_the_kit_not_the_stream_engine():
    """A wire format needs only the provider kit below it: the engine is not its business."""
    wrong = [
        imp.where()
        for imp in EDGES
        if imp.importer.startswith("blazen.providers.")
        and imp.importer not in BINDING_MODULES
        and (imp.imported == "blazen._stream" or imp.imported.startswith("blazen._stream."))
    ]
    assert wrong == []
    binding = {i.importer for i in EDGES if i.imported.startswith("blazen._stream")}
    assert set(BINDING_MODULES) <= binding  # the check sees the imports it lets through


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of the package, for a test to break."""
    target = tmp_path / "blazen"
    shutil.copytree(ROOT, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.mark.parametrize(
    "added",
    [
        "from ._types import TokenUsage",
        "def _late():\n    from ._types import TokenUsage",
        "import typing\nif typing.TYPE_CHECKING:\n    from ._types import TokenUsage",
        "import importlib\n_late = importlib.import_module('._types', 'blazen')",
    ],
    ids=["top level", "in a function", "under TYPE_CHECKING", "importlib"],
)
def test_a_back_import_from_the_errors_fails_the_checks(copy: Path, added: str):
    """The errors importing a value, by any kind of statement, breaks the order and makes a cycle."""
    assert layer_problems(copy) == cycle_problems(copy) == []
    errors = copy / "errors.py"
    line = len(errors.read_text().splitlines()) + len(added.splitlines())
    errors.write_text(errors.read_text() + "\n" + added + "\n")
    up = layer_problems(copy)
    assert len(up) == 1
    assert up[0].startswith(f"blazen/errors.py:{line + 1}: ")
    assert "`errors.py` (row 1) imports up to `_types/`" in up[0]
    (cycle,) = cycle_problems(copy)
    assert "blazen._types" in cycle.splitlines()[0] and "blazen.errors" in cycle.splitlines()[0]
    assert f"blazen/errors.py:{line + 1}: " in cycle


def test_a_back_import_inside_the_stream_engine_fails_the_checks(copy: Path):
    """The model reaching up to the worker breaks the engine's own order and makes a cycle."""
    model = copy / "_stream" / "model.py"
    model.write_text(model.read_text() + "\nfrom .worker import StreamWorker\n")
    (up,) = layer_problems(copy)
    assert "from .worker import StreamWorker" in up
    assert "`_stream/model.py` (row 2) imports up to `_stream/worker.py`" in up
    (cycle,) = cycle_problems(copy)
    assert "blazen._stream.model" in cycle and "blazen._stream.worker" in cycle


def test_a_module_the_doc_does_not_place_fails_the_checks(copy: Path):
    """A new module must be given its row: the picture cannot fall behind the code."""
    (copy / "_stray.py").write_text("")
    assert placement_problems(copy) == ["blazen/_stray.py is in no row of the package table"]
