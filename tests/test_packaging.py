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
        proc = subprocess.run([sys.executable, "-m", "build", *args, str(tree)],
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
