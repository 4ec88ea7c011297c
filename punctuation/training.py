"""Training a punctuation model from the cached token features: the library's entry points.

The loop lives in :mod:`punctuation.trainer` (one loop for the CPU, a GPU and several GPUs), its settings in
:mod:`punctuation.train_config` (:class:`TrainConfig`, :class:`Budget`), the batches in
:mod:`punctuation.train_data` and its files (atomic checkpoints, the folder lock) in
:mod:`punctuation.checkpoints`. This module keeps the names callers import, and :func:`load_trained_model`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from models import build_model
from punctuation.checkpoints import TrainingFolderLocked, atomic_torch_save
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
    to_device,
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


def load_trained_model(model_dir: str | Path, device: str = "cpu"):
    """Rebuild a model saved by :func:`train_model`; returns ``(model, config)`` in eval mode."""
    model_dir = Path(model_dir)
    config_path = model_dir / "config.json"
    if not config_path.exists():
        raise FileNotFoundError(f"{model_dir}: not a trained model directory (no config.json)")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    model = build_model(config["model"], num_labels=len(config["labels"]), vector_dim=config["vector_dim"],
                        vocab_size=config["vocab_size"])
    model.load_state_dict(torch.load(model_dir / "model.pt", map_location=device, weights_only=True))
    model.to(device).eval()
    return model, config
