"""A run's metrics against the committed ones (reporting.verify, python -m pipeline.verify): exact on the pinned
machine, each README figure within its seed spread elsewhere, every figure outside named."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pipeline.verify import committed_metrics, committed_reader, main, verify_run
from reporting.verify import (
    COMMITTED_FLOOR,
    EXACT,
    SPREAD,
    SPREAD_FILE,
    numerics_regime,
    pipeline_metrics,
    readme_figures,
    seed_spread_table,
    training_devices,
    values_from_runs,
    values_from_summary,
    verify_metrics,
    write_seed_spread,
)

REPO = Path(__file__).resolve().parents[1]
PINNED = {"floor": COMMITTED_FLOOR}


def scores(f1: float, ser: float) -> dict:
    cls = {"precision": f1, "recall": f1, "f1": f1}
    return {"COMMA": cls, "PERIOD": cls, "QUESTION": cls, "OVERALL": cls, "SER": ser, "tokens": 100}


def real_speech(f1: float) -> dict:
    return {"models": {"text_model": {"iwslt_metrics": "metrics/eval/minilm.json", "reads_timings": False,
                                      "text": {"all": scores(f1, 0.5), "talks": {}}}}}


SPREAD_TABLE = {"default": {"tolerance": 5.0},
                "figures": {"metrics/eval/minilm.json": {
                    "ref.OVERALL.f1": {"tolerance": 2.0, "basis": "measured", "source": "two seeds"}}}}
LOCK = """schema: '2.0'
stages:
  evaluate@minilm:
    outs:
    - path: artifacts/minilm/predictions
    - path: metrics/eval/minilm.json
  train@minilm:
    outs:
    - path: metrics/train/minilm.json
  evaluate_real:
    outs:
    - path: metrics/real_speech.json
  evaluate_tuning@gone:
    outs:
    - path: metrics/eval_variants/gone/minilm.json
"""
COMMITTED = {"metrics/eval/minilm.json": {"model": "artifacts/minilm/model", "ref": scores(0.70, 0.42),
                                          "asr": scores(0.62, 0.60)},
             "metrics/train/minilm.json": {"steps": 3150, "best_dev_f1": 0.68},
             "metrics/real_speech.json": real_speech(0.68)}


def write_run(root: Path, files: dict) -> None:
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(json.dumps(content, indent=2) + "\n")


def reader(files: dict):
    return lambda path: json.dumps(files[path]) if path in files else None


def changed(path: str, key: str, value) -> dict:
    """A copy of :data:`COMMITTED` with one value changed."""
    files = json.loads(json.dumps(COMMITTED))
    node = files[path]
    *parents, last = key.split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    return files


# ------------------------------------------------------------------------------------------ regime


def test_exact_only_at_the_committed_floor_with_every_record_there():
    assert numerics_regime(PINNED, [("prepare", {"numerics": PINNED})])[0] == EXACT
    regime, why = numerics_regime({"floor": None, "unpinned": "PUNCTUATION_NATIVE_NUMERICS is set"})
    assert regime == SPREAD and "PUNCTUATION_NATIVE_NUMERICS" in why
    regime, why = numerics_regime({"floor": "armv8-a"})  # pinned aarch64: its own bytes, not the committed ones
    assert regime == SPREAD and "armv8-a" in why
    regime, why = numerics_regime(PINNED, [("prepare", {"numerics": PINNED}),
                                           ("train@minilm", {"numerics": {"floor": None, "unpinned": "x"}})])
    assert regime == SPREAD and "train@minilm" in why
    assert numerics_regime(PINNED, [("old", {"stage": "old", "seconds": 3})])[0] == EXACT  # says nothing
    regime, why = numerics_regime(PINNED, system="darwin")  # an Intel Mac: pinned kernels, Apple's maths
    assert regime == SPREAD and "darwin" in why
    regime, why = numerics_regime(PINNED, devices=["cpu", "cuda"])  # a model trained on a GPU
    assert regime == SPREAD and "cuda" in why


def test_exact_only_on_mkl_s_committed_branch_which_intel_cpus_do_not_take():
    """MKL follows MKL_CBWR=AVX2 on Intel CPUs only; the committed bytes are its AUTO branch's (AMD CPUs). Measured
    on an Intel Xeon: the text model's weights got other last bits (docs/method.md)."""
    amd = {**PINNED, "cpu_vendor": "AuthenticAMD", "mkl_branch": "AUTO"}
    intel = {**PINNED, "cpu_vendor": "GenuineIntel", "mkl_branch": "AVX2"}
    assert numerics_regime(amd, [("train@minilm", {"numerics": amd})])[0] == EXACT
    regime, why = numerics_regime(intel)
    assert regime == SPREAD and "AVX2" in why and "GenuineIntel" in why
    regime, why = numerics_regime(amd, [("prepare", {"numerics": amd}), ("train@minilm", {"numerics": intel})])
    assert regime == SPREAD and "train@minilm" in why and "AVX2" in why  # a stage that ran on an Intel CPU


def test_the_devices_the_run_trained_on(tmp_path):
    write_run(tmp_path, {"metrics/train/a.json": {"device": "cpu"}, "metrics/train_variants/v/a.json":
                         {"device": "cuda:0"}, "metrics/eval/a.json": {"device": "mps"}})
    assert training_devices(tmp_path / "metrics") == {"cpu", "cuda:0"}


def test_the_regime_follows_the_native_switch(monkeypatch):
    monkeypatch.setenv("PUNCTUATION_NATIVE_NUMERICS", "1")
    assert verify_run(REPO).regime == SPREAD


# ------------------------------------------------------------------------------------------ comparison


def test_exact_regime_names_every_value_that_differs(tmp_path):
    write_run(tmp_path, COMMITTED)
    files = sorted(COMMITTED)
    assert verify_metrics(reader(COMMITTED), files, tmp_path, EXACT).ok
    write_run(tmp_path, changed("metrics/train/minilm.json", "best_dev_f1", 0.6800001))
    report = verify_metrics(reader(COMMITTED), files, tmp_path, EXACT)
    assert not report.ok and [(d.path, d.key) for d in report.differences] == [("metrics/train/minilm.json",
                                                                                 "best_dev_f1")]
    assert "metrics/train/minilm.json best_dev_f1: committed 0.68, run 0.6800001 (exact)" in report.text()
    (tmp_path / "metrics/eval/minilm.json").unlink()
    assert "missing: metrics/eval/minilm.json" in verify_metrics(reader(COMMITTED), files, tmp_path, EXACT).text()


def test_spread_regime_takes_a_figure_within_its_tolerance_and_names_one_outside(tmp_path):
    files = sorted(COMMITTED)
    write_run(tmp_path, changed("metrics/eval/minilm.json", "ref.OVERALL.f1", 0.715))  # +1.5 points, tolerance 2
    within = verify_metrics(reader(COMMITTED), files, tmp_path, SPREAD, SPREAD_TABLE)
    assert within.ok and within.compared == 4 + 5
    assert not verify_metrics(reader(COMMITTED), files, tmp_path, EXACT).ok  # the same run, pinned: a failure
    write_run(tmp_path, changed("metrics/eval/minilm.json", "ref.OVERALL.f1", 0.725))  # +2.5 points
    outside = verify_metrics(reader(COMMITTED), files, tmp_path, SPREAD, SPREAD_TABLE)
    assert not outside.ok
    assert ("metrics/eval/minilm.json ref.OVERALL.f1: committed 70.00, run 72.50, |diff| 2.50 > tolerance 2.00 "
            "points (measured)") in outside.text()
    assert outside.text().endswith("verify: FAILED (1 figures outside their seed spread, 0 missing)")


def test_spread_regime_names_the_figures_without_a_measured_spread(tmp_path):
    write_run(tmp_path, changed("metrics/real_speech.json", "models.text_model.text.all.SER", 0.56))  # +6 points > 5
    report = verify_metrics(reader(COMMITTED), sorted(COMMITTED), tmp_path, SPREAD, SPREAD_TABLE)
    text = report.text()
    assert "metrics/eval/minilm.json: ref.SER ±5.00 default, asr.OVERALL.f1 ±5.00 default" in text
    assert "metrics/real_speech.json models.text_model.text: OVERALL.f1 ±5.00 default, SER ±5.00 default" in text
    assert [d.key for d in report.differences] == ["models.text_model.text.all.SER"]
    assert "1 metrics files without README figures" in text  # the training metrics: pinned machine only


def test_the_readme_figures_of_each_metrics_file():
    assert readme_figures("metrics/eval/minilm.json", COMMITTED["metrics/eval/minilm.json"]) == [
        "ref.OVERALL.f1", "ref.SER", "asr.OVERALL.f1", "asr.SER"]
    assert readme_figures("metrics/real_speech.json", real_speech(0.5)) == [
        f"models.text_model.text.all.{figure}" for figure in ("OVERALL.f1", "SER", "COMMA.f1", "PERIOD.f1",
                                                              "QUESTION.f1")]
    assert readme_figures("metrics/train/minilm.json", {"steps": 3}) == []


def test_the_pipelines_metrics_are_the_lock_outputs_the_revision_holds():
    tracked = ["metrics/eval/minilm.json", "metrics/train/minilm.json", "metrics/real_speech.json",
               "metrics/gpu/record.json"]
    assert pipeline_metrics(LOCK, tracked) == ["metrics/eval/minilm.json", "metrics/real_speech.json",
                                               "metrics/train/minilm.json"]  # no stale entry, no other record


# ------------------------------------------------------------------------------------------ tolerances


def test_tolerances_twice_the_range_at_least_a_point_else_borrowed_else_the_default():
    figures = {"metrics/eval/a.json": ["ref.OVERALL.f1", "ref.SER"], "metrics/eval/b.json": ["ref.OVERALL.f1"],
               "metrics/eval/c.json": ["ref.OVERALL.f1"]}
    measured = {("metrics/eval/a.json", "ref.OVERALL.f1"): ([70.4, 68.8], "runs"),
                ("metrics/eval/b.json", "ref.OVERALL.f1"): ([53.0, 53.2, 52.9], "summary"),
                ("metrics/eval/c.json", "ref.OVERALL.f1"): ([50.0], "one seed: no spread")}
    table = seed_spread_table(figures, measured, {"runs": "two seeds"})
    a, b = table["figures"]["metrics/eval/a.json"], table["figures"]["metrics/eval/b.json"]
    assert a["ref.OVERALL.f1"] == {"tolerance": 3.2, "basis": "measured", "seeds": 2, "spread": 1.6, "source": "runs"}
    assert b["ref.OVERALL.f1"]["tolerance"] == 1.0  # 2 x 0.3 below the floor of a point
    c = table["figures"]["metrics/eval/c.json"]["ref.OVERALL.f1"]
    assert c["tolerance"] == 3.2 and c["basis"] == "borrowed" and "metrics/eval/a.json" in c["source"]
    assert a["ref.SER"] == {"tolerance": 3.2, "basis": "default", "source": "nothing of this measure measured: "
                                                                              "the default"}
    assert table["default"]["tolerance"] == 3.2 and "max(1.0, 2.0 x" in table["rule"]


def test_seed_values_from_runs_and_from_both_summary_formats():
    runs = [{"scores": {"ref": scores(0.704, 0.418)}}, {"scores": {"ref": scores(0.688, 0.436)}}]
    values = values_from_runs(runs, "metrics/eval/minilm.json")
    assert values[("metrics/eval/minilm.json", "ref.OVERALL.f1")] == pytest.approx([70.4, 68.8])
    real = {"models": {"blstm_text": {"iwslt_metrics": "metrics/eval/blstm.json"}}}
    first = {"text_1": {"ref": 52.6, "text": 52.5, "text_period": 63.5, "text_AlGore_2006": 41.6},
             "text_2": {"ref": 53.0, "text": 52.9, "text_period": 62.2}}
    now = {"1": {"blstm_text": {"ref": 52.6, "text": 52.5, "text_period": 63.5}},
           "2": {"blstm_text": {"ref": 53.0, "text": 52.9, "text_period": 62.2}}}
    for summary in (first, now):
        assert values_from_summary(summary, real) == {
            ("metrics/eval/blstm.json", "ref.OVERALL.f1"): [52.6, 53.0],
            ("metrics/real_speech.json", "models.blstm_text.text.all.OVERALL.f1"): [52.5, 52.9],
            ("metrics/real_speech.json", "models.blstm_text.text.all.PERIOD.f1"): [63.5, 62.2]}


def test_a_lost_seed_source_is_an_error_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="steps_for_words_arm_seed"):
        write_seed_spread(tmp_path, [], tmp_path / "seed_spread.json")


def test_the_committed_tolerances_are_what_their_sources_give(tmp_path):
    """reports/seed_spread.json is written from the measured seeds, never by hand: rewrite it with
    `python -m pipeline.verify --write-spread` when the seeds or the README's figures change."""
    files = committed_metrics(REPO, "HEAD")
    written = write_seed_spread(REPO, files, tmp_path / "seed_spread.json")
    assert json.loads((REPO / SPREAD_FILE).read_text(encoding="utf-8")) == written
    minilm = written["figures"]["metrics/eval/minilm.json"]["ref.OVERALL.f1"]
    assert minilm["basis"] == "measured" and minilm["seeds"] >= 2


# ------------------------------------------------------------------------------------------ the command


def test_the_committed_metrics_pass_and_a_changed_figure_is_named(tmp_path, capsys):
    """The committed metrics, copied out of HEAD, pass in both regimes; one README figure moved past its
    tolerance fails both, named with its file, key, values and tolerance."""
    read = committed_reader(REPO, "HEAD")
    files = committed_metrics(REPO, "HEAD")
    for path in files:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(read(path))
    spread = json.loads((REPO / SPREAD_FILE).read_text(encoding="utf-8"))
    assert verify_metrics(read, files, tmp_path, EXACT).ok
    assert verify_metrics(read, files, tmp_path, SPREAD, spread).ok
    path = tmp_path / "metrics/eval/blstm.json"
    data = json.loads(path.read_text())
    data["asr"]["OVERALL"]["f1"] += 0.10  # ten points
    path.write_text(json.dumps(data))
    for regime in (EXACT, SPREAD):
        report = verify_metrics(read, files, tmp_path, regime, spread)
        assert not report.ok and [(d.path, d.key) for d in report.differences] == [("metrics/eval/blstm.json",
                                                                                     "asr.OVERALL.f1")]
    assert "metrics/eval/blstm.json asr.OVERALL.f1: committed 48.6" in report.text()


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo, check=True,
                   capture_output=True)


def test_the_command_reads_the_committed_figures_from_git(tmp_path, capsys):
    write_run(tmp_path, COMMITTED)
    (tmp_path / "dvc.lock").write_text(LOCK)
    write_run(tmp_path, {SPREAD_FILE: SPREAD_TABLE})
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "the committed run")
    assert main(["--repo", str(tmp_path), "--regime", "exact"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("verify: OK")
    write_run(tmp_path, changed("metrics/eval/minilm.json", "ref.OVERALL.f1", 0.715))
    assert main(["--repo", str(tmp_path), "--regime", "exact"]) == 1
    assert main(["--repo", str(tmp_path), "--regime", "spread"]) == 0
    assert main(["--repo", str(tmp_path), "--regime", "spread", "--against", "HEAD"]) == 0
    out = capsys.readouterr().out
    assert "metrics/eval/minilm.json ref.OVERALL.f1: committed 0.7, run 0.715 (exact)" in out
    write_run(tmp_path, changed("metrics/eval/minilm.json", "ref.OVERALL.f1", 0.60))
    assert main(["--repo", str(tmp_path), "--regime", "spread"]) == 1
    assert "committed 70.00, run 60.00, |diff| 10.00 > tolerance 2.00 points" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="cannot read dvc.lock"):
        main(["--repo", str(tmp_path), "--regime", "exact", "--against", "no-such-revision"])
