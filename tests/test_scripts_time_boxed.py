"""scripts/time_boxed_run.py: a budgeted run records what it did, stops by its deadline and scores the test sets."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import yaml

from tests.corpus import TINY_MODEL, TINY_TRAIN, write_feature_cache

REPO = Path(__file__).resolve().parents[1]


def load_script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_time_boxed_run_fits_its_budget_and_records_the_settings(tmp_path):
    features = write_feature_cache(tmp_path, talks=10, sentences_per_talk=12, train_tokens=2000)
    params = {"profile": "tiny", "experiments": ["tiny"],
              "evaluate": {"test_splits": ["ref", "asr"], "window": 30, "stride": 15, "batch_size": 16,
                           "device": "cpu"},
              "profiles": {"tiny": {"train": {**TINY_TRAIN, "epochs": 1000},
                                    "experiments": {"tiny": {"model": TINY_MODEL, "published": "yi_tao_2019/word"}}}}}
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params), encoding="utf-8")
    out = tmp_path / "run"
    budget = 6.0
    assert load_script("time_boxed_run").main([
        "--experiment", "tiny", "--params", str(params_path), "--features", str(features),
        "--prepared", str(tmp_path / "prepared"), "--out", str(out), "--budget-s", str(budget),
        "--set", "dev_eval_tokens=200"]) == 0
    record = json.loads((out / "run.json").read_text())
    result = record["train_result"]
    assert result["completed"] and 0 < result["steps"] <= record["train"]["max_steps"]
    assert record["train"]["dev_eval_tokens"] == 200 and record["planned_steps"] > result["steps"]
    assert result["train_seconds"] < budget
    assert set(record["eval"]) == {"ref", "asr"} and record["published"] == "yi_tao_2019/word"
    assert (out / "predictions" / "ref.tsv").exists() and not (out / "state").exists()

    report = tmp_path / "report.md"
    assert load_script("time_boxed_report").main([str(out / "run.json"), "--out", str(report)]) == 0
    assert f"{result['steps']} (of {record['planned_steps']})" in report.read_text()


def test_time_boxed_run_refuses_an_unknown_setting(tmp_path):
    import pytest

    from punctuation.params import ParamsError

    features = write_feature_cache(tmp_path, talks=6, sentences_per_talk=8, train_tokens=800)
    params = {"profile": "tiny", "experiments": ["tiny"],
              "evaluate": {"test_splits": ["ref"], "window": 30, "stride": 15, "batch_size": 16, "device": "cpu"},
              "profiles": {"tiny": {"train": TINY_TRAIN, "experiments": {"tiny": {"model": TINY_MODEL}}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    with pytest.raises(ParamsError, match="dev_eval_token is not a train setting"):
        load_script("time_boxed_run").main([
            "--experiment", "tiny", "--params", str(tmp_path / "params.yaml"), "--features", str(features),
            "--out", str(tmp_path / "run"), "--budget-s", "5", "--set", "dev_eval_token=200"])
    assert not (tmp_path / "run").exists()
