"""Rehearse a GPU lease on the CPU: fails where the GPU kit would fail on the GPU machine (paper_runs/README.md).

    python -m paper_runs.rehearsal                        # the kit in gpu_kit/, the project's Python
    python -m paper_runs.rehearsal --make-venv /tmp/gpuvenv   # first a venv with the GPU machine's versions
    python -m paper_runs.rehearsal --python /tmp/gpuvenv/bin/python --set max_steps=2

What travels and nothing else -- the tracked and untracked-not-ignored files (``git ls-files``) and the kit folder
-- is copied into an empty folder with no ``../shared`` beside it; there, without network (``unshare -n`` where
allowed), the lease's one command ``python -m paper_runs launch --measure-steps N --device cpu --out OUT`` starts
every paper run (the copy leaves out the records and lease rates committed in ``metrics/``) on tiny schedules (``--set`` train settings, default ``max_steps=3 dev_eval_tokens=2000`` and
``compile=graph`` where the trainer knows it: graph mode requested, which a machine without CUDA refuses), ``collect``
is called while runs still go, and the rehearsal checks what comes back: one tarball within its limit holding a
well-formed record of every run (a run that asked for graph mode and recorded its step mode says eager and why),
the lease's rates, a second ``launch`` that starts nothing, and ``import`` here (records and rates into temporary
folders). Exit status 0 when all holds, else 1 with the problems and the end of the output.

The GPU machine runs Python 3.12, torch 2.11.0 and transformers 5.17.0. The venv of ``--make-venv`` holds the
same torch, transformers and tokenizers: torch 2.11.0 exists on the package indexes here only as its CUDA build
(a 530 MB wheel and ~4 GB of CUDA libraries, 5 GB installed), which imports and runs on a machine without a GPU.
Only the Python differs: the venv takes this interpreter's (3.11 here; no 3.12 is installable from the indexes
reachable here). ``--package`` replaces any pin; without ``--python``/``--make-venv`` the project's own Python
runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from paper_runs.processes import RunsError, travelling_files
from paper_runs.records import PAPER_RUNS
from paper_runs.tarball import tarball_records

REPO = Path(__file__).resolve().parents[1]
TARBALL = "paper_results.tar.gz"
#: the GPU machine's versions where a CPU build of them installs here (see the module docstring)
VENV_PACKAGES = ("torch==2.11.0", "transformers==5.17.0", "tokenizers==0.23.2", "safetensors==0.8.0", "numpy",
                 "pyyaml", "tqdm", "matplotlib")
DEFAULT_SETTINGS = ("max_steps=3", "dev_eval_tokens=2000")


def graph_settings() -> list[str]:
    """``compile=graph`` where this tree's trainer knows graph mode (training.config.COMPILE_MODES), else nothing."""
    from training.config import COMPILE_MODES

    return ["compile=graph"] if "graph" in COMPILE_MODES else []


def step_mode_problems(records: dict, settings: list[str]) -> list[str]:
    """A run asked for graph mode on a machine without CUDA must say it trained eagerly, and why (a record without a
    ``step_mode`` is from a trainer that does not record one: not a problem)."""
    if "compile=graph" not in settings:
        return []
    problems = []
    for name, record in sorted(records.items()):
        run = record["run"]
        if run.get("step_mode") is not None and (run["step_mode"] != "eager" or not run.get("step_mode_reason")):
            problems.append(f"{name}: graph mode asked on a CPU, recorded step_mode {run['step_mode']!r} "
                            f"({run.get('step_mode_reason')!r}), not eager with a reason")
    return problems


def default_python() -> str:
    """The interpreter of the rehearsal: ``GPU_KIT_REHEARSAL_PYTHON`` if set, else this one."""
    return os.environ.get("GPU_KIT_REHEARSAL_PYTHON") or sys.executable


def make_venv(folder: Path, packages: list[str]) -> str:
    """A virtual environment at ``folder`` with ``packages``; returns its Python."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = str(folder / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", *packages], check=True)
    return python


def copy_travelling(repo: Path, kit: Path, target: Path) -> tuple[int, Path]:
    """Copy what a GPU machine gets (the working tree's files and the kit folder) to ``target``; returns the bytes
    copied and where the kit folder went."""
    total = 0
    for path in travelling_files(repo):
        destination = target / path.relative_to(repo)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)
        total += path.stat().st_size
    kit_target = target / (kit.resolve().relative_to(repo) if kit.resolve().is_relative_to(repo) else "gpu_kit")
    shutil.copytree(kit, kit_target)
    return total + sum(p.stat().st_size for p in kit_target.rglob("*") if p.is_file()), kit_target


def _offline_prefix() -> list[str]:
    """``unshare -n`` (no network at all) where this user may, else nothing (the runs are offline anyway)."""
    try:
        if subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=30).returncode == 0:
            return ["unshare", "-n"]
    except (OSError, subprocess.SubprocessError):
        pass
    return []


def rehearse(*, repo: Path, kit: Path, work: Path, python: str, params: Path | None, settings: list[str],
             measure_steps: int, timeout_s: float) -> dict:
    """The whole rehearsal (see the module docstring); returns ``{"problems", "records", "tarball_bytes",
    "travel_bytes", "output"}`` -- no problems: the kit would work on the GPU machine."""
    work.mkdir(parents=True, exist_ok=True)
    tree, out = work / "repo", work / "out"
    report: dict = {"problems": [], "records": {}, "tarball_bytes": None, "output": []}
    problems, output = report["problems"], report["output"]
    report["travel_bytes"], kit_folder = copy_travelling(repo, kit, tree)
    # every paper run is rehearsed: the copy starts without the records and lease rates committed here (a lease
    # skips the recorded runs; a second launch below checks that skip)
    for folder in (tree / "metrics/paper", tree / "metrics/gpu/leases"):
        shutil.rmtree(folder, ignore_errors=True)
    if params is not None:
        shutil.copyfile(params, tree / "params.yaml")
    limits = yaml.safe_load((tree / "params.yaml").read_text(encoding="utf-8"))["gpu_kit"]
    if report["travel_bytes"] > float(limits["travel_limit_mib"]) * 2**20:
        problems.append(f"{report['travel_bytes'] / 2**20:.1f} MiB would travel, over gpu_kit.travel_limit_mib")
    prefix, env = _offline_prefix(), {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL"))}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "http_proxy": "http://127.0.0.1:9",
                "https_proxy": "http://127.0.0.1:9"})
    kit_option = ["--kit", str(kit_folder.relative_to(tree))]

    def paper(*args: str, python_: str = python, cwd: Path = tree) -> subprocess.CompletedProcess:
        command = [*prefix, python_, "-m", "paper_runs", *args]
        result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)
        output.extend([f"$ {' '.join(command)}  (exit {result.returncode})",
                       *(result.stdout + result.stderr).splitlines()])
        return result

    where = subprocess.run([python, "-c", "import pipeline; print(pipeline.__file__)"], cwd=tree, env=env,
                           capture_output=True, text=True)
    if not where.stdout.strip().startswith(str(tree)):
        problems.append(f"the copy's code is not what runs there: pipeline is {where.stdout.strip() or where.stderr}")
        return report
    sets = [part for setting in settings for part in ("--set", setting)]
    started = time.monotonic()
    status = paper("launch", *kit_option, "--measure-steps", str(measure_steps), "--device", "cpu", *sets,
                   "--out", str(out)).returncode
    if status not in (0, 3):
        problems.append(f"launch --out ended with status {status}")
        return report
    measured = json.loads((tree / "gpu_runs/kit/measure.json").read_text(encoding="utf-8"))
    first_wave = json.loads((tree / "gpu_runs/kit/state.json").read_text(encoding="utf-8"))["plan"]["first_wave"]
    unmeasured = sorted(name for name in first_wave if not (measured.get(name) or {}).get("steps_per_second"))
    if unmeasured:
        problems.append(f"launch --measure-steps measured no rate for {', '.join(unmeasured)}")
    while status == 3 and time.monotonic() - started <= timeout_s:
        status = paper("collect", "--out", str(out), "--wait-s", "30").returncode
    if status != 0:
        problems.append(f"collect ended with status {status}: not every run was recorded")
    tarball = out / TARBALL
    if not tarball.is_file():
        problems.append(f"no tarball at {tarball}")
        return report
    report["tarball_bytes"] = tarball.stat().st_size
    if report["tarball_bytes"] > float(limits["tarball_limit_mib"]) * 2**20:
        problems.append(f"the tarball is {report['tarball_bytes'] / 2**20:.1f} MiB, over gpu_kit.tarball_limit_mib")
    try:
        report["records"] = tarball_records(tarball)
    except RunsError as error:
        problems.append(str(error))
    if sorted(report["records"]) != sorted(PAPER_RUNS):
        problems.append(f"the tarball holds {len(report['records'])} records, not the {len(PAPER_RUNS)} paper runs")
    problems.extend(step_mode_problems(report["records"], settings))
    again = paper("launch", *kit_option, "--device", "cpu", *sets)
    if again.returncode or "nothing to start" not in again.stdout or \
            again.stdout.count("recorded, skipped") != len(PAPER_RUNS):
        problems.append(f"a second launch did not skip the {len(PAPER_RUNS)} recorded runs")
    with tempfile.TemporaryDirectory() as records, tempfile.TemporaryDirectory() as rates:
        imported = paper("--params", str(tree / "params.yaml"), "--records", records, "import", str(tarball),
                         "--status-dir", str(work / "status"), "--rates-dir", rates, python_=sys.executable, cwd=REPO)
        if imported.returncode or len(list(Path(records).glob("*.json"))) != len(report["records"]):
            problems.append("import here did not write every record")
        leases = list(Path(rates).glob("*.json"))
        report["rates"] = json.loads(leases[0].read_text(encoding="utf-8")) if len(leases) == 1 else None
        if report["rates"] is None or sorted(report["rates"]["runs"]) != sorted(PAPER_RUNS):
            problems.append("import here did not file the lease's rates of every run")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kit", type=Path, default=REPO / "gpu_kit", help="the kit folder (default: gpu_kit)")
    parser.add_argument("--python", help="the interpreter there (default: $GPU_KIT_REHEARSAL_PYTHON or this one)")
    parser.add_argument("--make-venv", type=Path, help="first make a venv here with the GPU machine's versions")
    parser.add_argument("--package", action="append", default=[], help="a pin of --make-venv (replaces ours)")
    parser.add_argument("--params", type=Path, help="a params file to put in place of params.yaml there")
    parser.add_argument("--set", action="append", default=[], help="a train setting of every run "
                        f"(default: {' '.join(DEFAULT_SETTINGS)}, and compile=graph where the trainer knows it)")
    parser.add_argument("--measure-steps", type=int, default=2)
    parser.add_argument("--timeout-s", type=float, default=3600)
    parser.add_argument("--work", type=Path, help="the empty folder to rehearse in (default: a temporary one)")
    args = parser.parse_args(argv)
    if not (args.kit / "kit.zip").is_file():
        print(f"error: no kit at {args.kit}; make it with `python -m paper_runs pack`", file=sys.stderr)
        return 2
    python = args.python or default_python()
    if args.make_venv:
        names = {spec.split("=")[0].split("[")[0] for spec in args.package}
        python = make_venv(args.make_venv, [*args.package, *(p for p in VENV_PACKAGES if p.split("=")[0] not in names)])
    work = args.work or Path(tempfile.mkdtemp(prefix="paper_runs_rehearsal."))
    if work.exists() and any(work.iterdir()):
        print(f"error: {work} is not empty", file=sys.stderr)
        return 2
    report = rehearse(repo=REPO, kit=args.kit, work=work, python=python, params=args.params,
                      settings=args.set or [*DEFAULT_SETTINGS, *graph_settings()], measure_steps=args.measure_steps,
                      timeout_s=args.timeout_s)
    (work / "rehearsal.log").write_text("\n".join(report["output"]) + "\n", encoding="utf-8")
    print("\n".join(report["output"][-60:]) + f"\n(the whole output: {work / 'rehearsal.log'})")
    if report["problems"]:
        print("REHEARSAL FAILED:\n  " + "\n  ".join(report["problems"]) + f"\n(everything is in {work})")
        return 1
    print(f"rehearsal passed in {work}: {len(report['records'])} records, tarball "
          f"{report['tarball_bytes'] / 2**20:.2f} MiB, {report['travel_bytes'] / 2**20:.1f} MiB travelled")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
