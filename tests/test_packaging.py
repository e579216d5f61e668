"""The release: the wheel holds the package alone, the sdist holds what runs its tests.

Both are built here as a release would build them (``python -m build``: the sdist from
the tree, then the wheel from the unpacked sdist), and a second wheel straight from the
tree; the two wheels must be the same file by file. The tree is a fresh copy of the
checkout's files (tracked, or new and not ignored): a ``build/`` folder left in the
checkout would hand the wheel files that no longer exist.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("build")


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and its wheel, and a wheel built from the tree."""
    tree = tmp_path_factory.mktemp("tree")
    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    for name in files:
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    released = tmp_path_factory.mktemp("dist")
    direct = tmp_path_factory.mktemp("wheel")
    for args in (["--outdir", str(released)], ["--wheel", "--outdir", str(direct)]):
        # --no-isolation: the backend the test extra installs (pyproject's build-system
        # requires) instead of a fresh environment per build; CI's release step isolates.
        proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", *args, str(tree)],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sdist,) = released.glob("*.tar.gz")
    (wheel,) = released.glob("*.whl")
    (tree_wheel,) = direct.glob("*.whl")
    return {"sdist": sdist, "wheel": wheel, "tree_wheel": tree_wheel}


def wheel_files(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as wheel:
        return {name: wheel.read(name) for name in wheel.namelist()}


def test_the_wheel_holds_the_package_and_its_metadata_only(dists):
    """Every file of the wheel is under blazen/ (py.typed among them) or its .dist-info."""
    names = wheel_files(dists["wheel"])
    top = {name.split("/")[0] for name in names}
    info = {t for t in top if t.endswith(".dist-info")}
    assert top - info == {"blazen"}, top
    assert "blazen/py.typed" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    (info_dir,) = info
    assert info_dir.startswith("blazen_stream-")
    assert f"{info_dir}/licenses/LICENSE" in names


def test_the_sdist_builds_the_same_wheel_as_the_tree(dists):
    """The wheel built from the unpacked sdist equals the one built from the checkout."""
    assert wheel_files(dists["wheel"]) == wheel_files(dists["tree_wheel"])


def test_the_sdist_holds_the_tests_examples_docs_and_changelog(dists):
    """Every file git tracks under tests/, examples/ and docs/ is in the sdist, and CHANGELOG.md."""
    with tarfile.open(dists["sdist"]) as sdist:
        members = sdist.getnames()
    root = members[0].split("/")[0]
    inside = {m[len(root) + 1 :] for m in members}
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "tests", "examples", "docs", "benchmarks"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    missing = [f for f in tracked if f not in inside]
    assert not missing, missing
    for name in ("CHANGELOG.md", "LICENSE", "README.md", "mkdocs.yml", "pyproject.toml",
                 "tests/conftest.py", "tests/hostile", "tests/sinks", "tests/fixtures"):
        assert name in inside, name


def test_the_metadata_names_the_distribution_and_its_licence(dists):
    """The wheel's METADATA: name blazen-stream, MIT, the Python floor, the project URLs."""
    names = wheel_files(dists["wheel"])
    (meta,) = [v for k, v in names.items() if k.endswith(".dist-info/METADATA")]
    text = meta.decode()
    assert "Name: blazen-stream\n" in text
    assert "License-Expression: MIT\n" in text
    assert "Requires-Python: >=3.10\n" in text
    assert "Project-URL: Documentation, https://" in text


def test_the_supported_pythons_are_the_ones_ci_runs():
    """requires-python's floor, the classifiers and .ci/run's list of Pythons say the same."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    prefix = "Programming Language :: Python :: 3."
    classified = sorted(
        int(c[len(prefix):]) for c in project["classifiers"] if c.startswith(prefix)
         and c[len(prefix):].isdigit()
    )
    ci = (ROOT / ".ci" / "run").read_text()
    floor = ci.split("FLOOR=", 1)[1].split()[0]
    others = ci.split("OTHER_PYTHONS=(", 1)[1].split(")")[0].split()
    run = sorted(int(v.split(".")[1]) for v in [*others, "3.11"])
    assert classified == run
    assert project["requires-python"] == f">={floor}" == f">=3.{run[0]}"


def test_the_bench_extra_pins_nothing_and_the_benchmarks_constraints_pin_all_of_it():
    """A user's requests or openai is never pinned by the extra; the benchmarks pin each one."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")
    bench = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["bench"]
    assert not [d for d in bench if any(op in d for op in "=<>~")], bench
    pins = {}
    for line in (ROOT / "benchmarks" / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version.strip(), line
            pins[name.strip()] = version.strip()
    assert set(pins) == set(bench)


def test_the_wheel_and_the_command_report_the_package_version(dists, capsys):
    """The wheel's version, ``blazen.__version__`` and ``blazen --version`` are one value."""
    import blazen
    from blazen import cli

    assert dists["wheel"].name.startswith(f"blazen_stream-{blazen.__version__}-")
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out == f"blazen {blazen.__version__}\n"
