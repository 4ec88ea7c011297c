"""Every entry point runs under the pinned numerics: the pin comes first, before numpy or torch loads.

Each command runs in a fresh process from a shell that pinned nothing and asks for other kernels
(``OPENBLAS_CORETYPE=Sandybridge``, ``ATEN_CPU_CAPABILITY=default``). With ``PUNCTUATION_NUMERICS_REPORT`` set,
:func:`experiments.numerics.pin_numerics` has the process write, at its exit, which libraries were loaded at its
first pin and what the loaded libraries report (experiments/numerics.py). A command that never pins, or pins
after numpy or torch loaded (``python -m paper_runs`` did: it imported the feature store first), fails here: no
report, or OpenBLAS on the shell's kernels. ``--help`` is a fair probe: a pin that waited for the arguments
would not have run by then.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from experiments import numerics

REPO = Path(__file__).resolve().parents[1]
PYTHON = [sys.executable]
#: A shell that asks for other kernels than the pin's (both run on any x86-64 CPU of the floor).
OTHER_KERNELS = {"OPENBLAS_CORETYPE": "Sandybridge", "ATEN_CPU_CAPABILITY": "default"}
#: scripts/asr_levers.py is being retired (it pins itself)
LEFT_OUT = {"scripts/asr_levers.py"}


def _has_main(path: Path) -> bool:
    return '__name__ == "__main__"' in path.read_text(encoding="utf-8")


def entry_points(records: Path) -> dict[str, tuple[list[str], int]]:
    """name -> (command, its exit status): every command of the project, each with a cheap argument."""
    commands = {f"python -m pipeline.{path.stem}": ([*PYTHON, "-m", f"pipeline.{path.stem}", "--help"], 0)
                for path in sorted((REPO / "pipeline").glob("*.py")) if _has_main(path)}
    commands.update({
        "punctuate": ([str(Path(sys.executable).parent / "punctuate"), "--help"], 0),
        "python -m inference.cli": ([*PYTHON, "-m", "inference.cli", "--help"], 0),
        "python -m paper_runs status": ([*PYTHON, "-m", "paper_runs", "--records", str(records), "status"], 0),
        # what `launch` starts, one per run: the same module (here refused at once: no such run)
        "python -m paper_runs run": ([*PYTHON, "-m", "paper_runs", "--records", str(records), "run", "nope"], 2),
        "python -m aligner": ([*PYTHON, "-m", "aligner", "--help"], 0),
        "python -m aligner batch": ([*PYTHON, "-m", "aligner", "batch", "--help"], 0),
        "python -m aligner.cli": ([*PYTHON, "-m", "aligner.cli", "--help"], 0),
    })
    for main in sorted(REPO.glob("*/__main__.py")):  # any other package's command (python -m PACKAGE)
        if not any(f"python -m {main.parent.name}" in name for name in commands):
            commands[f"python -m {main.parent.name}"] = ([*PYTHON, "-m", main.parent.name, "--help"], 0)
    for path in sorted((REPO / "scripts").glob("*.py")):
        if path.relative_to(REPO).as_posix() not in LEFT_OUT and _has_main(path):
            commands[f"python scripts/{path.name}"] = ([*PYTHON, str(path), "--help"], 0)
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        if _has_main(path):
            commands[f"python -m benchmarks.{path.stem}"] = ([*PYTHON, "-m", f"benchmarks.{path.stem}", "--help"], 0)
    return commands


def _run(command: list[str], report_dir: Path) -> tuple[int, int, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in numerics.pinned_environment() and key != numerics.NATIVE_SWITCH}
    env.update({**OTHER_KERNELS, numerics.REPORT_SWITCH: str(report_dir)})
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    _, stderr = process.communicate(timeout=600)
    return process.pid, process.returncode, stderr


def problems_of(name: str, pid: int, status: int, expected_status: int, stderr: str, report_dir: Path) -> list[str]:
    """What is wrong with how command ``name`` ran (empty: it ran pinned)."""
    if status != expected_status:
        return [f"{name}: exit status {status} (expected {expected_status}): {stderr[-600:]}"]
    path = report_dir / f"{pid}.json"
    if not path.is_file():
        return [f"{name}: never pinned (or only after reading its arguments): no report"]
    report = json.loads(path.read_text(encoding="utf-8"))
    facts, first = report["facts"], report["first_pin"]
    problems = []
    if first["loaded_before"] and not first["in_force_before"]:
        problems.append(f"{name}: pinned after {', '.join(first['loaded_before'])} loaded")
    if facts["environment"] != numerics.pinned_environment():
        problems.append(f"{name}: ran with {facts['environment']}")
    if "numpy" in report["loaded"] and not any("Haswell" in blas for blas in facts.get("blas", [])):
        problems.append(f"{name}: numpy's BLAS runs {facts.get('blas')}, not OpenBLAS's Haswell kernels")
    if "torch" in report["loaded"] and facts.get("torch_cpu_capability") != "AVX2":
        problems.append(f"{name}: torch runs its {facts.get('torch_cpu_capability')} kernels, not AVX2")
    return problems


@pytest.mark.slow  # ~30 fresh interpreters, most of them loading torch
def test_every_entry_point_pins_before_numpy_or_torch_loads(tmp_path):
    if numerics.why_not_pinned({}) is not None or numerics.is_aarch64():
        pytest.skip(numerics.why_not_pinned({}) or "the x86-64 floor's kernels are checked")
    commands = entry_points(tmp_path / "records")
    folders = {name: tmp_path / f"report{index}" for index, name in enumerate(commands)}
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(commands, pool.map(lambda name: _run(commands[name][0], folders[name]), commands)))
    problems = [problem for name, (pid, status, stderr) in runs.items()
                for problem in problems_of(name, pid, status, commands[name][1], stderr, folders[name])]
    assert problems == []
    # the probe saw the libraries load: the paper runs' command loads numpy and torch before its arguments
    paper = json.loads((folders["python -m paper_runs status"] / f"{runs['python -m paper_runs status'][0]}.json")
                       .read_text(encoding="utf-8"))
    assert {"numpy", "torch"} <= set(paper["loaded"]) and paper["first_pin"]["loaded_before"] == []
    aligner = json.loads((folders["python -m aligner"] / f"{runs['python -m aligner'][0]}.json").read_text())
    assert aligner["first_pin"] == {"loaded_before": ["numpy"], "in_force_before": True}  # started again, pinned
