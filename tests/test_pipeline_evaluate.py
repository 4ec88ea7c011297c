"""``python -m pipeline.evaluate REFERENCE PREDICTION`` end to end (subprocess); stage mode's device and threads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
KEYS = {"COMMA", "PERIOD", "QUESTION", "OVERALL", "SER"}

REFERENCE = [
    ("so", "O"), ("what", "O"), ("happened", "QUESTION"), ("well", "COMMA"),
    ("we", "O"), ("left", "PERIOD"), ("then", "COMMA"), ("it", "O"), ("rained", "PERIOD"),
]
PREDICTION_LABELS = ["O", "O", "PERIOD", "COMMA", "O", "PERIOD", "O", "COMMA", "PERIOD"]


def _write(path: Path, rows, newline: str = "\n") -> Path:
    path.write_bytes("".join(f"{w}\t{l}{newline}" for w, l in rows).encode("utf-8"))
    return path


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.evaluate", *map(str, args)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )


def _check_scores(stdout: str) -> dict:
    scores = json.loads(stdout)  # the whole of stdout is one JSON object
    assert isinstance(scores, dict) and set(scores) == KEYS
    for name in ("COMMA", "PERIOD", "QUESTION", "OVERALL"):
        assert set(scores[name]) == {"precision", "recall", "f1"}
        assert all(0.0 <= v <= 1.0 for v in scores[name].values())
    assert scores["SER"] >= 0.0
    return scores


@pytest.fixture
def files(tmp_path):
    ref = _write(tmp_path / "ref.txt", REFERENCE)
    hyp = _write(tmp_path / "hyp.txt", [(w, l) for (w, _), l in zip(REFERENCE, PREDICTION_LABELS)])
    return ref, hyp


def test_scores_two_files(files):
    result = _run(*files)
    assert result.returncode == 0, result.stderr
    scores = _check_scores(result.stdout)
    # C = 3 (well, left, rained), S = 1 (happened), D = 1 (then), I = 1 (it); #(r != O) = 5
    assert scores["OVERALL"]["precision"] == pytest.approx(3 / 5)
    assert scores["OVERALL"]["recall"] == pytest.approx(3 / 5)
    assert scores["SER"] == pytest.approx(3 / 5)


def test_crlf_file_scores_the_same(files, tmp_path):
    ref, hyp = files
    crlf = _write(tmp_path / "hyp_crlf.txt",
                  [(w, l) for (w, _), l in zip(REFERENCE, PREDICTION_LABELS)], "\r\n")
    plain, windows = _run(ref, hyp), _run(ref, crlf)
    assert windows.returncode == 0, windows.stderr
    assert _check_scores(windows.stdout) == _check_scores(plain.stdout)


def test_token_mismatch_exits_2_naming_line(files, tmp_path):
    ref, _ = files
    rows = [(w, l) for (w, _), l in zip(REFERENCE, PREDICTION_LABELS)]
    rows[4] = ("WE", "O")
    bad = _write(tmp_path / "bad.txt", rows)
    result = _run(ref, bad)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert f"{bad}:5" in result.stderr and f"{ref}:5" in result.stderr


def test_missing_token_exits_2(files, tmp_path):
    ref, _ = files
    short = _write(tmp_path / "short.txt", REFERENCE[:-1])
    result = _run(ref, short)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and f"{ref}:9" in result.stderr


def test_malformed_file_exits_2(files, tmp_path):
    ref, _ = files
    bad = tmp_path / "malformed.txt"
    bad.write_text("so\tO\nwhat O O\n", encoding="utf-8")
    result = _run(ref, bad)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and str(bad) in result.stderr


def test_missing_file_exits_2(files, tmp_path):
    ref, _ = files
    result = _run(ref, tmp_path / "nope.txt")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "nope.txt" in result.stderr


def test_two_empty_files_exit_2_naming_the_reference(tmp_path):
    ref, hyp = tmp_path / "ref.txt", tmp_path / "hyp.txt"
    ref.write_bytes(b"")
    hyp.write_bytes(b"")
    result = _run(ref, hyp)
    assert result.returncode == 2 and result.stdout == ""
    assert "Traceback" not in result.stderr and f"{ref}: the reference file holds no tokens" in result.stderr


def test_empty_prediction_exits_2_naming_it(files, tmp_path):
    ref, _ = files
    hyp = tmp_path / "empty.txt"
    hyp.write_bytes(b"\r\n")
    result = _run(ref, hyp)
    assert result.returncode == 2 and f"{hyp}: the prediction file holds no tokens" in result.stderr


DEV2012 = REPO_ROOT / ".." / "shared" / "data" / "iwslt2011" / "dev2012"


@pytest.mark.skipif(not DEV2012.is_file(), reason=f"shared data not found at {DEV2012}")
def test_the_benchmark_dev_set_scores_against_itself():
    """dev2012 has empty-word lines (line 69615: '\\tCOMMA'); they are slots, as in the reference scorer."""
    result = _run(DEV2012, DEV2012)
    assert result.returncode == 0, result.stderr
    scores = _check_scores(result.stdout)
    assert scores["OVERALL"]["f1"] == 1.0 and scores["SER"] == 0.0


# ----------------------------------------------------------------------------- stage mode: device and threads


@pytest.fixture(scope="module")
def stage_inputs(tmp_path_factory):
    """A tiny trained model under ARTIFACTS/tiny/model, its feature cache and prepared splits."""
    from tests.fixture_corpus import TINY_MODEL, TINY_TRAIN, write_feature_cache
    from training import train_model

    root = tmp_path_factory.mktemp("evaluate_stage")
    features = write_feature_cache(root, talks=8, sentences_per_talk=10, train_tokens=800)
    train_model(features, root / "artifacts" / "tiny" / "model", root / "state", model_config=TINY_MODEL,
                train_config={**TINY_TRAIN, "max_steps": 2, "eval_every_steps": 2, "dev_eval_tokens": 60},
                window=30, stride=15)
    return root


def _stage(root: Path, tmp_path: Path, threads: int | None, *extra: str) -> int:
    import yaml

    from pipeline import evaluate

    settings = {"test_splits": ["ref"], "window": 30, "stride": 15, "batch_size": 16, "device": "cpu",
                **({} if threads is None else {"threads": threads})}
    params = {"profile": "p", "evaluate": settings, "train": {}, "experiment_defs": {},
              "profiles": {"p": {"data": {}, "train": {}, "experiments": {}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    return evaluate.main(["--stage", "--experiment", "tiny", "--params", str(tmp_path / "params.yaml"),
                          "--features", str(root / "features"), "--prepared", str(root / "prepared"),
                          "--artifacts", str(root / "artifacts"), "--metrics", str(tmp_path / "metrics"), *extra])


@pytest.mark.slow  # ~15 s: two evaluations, with their confusion-matrix plots
def test_the_stage_decodes_on_the_cpu_on_evaluate_threads_and_records_both(stage_inputs, tmp_path, capsys):
    import torch

    from pipeline.stage import StageRecord

    before = torch.get_num_threads()
    try:
        assert _stage(stage_inputs, tmp_path, 2) == 0
        assert (StageRecord.facts["device"], StageRecord.facts["torch_threads"]) == ("cpu", 2)
        first = (stage_inputs / "artifacts" / "tiny" / "predictions" / "ref.tsv").read_bytes()
        assert _stage(stage_inputs, tmp_path, 1) == 0 and StageRecord.facts["torch_threads"] == 1
        assert (stage_inputs / "artifacts" / "tiny" / "predictions" / "ref.tsv").read_bytes() == first
    finally:
        torch.set_num_threads(before)
    # --device asks for another device than evaluate.device (the paper runs ask for their GPU): this one is refused
    capsys.readouterr()
    assert _stage(stage_inputs, tmp_path, 1, "--device", "cuda:99") == 2
    assert "device 'cuda:99' requested" in capsys.readouterr().err
