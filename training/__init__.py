"""Training a punctuation model from the cached token features: the library's entry points.

* :mod:`training.loop` -- :func:`train_model`, the one loop for the CPU, a GPU and several GPUs;
* :mod:`training.config` -- its typed settings (:class:`TrainConfig`) and the budget of one call (:class:`Budget`);
* :mod:`training.optimizer` -- its Adam, a pretrained encoder's weights at their own rate (``train.encoder_lr``);
* :mod:`training.batches` -- the seeded window plan of each epoch and the batches cut from a split;
* :mod:`training.dev_eval` -- model selection on the dev split, decoded as ``punctuate`` decodes;
* :mod:`training.execution` -- processes of a distributed run, bf16 autocast, peak memory;
* :mod:`training.checkpoints` -- atomic checkpoints that keep the previous good one, the folder lock;
* :mod:`training.warm_start` -- a run that starts from a trained model (the speech model from the text model);
* :mod:`training.model_output` -- the self-contained model directory a finished run writes.

Loading a model directory is :mod:`inference.model_dir`'s job (one loader, whose errors name the damaged file).
"""

from __future__ import annotations

from inference.device import DeviceUnavailable, choose_device
from inference.model_dir import load_trained_model, to_device
from training.batches import epoch_plan, schedule_steps, transformer_schedule
from training.checkpoints import TrainingFolderLocked, atomic_torch_save, training_fingerprint
from training.config import Budget, ConfigError, TrainConfig
from training.dev_eval import evaluate_on_tokens
from training.loop import BEST_FILE, CHECKPOINT_FILE, TrainResult, train_model
from training.model_output import HISTORY_COLUMNS

__all__ = [
    "BEST_FILE", "CHECKPOINT_FILE", "HISTORY_COLUMNS", "Budget", "ConfigError", "DeviceUnavailable", "TrainConfig",
    "TrainResult", "TrainingFolderLocked", "atomic_torch_save", "choose_device", "epoch_plan", "evaluate_on_tokens",
    "load_trained_model", "schedule_steps", "to_device", "train_model", "training_fingerprint",
    "transformer_schedule",
]
