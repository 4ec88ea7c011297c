"""scripts/seed_spread.py: seeds as DVC experiments, their metrics read from `dvc exp show --json`, and the
reports computed from them."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers import load_script

TALKS = ["TalkA", "TalkB"]
seed_spread = load_script("seed_spread")


def scores(f1, period=None):
    cls = {"precision": f1, "recall": f1, "f1": f1}
    return {"COMMA": cls, "PERIOD": {**cls, "f1": period if period is not None else f1}, "QUESTION": cls,
            "OVERALL": cls, "SER": 1 - f1}


def real_entry(text, timings=None, talks=(0.4, 0.6), iwslt=None):
    entry = {"iwslt_metrics": iwslt, "text": {"all": scores(text), "talks": dict(zip(TALKS, map(scores, talks)))}}
    if timings is not None:
        entry["timings"] = {"all": scores(timings, period=timings + 0.1),
                            "talks": dict(zip(TALKS, (scores(timings - 0.05), scores(timings + 0.05))))}
    return entry


def metrics(shift=0.0):
    """What one run's metrics hold: the real-speech metrics naming each model's IWSLT2011 metrics."""
    return {
        "metrics/eval/minilm.json": {"model": "artifacts/minilm/model", "ref": scores(0.6 + shift), "asr": scores(0.55)},
        "metrics/real_speech.json": {"models": {
            "text_model": real_entry(0.60 + shift, iwslt="metrics/eval/minilm.json"),
            "audio_model": real_entry(0.61, timings=0.68 + shift),
            "audio_control": real_entry(0.62, timings=0.63),
        }},
    }


SHOW = [
    {"rev": "workspace", "name": None, "data": {"metrics": {"metrics/real_speech.json": {"data": {"junk": 1}}}},
     "experiments": None},
    {"rev": "abc", "name": "main", "data": {"metrics": {path: {"data": data} for path, data in metrics().items()}},
     "experiments": [{"revs": [{"rev": "def", "name": "seed-2", "data": {
         "metrics": {path: {"data": data} for path, data in metrics(0.02).items()}}}]}]},
]


def test_the_experiments_metrics_are_read_from_dvc_exp_show():
    by_name = seed_spread.metrics_by_name(SHOW)
    assert set(by_name) == {"baseline", "seed-2"}  # the workspace row is left out
    assert by_name["seed-2"]["metrics/eval/minilm.json"]["ref"]["OVERALL"]["f1"] == pytest.approx(0.62)


def test_each_models_row_joins_real_speech_and_its_iwslt_figures():
    rows = seed_spread.rows_of(metrics())
    assert rows["text_model"]["ref"] == pytest.approx(60.0) and rows["text_model"]["asr"] == pytest.approx(55.0)
    assert rows["audio_model"]["timings"] == pytest.approx(68.0) and "ref" not in rows["audio_model"]
    assert rows["audio_model"]["timings_TalkB"] == pytest.approx(73.0)
    with pytest.raises(ValueError, match="real_speech.json"):
        seed_spread.rows_of({})


def test_the_real_speech_report_gives_each_seeds_gains_and_their_mean():
    rows = seed_spread.seed_rows(seed_spread.metrics_by_name(SHOW), [1, 2])
    text = seed_spread.real_speech_seeds_markdown(rows, TALKS, notes=["A note."])
    lines = text.splitlines()
    assert "A note." in lines and "## MiniLM encoder" in lines and "## BLSTM over GloVe" not in text
    # timings 68 (PERIOD 78) against the text model's 60 (PERIOD 60, talks 40 / 60: with timings 63 / 73)
    assert "| 1 | 60.0 | 61.0 | 68.0 | 63.0 | +8.0 | +18.0 | +5.0 | +23.0 | +13.0 | 60.0 / nan / nan |" in lines
    assert "| 2 | 62.0 | 61.0 | 70.0 | 63.0 | +8.0 | +18.0 | +7.0 | +25.0 | +15.0 | 62.0 / nan / nan |" in lines
    assert "| mean | 61.0 | 61.0 | 69.0 | 63.0 | +8.0 | +18.0 | +6.0 | +24.0 | +14.0 | 61.0 / nan / nan |" in lines
    assert "gains +8.0 to +8.0 F1 over its own text model (PERIOD +18.0 to +18.0) and +5.0 to +7.0" in text
    with pytest.raises(SystemExit, match="seed-3"):
        seed_spread.seed_rows(seed_spread.metrics_by_name(SHOW), [1, 3])


def test_the_speech2vec_report_gives_the_difference_per_seed_mean_and_spread():
    rows = {1: {"transformer_words": {"ref": 40.0, "asr": 36.0, "text": 39.0},
                "word_speech2vec": {"ref": 39.0, "asr": 37.0, "text": 36.0}},
            2: {"transformer_words": {"ref": 42.0, "asr": 38.0, "text": 41.0},
                "word_speech2vec": {"ref": 43.0, "asr": 37.0, "text": 40.0}}}
    lines = seed_spread.speech2vec_markdown(rows).splitlines()
    assert "| 1 | 40.0 | 36.0 | 39.0 | 39.0 | 37.0 | 36.0 | -1.0 | +1.0 | -3.0 |" in lines
    assert "| 2 | 42.0 | 38.0 | 41.0 | 43.0 | 37.0 | 40.0 | +1.0 | -1.0 | -1.0 |" in lines
    assert ("| mean (sd) | 41.0 (1.4) | 37.0 (1.4) | 40.0 (1.4) | 41.0 (2.8) | 37.0 (0.0) | 38.0 (2.8) "
            "| +0.0 | +0.0 | -2.0 |") in lines


def test_run_refuses_seed_one_and_a_dirty_workspace_and_skips_existing_experiments(monkeypatch):
    with pytest.raises(SystemExit, match="seed 1"):
        seed_spread.run_seeds([1, 2])
    calls = []

    def fake_run(command, check=True, capture_output=False, text=False):
        calls.append(command)
        stdout = " M params.yaml\n" if command[:2] == ["git", "status"] and dirty else ""
        if command[1:3] == ["exp", "show"]:
            stdout = json.dumps(SHOW)
        return subprocess.CompletedProcess(command, 0, stdout=stdout)

    monkeypatch.setattr(subprocess, "run", fake_run)
    dirty = True
    with pytest.raises(SystemExit, match="uncommitted changes"):
        seed_spread.run_seeds([2], dvc="dvc")
    dirty = False
    calls.clear()
    seed_spread.run_seeds([2, 3], dvc="dvc")
    runs = [c for c in calls if c[1:3] == ["exp", "run"]]
    assert runs == [["dvc", "exp", "run", "-S", "train.seed=3", "-n", "seed-3"]]  # seed-2 exists
    assert calls[-2:] == [["git", "checkout", "HEAD", "--", "."], ["dvc", "checkout", "--force"]]


def test_report_writes_the_reports_from_the_experiments(tmp_path, monkeypatch):
    monkeypatch.setattr(seed_spread, "show_experiments", lambda dvc: seed_spread.metrics_by_name(SHOW))
    assert seed_spread.main(["report", "--seeds", "1", "2", "--reports", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "seed_spread_summary.json").read_text())
    assert set(summary) == {"1", "2"} and summary["2"]["text_model"]["text"] == pytest.approx(62.0)
    assert "| mean |" in (tmp_path / "real_speech_seeds.md").read_text()
    assert not (tmp_path / "transformer_speech2vec_seeds.md").exists()  # no Transformer pair in these metrics
