"""``python -m benchmarks.train_speed --tiny``: the training-speed benchmark runs on the CPU and prints one complete
JSON line per experiment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import train_speed
from experiments.params import ParamsError

REPO = Path(__file__).resolve().parents[1]


def test_the_tiny_benchmark_prints_one_json_line_per_experiment(tmp_path, capsys):
    assert train_speed.main(["--tiny", "--params", str(REPO / "params.yaml"), "--experiments", "transformer", "blstm",
                             "--steps", "12", "--work", str(tmp_path)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["experiment"] for line in lines] == ["transformer", "blstm"]
    for line in lines:
        assert line["device"] == "cpu" and line["steps"] == 12 and line["steps_scheduled"] >= 12
        assert line["steps_per_s"] > 0 and line["tokens_per_s"] > 0 and line["achieved_tflops"] > 0
        assert line["flops_per_token"] > 0 and "flop_counter" in line["flop_count"]
        assert line["mfu"] is None and line["peak_tflops"] is None  # no known peak for a CPU
        assert line["peak_memory_bytes"] > 0 and line["dev_evaluations"] >= 1
        assert 0 < line["eval_share"] < 1 and 0 <= line["checkpoint_share"] < 1
        assert line["projected_schedule_s"] > 0


def test_a_model_setting_reaches_the_trained_model_and_is_printed_beside_its_figures(tmp_path, capsys):
    argv = ["--tiny", "--params", str(REPO / "params.yaml"), "--experiments", "blstm", "--steps", "4",
            "--work", str(tmp_path)]
    assert train_speed.main([*argv, "--model-set", "hidden=8", "--set", "lr=0.01"]) == 0
    line = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert line["model_set"] == {"hidden": 8} and line["train_set"] == {"lr": 0.01}
    config = json.loads((tmp_path / "runs" / "blstm" / "model" / "config.json").read_text(encoding="utf-8"))
    assert config["model"]["hidden"] == 8 and config["train"]["lr"] == 0.01
    assert line["model"] == config["model"]  # the settings resolved: the line means the same when params change
    with pytest.raises(ParamsError, match="no_such_setting"):  # a setting the model lacks is an error, not ignored
        train_speed.main([*argv, "--model-set", "no_such_setting=1"])


def test_recurrent_layers_are_counted_analytically():
    from torch import nn

    lstm = nn.LSTM(16, 32, num_layers=2, bidirectional=True)
    # layer 1: 2 directions x 2 x 4 gates x 32 x (16 + 32); layer 2: input 64; x 3 for training
    expected = 3 * (2 * 2 * 4 * 32 * (16 + 32) + 2 * 2 * 4 * 32 * (64 + 32))
    assert train_speed.recurrent_flops_per_token(nn.Sequential(lstm)) == expected
