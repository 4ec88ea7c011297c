"""Per-token MFCC frames: the ragged store the ``features`` stage writes and Speech2Vec reads.

A :class:`RaggedFrames` holds variable-length frame sequences, one per token: ``values`` ``(T, D)`` float32
and ``offsets`` ``(N + 1,)`` int64, token ``i`` owning rows ``offsets[i]:offsets[i+1]`` (none for a token
without audio or time).

On disk, two ``.npy`` files: per split folder of the ``features`` stage ``<split_dir>/`` :data:`FRAMES_FILE`
and :data:`OFFSETS_FILE`; by :meth:`RaggedFrames.save` ``<prefix>.mfcc.npy`` and ``<prefix>.mfcc_offsets.npy``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["FRAMES_FILE", "OFFSETS_FILE", "RaggedFrames"]

#: The frames of a split folder, ``(T, D)`` float32.
FRAMES_FILE = "mfcc.npy"
#: The offsets of a split folder, ``(N + 1,)`` int64.
OFFSETS_FILE = "mfcc_offsets.npy"


@dataclass
class RaggedFrames:
    """Variable-length frame sequences, one per token: ``values[offsets[i]:offsets[i+1]]`` for token ``i``."""

    values: np.ndarray  # (T, D) float32
    offsets: np.ndarray  # (N + 1,) int64

    def __post_init__(self) -> None:
        self.values = np.asarray(self.values, dtype=np.float32)
        self.offsets = np.asarray(self.offsets, dtype=np.int64)
        if self.values.ndim != 2 or self.offsets.ndim != 1 or len(self.offsets) == 0:
            raise ValueError("values must be (T, D) and offsets (N + 1,)")
        if self.offsets[0] != 0 or self.offsets[-1] != len(self.values) or np.any(np.diff(self.offsets) < 0):
            raise ValueError(
                f"offsets must start at 0, never decrease and end at {len(self.values)} (got ..{self.offsets[-1]})"
            )

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def token(self, index: int) -> np.ndarray:
        return self.values[self.offsets[index] : self.offsets[index + 1]]

    def save(self, prefix: str | Path) -> tuple[Path, Path]:
        """Write ``<prefix>.mfcc.npy`` and ``<prefix>.mfcc_offsets.npy``."""
        prefix = Path(prefix)
        prefix.parent.mkdir(parents=True, exist_ok=True)
        values, offsets = Path(f"{prefix}.{FRAMES_FILE}"), Path(f"{prefix}.{OFFSETS_FILE}")
        np.save(values, self.values)
        np.save(offsets, self.offsets)
        return values, offsets

    @classmethod
    def load(cls, prefix: str | Path, *, mmap: bool = True) -> RaggedFrames:
        mode = "r" if mmap else None
        return cls(np.load(f"{prefix}.{FRAMES_FILE}", mmap_mode=mode), np.load(f"{prefix}.{OFFSETS_FILE}"))

    @classmethod
    def concatenate(cls, parts: Sequence[RaggedFrames], *, dim: int | None = None) -> RaggedFrames:
        if not parts:
            return cls(np.zeros((0, dim or 0), np.float32), np.zeros(1, np.int64))
        values = np.concatenate([p.values for p in parts])
        offsets = [np.zeros(1, np.int64)]
        base = 0
        for p in parts:
            offsets.append(p.offsets[1:] + base)
            base += len(p.values)
        return cls(values, np.concatenate(offsets))
