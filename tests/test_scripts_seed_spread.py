"""scripts/seed_spread.py: the pipeline's comparisons repeated over seeds, resumable, and reported correctly."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from punctuation.params import load_params

REPO = Path(__file__).resolve().parents[1]
TALKS = ["TalkA", "TalkB"]


def load_script():
    spec = importlib.util.spec_from_file_location("seed_spread", REPO / "scripts" / "seed_spread.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


seed_spread = load_script()


PARAMS = {"variants": {"blstm_word_pauses": {"experiment": "blstm", "features": "word_pauses"},
                      "blstm_word_pauses_control": {"experiment": "blstm", "features": "word_pauses_control"}}}


def test_a_variant_reads_its_feature_set_from_the_params():
    assert seed_spread.features_dir(PARAMS, "blstm_word_pauses") == "data/feature_sets/word_pauses"
    assert seed_spread.features_dir(PARAMS, "text") == "data/features"
    params = load_params(REPO / "params.yaml")
    word_speech = params["variants"]["transformer_word_speech"]["features"]
    assert seed_spread.features_dir(params, "ws") == f"data/feature_sets/{word_speech}"


def test_a_variant_run_trains_the_variant_with_the_seed_on_its_feature_set(tmp_path):
    features = seed_spread.features_dir(PARAMS, "blstm_word_pauses")
    train, evaluate = seed_spread.seed_commands("blstm_word_pauses", 2, tmp_path, tmp_path / "params_2.yaml", features)
    assert train[1:4] == ["-m", "pipeline.train", "--variant"] and train[4] == "blstm_word_pauses"
    assert train[train.index("--set") + 1] == "seed=2"
    assert train[train.index("--features") + 1] == "data/feature_sets/word_pauses"
    assert train[train.index("--params") + 1] == str(tmp_path / "params_2.yaml")
    assert train[train.index("--artifacts") + 1] == str(tmp_path / "blstm_word_pauses_2")
    assert evaluate[1:6] == ["-m", "pipeline.evaluate", "--stage", "--experiment", "blstm"]
    assert evaluate[evaluate.index("--metrics") + 1] == str(tmp_path / "eval" / "blstm_word_pauses_2")
    # the evaluation finds the model where training put it
    model, scores = seed_spread.run_paths(tmp_path, "blstm_word_pauses", 2)
    assert model == tmp_path / "blstm_word_pauses_2" / "blstm" / "model"
    assert scores == tmp_path / "eval" / "blstm_word_pauses_2" / "blstm.json"


def test_an_experiment_run_trains_on_the_default_features():
    train, _ = seed_spread.seed_commands("words", 3, Path("out"), Path("params.yaml"),
                                         seed_spread.features_dir(PARAMS, "words"))
    assert train[train.index("--experiment") + 1] == "transformer"
    assert train[train.index("--features") + 1] == "data/features"
    assert "--variant" not in train


def test_seed_one_is_the_pipelines_own_run(tmp_path):
    assert seed_spread.run_paths(tmp_path, "text", 1) == (Path("artifacts/blstm/model"),
                                                          Path("metrics/eval/blstm.json"))
    model, _ = seed_spread.run_paths(tmp_path, "ws", 1)
    assert model == Path("variant_artifacts/transformer_word_speech/transformer/model")


def test_the_speech_model_of_a_seed_starts_from_that_seeds_text_model(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"punctuate": {"text_model": "artifacts/blstm/model", "audio_model": "x"},
                                      "train": {"seed": 1}}))
    written = yaml.safe_load(seed_spread.seed_params(params, tmp_path / "out", 2).read_text())
    assert written == {"punctuate": {"text_model": str(tmp_path / "out" / "text_2" / "blstm" / "model"),
                                     "audio_model": "x"}, "train": {"seed": 1}}


def test_runs_already_scored_are_not_trained_again_and_the_text_model_comes_first(tmp_path, monkeypatch):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"punctuate": {"text_model": "artifacts/blstm/model"}}))
    out = tmp_path / "out"
    scored = seed_spread.run_paths(out, "blstm_word_pauses_control", 2)[1]
    scored.parent.mkdir(parents=True)
    scored.write_text("{}")
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda command, check: calls.append(command))
    seed_spread.train_seed(2, out, params, PARAMS, ["blstm_word_pauses", "blstm_word_pauses_control", "text"])
    trained = [c[c.index("--artifacts") + 1] for c in calls if "pipeline.train" in c]
    assert trained == [str(out / "text_2"), str(out / "blstm_word_pauses_2")]
    speech_train = next(c for c in calls if "--variant" in c)
    assert speech_train[speech_train.index("--params") + 1] == str(out / "params_2.yaml")
    assert speech_train[speech_train.index("--features") + 1] == "data/feature_sets/word_pauses"


def row(ref, text, period=None, timings=None, timings_period=None, talks=None):
    values = {"ref": ref, "asr": ref - 2, "text": text, "text_period": period if period is not None else text}
    for talk, (talk_text, talk_timings) in (talks or {}).items():
        values[f"text_{talk}"] = talk_text
        if talk_timings is not None:
            values[f"timings_{talk}"] = talk_timings
    if timings is not None:
        values.update(timings=timings, timings_period=timings_period)
    return values


def test_the_real_speech_report_gives_each_seeds_gains_and_their_mean():
    rows = {}
    for seed, shift in ((1, 0.0), (2, 1.0)):
        rows[f"text_{seed}"] = row(50 + shift, 50 + shift, period=60, talks={"TalkA": (40, None), "TalkB": (60, None)})
        rows[f"blstm_word_pauses_{seed}"] = row(52, 51, timings=56 + 2 * shift, timings_period=70,
                                                talks={"TalkA": (41, 50), "TalkB": (61, 62)})
        rows[f"blstm_word_pauses_control_{seed}"] = row(53, 52, timings=52.5, timings_period=61)
    text = seed_spread.real_speech_seeds_markdown(rows, [1, 2], TALKS, notes=["A note."])
    lines = text.splitlines()
    assert "A note." in lines
    assert "| 1 | 50.0 | 51.0 | 56.0 | 52.5 | +6.0 | +10.0 | +3.5 | +10.0 | +2.0 | 50.0 / 52.0 / 53.0 |" in lines
    assert "| 2 | 51.0 | 51.0 | 58.0 | 52.5 | +7.0 | +10.0 | +5.5 | +10.0 | +2.0 | 51.0 / 52.0 / 53.0 |" in lines
    assert "| mean | 50.5 | 51.0 | 57.0 | 52.5 | +6.5 | +10.0 | +4.5 | +10.0 | +2.0 | 50.5 / 52.0 / 53.0 |" in lines
    assert "gains +6.0 to +7.0 F1 over its own text model (PERIOD +10.0 to +10.0) and +3.5 to +5.5" in text


def test_the_speech2vec_report_gives_the_difference_per_seed_mean_and_spread():
    rows = {"words_1": {"ref": 40.0, "asr": 36.0, "text": 39.0}, "ws_1": {"ref": 39.0, "asr": 37.0, "text": 36.0},
            "words_2": {"ref": 42.0, "asr": 38.0, "text": 41.0}, "ws_2": {"ref": 43.0, "asr": 37.0, "text": 40.0}}
    lines = seed_spread.speech2vec_markdown(rows, [1, 2]).splitlines()
    assert "| 1 | 40.0 | 36.0 | 39.0 | 39.0 | 37.0 | 36.0 | -1.0 | +1.0 | -3.0 |" in lines
    assert "| 2 | 42.0 | 38.0 | 41.0 | 43.0 | 37.0 | 40.0 | +1.0 | -1.0 | -1.0 |" in lines
    assert ("| mean (sd) | 41.0 (1.4) | 37.0 (1.4) | 40.0 (1.4) | 41.0 (2.8) | 37.0 (0.0) | 38.0 (2.8) "
            "| +0.0 | +0.0 | -2.0 |") in lines


def test_seed_one_cannot_be_asked_for(tmp_path, capsys):
    with pytest.raises(SystemExit):
        seed_spread.main(["--out", str(tmp_path), "--seeds", "1", "--params", str(REPO / "params.yaml")])
    assert "seed 1 is the default pipeline's own run" in capsys.readouterr().err


def test_the_committed_reports_are_what_the_script_writes_from_its_summary():
    """The two committed reports are regenerated from the figures they show (no hand edits)."""
    for report in ("real_speech_seeds.md", "transformer_speech2vec_seeds.md"):
        text = (REPO / "reports" / report).read_text(encoding="utf-8")
        assert "Written by `python scripts/seed_spread.py`" in text
    summary = json.loads((REPO / "reports" / "seed_spread_summary.json").read_text(encoding="utf-8"))
    seeds = sorted({int(name.rsplit("_", 1)[1]) for name in summary})
    real = (REPO / "reports" / "real_speech_seeds.md").read_text(encoding="utf-8")
    table = seed_spread.real_speech_seeds_markdown(summary, seeds, ["AlGore_2006", "AmySmith_2006"])
    assert [line for line in table.splitlines() if line.startswith("| ")] == \
        [line for line in real.splitlines() if line.startswith("| ")]
    speech2vec = (REPO / "reports" / "transformer_speech2vec_seeds.md").read_text(encoding="utf-8")
    assert [line for line in seed_spread.speech2vec_markdown(summary, seeds).splitlines() if line.startswith("| ")] \
        == [line for line in speech2vec.splitlines() if line.startswith("| ")]
