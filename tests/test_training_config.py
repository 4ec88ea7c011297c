"""The trainer's typed configuration and budget, and the batches it cuts (resident on the device or not)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.fixture_corpus import TINY_TRAIN
from training.batches import TokenStore, real_tokens
from training.config import Budget, ConfigError, TrainConfig


def test_a_params_train_section_becomes_a_typed_config_and_back():
    config = TrainConfig.from_mapping({**TINY_TRAIN, "lr": "1e-4"})  # YAML 1.1 reads 1e-4 as a string
    assert config.lr == 1e-4 and config.batch_size == 8 and config.max_steps is None
    assert config.precision == "auto" and config.compile == "off" and config.resident == "auto"
    # what a model directory records (and the checkpoint fingerprint covers): the params keys, and execution
    # settings only where they differ from their defaults
    assert config.as_params() == {**TINY_TRAIN, "lr": 1e-4}
    assert config.replace(compile=True).as_params()["compile"] == "default"
    assert set(config.as_params(full=True)) - set(TINY_TRAIN) == {"precision", "compile", "resident",
                                                                 "eval_batch_size", "find_unused_parameters",
                                                                 "decode_window", "decode_stride", "lr_schedule",
                                                                 "decode_combine", "window_jitter", "augment_rate",
                                                                 "augment_substitute", "augment_delete", "keep",
                                                                 "encoder_lr"}
    # a model's own decoding windows are recorded where it has them
    assert config.replace(decode_window=64, decode_stride=48).as_params() == {
        **TINY_TRAIN, "lr": 1e-4, "decode_window": 64, "decode_stride": 48}


@pytest.mark.parametrize("change, message", [
    ({"epoch": 3}, "unknown epoch"),
    ({"seed": None}, "train.seed: must not be null"),
    ({"batch_size": 0}, "batch_size: must be at least 1"),
    ({"batch_size": True}, "batch_size: must be an integer"),
    ({"label_smoothing": 1.0}, r"label_smoothing: must be in \[0, 1\)"),
    ({"device": "tpu"}, "device: must be auto, cpu, cuda or cuda:N"),
    ({"precision": "fp16"}, "precision: must be one of auto, fp32, bf16"),
    ({"max_steps": -1}, "max_steps: must be null or >= 0"),
])
def test_a_bad_setting_is_refused_naming_it(change, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig.from_mapping({**TINY_TRAIN, **change})


def test_a_missing_setting_is_refused():
    settings = dict(TINY_TRAIN)
    del settings["warmup_steps"]
    with pytest.raises(ConfigError, match="missing warmup_steps"):
        TrainConfig.from_mapping(settings)


def test_a_budget_pauses_by_steps_or_time_and_stops_by_time():
    budget = Budget(steps=3, pause_at=100.0, stop_at=200.0)
    assert not budget.pause_due(2, now=50.0) and budget.pause_due(3, now=50.0) and budget.pause_due(1, now=100.0)
    assert not budget.stop_due(199.0) and budget.stop_due(200.0)
    assert Budget.seconds(pause_after=5, stop_after=9, now=10.0) == Budget(pause_at=15.0, stop_at=19.0)
    assert not Budget().pause_due(10**9, now=1e12) and not Budget().stop_due(1e12)
    with pytest.raises(ConfigError):
        Budget(steps=0)


def test_a_resident_store_cuts_the_same_batches_as_the_host_one():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(50, 3)).astype(np.float32)
    ids = rng.integers(0, 9, size=50).astype(np.int32)
    labels = rng.integers(0, 4, size=50).astype(np.int8)
    words = [f"w{i}" for i in range(50)]
    stores = [TokenStore(vectors, ids, labels, words=words, device=torch.device("cpu"), resident=resident)
              for resident in (False, True)]
    starts = np.array([45, 0, 20])  # the first window runs past the end: padded
    host, resident = (store.batch(starts, 10) for store in stores)
    assert host.keys() == resident.keys() == {"vectors", "ids", "mask", "labels", "words"}
    for key in ("vectors", "ids", "mask", "labels"):
        assert host[key].dtype == resident[key].dtype and torch.equal(host[key], resident[key]), key
    assert host["words"] == resident["words"] and resident["words"][0] == words[45:]
    assert int(host["mask"].sum()) == real_tokens(starts, 10, 50) == 25
    unlabelled = stores[1].batch(starts, 10, device_starts=torch.tensor([45, 0, 20]), with_labels=False)
    assert "labels" not in unlabelled and torch.equal(unlabelled["vectors"], host["vectors"])
