"""scripts/time_boxed_run.py: a budgeted run records what it did, stops by its deadline and scores the test sets."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
import yaml

from tests.fixture_corpus import TINY_MODEL, TINY_TRAIN, write_feature_cache

REPO = Path(__file__).resolve().parents[1]


def load_script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_params(tmp_path, splits=("ref",), published=None, **profile_train) -> Path:
    """A params file defining one experiment, ``tiny``, whose profile sets ``profile_train``."""
    experiment = {"model": TINY_MODEL, **({"published": published} if published else {})}
    params = {"profile": "tiny", "experiments": ["tiny"],
              "evaluate": {"test_splits": list(splits), "window": 30, "stride": 15, "batch_size": 16, "device": "cpu"},
              "train": TINY_TRAIN, "experiment_defs": {"tiny": experiment},
              "profiles": {"tiny": {"train": profile_train}}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    return path


@pytest.mark.slow  # ~14 s: calibrates, trains, scores
def test_time_boxed_run_fits_its_budget_and_records_the_settings(tmp_path):
    features = write_feature_cache(tmp_path, talks=10, sentences_per_talk=12, train_tokens=2000)
    params_path = write_params(tmp_path, splits=("ref", "asr"), published="yi_tao_2019/word", epochs=1000)
    out = tmp_path / "run"
    budget = 12.0  # calibration is a share of it: leave room for training on a loaded machine
    assert load_script("time_boxed_run").main([
        "--experiment", "tiny", "--params", str(params_path), "--features", str(features),
        "--prepared", str(tmp_path / "prepared"), "--out", str(out), "--budget-s", str(budget),
        "--set", "dev_eval_tokens=200"]) == 0
    record = json.loads((out / "run.json").read_text())
    result = record["train_result"]
    assert result["completed"] and 0 < result["steps"] <= record["train"]["max_steps"]
    assert record["train"]["dev_eval_tokens"] == 200 and record["planned_steps"] > result["steps"]
    assert set(record["eval"]) == {"ref", "asr"} and record["published"] == "yi_tao_2019/word"
    assert (out / "predictions" / "ref.tsv").exists() and not (out / "state").exists()

    report = tmp_path / "report.md"
    curves = tmp_path / "figures" / "curves.png"
    assert load_script("time_boxed_report").main([str(out / "run.json"), "--out", str(report),
                                                  "--curves", str(curves)]) == 0
    text = report.read_text()
    assert f"{result['steps']} (of {record['planned_steps']})" in text
    assert curves.stat().st_size > 0 and "](figures/curves.png)" in text


def test_time_boxed_run_refuses_an_unknown_setting(tmp_path):

    from punctuation.params import ParamsError

    features = write_feature_cache(tmp_path, talks=6, sentences_per_talk=8, train_tokens=800)
    params_path = write_params(tmp_path)
    with pytest.raises(ParamsError, match="dev_eval_token is not a train setting"):
        load_script("time_boxed_run").main([
            "--experiment", "tiny", "--params", str(params_path), "--features", str(features),
            "--out", str(tmp_path / "run"), "--budget-s", "5", "--set", "dev_eval_token=200"])
    assert not (tmp_path / "run").exists()


def fixed_steps_setup(tmp_path, epochs):
    """A tiny feature cache and params with one experiment; the command-line start of a fixed-steps run."""
    features = write_feature_cache(tmp_path, talks=8, sentences_per_talk=10, train_tokens=1500)
    params_path = write_params(tmp_path, epochs=epochs)
    return ["--experiment", "tiny", "--params", str(params_path), "--features", str(features),
            "--prepared", str(tmp_path / "prepared"), "--steps", "schedule"]


def test_a_fixed_schedule_pauses_and_resumes_across_calls_to_the_same_model(tmp_path):
    common = fixed_steps_setup(tmp_path, epochs=3)
    script = load_script("time_boxed_run")

    def run(out, *extra):
        return script.main([*common, "--out", str(out), *extra])

    assert run(tmp_path / "straight") == 0
    straight = json.loads((tmp_path / "straight" / "run.json").read_text())
    assert straight["train_result"]["steps"] == straight["planned_steps"] == straight["train"]["max_steps"]

    # a slot already over: each call checkpoints after its first step and asks to be called again
    calls = 0
    while (status := run(tmp_path / "sliced", "--pause-after-s", "0")) == script.PAUSED_EXIT_STATUS:
        calls += 1
        assert not (tmp_path / "sliced" / "run.json").exists() and (tmp_path / "sliced" / "state").exists()
    assert status == 0 and calls >= 2
    sliced = json.loads((tmp_path / "sliced" / "run.json").read_text())
    assert sliced["train_result"]["steps"] == straight["train_result"]["steps"]
    assert sliced["eval"] == straight["eval"]
    a = torch.load(tmp_path / "straight" / "model" / "model.pt", weights_only=True)
    b = torch.load(tmp_path / "sliced" / "model" / "model.pt", weights_only=True)
    assert all(torch.equal(a[name], b[name]) for name in a)
    assert not (tmp_path / "sliced" / "state").exists()  # the finished run drops its checkpoint


def test_the_last_slot_of_a_fixed_schedule_can_end_it_early_and_say_so(tmp_path):
    common = [*fixed_steps_setup(tmp_path, epochs=50), "--out", str(tmp_path / "run")]
    script = load_script("time_boxed_run")
    assert script.main([*common, "--pause-after-s", "0"]) == script.PAUSED_EXIT_STATUS
    assert script.main([*common, "--stop-after-s", "0"]) == 0  # resumes, then ends at once for good
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["train_result"]["stopped_at_deadline"]
    assert 1 <= record["train_result"]["steps"] < record["planned_steps"] == record["train"]["max_steps"]
    assert set(record["eval"]) == {"ref"}


def test_slot_options_belong_to_fixed_steps_runs(tmp_path, capsys):

    script = load_script("time_boxed_run")
    base = ["--experiment", "tiny", "--out", str(tmp_path / "run")]
    for argv, message in ((["--steps", "many"], "--steps wants a number or 'schedule'"),
                          (["--budget-s", "60", "--pause-after-s", "30"], "go with --steps")):
        with pytest.raises(SystemExit) as stopped:
            script.main([*base, *argv])
        assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
