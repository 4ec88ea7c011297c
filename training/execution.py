"""How one training computation runs on this machine: the processes of a distributed run, bf16 autocast, the
loss as a module for DistributedDataParallel and torch.compile, deterministic algorithms on the CPU, peak memory.

Several processes (``torchrun --nproc_per_node N -m pipeline.train ...``) split every global batch of
``batch_size`` windows; process 0 evaluates, checkpoints and writes the model directory. On one process every
collective is the identity.
"""

from __future__ import annotations

import contextlib
import os
import resource
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from inference.device import choose_device
from training.batches import real_tokens
from training.config import TrainConfig


@dataclass
class Processes:
    """This process's place in a distributed run (``torchrun`` sets ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    owns_group: bool = False
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1

    def all_max(self, values: list[float]) -> list[float]:
        """Element-wise maximum over the processes (the values themselves in a single process)."""
        if not self.distributed:
            return values
        import torch.distributed as dist

        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return tensor.tolist()

    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.distributed:
            import torch.distributed as dist

            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def share(self, starts: np.ndarray, flat_offset: int, device_plan: torch.Tensor | None, window: int,
              num_tokens: int) -> tuple[np.ndarray, torch.Tensor | None, float | None]:
        """This process's share of a global batch ``starts`` (at ``flat_offset`` of the epoch's starts
        ``device_plan``, on the device or None): its starts, the same on the device or None, and its loss weight
        (its share of the batch's real tokens; None in a single process)."""
        if not self.distributed:
            on_device = None if device_plan is None else device_plan[flat_offset:flat_offset + len(starts)]
            return starts, on_device, None
        sizes = [len(part) for part in np.array_split(np.arange(len(starts)), self.world)]
        first = sum(sizes[:self.rank])
        mine = starts[first:first + sizes[self.rank]]
        global_tokens = real_tokens(starts, window, num_tokens)
        if len(mine) == 0:  # fewer windows than processes: take part in the gradient exchange with weight 0
            mine, first, weight = starts[:1], 0, 0.0
        else:
            weight = real_tokens(mine, window, num_tokens) / global_tokens
        on_device = None if device_plan is None else device_plan[flat_offset + first:flat_offset + first + len(mine)]
        return mine, on_device, weight

    def gather(self, obj: Any) -> list[Any]:
        if not self.distributed:
            return [obj]
        import torch.distributed as dist

        gathered: list[Any] = [None] * self.world
        dist.all_gather_object(gathered, obj)
        return gathered


def processes_of(config: TrainConfig) -> Processes:
    """The device of this process and, under ``torchrun`` with several processes, the process group (gloo on
    the CPU, NCCL on CUDA; made here unless the caller made it)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Processes(device=choose_device(config.device))
    import torch.distributed as dist

    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    device = choose_device(config.device)
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    owns = False
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
        owns = True
    return Processes(rank=rank, world=world, local_rank=local_rank, owns_group=owns, device=device)


class LossOf(nn.Module):
    """``model.loss`` as a module's forward: what DistributedDataParallel and torch.compile wrap."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch: dict, label_smoothing: float) -> torch.Tensor:
        return self.model.loss(batch, label_smoothing)


def autocast_for(config: TrainConfig, device: torch.device):
    """bf16 autocast where ``precision`` asks for it (auto: on CUDA); else nothing."""
    bf16 = config.precision == "bf16" or (config.precision == "auto" and device.type == "cuda")
    if not bf16:
        return contextlib.nullcontext
    return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)


@contextlib.contextmanager
def deterministic_on_cpu(device: torch.device):
    """On the CPU, run the enclosed training with ``torch.use_deterministic_algorithms(True)``, then restore the
    caller's setting.

    With the seeds and a fixed thread count (``train.threads``) it is what torch offers for a CPU run that repeats
    to the byte: torch then takes the deterministic implementation of every operation that has two (on the CPU
    the accumulating index writes behind the backward pass of advanced indexing: ``index_put_``, ``put_``,
    ``index_copy_``) and raises on one that has none, instead of training on. Torch's default with the mode on
    also fills every new uninitialised tensor; that is turned off here (restored after): it costs a write of every
    allocation on every step, and the kernels the models use write every element of their outputs, so the bytes
    do not depend on it (the determinism tests train twice in fresh processes with it off).
    On CUDA the mode stays as the caller has it: there it would make the loss (``nll_loss``) raise and
    slow the rest, and a GPU run is not expected to repeat to the byte (docs/method.md lists why)."""
    if device.type != "cpu":
        yield
        return
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def peak_memory(device: torch.device) -> tuple[int, str]:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "cuda max_memory_allocated"
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "process peak RSS"


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
