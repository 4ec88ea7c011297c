"""``torchrun --nproc_per_node 2 -m pipeline.train``: DistributedDataParallel on the CPU (gloo) trains the same model
as one process with the same global batch.

Tolerance: every logged training loss within 1e-4 relative of the single-process one (measured: ~1e-7, the
order of float32 rounding: the gradient is summed across processes instead of within one batch), dev loss
within 1e-4 relative and dev F1 within 0.01 at every evaluation, the same steps and tokens. Dropout is off in
this test: with it, the two processes draw other masks than the one process does, and the curves agree only
within noise.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.fixture_corpus import TINY_MODEL, TINY_TRAIN, write_feature_cache

REPO = Path(__file__).resolve().parents[1]
TORCHRUN = Path(sys.executable).with_name("torchrun")


def history(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def close(a: str, b: str, relative: float) -> bool:
    return abs(float(a) - float(b)) <= relative * max(abs(float(a)), 1e-12)


@pytest.mark.slow  # ~25 s: two processes under torchrun and one alone
@pytest.mark.skipif(not TORCHRUN.exists(), reason="torchrun is not installed beside this interpreter")
def test_two_processes_train_the_single_process_model_of_the_same_global_batch(tmp_path):
    features = write_feature_cache(tmp_path, talks=20, sentences_per_talk=20, train_tokens=2500)
    params = {"profile": "tiny", "experiments": ["tiny"],
              "evaluate": {"test_splits": ["ref"], "window": 30, "stride": 15, "batch_size": 16, "device": "cpu"},
              "train": {**TINY_TRAIN, "epochs": 4, "lr": 0.01, "eval_every_steps": 11, "log_every_steps": 1},
              "experiment_defs": {"tiny": {"model": {**TINY_MODEL, "dropout": 0.0}}},
              "profiles": {"tiny": {"train": {}}}}
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params), encoding="utf-8")

    def args(name: str) -> list[str]:
        return ["--experiment", "tiny", "--params", str(params_path), "--features", str(features),
                "--artifacts", str(tmp_path / name / "a"), "--checkpoints", str(tmp_path / name / "c"),
                "--metrics", str(tmp_path / name / "m")]

    env = {key: value for key, value in os.environ.items()
           if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    for name, launcher in (("one", [sys.executable, "-m", "pipeline.train"]),
                           ("two", [str(TORCHRUN), "--standalone", "--nproc_per_node", "2", "-m", "pipeline.train"])):
        done = subprocess.run([*launcher, *args(name)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]

    one, two = (json.loads((tmp_path / name / "m" / "tiny.json").read_text()) for name in ("one", "two"))
    assert (one["processes"], two["processes"]) == (1, 2)
    for key in ("steps", "train_tokens_seen", "best_step"):
        assert one[key] == two[key], key
    assert abs(one["best_dev_f1"] - two["best_dev_f1"]) <= 0.01 and one["best_dev_f1"] > 0
    rows_one, rows_two = (history(tmp_path / name / "a" / "tiny" / "model" / "history.csv") for name in ("one", "two"))
    assert [r["step"] for r in rows_one] == [r["step"] for r in rows_two] and len(rows_one) > 40
    for a, b in zip(rows_one, rows_two):
        assert close(a["train_loss"], b["train_loss"], 1e-4), (a, b)
        if a["dev_loss"]:
            assert close(a["dev_loss"], b["dev_loss"], 1e-4) and abs(float(a["dev_f1"]) - float(b["dev_f1"])) <= 0.01
