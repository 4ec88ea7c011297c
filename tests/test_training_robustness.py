"""The trainer's robustness: unreadable checkpoints fall back to the previous good one, the training folder is
locked while in use, a missing GPU is a clear error, and a trainer dies with its parent."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from tests.fixture_corpus import TINY_MODEL, TINY_TRAIN, write_feature_cache
from training import (
    BEST_FILE,
    CHECKPOINT_FILE,
    Budget,
    DeviceUnavailable,
    TrainingFolderLocked,
    choose_device,
    train_model,
)
from training.checkpoints import LOCK_FILE, TrainingLock, atomic_torch_save, load_checkpoint, previous_path

REPO = Path(__file__).resolve().parents[1]
TRAIN = {**TINY_TRAIN, "epochs": 2, "eval_every_steps": 8}


@pytest.fixture(scope="module")
def features(tmp_path_factory):
    return write_feature_cache(tmp_path_factory.mktemp("robust"), talks=20, sentences_per_talk=20, train_tokens=2500)


def train(features, root: Path, name: str, **kwargs):
    return train_model(features, root / name, root / f"{name}_state", model_config=TINY_MODEL, train_config=TRAIN,
                       window=30, stride=15, **kwargs)


def weights(model_dir: Path):
    return torch.load(model_dir / "model.pt", weights_only=True)


def same_weights(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def test_a_checkpoint_is_replaced_atomically_and_the_previous_one_kept(tmp_path):
    path = tmp_path / CHECKPOINT_FILE
    atomic_torch_save({"n": 1}, path)
    assert not previous_path(path).exists()
    atomic_torch_save({"n": 2}, path)
    assert previous_path(path).name == "checkpoint.prev.pt"
    assert torch.load(path)["n"] == 2 and torch.load(previous_path(path))["n"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.prev.pt", "checkpoint.pt"]  # no temporaries


def test_an_unreadable_checkpoint_falls_back_to_the_previous_one_with_a_warning(tmp_path, caplog):
    path = tmp_path / CHECKPOINT_FILE
    atomic_torch_save({"n": 1}, path)
    atomic_torch_save({"n": 2}, path)
    truncate(path)
    with caplog.at_level(logging.WARNING):
        content, used = load_checkpoint(path)
    assert content == {"n": 1} and used == previous_path(path)
    assert str(path) in caplog.text and "unreadable" in caplog.text
    truncate(previous_path(path))
    assert load_checkpoint(path) is None  # neither is readable: start afresh, no traceback


@pytest.mark.slow  # three short trainings
def test_training_resumes_from_the_previous_checkpoint_when_the_last_one_is_truncated(features, tmp_path, caplog):
    straight = train(features, tmp_path, "straight")
    paused = train(features, tmp_path, "cut", budget=Budget(steps=12))  # checkpoints at steps 8, 11 (dev) and 12
    assert paused.metrics == {"completed": False, "steps": 12}
    state = tmp_path / "cut_state"
    truncate(state / CHECKPOINT_FILE)
    with caplog.at_level(logging.WARNING):
        resumed = train(features, tmp_path, "cut")
    assert f"{state / CHECKPOINT_FILE}: unreadable" in caplog.text
    assert resumed.metrics["steps"] == straight.metrics["steps"]
    assert same_weights(weights(tmp_path / "straight"), weights(tmp_path / "cut"))
    assert (tmp_path / "straight" / "history.csv").read_text() == (tmp_path / "cut" / "history.csv").read_text()

    # both unreadable: a fresh start, to the same model
    train(features, tmp_path, "both", budget=Budget(steps=12))
    for name in (CHECKPOINT_FILE, "checkpoint.prev.pt"):
        truncate(tmp_path / "both_state" / name)
    assert train(features, tmp_path, "both").metrics["steps"] == straight.metrics["steps"]
    assert same_weights(weights(tmp_path / "straight"), weights(tmp_path / "both"))


def test_a_truncated_best_model_falls_back_to_the_previous_best_with_a_warning_naming_it(features, tmp_path, caplog,
                                                                                         monkeypatch):
    import itertools

    from training import dev_eval

    rising = itertools.count(1)  # every dev evaluation is a new best, so there is a previous best to fall back to
    monkeypatch.setattr(dev_eval, "score_labels", lambda *_: {"OVERALL": {"f1": next(rising) / 100}})
    first = train(features, tmp_path, "m")
    history = (tmp_path / "m" / "history.csv").read_text().splitlines()
    dev_steps = [int(line.split(",")[0]) for line in history[1:] if line.split(",")[4]]
    assert first.metrics["best_step"] == dev_steps[-1]
    best = tmp_path / "m_state" / BEST_FILE
    truncate(best)
    with caplog.at_level(logging.WARNING):
        again = train(features, tmp_path, "m")  # a finished run: only rewrites its model directory
    assert f"{best}: unreadable" in caplog.text and again.metrics["completed"]
    assert again.metrics["best_step"] == dev_steps[-2]
    assert same_weights(weights(tmp_path / "m"), torch.load(previous_path(best), weights_only=True))

    for name in (BEST_FILE, "best_model.prev.pt"):  # no readable best at all: the last weights, said so
        truncate(tmp_path / "m_state" / name)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        last = train(features, tmp_path, "m")
    assert "no readable best model" in caplog.text and last.metrics["best_step"] == last.metrics["steps"]
    assert len(weights(tmp_path / "m")) > 0  # a complete, loadable model all the same


def test_a_second_trainer_on_the_same_folder_is_refused_naming_the_folder_and_the_holder(features, tmp_path):
    state = tmp_path / "m_state"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from training.checkpoints import TrainingLock; "
         f"lock = TrainingLock({str(state)!r}).acquire(); print('locked', flush=True); time.sleep(60)"],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(TrainingFolderLocked) as refused:
            train(features, tmp_path, "m")
        assert str(state) in str(refused.value) and f"pid {holder.pid}" in str(refused.value)
        assert not (tmp_path / "m").exists()
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_of_a_dead_process_is_taken_over(features, tmp_path, caplog):
    state = tmp_path / "m_state"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    state.mkdir()
    (state / LOCK_FILE).write_text(dead.stdout)  # a lock file left by a process that no longer runs
    with caplog.at_level(logging.INFO):
        result = train(features, tmp_path, "m", budget=Budget(steps=1))
    assert result.metrics["steps"] == 1 and f"pid {int(dead.stdout)}" in caplog.text
    with TrainingLock(state):  # released when the trainer returned
        pass


def test_a_lock_refuses_a_second_holder_in_the_same_process(tmp_path):
    with TrainingLock(tmp_path):
        with pytest.raises(TrainingFolderLocked, match=f"pid {os.getpid()}"):
            TrainingLock(tmp_path).acquire()
    TrainingLock(tmp_path).acquire().release()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_a_clear_error(features, tmp_path, capsys):
    with pytest.raises(DeviceUnavailable, match="no GPU here"):
        choose_device("cuda")
    from pipeline import train as stage

    params = {"profile": "tiny", "experiments": ["tiny"],
              "evaluate": {"test_splits": ["ref"], "window": 30, "stride": 15, "batch_size": 16, "device": "cpu"},
              "train": TINY_TRAIN, "experiment_defs": {"tiny": {"model": TINY_MODEL}},
              "profiles": {"tiny": {"train": {}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    status = stage.main(["--experiment", "tiny", "--params", str(tmp_path / "params.yaml"), "--features",
                         str(features), "--artifacts", str(tmp_path / "a"), "--checkpoints", str(tmp_path / "c"),
                         "--metrics", str(tmp_path / "m"), "--device", "cuda"])
    err = capsys.readouterr().err
    assert status == 2 and "error: device 'cuda' requested" in err and "Traceback" not in err
    assert not (tmp_path / "a").exists()


def test_an_unknown_or_ill_typed_setting_is_a_clear_error(features, tmp_path):
    from training import ConfigError

    for change, message in (({"epoch": 2}, "unknown epoch"), ({"batch_size": "8"}, "batch_size: must be an integer"),
                            ({"lr": -1.0}, "lr: must be a positive number"), ({"device": "gpu"}, "train.device")):
        with pytest.raises(ConfigError, match=message):
            train_model(features, tmp_path / "m", tmp_path / "s", model_config=TINY_MODEL,
                        train_config={**TRAIN, **change}, window=30, stride=15)


def test_a_trainer_exits_when_its_parent_is_killed(tmp_path):
    """The parent (standing for dvc) starts a child that asks for the parent-death signal, then is killed -9."""
    child_code = ("from training.checkpoints import exit_with_parent; import time; "
                  "assert exit_with_parent(); print('ready', flush=True); time.sleep(60)")
    parent_code = ("import subprocess, sys, time; "
                   f"child = subprocess.Popen([sys.executable, '-c', {child_code!r}], stdout=subprocess.PIPE, "
                   "text=True); "
                   "assert child.stdout.readline().strip() == 'ready'; print(child.pid, flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", parent_code], cwd=REPO, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    child_pid = int(parent.stdout.readline())
    assert _running(child_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while _running(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child_pid)


def test_the_training_stage_asks_to_end_with_its_parent(tmp_path, monkeypatch):
    from pipeline import train as stage

    calls = []
    monkeypatch.setattr(stage, "exit_with_parent", lambda: calls.append(True))
    params = {"profile": "tiny", "experiments": ["tiny"], "evaluate": {"window": 30, "stride": 15},
              "train": TINY_TRAIN, "experiment_defs": {"tiny": {"model": TINY_MODEL}}, "profiles": {"tiny": {}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    assert stage.main(["--experiment", "tiny", "--params", str(tmp_path / "params.yaml"), "--features",
                       str(tmp_path / "none"), "--checkpoints", str(tmp_path / "c")]) == 2  # no cache: a clear error
    assert calls == [True]


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


@pytest.mark.slow  # a trainer started, killed -9 mid-run, resumed; and a straight run
def test_a_trainer_killed_mid_run_resumes_to_a_byte_identical_model(features, tmp_path):
    params = {"profile": "tiny", "experiments": ["tiny"],
              "evaluate": {"test_splits": ["ref"], "window": 30, "stride": 15, "batch_size": 16, "device": "cpu"},
              "train": {**TRAIN, "epochs": 6, "eval_every_steps": 5},
              "experiment_defs": {"tiny": {"model": TINY_MODEL}},
              "profiles": {"tiny": {"train": {}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")

    def argv(name: str) -> list[str]:
        return ["--experiment", "tiny", "--params", str(tmp_path / "params.yaml"), "--features", str(features),
                "--artifacts", str(tmp_path / name), "--checkpoints", str(tmp_path / f"{name}_state"),
                "--metrics", str(tmp_path / f"{name}_metrics")]

    from pipeline import train as stage

    assert stage.main(argv("straight")) == 0
    checkpoint = tmp_path / "killed_state" / "tiny" / CHECKPOINT_FILE
    trainer = subprocess.Popen([sys.executable, "-m", "pipeline.train", *argv("killed")], cwd=REPO,
                               env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not previous_path(checkpoint).exists() and trainer.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    trainer.send_signal(signal.SIGKILL)
    assert trainer.wait() == -signal.SIGKILL, "the trainer finished before it could be killed"
    steps_at_kill = torch.load(load_checkpoint(checkpoint)[1], weights_only=False)["state"]["step"]
    assert stage.main(argv("killed")) == 0  # resumes (and takes over the dead trainer's lock)
    straight, killed = (json.loads((tmp_path / f"{name}_metrics" / "tiny.json").read_text())
                        for name in ("straight", "killed"))
    assert 0 < steps_at_kill < killed["steps"] == straight["steps"]
    for name in ("model.pt", "history.csv"):
        assert (tmp_path / "killed" / "tiny" / "model" / name).read_bytes() == \
            (tmp_path / "straight" / "tiny" / "model" / name).read_bytes()
