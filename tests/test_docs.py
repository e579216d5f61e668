"""Every code block of the docs and the README runs, against blazen.testing's server.

The Python blocks of one page run in order in one fresh interpreter, as a reader pastes
them into one session (a later block may use a name an earlier one defined; top-level
``await`` works, as in a notebook cell). Shell blocks run in bash. Both run with the
providers' base-URL variables pointing at a ``StreamServer`` that answers what each
request asks (``tests/docs_server.py``), so no key and no network is needed. A block that
cannot run here says why, on the line before it: ``<!-- test: skip (reason) -->``; one
that needs Redis, the bundled model or an MCP server says ``<!-- test: needs redis -->``,
``<!-- test: needs local -->`` or ``<!-- test: needs mcp -->`` and gets it (or is left out,
saying why, without the ``local`` extra or the MCP SDK). ``needs mcp`` puts
``examples/mcp_weather_server.py`` beside the blocks as ``weather_server.py``, the server the
page names.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from blazen.testing import StreamServer

from .docs_server import respond

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])
# text and json blocks show output and data, not code to run.
LANGUAGES = {"python", "sh", "text", "json"}
FENCE = re.compile(r"^```(\S*)\s*$")
DIRECTIVE = re.compile(r"^<!-- test: (skip \(.+\)|needs redis|needs local|needs mcp) -->$")


@attrs.frozen
class Block:
    """One fenced code block: where it is, its language, its text and its test directive."""

    page: Path
    line: int
    lang: str
    code: str
    directive: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of one page, with the directive on the line before each."""
    found: list[Block] = []
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        start = i
        i += 1
        while i < len(lines) and lines[i] != "```":
            i += 1
        before = lines[start - 1].strip() if start else ""
        directive = DIRECTIVE.match(before)
        found.append(Block(page, start + 1, match.group(1), "\n".join(lines[start + 1 : i]) + "\n",
                           directive.group(1) if directive else ""))
        i += 1
    return found


ALL = [b for page in PAGES for b in blocks(page)]
RUNNER = r"""
import ast, asyncio, json, sys, traceback
with open(sys.argv[1]) as f:
    blocks = json.load(f)
ns = {"__name__": "__main__"}
for b in blocks:
    try:
        code = compile(b["code"], b["where"], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        if code.co_flags & 0x80:  # CO_COROUTINE: a block with top-level await
            asyncio.run(eval(code, ns))
        else:
            exec(code, ns)
    except BaseException:
        print(f"--- the block at {b['where']} failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


def local_missing() -> str | None:
    from blazen import local

    return local.missing_extra()


@pytest.fixture(scope="module")
def docs_server() -> Iterator[StreamServer]:
    with StreamServer(respond=respond) as server:
        yield server


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from .sinks.conftest import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("docs-redis")).start()
    try:
        yield server.url
    finally:
        server.kill()


def environment(server: StreamServer, **extra: str) -> dict[str, str]:
    """The reader's environment: keys set, every base URL at the docs server."""
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_API_KEY") and not k.endswith("_BASE_URL")}
    return {
        **env,
        "PYTHONPATH": str(ROOT),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "OPENAI_API_KEY": "sk-docs-test",
        "OPENAI_BASE_URL": server.base_url,
        "ANTHROPIC_API_KEY": "sk-ant-docs-test",
        "ANTHROPIC_BASE_URL": server.url,
        **extra,
    }


def runnable(page: Path, lang: str) -> list[Block]:
    return [b for b in blocks(page) if b.lang == lang and not b.directive.startswith("skip")]


@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p, "python")],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_python_blocks_of_each_page_run_in_order(page, docs_server, request, tmp_path):
    """A page's Python blocks, run in one interpreter in order, finish without an error."""
    chosen = runnable(page, "python")
    extra: dict[str, str] = {}
    if any(b.directive == "needs redis" for b in chosen):
        extra["REDIS_URL"] = request.getfixturevalue("redis_url")
    if any(b.directive == "needs local" for b in chosen) and local_missing():
        chosen = [b for b in chosen if b.directive != "needs local"]
    if any(b.directive == "needs mcp" for b in chosen):
        if importlib.util.find_spec("mcp") is None:
            chosen = [b for b in chosen if b.directive != "needs mcp"]
        else:
            shutil.copy(ROOT / "examples" / "mcp_weather_server.py", tmp_path / "weather_server.py")
    script = tmp_path / "blocks.json"
    script.write_text(json.dumps([{"code": b.code, "where": b.where} for b in chosen]))
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-c", RUNNER, str(script)],
        cwd=tmp_path, env=environment(docs_server, **extra),
        capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.mark.parametrize("block", [b for b in ALL if b.lang == "sh" and not b.directive],
                         ids=lambda b: b.where)
def test_the_shell_blocks_run(block, docs_server, tmp_path):
    """A shell block runs in bash, each command succeeding; install hints are only checked."""
    if all(line.lstrip().startswith(("pip install", "python3 -m pip install"))
           for line in block.code.splitlines() if line.strip()):
        assert "blazen-stream" in block.code or "'.[" in block.code, block.where
        return
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.code],
        cwd=tmp_path, env=environment(docs_server), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, (block.where, proc.stdout[-2000:], proc.stderr[-2000:])


def test_every_block_is_in_a_language_the_test_knows():
    """A block in another language would silently escape the run: each is a known one."""
    assert {b.lang for b in ALL} <= LANGUAGES, [b.where for b in ALL if b.lang not in LANGUAGES]


def test_every_skipped_block_says_why():
    """A directive is one of the known ones, and a skip gives its reason in parentheses."""
    for page in PAGES:
        for line in page.read_text().splitlines():
            if line.startswith("<!-- test"):
                assert DIRECTIVE.match(line.strip()), (page, line)


def test_the_benchmark_chart_in_the_docs_is_the_latest_one():
    """docs/images/benchmarks.png is benchmarks/results/chart.png, byte for byte."""
    assert (DOCS / "images" / "benchmarks.png").read_bytes() == (
        ROOT / "benchmarks" / "results" / "chart.png"
    ).read_bytes()


def test_the_readme_reads_on_the_package_index():
    """The README's links are absolute and it sends no reader to a file of the checkout."""
    text = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)]+)\)", text):
        assert target.startswith("https://"), target
    assert "tests/" not in text and "examples/" not in text


def test_the_readme_counts_the_factories_there_are():
    """"N factories in all" is the registry's size."""
    from blazen.providers import PROVIDERS

    assert f"[{len(PROVIDERS)} factories in all]" in (ROOT / "README.md").read_text()


def test_every_install_hint_names_the_distribution():
    """No hint anywhere tells a user to install ``blazen``: that is another project."""
    def wrong(line: str) -> bool:
        for command in re.split(r"&&|;|\|", line):
            words = command.split()
            if "install" in words and "pip" in " ".join(words[: words.index("install")]):
                for word in words[words.index("install") + 1 :]:
                    package = word.strip("'\"`")
                    if package == "blazen" or package.startswith("blazen["):
                        return True
        return False

    files = [*PAGES, *ROOT.glob("blazen/**/*.py"), *ROOT.glob("examples/*.py"),
             ROOT / "CHANGELOG.md", *ROOT.glob("benchmarks/*.md"), *ROOT.glob("benchmarks/*.py")]
    for path in files:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            assert not wrong(line), f"{path.relative_to(ROOT)}:{n}: {line.strip()}"


def test_mkdocs_is_where_ci_builds_the_site():
    """mkdocs.yml's nav lists every page under docs/ (mkdocs build --strict runs in .ci/run)."""
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in DOCS.rglob("*.md"):
        assert f" {page.relative_to(DOCS).as_posix()}" in nav, page


PUBLIC_MODULES = ["blazen", "blazen.errors", "blazen.providers", "blazen.sinks", "blazen.batch",
                  "blazen.testing", "blazen.local", "blazen.agent", "blazen.agent.mcp",
                  "blazen.workflow"]


def public_names() -> Iterator[tuple[str, str]]:
    import importlib

    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            if attr != "__version__" and not (name == "blazen" and attr == "batch"):
                yield name, attr


def test_every_public_name_is_in_the_api_reference():
    """Each name in a public module's __all__ has its ``::: module.name`` on a reference page."""
    import importlib

    reference = "".join(p.read_text() for p in (DOCS / "reference").glob("*.md"))
    listed = set()
    for path in re.findall(r"^::: ([\w.]+)$", reference, re.M):
        module, _, attr = path.rpartition(".")
        listed.add(id(getattr(importlib.import_module(module), attr)))
    missing = [f"{m}.{a}" for m, a in public_names()
               if id(getattr(importlib.import_module(m), a)) not in listed]
    assert not missing, f"add these to a page under docs/reference/: {missing}"


def test_every_public_name_has_a_one_line_summary():
    """Each public class and function has a docstring whose first line says what it is."""
    import importlib
    import inspect

    for module, attr in public_names():
        value = getattr(importlib.import_module(module), attr)
        if inspect.isclass(value) or inspect.isfunction(value) or inspect.ismodule(value):
            doc = inspect.getdoc(value) or ""
            assert doc.strip().splitlines()[:1], f"{module}.{attr} has no docstring"


ENTRY_POINTS = [
    "blazen.Streaming.complete", "blazen.Streaming.complete_async", "blazen.Streaming.start",
    "blazen.Streaming.stream", "blazen.Streaming.stream_async", "blazen.Providers",
    "blazen.Llm.completion_request", "blazen.cancel_scope", "blazen.CancelToken",
    "blazen.Agent", "blazen.tool", "blazen.workflow", "blazen.batch.run", "blazen.batch.read",
    "blazen.local.start", "blazen.sinks.RedisStreamSink", "blazen.sinks.follow",
    "blazen.sinks.sse_lines", "blazen.sinks.JsonlSink", "blazen.sinks.QueueSink",
    "blazen.sinks.tee", "blazen.testing.StreamServer", "blazen.testing.Recorder",
    "blazen.agent.mcp.stdio", "blazen.agent.mcp.http",
]


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_every_entry_point_shows_an_example_in_its_docstring(path):
    """The names a user starts from carry an ``Example::`` (or ``::``) block in their docs."""
    import importlib
    import inspect

    module, _, rest = path.partition(".")
    value = importlib.import_module(module)
    for part in rest.split("."):
        value = getattr(value, part) if hasattr(value, part) else importlib.import_module(
            f"{value.__name__}.{part}")
    assert "::" in (inspect.getdoc(value) or ""), path
