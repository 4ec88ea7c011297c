"""The machine a timing was taken on: wall times are compared only between timings of one machine.

Kept out of the pipeline's packages (``experiments`` and the rest are dependencies of the DVC stages, so a helper
for timings there would change every training stage's lock entry)."""

from __future__ import annotations

import os

from experiments.numerics import cpu_flags, cpu_model


def this_machine() -> str:
    """What a wall time depends on: the CPU's model name, its cores and whether it has AVX-512 (the model name
    alone can be the same on CPUs of two generations)."""
    flags = cpu_flags() or set()
    return f"{cpu_model()}, {os.cpu_count()} cores, {'AVX-512' if 'avx512f' in flags else 'no AVX-512'}"
