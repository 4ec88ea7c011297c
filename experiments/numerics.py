"""One declared numeric environment, so that every x86-64 CPU of the last decade computes the same bytes (every
AMD one: MKL honours its AVX2 branch on Intel CPUs only, :func:`mkl_branch`, so a model trained on an Intel CPU
has bytes of its own).

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
committed ones in the last bits). On a CPU below the floor, or neither x86-64 nor aarch64 under Linux (macOS:
Apple's Accelerate has no kernel switch), nothing is pinned and the facts say so: such a machine computes its
own bytes. Linux on aarch64 is pinned to its own floor, **armv8-a** (:data:`AARCH64_PINNED_ENVIRONMENT`): the
same bytes on every such machine as far as the libraries' switches reach, never x86-64-v3's.

Every entry point pins as its first act: the stages (``pipeline/__init__.py``), ``punctuate``, ``python -m
paper_runs`` (and so the runs it launches, which inherit the pinned environment), the scripts and the benchmarks;
``python -m aligner``, whose package loads numpy before its ``__main__`` runs, starts itself again pinned
(:func:`pin_or_restart`). A pin that comes too late -- numpy, torch or scipy loaded in this process without the
pinned environment in force -- warns, naming them (tests/test_entry_points_pinned.py runs each entry point).

:func:`numeric_regime` names the regime in a few characters (the floor, or ``native:`` and why): what a cache key
holds (the acoustic features' per-talk cache), and, with the switches (:func:`regime_facts`), what a Dask worker
must share with its client (:func:`executor.tasks.run_tasks` checks it before a task runs).

This module imports nothing but the standard library, so that it can run before numpy and torch are loaded.
"""

from __future__ import annotations

import atexit
import json
import os
import platform
import sys
import warnings
from typing import Any, Mapping, MutableMapping

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

#: The floor of 64-bit ARM CPUs under Linux: ARMv8-A with Advanced SIMD (NEON), which every aarch64 CPU has
#: (Graviton 1-4, Ampere, Neoverse, Cortex-A53 and up). Its bytes are its own, not x86-64-v3's: other kernels.
AARCH64_FLOOR = "armv8-a"
AARCH64_MACHINES = ("aarch64", "arm64")

#: Each library's switch at the aarch64 floor (the values its sources accept); MKL does not exist on ARM.
AARCH64_PINNED_ENVIRONMENT: dict[str, str] = {
    "OPENBLAS_CORETYPE": "ARMV8",  # numpy/scipy's OpenBLAS: its generic ARMv8 NEON kernels, not NeoverseN1/V1/V2/SVE
    "OPENBLAS_NUM_THREADS": "1",  # as on x86-64: the single-threaded sgemm's order of sums
    "NPY_DISABLE_CPU_FEATURES": "ASIMDHP ASIMDDP ASIMDFHM SVE",  # numpy's own loops: the ASIMD baseline alone
    "ATEN_CPU_CAPABILITY": "default",  # torch's vectorised kernels: NEON, not SVE256
    "ONEDNN_MAX_CPU_ISA": "ADVANCED_SIMD",  # torch's oneDNN JIT: no SVE
}

#: CPU features (as /proc/cpuinfo's "Features" line spells them) the aarch64 floor needs.
AARCH64_FLOOR_FEATURES = ("fp", "asimd")


def cpu_features() -> set[str] | None:
    """An ARM CPU's features from /proc/cpuinfo's "Features" line (None where that file does not exist)."""
    features = _cpuinfo("Features")
    return None if features is None else set(features.split())


def is_aarch64() -> bool:
    return platform.machine().lower() in AARCH64_MACHINES


def pinned_environment() -> dict[str, str]:
    """The switches :func:`pin_numerics` sets on this machine: aarch64's or x86-64's."""
    return AARCH64_PINNED_ENVIRONMENT if is_aarch64() else PINNED_ENVIRONMENT


def _why_not_pinned_aarch64() -> str | None:
    if sys.platform != "linux":
        # macOS: numpy's and torch's BLAS is Apple's Accelerate, which has no switch for its kernels
        return f"an ARM CPU under {sys.platform}: only Linux on aarch64 is pinned"
    features = cpu_features()
    if features is not None and not set(AARCH64_FLOOR_FEATURES) <= features:
        missing = sorted(set(AARCH64_FLOOR_FEATURES) - features)
        return f"this ARM CPU lacks {', '.join(missing)} of the {AARCH64_FLOOR} floor"
    return None

_LIBRARIES = ("numpy", "torch", "scipy")

#: Set to a folder: each process that pins writes what it ran under to FOLDER/PID.json when it exits (the libraries
#: loaded before its first pin, the facts at exit): how tests/test_entry_points_pinned.py sees inside a process.
REPORT_SWITCH = "PUNCTUATION_NUMERICS_REPORT"

#: This process's first pin: the libraries loaded by then and whether the pinned environment was in force already
#: (inherited from a pinned parent). None: no pin yet.
_FIRST_PIN: dict[str, Any] | None = None


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


def cpu_vendor() -> str | None:
    """The CPU's vendor (/proc/cpuinfo's ``vendor_id``: ``GenuineIntel``, ``AuthenticAMD``, ...), None if unknown."""
    return _cpuinfo("vendor_id") or None


def mkl_branch(environ: Mapping[str, str] | None = None, vendor: str | None = None) -> str | None:
    """The code branch torch's MKL takes under ``environ`` on a CPU of ``vendor`` (default: this process, this
    CPU); None where no MKL is pinned (aarch64, unpinned). MKL honours ``MKL_CBWR=AVX2`` on Intel CPUs only: on
    any other it takes its ``AUTO`` branch (Intel's oneMKL Developer Guide, "Specifying Code Branches": settings
    other than AUTO or COMPATIBLE are available only for Intel processors). The two branches sum in other orders,
    so a model trained on the CPU gets other last bits on an Intel CPU than on an AMD one (docs/method.md)."""
    environ = os.environ if environ is None else environ
    branch = environ.get("MKL_CBWR")
    if not branch or is_aarch64():
        return None
    name = branch.split(",")[0].strip().upper()
    if name in ("AUTO", "COMPATIBLE"):
        return name
    vendor = cpu_vendor() if vendor is None else vendor
    return name if vendor == "GenuineIntel" else "AUTO"


def why_not_pinned(environ: MutableMapping[str, str] | None = None) -> str | None:
    """Why :func:`pin_numerics` would leave this machine's kernels alone (None: it pins)."""
    environ = os.environ if environ is None else environ
    if environ.get(NATIVE_SWITCH, "") not in ("", "0"):
        return f"{NATIVE_SWITCH} is set"
    if is_aarch64():
        return _why_not_pinned_aarch64()
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"neither an x86-64 nor an aarch64 CPU ({platform.machine()})"
    flags = cpu_flags()
    if flags is not None and not set(FLOOR_FLAGS) <= flags:
        return f"this CPU lacks {', '.join(sorted(set(FLOOR_FLAGS) - flags))} of the {FLOOR} floor"
    return None


def loaded_libraries() -> list[str]:
    """Which of numpy, torch and scipy this process has loaded (their kernels are chosen by then)."""
    return [name for name in _LIBRARIES if name in sys.modules]


def pinned_in_force(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``environ`` (default: this process's) holds every switch of this machine at its pinned value."""
    environ = os.environ if environ is None else environ
    return all(environ.get(key) == value for key, value in pinned_environment().items())


def pin_numerics(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set :func:`pinned_environment` in ``environ`` (default: this process's, inherited by its workers),
    overriding what the shell set; returns what it set.

    Sets nothing and returns {} where :func:`why_not_pinned` gives a reason, and in this process once numpy,
    torch or scipy is loaded (their kernels are chosen then: a stage imported into a running program, a test,
    keeps the program's numerics; :func:`numeric_facts` tells what is in force). That is a warning naming them,
    unless the pinned environment is in force already (inherited from a pinned parent: they loaded under it)."""
    own = environ is None
    environ = os.environ if own else environ
    if own:
        _note_first_pin()
    if why_not_pinned(environ) is not None:
        return {}
    if own and loaded_libraries():
        if not pinned_in_force(environ):
            warnings.warn(f"pin_numerics() comes too late: {', '.join(loaded_libraries())} already loaded with this "
                          "machine's own kernels, so this process does not run the pinned numerics (pin before "
                          "numpy or torch is imported: experiments/numerics.py)", RuntimeWarning, stacklevel=2)
        return {}
    pinned = pinned_environment()  # x86-64's, or aarch64's on an ARM CPU
    environ.update(pinned)
    return dict(pinned)


def pin_or_restart() -> None:
    """:func:`pin_numerics` for an entry point whose package loads numpy before its ``__main__`` can pin (``python
    -m aligner``: ``aligner/__init__.py`` imports numpy). Where the pinned environment is not in force yet, it is
    set and the same command runs again in this process's place (:func:`os.execv`: the same pid, nothing done
    yet), so that the libraries load under it; the new process finds it in force and goes on."""
    if why_not_pinned() is None and loaded_libraries() and not pinned_in_force():
        os.environ.update(pinned_environment())
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    pin_numerics()


def _note_first_pin() -> None:
    """Remember this process's first pin; with :data:`REPORT_SWITCH` set, write the report at exit."""
    global _FIRST_PIN
    if _FIRST_PIN is not None:
        return
    _FIRST_PIN = {"loaded_before": loaded_libraries(), "in_force_before": pinned_in_force()}
    if os.environ.get(REPORT_SWITCH):
        atexit.register(_write_report, os.environ[REPORT_SWITCH])


def _write_report(folder: str) -> None:
    report = {"pid": os.getpid(), "argv": list(sys.orig_argv), "first_pin": _FIRST_PIN,
              "loaded": loaded_libraries(), "facts": numeric_facts()}
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{os.getpid()}.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle)


def numeric_regime(environ: Mapping[str, str] | None = None) -> str:
    """The numeric regime of a process with ``environ`` (default: this one's) in a few characters: the floor
    (``x86-64-v3``; ``armv8-a`` on aarch64) where its pinned switches are in force -- the same on every CPU of
    the floor, so a cache key may hold it -- else ``native:`` and why, with the CPU's model (its own kernels:
    its own bytes, and the switches the shell set, which choose among them)."""
    environ = os.environ if environ is None else environ
    reason = why_not_pinned(environ)
    if reason is None and pinned_in_force(environ):
        return AARCH64_FLOOR if is_aarch64() else FLOOR
    switches = [f"{key}={environ[key]}" for key in pinned_environment() if key in environ]
    return "; ".join([f"native:{reason or 'not pinned'}", cpu_model(), *switches])


def regime_facts() -> dict[str, str | None]:
    """What decides this process's bytes, as values to compare with another process's (a Dask worker's with its
    client's): :func:`numeric_regime` and each switch of :func:`pinned_environment` as this process has it."""
    return {"regime": numeric_regime(), **{key: os.environ.get(key) for key in pinned_environment()}}


def numeric_facts() -> dict[str, Any]:
    """What numerics this process runs under: the floor (or why none), the switches, the CPU, and the kernels
    the loaded libraries report (OpenBLAS's core type, torch's CPU capability)."""
    reason = why_not_pinned()
    facts: dict[str, Any] = {
        "floor": None if reason else (AARCH64_FLOOR if is_aarch64() else FLOOR),
        "cpu": cpu_model(),
        "environment": {key: os.environ.get(key) for key in pinned_environment()},
        "regime": numeric_regime(),  # the floor only where the switches are in force, else native: and why
        "cpu_vendor": cpu_vendor(),
        "mkl_branch": mkl_branch(),
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
