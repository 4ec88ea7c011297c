"""Same seed, same bytes on the CPU: a run repeated in a fresh process at two threads writes the same
weights to the byte, for the BLSTM speech model tuned from its text model (timing cues concatenated to the word
vectors, :mod:`training.warm_start`), for the Transformer (relative position bias, dropout) and for WRN-BLSTM (fused
BatchNorm on whole windows, a BLSTM); and the trainer's
deterministic mode is on for the CPU run only and handed back as it found it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from tests.fixture_corpus import TINY_MODEL, TINY_TRAIN, write_cue_caches
from tests.helpers import REPO
from training.execution import deterministic_on_cpu

#: The pipeline's BLSTM layout (two layers, dropout between them) at a test's width.
BLSTM = {"name": "blstm", "hidden": 16, "layers": 2, "dropout": 0.3}
TRANSFORMER = {**TINY_MODEL, "relative_window": 4}
WRN_BLSTM = {"name": "wrn_blstm", "channels": 4, "widen": 2, "blocks": 2, "lstm_hidden": 8, "dropout": 0.2}
#: Two threads: one thread cannot show a reduction whose order depends on how work is split between threads.
TRAIN = {**TINY_TRAIN, "threads": 2, "max_steps": 6, "eval_every_steps": 3, "log_every_steps": 1,
         "dev_eval_tokens": 100}

RUNS = """
import hashlib, json, sys
from pathlib import Path
from training import train_model

root, out = Path(sys.argv[1]), Path(sys.argv[2])
blstm, transformer, wrn_blstm, train = (json.loads(arg) for arg in sys.argv[3:7])
train_model(root / "words", out / "text", out / "text_state", model_config=blstm, train_config=train, window=30,
            stride=15)
train_model(root / "cues", out / "tuned", out / "tuned_state", model_config=blstm,
            train_config={**train, "lr": 0.001}, window=30, stride=15, init_from=out / "text")
train_model(root / "words", out / "transformer", out / "transformer_state", model_config=transformer,
            train_config=train, window=30, stride=15)
train_model(root / "words", out / "wrn_blstm", out / "wrn_blstm_state", model_config=wrn_blstm,
            train_config=train, window=30, stride=15)
print(json.dumps({f"{run}/{name}": hashlib.sha256((out / run / name).read_bytes()).hexdigest()
                  for run in ("text", "tuned", "transformer", "wrn_blstm") for name in ("model.pt", "history.csv")}))
"""


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    """Word vectors alone, and with two timing-cue-like columns concatenated (as the word_pauses feature set)."""
    return write_cue_caches(tmp_path_factory.mktemp("determinism"), sentences_per_talk=12, train_tokens=900,
                            words_name="words")


def run_in_a_fresh_process(caches, out) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", RUNS, str(caches), str(out), json.dumps(BLSTM), json.dumps(TRANSFORMER),
         json.dumps(WRN_BLSTM), json.dumps(TRAIN)], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # eight short trainings in two fresh processes
def test_the_same_run_in_a_fresh_process_writes_the_same_bytes(caches, tmp_path):
    first = run_in_a_fresh_process(caches, tmp_path / "first")
    second = run_in_a_fresh_process(caches, tmp_path / "second")
    assert first == second
    history = (tmp_path / "first" / "tuned" / "history.csv").read_text().splitlines()
    assert len(history) == 1 + TRAIN["max_steps"]  # a loss written at every step was compared


def test_deterministic_algorithms_are_on_for_a_cpu_run_only_and_handed_back():
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
        with deterministic_on_cpu(torch.device("cpu")):
            assert torch.are_deterministic_algorithms_enabled()
            assert not torch.is_deterministic_algorithms_warn_only_enabled()
            assert not torch.utils.deterministic.fill_uninitialized_memory  # no write of every new tensor
        assert torch.is_deterministic_algorithms_warn_only_enabled()
        assert torch.utils.deterministic.fill_uninitialized_memory  # torch's default, handed back
        torch.use_deterministic_algorithms(False)
        with deterministic_on_cpu(torch.device("cuda")):  # a GPU run keeps the caller's setting
            assert not torch.are_deterministic_algorithms_enabled()
        with pytest.raises(RuntimeError, match="inside"), deterministic_on_cpu(torch.device("cpu")):
            raise RuntimeError("inside")
        assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
