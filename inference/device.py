"""The torch device a model runs on: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``, checked before any weight moves.

Asking for a GPU this machine lacks is a :class:`DeviceUnavailable` that names the device and why (torch built
without CUDA, no GPU visible), raised before a model file is opened -- not a failure at the first tensor moved,
and never reported as a damaged model file. Training (:mod:`training`), the evaluate stage and ``punctuate``
all choose their device here.
"""

from __future__ import annotations

import torch


class DeviceUnavailable(RuntimeError):
    """The configured device does not exist on this machine (e.g. ``cuda`` without a GPU)."""


def choose_device(name: str) -> torch.device:
    """``auto`` = CUDA when available, else CPU; ``cpu``, ``cuda`` or ``cuda:N`` as named.

    A CUDA device this machine lacks is a :class:`DeviceUnavailable` saying so (not a failure at the first
    tensor moved). On CUDA, float32 matrix products may use TF32 tensor cores (10-bit mantissa inputs,
    float32 accumulation): several times faster, and well inside the run-to-run noise of these models.
    """
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise DeviceUnavailable(f"device {name!r}: not a device name (auto, cpu, cuda or cuda:N)") from error
    if device.type == "cuda":
        if not torch.cuda.is_available():
            why = "built without CUDA" if torch.version.cuda is None else "no CUDA GPU is visible to this process"
            raise DeviceUnavailable(f"device {name!r} requested, but torch {torch.__version__} has no GPU here "
                                    f"({why}); use device cpu or auto")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceUnavailable(f"device {name!r} requested, but this machine has "
                                    f"{torch.cuda.device_count()} CUDA device(s)")
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True  # fixed shapes: let cuDNN pick its fastest kernels once
    return device

