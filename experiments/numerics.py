"""One declared numeric environment, so that every x86-64 CPU of the last decade computes the same bytes.

The numeric libraries pick their kernels by the CPU they find: OpenBLAS (numpy's and scipy's BLAS) a kernel per
core type, numpy its own SIMD loops per instruction set, torch its vectorised ATen kernels, MKL (torch's BLAS)
and oneDNN theirs. Kernels of different vector widths sum in different orders, so the same stage gives other
bits on another CPU generation: measured on one AMD EPYC machine, OpenBLAS's ``SkylakeX`` kernels against its
``Haswell`` ones changed the acoustic features (``librosa.feature.mfcc``'s mel filterbank product is a BLAS
``sgemm``), and everything trained from them after it (docs/method.md, "Same bytes on every machine").

:func:`pin_numerics` sets each library's own switch to one floor, **x86-64-v3** (AVX2 + FMA: Intel Haswell, 2013,
and AMD Zen, 2017, and every x86-64 server CPU since), before any of them loads. Every DVC stage runs under it
(``pipeline/__init__.py`` calls it first, whatever the user's shell says) and records it
(:func:`numeric_facts`, in the stage's run facts under ``logs/timings/``); so does ``punctuate``, whose labels
are the evaluate stage's. Thread counts: OpenBLAS runs on one thread (its single-threaded product sums in another
order), MKL in its strict mode (independent of threads), and the trainer sets torch's (``train.threads``).

``PUNCTUATION_NATIVE_NUMERICS=1`` keeps the machine's own fastest kernels (the figures may then differ from the
committed ones in the last bits). On a CPU below the floor, or not x86-64 (aarch64), nothing is pinned and the
facts say so: such a machine computes its own bytes.

This module imports nothing but the standard library, so that it can run before numpy and torch are loaded.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Any, MutableMapping

#: The instruction-set floor every pinned library is held to.
FLOOR = "x86-64-v3"

#: Each library's switch, at the floor. Read when the library loads (OpenBLAS, numpy) or at its first kernel
#: dispatch (torch, MKL, oneDNN): set before any of them is imported.
PINNED_ENVIRONMENT: dict[str, str] = {
    "OPENBLAS_CORETYPE": "Haswell",  # numpy/scipy's OpenBLAS: its AVX2 + FMA kernels
    # ... on one thread: its single-threaded sgemm sums in another order than its threaded one (measured: the
    # mel filterbank product, 1 thread against 2); the stages run talks in parallel processes instead
    "OPENBLAS_NUM_THREADS": "1",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # numpy's own loops: no AVX-512 targets
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's vectorised kernels
    # torch's BLAS (MKL): its AVX2 code path; STRICT: gemm's result independent of the thread count too
    "MKL_CBWR": "AVX2,STRICT",
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # torch's oneDNN (convolutions)
}

#: Set to 1 to keep each library's own choice of kernels.
NATIVE_SWITCH = "PUNCTUATION_NATIVE_NUMERICS"

#: CPU flags (as /proc/cpuinfo spells them) the floor needs.
FLOOR_FLAGS = ("avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe")

_LIBRARIES = ("numpy", "torch", "scipy")


def _cpuinfo(field: str) -> str | None:
    """The value of the first ``field`` line of /proc/cpuinfo ("" when there is none; None without the file)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return ""


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags from /proc/cpuinfo (None where that file does not exist)."""
    flags = _cpuinfo("flags")
    return None if flags is None else set(flags.split())


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or what :mod:`platform` knows."""
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def why_not_pinned(environ: MutableMapping[str, str] | None = None) -> str | None:
    """Why :func:`pin_numerics` would leave this machine's kernels alone (None: it pins)."""
    environ = os.environ if environ is None else environ
    if environ.get(NATIVE_SWITCH, "") not in ("", "0"):
        return f"{NATIVE_SWITCH} is set"
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"not an x86-64 CPU ({platform.machine()})"
    flags = cpu_flags()
    if flags is not None and not set(FLOOR_FLAGS) <= flags:
        return f"this CPU lacks {', '.join(sorted(set(FLOOR_FLAGS) - flags))} of the {FLOOR} floor"
    return None


def pin_numerics(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set :data:`PINNED_ENVIRONMENT` in ``environ`` (default: this process's, inherited by its workers),
    overriding what the shell set; returns what it set.

    Sets nothing and returns {} where :func:`why_not_pinned` gives a reason, and in this process once numpy or
    torch is loaded (their kernels are chosen then: a stage imported into a running program, a test, keeps the
    program's numerics; :func:`numeric_facts` tells what is in force)."""
    own = environ is None
    environ = os.environ if own else environ
    if why_not_pinned(environ) is not None:
        return {}
    if own and any(name in sys.modules for name in _LIBRARIES):
        return {}
    environ.update(PINNED_ENVIRONMENT)
    return dict(PINNED_ENVIRONMENT)


def numeric_facts() -> dict[str, Any]:
    """What numerics this process runs under: the floor (or why none), the switches, the CPU, and the kernels
    the loaded libraries report (OpenBLAS's core type, torch's CPU capability)."""
    reason = why_not_pinned()
    facts: dict[str, Any] = {
        "floor": None if reason else FLOOR,
        "cpu": cpu_model(),
        "environment": {key: os.environ.get(key) for key in PINNED_ENVIRONMENT},
    }
    if reason:
        facts["unpinned"] = reason
    if "numpy" in sys.modules:
        try:
            from threadpoolctl import threadpool_info

            facts["blas"] = sorted({f"{info.get('internal_api')} {info.get('architecture')}"
                                    for info in threadpool_info() if info.get("user_api") == "blas"})
        except Exception:  # a fact, not a requirement
            pass
    if "torch" in sys.modules:
        try:
            facts["torch_cpu_capability"] = sys.modules["torch"].backends.cpu.get_cpu_capability()
        except Exception:
            pass
    return facts
