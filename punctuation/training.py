"""Training a punctuation model from the cached token features: the library's entry points.

The loop lives in :mod:`punctuation.trainer` (one loop for the CPU, a GPU and several GPUs), its settings in
:mod:`punctuation.train_config` (:class:`TrainConfig`, :class:`Budget`), the batches in
:mod:`punctuation.train_data` and its files (atomic checkpoints, the folder lock) in
:mod:`punctuation.checkpoints`. This module keeps the names callers import; :func:`load_trained_model` is :mod:`punctuation.model_dir`'s
(one loader, whose errors name the damaged file).
"""

from __future__ import annotations

from punctuation.checkpoints import TrainingFolderLocked, atomic_torch_save
from punctuation.model_dir import load_trained_model, to_device
from punctuation.train_config import Budget, ConfigError, TrainConfig
from punctuation.train_data import epoch_plan, schedule_steps
from punctuation.trainer import (
    BEST_FILE,
    CHECKPOINT_FILE,
    HISTORY_COLUMNS,
    DeviceUnavailable,
    TrainResult,
    choose_device,
    evaluate_on_tokens,
    train_model,
    training_fingerprint,
    transformer_schedule,
)

__all__ = [
    "BEST_FILE", "CHECKPOINT_FILE", "HISTORY_COLUMNS", "Budget", "ConfigError", "DeviceUnavailable", "TrainConfig",
    "TrainResult", "TrainingFolderLocked", "atomic_torch_save", "choose_device", "epoch_plan", "evaluate_on_tokens",
    "load_trained_model", "schedule_steps", "to_device", "train_model", "training_fingerprint",
    "transformer_schedule",
]

_atomic_torch_save = atomic_torch_save  # the former private name

