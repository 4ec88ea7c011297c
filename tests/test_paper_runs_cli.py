"""The paper-profile records: ``python -m paper_runs run NAME`` trains in slots (pausing and resuming), scores
Ref and ASR and writes ``metrics/paper/NAME.json`` with its provenance; ``report`` renders the records beside the
published and small-profile figures and names the missing ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from embeddings.sources import file_sha256
from experiments.numerics import numeric_facts
from paper_runs import __main__ as paper
from paper_runs.records import PAPER_RUNS, missing_records
from pipeline.stage import StageRecord
from tests.fixture_corpus import TINY_MODEL, TINY_TRAIN, write_feature_cache


@pytest.mark.slow  # ~15 s: a paused and resumed training, scoring, rendering
def test_a_paper_run_is_recorded_with_its_provenance_and_rendered_beside_the_other_figures(tmp_path, capsys):
    features = write_feature_cache(tmp_path, talks=12, sentences_per_talk=14, train_tokens=1500)
    experiments = {"transformer": {"published": "yi_tao_2019/word", "model": TINY_MODEL, "train": {}}}
    # a paper run is scored where it trained (here: train.device cpu), not on evaluate.device
    params = {"profile": "small", "experiments": ["transformer"],
              "evaluate": {"test_splits": ["ref", "asr"], "window": 30, "stride": 15, "batch_size": 16,
                           "device": "cuda:99"},
              "train": {**TINY_TRAIN, "epochs": 2}, "experiment_defs": experiments,
              "profiles": {name: {"data": {}, "train": {}, "experiments": {"transformer": {}}}
                           for name in ("small", "paper")}}
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params), encoding="utf-8")
    records = tmp_path / "records"
    base = ["--params", str(params_path), "--records", str(records)]
    run = [*base, "run", "transformer_word", "--features", str(features), "--prepared", str(tmp_path / "prepared"),
           "--runs", str(tmp_path / "runs")]

    assert paper.main([*run, "--slot-s", "0"]) == 3  # the slot is over at once: checkpointed, to be resumed
    assert not (records / "transformer_word.json").exists()
    assert paper.main([*run, "--slot-s", "600"]) == 0
    assert StageRecord.facts["device"] == "cpu"  # the evaluation's (its stage record)
    record = json.loads((records / "transformer_word.json").read_text())
    info = record["run"]
    assert info["numerics"]["environment"] == numeric_facts()["environment"]
    assert set(record) == {"ref", "asr", "run"} and "OVERALL" in record["ref"] and "SER" in record["asr"]
    assert info["steps_completed"] == info["steps_scheduled"] > 1 and info["full_schedule"]
    assert info["device"] == "cpu" and info["steps_per_s"] > 0 and info["wall_s"] >= info["train_s"] > 0
    assert info["features_sha256"] == file_sha256(features / "manifest.json") and len(info["params_sha256"]) == 64
    assert info["git"]["commit"] is None or len(info["git"]["commit"]) == 40
    assert info["software"]["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert info["software"]["python"].count(".") == 2
    assert info["published"] == "yi_tao_2019/word" and info["train"]["epochs"] == 2
    assert (records / "transformer_word.history.csv").read_text().startswith("step,")
    assert missing_records(records) == [name for name in PAPER_RUNS if name != "transformer_word"]

    small = tmp_path / "small"
    small.mkdir()
    (small / "transformer.json").write_text(json.dumps({"ref": record["ref"], "asr": record["asr"]}))
    out = tmp_path / "paper.md"
    capsys.readouterr()
    assert paper.main([*base, "report", "--out", str(out), "--eval-metrics", str(small),
                       "--variant-metrics", str(tmp_path / "none")]) == 0
    text = out.read_text()
    n = len(PAPER_RUNS)
    assert f"**Missing records ({n - 1} of {n}): transformer_learned, transformer_word_literal, transformer_speech," in text
    ref_row = next(line for line in text.splitlines() if line.startswith("| transformer_word | ") and "| Ref |" in line)
    f1, ser = (f"{100 * value:.1f}" for value in (record["ref"]["OVERALL"]["f1"], record["ref"]["SER"]))
    assert f"| {info['steps_completed']} (of {info['steps_scheduled']}) | cpu |" in ref_row
    assert f"/ {f1} | {ser} | 69.4 | – | {f1} | {ser} |" in ref_row  # ours, published, small profile
    assert "| lstm | **missing** |" in text

    assert paper.main([*base, "status"]) == 0
    assert "transformer_word: recorded" in capsys.readouterr().out


def test_the_report_of_no_records_says_that_every_one_is_missing():
    from paper_runs.records import paper_markdown
    from reporting.results import load_published

    text = paper_markdown({}, load_published(), small={}, default_published={"drnn_lwma": "kim_2019/drnn_lwma"})
    assert f"**Missing records ({len(PAPER_RUNS)} of {len(PAPER_RUNS)}): {', '.join(PAPER_RUNS)}.**" in text
    assert "| drnn_lwma | **missing** | – | – | Ref | – | – | 68.6 |" in text


def test_a_missing_feature_cache_is_a_clear_error(tmp_path, capsys):
    from pipeline import train

    params = {"profile": "paper", "experiments": ["transformer"],
              "evaluate": {"test_splits": ["ref"], "window": 30, "stride": 15, "batch_size": 16, "device": "cpu"},
              "train": TINY_TRAIN, "experiment_defs": {"transformer": {"model": TINY_MODEL}},
              "profiles": {"paper": {"train": {}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    status = train.main(["--experiment", "transformer", "--params", str(tmp_path / "params.yaml"),
                         "--features", str(tmp_path / "nowhere"), "--checkpoints", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert status == 2 and "error:" in err and "nowhere" in err


def test_the_paper_speech2vec_command_refreshes_the_coverage_the_report_reads(tmp_path, monkeypatch, capsys):
    """`paper_runs speech2vec` copies its coverage.json to --report (what stage speech2vec reports from), and
    only when every talk went through."""
    from audio import coverage as coverage_module

    committed = json.loads((Path(__file__).resolve().parents[1] / "reports/paper_speech2vec/coverage.json")
                           .read_text(encoding="utf-8"))
    failed: list[dict] = []

    def build(prepared, iwslt_dir, out, **kwargs):
        summary = {**committed, "speech2vec_dir": f"{out}/speech2vec", "seconds": 1.0, "steps_skipped": [],
                   "steps_run": ["select"], "failed": failed}
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "coverage.json").write_text(json.dumps(committed), encoding="utf-8")
        return summary

    monkeypatch.setattr(coverage_module, "build_coverage_speech2vec", build)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"profile": "paper", "data": {"iwslt_dir": "x"},
                                      "profiles": {"paper": {"data": {}, "train": {}, "experiments": {}}}}))
    report = tmp_path / "reports" / "coverage.json"
    command = ["--params", str(params), "speech2vec", "--out", str(tmp_path / "work"), "--report", str(report)]

    failed.append({"step": "align", "split": "train", "talk": "t1", "error": "boom"})
    assert paper.main(command) == 1
    assert not report.exists()  # a run with failed talks is not the coverage to report
    assert "FAILED align train t1: boom" in capsys.readouterr().err

    failed.clear()
    assert paper.main(command) == 0
    assert json.loads(report.read_text(encoding="utf-8")) == committed
    printed = capsys.readouterr().out
    assert "7,936 types targeted (95.0% of the training tokens)" in printed
    assert "95.0% of the training tokens have a vector" in printed


def published_defaults() -> dict:
    from experiments.params import load_params

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml", profile="paper")
    return {name: e.get("published") for name, e in params["active"]["experiments"].items()}


def test_every_gap_of_the_committed_records_has_three_hypotheses_each_with_its_measurement():
    """A complete record more than 3 F1 under its published figure needs at least three hypotheses in
    reports/paper_gaps.yaml, each with the measurement that tests it and what it has shown."""
    from paper_runs.records import gaps, load_gaps, load_records, unexplained
    from reporting.results import load_published

    repo = Path(__file__).resolve().parents[1]
    found = gaps(load_records(repo / "metrics/paper"), load_published(), published_defaults())
    groups = load_gaps()
    assert unexplained(found, groups) == []
    named = {name for group in groups for name in group["runs"]}
    assert named <= set(PAPER_RUNS)  # a group names paper runs only


def test_a_gap_without_three_hypotheses_is_flagged_and_a_hypothesis_needs_its_measurement(tmp_path):
    from paper_runs.records import gaps, gaps_markdown, load_gaps, unexplained
    from reporting.results import load_published

    def scores(f1: float) -> dict:
        return {"OVERALL": {"precision": f1, "recall": f1, "f1": f1}, "SER": 0.5}

    run = {"steps_completed": 10, "steps_scheduled": 10, "full_schedule": True}
    records = {"transformer_word": {"ref": scores(0.60), "asr": scores(0.64), "run": run},  # 69.4 / 65.3
               "transformer_learned": {"ref": scores(0.50), "asr": scores(0.50), "run": {**run, "full_schedule": False}}}
    found = gaps(records, load_published(), published_defaults())
    # Ref 9.4 under: a gap; ASR 1.3 under: none; a partial record is no gap yet
    assert [(gap["name"], gap["split"], round(gap["gap"], 1)) for gap in found] == [("transformer_word", "ref", 9.4)]
    two = [{"title": "t", "runs": ["transformer_word"],
            "hypotheses": [{"claim": "c", "test": "t", "seen": "s"}] * 2}]
    assert unexplained(found, two) == ["transformer_word"]
    assert "**Not yet explained** (fewer than 3 hypotheses" in "\n".join(gaps_markdown(found, two, "g.yaml"))
    three = [{**two[0], "hypotheses": two[0]["hypotheses"] * 2}]
    text = "\n".join(gaps_markdown(found, three, "g.yaml"))
    assert "Not yet explained" not in text and "| transformer_word | Ref | 60.0 | 69.4 | 9.4 |" in text
    (tmp_path / "gaps.yaml").write_text(yaml.safe_dump({"groups": [
        {"title": "no test", "runs": ["transformer_word"], "hypotheses": [{"claim": "c", "seen": "s"}]}]}))
    with pytest.raises(ValueError, match="group 1 \\(no test\\) lacks hypothesis 1 test"):
        load_gaps(tmp_path / "gaps.yaml")


def test_the_committed_paper_report_is_what_report_writes_from_the_records(tmp_path, monkeypatch, capsys):
    repo = Path(__file__).resolve().parents[1]
    out = tmp_path / "paper_results.md"
    monkeypatch.chdir(repo)  # the report names the records' folder as given
    assert paper.main(["report", "--out", str(out)]) == 0
    assert out.read_text() == (repo / "reports/paper_results.md").read_text()


def test_a_kit_run_s_code_is_the_commit_its_kit_was_packed_at():
    """The device machine's copy of .git may lag the tree it was sent (a record of 2026-12-04 read dd8f975,
    modified, for a tree packed clean at 29e6387): the report's code commit is the kit's."""
    from paper_runs.records import run_code

    kit = {"git": {"commit": "b" * 40, "dirty": False}}
    assert run_code({"git": {"commit": "a" * 40, "dirty": True}, "kit": kit}) == kit["git"]
    assert run_code({"git": {"commit": "a" * 40, "dirty": True}}) == {"commit": "a" * 40, "dirty": True}
