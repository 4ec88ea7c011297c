"""The training data as the trainer sees it: the seeded window plan of each epoch, and batches cut from a split.

A batch is a set of window starts; :class:`TokenStore` turns them into the padded batch dict the models read
(see ``models.registry``). It holds a split either as the cached memory-mapped arrays (each batch copied
from them: :func:`inference.windows.make_batch`, the CPU default) or *resident*: the whole split as tensors
on the device, each batch gathered there by index (the CUDA default; no host work or copy per step). Both
give the same tensors.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from inference.windows import make_batch
from training.config import LR_SCHEDULES


def epoch_plan(num_tokens: int, seq_len: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The batches of window starts for one epoch: a random offset, then shuffled non-overlapping windows."""
    rng = np.random.default_rng([seed, epoch])
    offset = int(rng.integers(seq_len)) if num_tokens > 2 * seq_len else 0
    starts = np.arange(offset, max(num_tokens - seq_len, 0) + 1, seq_len)
    if len(starts) == 0:
        starts = np.array([0])
    starts = rng.permutation(starts)
    return [starts[i:i + batch_size] for i in range(0, len(starts), batch_size)]


def schedule_steps(num_tokens: int, train_config) -> int:
    """Steps of the full schedule (every epoch's windows), before any ``max_steps`` budget.

    ``train_config``: a :class:`training.config.TrainConfig` or a ``train`` mapping of params."""
    get = train_config.get if isinstance(train_config, dict) else lambda key: getattr(train_config, key)
    seq_len, batch_size, seed = int(get("seq_len")), int(get("batch_size")), int(get("seed"))
    return sum(len(epoch_plan(num_tokens, seq_len, batch_size, seed, epoch)) for epoch in range(int(get("epochs"))))


def real_tokens(starts: Sequence[int] | np.ndarray, window: int, num_tokens: int) -> int:
    """How many real (unpadded) tokens the windows at ``starts`` hold: known on the host, without the device."""
    starts = np.asarray(starts, dtype=np.int64)
    return int(np.minimum(starts + window, num_tokens).sum() - starts.sum())


class TokenStore:
    """One split's token vectors, ids and labels (and words, for models that read them), cut into windows.

    ``resident``: copy the arrays to ``device`` once and gather every batch there; otherwise build each batch
    on the host from the (memory-mapped) arrays and move it to ``device``.
    """

    def __init__(self, vectors: np.ndarray, ids: np.ndarray, labels: np.ndarray | None, *,
                 words: Sequence[str] | None, device: torch.device, resident: bool):
        self.vectors, self.ids, self.labels, self.words = vectors, ids, labels, words
        self.device, self.resident = device, resident
        self.num_tokens = len(ids)
        if resident:
            # copies: the cached arrays are read-only memory maps
            self._vectors = torch.from_numpy(np.array(vectors, dtype=np.float32)).to(device)
            self._ids = torch.from_numpy(np.array(ids, dtype=np.int64)).to(device)
            self._labels = None if labels is None else torch.from_numpy(np.array(labels, dtype=np.int64)).to(device)

    def nbytes(self) -> int:
        """Bytes the resident copy takes on the device (0 when not resident)."""
        if not self.resident:
            return 0
        return sum(t.numel() * t.element_size() for t in (self._vectors, self._ids, self._labels) if t is not None)

    def spans(self, starts: Sequence[int], window: int) -> list[tuple[int, int]]:
        return [(int(s), min(int(s) + window, self.num_tokens)) for s in starts]

    def batch(self, starts: np.ndarray, window: int, *, device_starts: torch.Tensor | None = None,
              with_labels: bool = True) -> dict:
        """The padded batch of the windows of ``window`` tokens at ``starts`` (host integers).

        ``device_starts``: the same starts already on the device (a resident store then transfers nothing).
        """
        labels = self.labels if with_labels else None
        if not self.resident:
            batch = make_batch(self.vectors, self.ids, self.spans(starts, window), window, labels, self.words)
            return {key: value.to(self.device, non_blocking=True) if isinstance(value, torch.Tensor) else value
                    for key, value in batch.items()}
        if device_starts is None:
            device_starts = torch.as_tensor(np.asarray(starts, dtype=np.int64)).to(self.device, non_blocking=True)
        positions = device_starts[:, None] + torch.arange(window, device=self.device)
        mask = positions < self.num_tokens
        index = positions.clamp(max=max(self.num_tokens - 1, 0))
        batch = {
            "vectors": torch.where(mask[..., None], self._vectors[index], 0.0),
            "ids": torch.where(mask, self._ids[index], 0),
            "mask": mask,
        }
        if with_labels and self._labels is not None:
            batch["labels"] = torch.where(mask, self._labels[index], 0)
        if self.words is not None:
            batch["words"] = [list(self.words[start:end]) for start, end in self.spans(starts, window)]
        return batch


def transformer_schedule(warmup_steps: int):
    """Linear warm-up to the peak rate, then decay with 1/sqrt(step) (Vaswani et al. 2017).

    Returned as a multiplier of the peak learning rate for ``torch.optim.lr_scheduler.LambdaLR``.
    """
    def multiplier(step: int) -> float:
        step = max(step, 1)
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))

    return multiplier


def linear_schedule(warmup_steps: int, total_steps: int):
    """Linear warm-up to the peak rate, then a straight line down to zero at ``total_steps`` (the schedule used
    to fine-tune pretrained encoders, Devlin et al. 2019): a short budget ends annealed, where 1/sqrt(step)
    would still be at a third of its peak."""
    def multiplier(step: int) -> float:
        step = max(step, 1)
        if step < warmup_steps:
            return step / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return multiplier


#: where the ``exponential`` schedule ends, as a fraction of the peak rate
EXPONENTIAL_FINAL_FRACTION = 0.1


def exponential_schedule(warmup_steps: int, total_steps: int):
    """Linear warm-up, then exponential decay to :data:`EXPONENTIAL_FINAL_FRACTION` of the peak at
    ``total_steps`` (Yi & Tao: "the learning rate is exponentially decayed during training")."""
    def multiplier(step: int) -> float:
        step = max(step, 1)
        if step < warmup_steps:
            return step / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return EXPONENTIAL_FINAL_FRACTION ** progress

    return multiplier


def constant_schedule(warmup_steps: int):
    """Linear warm-up, then the peak rate to the end (Kyubyong/transformer: Adam at a constant 1e-4)."""
    def multiplier(step: int) -> float:
        return min(1.0, max(step, 1) / warmup_steps)

    return multiplier


def lr_schedule(name: str, warmup_steps: int, total_steps: int):
    """The multiplier function of schedule ``name`` (:data:`LR_SCHEDULES`) for ``LambdaLR``."""
    if name == "rsqrt":
        return transformer_schedule(warmup_steps)
    if name == "linear":
        return linear_schedule(warmup_steps, total_steps)
    if name == "exponential":
        return exponential_schedule(warmup_steps, total_steps)
    if name == "constant":
        return constant_schedule(warmup_steps)
    raise ValueError(f"unknown lr_schedule {name!r} (one of {', '.join(LR_SCHEDULES)})")
