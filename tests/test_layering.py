"""The one direction of dependencies (docs/architecture.md), checked on every import in the tree.

    corpus, experiments, executor
      <-  aligner, embeddings, models
      <-  audio, trainset, figures
      <-  inference  <-  evaluation  <-  training  <-  realspeech, reporting
      <-  pipeline
      <-  paper_runs

A package may import the packages of the layers below it (and itself), never one beside or above it.
``benchmarks/``, ``scripts/`` and ``tests/`` may import anything; nothing imports them, ``pipeline/`` or the GPU wing
``paper_runs/``. No module of ``pipeline/`` is over 200 lines: a stage wrapper is thin.
Imports are read from the source (every ``import`` statement, also inside functions), not by importing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import LAYERS

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = [package for layer in LAYERS for package in layer]
OURS = set(LIBRARY) | {"benchmarks", "scripts", "tests"}


def _allowed() -> dict[str, set[str]]:
    """package -> the packages of ours it may import (itself included): everything in the layers below."""
    allowed, below = {}, set()
    for layer in LAYERS:
        for package in layer:
            allowed[package] = below | {package}
        below = below | set(layer)
    allowed["benchmarks"] = OURS - {"pipeline", "paper_runs", "scripts", "tests"}
    allowed["scripts"] = OURS - {"pipeline", "paper_runs", "benchmarks", "tests"}
    allowed["tests"] = OURS
    return allowed


#: package -> the packages of ours it may import (itself included)
ALLOWED = _allowed()


def imported_packages(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) of every absolute import of ours in a source file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.extend((node.lineno, name.split(".")[0]) for name in names if name.split(".")[0] in OURS)
    return found


def layering_violations(root: Path = ROOT) -> list[str]:
    violations = []
    for package, allowed in ALLOWED.items():
        for path in sorted((root / package).rglob("*.py")):
            for line, imported in imported_packages(path):
                if imported not in allowed:
                    violations.append(f"{path.relative_to(root)}:{line}: {package} imports {imported}")
    return violations


def test_every_import_follows_the_layering():
    assert layering_violations() == []


def test_the_checker_sees_an_upward_import(tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "bad.py").write_text("def f():\n    from training import train_model\n")
    assert layering_violations(tmp_path) == ["corpus/bad.py:2: corpus imports training"]


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_every_package_exists(package):
    assert (ROOT / package).is_dir()


#: A package a newcomer can take in at once, a module one can read through (docs/architecture.md)
MAX_MODULES_PER_PACKAGE = 15
#: pipeline/ holds one thin wrapper per DVC stage (and the stage_times command): it grows with the stages, each
#: under 200 lines (test_every_stage_wrapper_is_thin), not with the library
MAX_PIPELINE_MODULES = 20
MAX_LINES_PER_LIBRARY_FILE = 500


@pytest.mark.parametrize("package", LIBRARY)
def test_each_package_is_small_enough_to_read(package):
    modules = [path for path in (ROOT / package).rglob("*.py") if path.name not in ("__init__.py", "__main__.py")]
    limit = MAX_PIPELINE_MODULES if package == "pipeline" else MAX_MODULES_PER_PACKAGE
    assert len(modules) <= limit, f"{package}: {len(modules)} modules"
    too_long = {str(path.relative_to(ROOT)): lines for path in modules
                if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES_PER_LIBRARY_FILE}
    assert too_long == {}


def test_every_stage_wrapper_is_thin():
    """pipeline/ holds one thin wrapper per DVC stage: the work is in the library."""
    long = {path.name: n for path in sorted((ROOT / "pipeline").glob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 200}
    assert long == {}


def test_the_gpu_wing_alone_spawns_and_packs():
    """reporting/ keeps tables and figures: no process, packing or spawning code."""
    for path in sorted((ROOT / "reporting").rglob("*.py")):
        imported = {name for _, name in imported_packages_any(path)}
        assert not imported & {"subprocess", "multiprocessing", "zipfile", "tarfile", "signal"}, path


def imported_packages_any(path: Path) -> list[tuple[int, str]]:
    """(line, top-level module) of every absolute import in a source file, ours or not."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found
