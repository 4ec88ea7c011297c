"""The trainer's Adam and its parameter groups.

Every weight trains at ``train.lr`` unless ``train.encoder_lr`` is set. Then a model's pretrained encoder (the
module its ``pretrained_encoder`` property names: encoder_tagger's MiniLM or MPNet) trains at that rate, and every
other weight (a head, a new cue input) keeps ``train.lr``. Both follow the same schedule (``LambdaLR`` scales each
group's own peak). Why: a new input layer starting at zero needs a head's rate, which would wreck a pretrained
encoder's weights; one shared rate either leaves the new layer barely moved or the encoder frozen.
"""

from __future__ import annotations

import torch
from torch import nn

from training.config import ConfigError, TrainConfig

__all__ = ["ADAM_SETTINGS", "graph_optimizer", "optimizer_groups", "trainer_adam"]

# Adam's betas and epsilon in every trainer: the Transformer's (Vaswani et al. 2017), beside its warm-up schedule.
# One place for the eager optimizer, the graph optimizer and paper_runs' operator count.
ADAM_SETTINGS = {"betas": (0.9, 0.98), "eps": 1e-9}


def optimizer_groups(model: nn.Module, config: TrainConfig) -> list[dict]:
    """Adam's parameter groups for ``model`` (module docstring): one group at ``config.lr``; with
    ``config.encoder_lr``, the pretrained encoder's weights in a second group at that rate."""
    parameters = list(model.parameters())
    if config.encoder_lr is None:
        return [{"params": parameters}]
    encoder = getattr(model, "pretrained_encoder", None)
    if not isinstance(encoder, nn.Module):
        raise ConfigError(f"train.encoder_lr: {type(model).__name__} has no pretrained encoder of its own weights "
                          "(only encoder_tagger has one); leave encoder_lr null")
    inside = {id(parameter) for parameter in encoder.parameters()}
    return [{"params": [parameter for parameter in parameters if id(parameter) not in inside]},
            {"params": [parameter for parameter in parameters if id(parameter) in inside], "lr": config.encoder_lr}]


def trainer_adam(model: nn.Module, config: TrainConfig, device: torch.device, *, graph: bool) -> torch.optim.Adam:
    """The trainer's Adam (:data:`ADAM_SETTINGS`) over :func:`optimizer_groups`: fused on CUDA, or as a CUDA
    graph needs it (``graph``: :func:`graph_optimizer`)."""
    groups = optimizer_groups(model, config)
    if graph:
        return graph_optimizer(groups, config.lr, device)
    options = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.Adam(groups, lr=config.lr, **ADAM_SETTINGS, **options)


def graph_optimizer(parameters, lr: float, device: torch.device) -> torch.optim.Adam:
    """The trainer's Adam (:data:`ADAM_SETTINGS`) as a graph needs it: ``capturable``, fused on CUDA, its
    learning rate a float32 tensor on ``device`` (made on the host and moved after the constructor, whose range check
    of the rate would otherwise read it back from the device)."""
    optimizer = torch.optim.Adam(parameters, lr=torch.tensor(float(lr), dtype=torch.float32), **ADAM_SETTINGS,
                                 capturable=True, fused=device.type == "cuda")
    for group in optimizer.param_groups:  # a group with its own rate (train.encoder_lr) gets its own tensor
        group["lr"] = torch.as_tensor(group["lr"], dtype=torch.float32).to(device)
    # its eager steps (warm-up, shorter batches) are meant: no warning that capturable=True runs uncaptured
    optimizer._warned_capturable_if_run_uncaptured = True
    return optimizer
