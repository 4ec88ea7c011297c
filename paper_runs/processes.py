"""The paper runs side by side on one borrowed GPU machine: their inputs, processes and status.

The machine is lent briefly (paper_runs/README.md): every run must train there at once, outlive the command
that started it, and be looked at by later commands, which bring back one small file. Here:

* :func:`kit_inputs` -- what the paper runs read and where it is here (a feature set that ``dvc repro`` left
  unbuilt is built by :func:`build_feature_set` from its sources; a missing source is named with its command);
* :func:`spawn` -- a run as its own process session (``setsid``: it outlives the command), output to its log;
  :func:`pid_alive` -- whether it still runs (a zombie or another program under a reused id does not);
* :func:`run_status` -- done (a record), running, failed (dead without a record), probed (a probe that checkpointed
  at the end of its slot, without a record) or not started, with the step it reached from its log (tqdm's ``N/M
  [..., R step/s]``); :func:`measure_running` -- the started runs' steps/s over their own first steps (the
  measurement costs no training time);
* what comes back, one ``.tar.gz``: :mod:`paper_runs.tarball`.

Everything the runs write on the machine stays under ignored folders (``gpu_runs/``, ``data/``): a later command's
copy of the working tree leaves those alone.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from corpus.io import atomic_write_bytes
from embeddings.cache import SPLITS, build_feature_cache
from experiments.params import experiment_config
from paper_runs.records import PAPER_RUNS, complete, record_path

#: the modules a paper run imports on the machine (besides the repository's own)
RUN_MODULES = ("torch", "transformers", "tokenizers", "safetensors", "numpy", "yaml", "tqdm", "matplotlib")
_PROGRESS = re.compile(r"train:[^\r\n]*?(\d+)/(\d+) \[[^\]]*?([\d.]+)(step/s|s/step)")
_PROGRESS_NO_RATE = re.compile(r"train:[^\r\n]*?(\d+)/(\d+) \[")
_PAUSED = re.compile(r'"paused_at_step": (\d+)')  # pipeline.train's line when a call pauses (run --slot-s)


class RunsError(ValueError):
    """A launch, collect or import that cannot go on (a bad tarball, a state file that is not one)."""


# ---------------------------------------------------------------------------------------------- the kit's inputs

#: what builds a missing source of a feature set (the speech source, by type)
BUILT_BY = {"speech2vec": "dvc repro speech2vec  (the audio stages: synthesize, align, features, speech2vec; "
                          "~10 min on 2 CPU cores)",
            "speech2vec-occurrence": "dvc repro speech2vec", "acoustic": "dvc repro features",
            "pauses": "dvc repro fit_pauses", "paper-speech2vec": "python -m paper_runs speech2vec  (the audio "
            "stages and Speech2Vec on sentences covering the training vocabulary; resumable, --workers N)"}
#: the targets of the paper runs' inputs on the GPU machine (relative to the repository root)
FEATURES_TARGET, FEATURE_SETS_TARGET = "data/features", "data/feature_sets"


@dataclass
class KitInputs:
    """What the paper runs read: caches built here, feature sets to build first (target -> folder), the prepared
    splits they are scored on, the encoder, and what is missing (each with the command that makes it)."""
    caches: dict[str, Path] = field(default_factory=dict)
    build: dict[str, Path] = field(default_factory=dict)
    prepared: dict[str, Path] = field(default_factory=dict)
    encoder: Path | None = None
    missing: list[str] = field(default_factory=list)
    unbuilt: list[str] = field(default_factory=list)


def kit_feature_set(params: dict[str, Any], name: str) -> tuple[dict[str, Any] | None, bool]:
    """(``embed.feature_sets.<name>`` as the kit builds it or None, whether it reads ``gpu_kit.speech2vec_dir``)."""
    entry = (params["embed"].get("feature_sets") or {}).get(name)
    speech, paper = (entry or {}).get("speech_source") or {}, (params.get("gpu_kit") or {}).get("speech2vec_dir")
    if entry is None or not paper or speech.get("type") != "speech2vec":
        return (None if entry is None else dict(entry or {})), False
    return {**entry, "speech_source": {**speech, "path": str(paper)}}, True


def kit_inputs(params: dict[str, Any], *, features: str | Path, feature_sets: str | Path, prepared: str | Path,
               build_dir: str | Path, encoder: str | Path | None) -> KitInputs:
    """Where each input of the paper runs is here: a built cache, or a feature set to build into ``build_dir`` from
    sources that are here, or missing. ``encoder``: the checkpoint folder for ``pretrained: null`` (None: the
    pinned package's). A set on the paper's Speech2Vec (:func:`kit_feature_set`) is always built (reused unchanged)."""
    found, embed, prepared = KitInputs(), params["embed"], Path(prepared)
    for spec in PAPER_RUNS.values():
        target = spec.features(FEATURES_TARGET, FEATURE_SETS_TARGET).as_posix()
        source = spec.features(features, feature_sets)
        if target in found.caches or target in found.unbuilt:
            continue
        entry, paper_speech = kit_feature_set(params, spec.feature_set) if spec.feature_set else (None, False)
        if (source / "manifest.json").is_file() and not paper_speech:
            found.caches[target] = source
            continue
        if spec.feature_set is None:
            found.missing.append(f"{source}: the word-vector cache  ->  dvc repro embed")
            continue
        if entry is None:
            found.missing.append(f"embed.feature_sets.{spec.feature_set}: not defined in params")
            continue
        found.unbuilt.append(target)
        word, speech = entry.get("word_source") or embed["word_source"], entry.get("speech_source") or {}
        needs = [(prepared / f"{split}.tsv", "dvc repro prepare") for split in SPLITS]
        if word.get("type") != "none":
            needs.append((Path(word["path"]), "dvc repro word_vectors"))
        if speech.get("path"):
            needs.append((Path(speech["path"]), BUILT_BY.get("paper-speech2vec" if paper_speech else
                                                             speech.get("type"), "its stage in dvc.yaml")))
        lacking = [f"{path} (for {target})  ->  {command}" for path, command in needs if not path.exists()]
        found.missing += [line for line in lacking if line not in found.missing]
        if not lacking:
            found.build[target] = Path(build_dir) / spec.feature_set
    found.prepared = {f"data/prepared/{s}.tsv": prepared / f"{s}.tsv"
                      for s in sorted({*params["evaluate"]["test_splits"], "dev"})}
    found.missing += [f"{path}: a prepared split  ->  dvc repro prepare" for path in found.prepared.values()
                      if not path.is_file()]
    try:
        if any(_uses_default_encoder(params, spec.experiment) for spec in PAPER_RUNS.values()):
            from models.pretrained import default_checkpoint_dir

            found.encoder = Path(encoder) if encoder else default_checkpoint_dir()
            if not (found.encoder / "config.json").is_file():
                found.missing.append(f"{found.encoder}: no config.json, not the encoder's checkpoint folder")
    except (ImportError, ValueError) as error:
        found.missing.append(f"the encoder FF2/FFA start from: {error}")
    return found


def _uses_default_encoder(params: dict[str, Any], experiment: str) -> bool:
    model, _ = experiment_config(params, experiment)
    if model.get("pretrained", False) not in (None, False):
        raise ValueError(f"experiment_defs.{experiment}.model.pretrained names {model['pretrained']!r}: the kit "
                         "carries only the default encoder (pretrained: null)")
    return "pretrained" in model


def build_feature_set(params: dict[str, Any], name: str, prepared: str | Path, folder: Path) -> Path:
    """Feature set ``name`` (:func:`kit_feature_set`) built into ``folder`` as stage ``embed_set`` builds it."""
    embed, (entry, _) = params["embed"], kit_feature_set(params, name)
    build_feature_cache(prepared, folder, word_source=entry.get("word_source") or embed["word_source"],
                        oov=embed["oov"], splits=SPLITS, vocab_min_count=int(embed["vocab_min_count"]),
                        speech_source=entry.get("speech_source"), combine=entry.get("combine", "sum"))
    return folder


# ------------------------------------------------------------------------------------------------- the processes


def missing_modules(modules: Sequence[str] = RUN_MODULES) -> dict[str, str | None]:
    """Each module's version (None where it cannot be imported), checked in a fresh interpreter."""
    code = ("import importlib, json, sys\nfound = {}\nfor name in sys.argv[1:]:\n    try:\n"
            "        found[name] = str(getattr(importlib.import_module(name), '__version__', 'present'))\n"
            "    except Exception:\n        found[name] = None\nprint(json.dumps(found))\n")
    result = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True, text=True, timeout=600)
    return json.loads(result.stdout) if result.returncode == 0 else {name: None for name in modules}


def child_environment(*, threads: int, site_dir: Path | None, git_commit: str | None) -> dict[str, str]:
    """The environment of a run: its share of the cores, the kit's encoder package first on the path, offline,
    outliving the launch."""
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false",
                "PYTHONUNBUFFERED": "1", "TQDM_MININTERVAL": "5", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                # the trainer otherwise dies with its parent (training.checkpoints.exit_with_parent): here the
                # parent is the launch, which returns at once, and the run must go on
                "PUNCTUATION_KEEP_TRAINER": "1"})
    if site_dir is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(site_dir).resolve()), env.get("PYTHONPATH")) if p)
    if git_commit and not Path(".git").exists():  # a copy of the tree without git: the commit the kit was packed at
        env["PAPER_GIT_COMMIT"] = git_commit
    return env


def spawn(command: Sequence[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    """Start ``command`` in a session of its own (``setsid``), stdout and stderr appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as handle:
        handle.write(f"$ {' '.join(command)}\n".encode())
        handle.flush()
        process = subprocess.Popen(list(command), stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, start_new_session=True)
    _wait_for_arguments(process.pid)
    return process


def _wait_for_arguments(pid: int, wait_s: float = 5.0) -> None:
    """Wait until ``/proc/pid/cmdline`` is not empty: Linux closes the close-on-exec pipe Popen waits on before it
    writes the new program's arguments, and :func:`pid_alive` would call a run that has just started dead."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes():
                return
        except OSError:
            return  # no /proc, or the process has already ended
        time.sleep(0.005)


def pid_alive(pid: int, marker: Sequence[str]) -> bool:
    """Whether process ``pid`` runs and is ours (its arguments hold each of ``marker``); a zombie is not alive."""
    try:
        os.waitpid(pid, os.WNOHANG)  # reaps it if it is our own finished child
    except ChildProcessError:
        pass
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True  # no /proc to look closer
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        arguments = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X") and all(part in arguments for part in marker)


def runs_to_start(names: Sequence[str], state: dict[str, Any],
                  records_dirs: Sequence[Path]) -> tuple[list[str], dict[str, str]]:
    """(runs that may start, {run skipped: why}): a run with a record in the first of ``records_dirs`` (this
    machine's: it ran in this lease) or a complete one (``full_schedule``) in the others (the repository's) is done;
    a run whose process still runs (a probe too) is left alone; every other may start (again: a partial record never
    blocks, and a probe that checkpointed at the end of its slot resumes there)."""
    start, skipped = [], {}
    for name in names:
        entry = (state.get("runs") or {}).get(name)
        records = [json.loads(record_path(d, name).read_text(encoding="utf-8")) if record_path(d, name).is_file()
                   else None for d in records_dirs]
        if records[0] is not None or any(complete(r) for r in records[1:]):
            skipped[name] = "recorded"
        elif entry and pid_alive(int(entry["pid"]), entry["marker"]):
            skipped[name] = f"still running (pid {entry['pid']})"
        else:
            start.append(name)
    return start, skipped


def load_state(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise RunsError(f"{path}: not valid JSON ({error}); move it away to start afresh") from error


def save_state(path: Path, state: dict[str, Any]) -> None:
    atomic_write_bytes(path, (json.dumps(state, indent=2, sort_keys=True) + "\n").encode())


def alive_runs(state: dict[str, Any]) -> list[str]:
    """The runs of a launch's ``state`` whose processes still run."""
    return [name for name, entry in sorted((state.get("runs") or {}).items())
            if pid_alive(int(entry["pid"]), entry["marker"])]


def command_state(previous: dict[str, Any], began: float, deadline: float, *,
                  lease_left_s: float | None = None) -> dict[str, Any]:
    """The state of a new command of the lease (``state.json``), begun at ``began`` (epoch seconds) with its own
    training ``deadline``: command 1 without a ``previous`` state, else the one after it, in the same lease
    (``lease_started``: when its first command began)."""
    number = int(previous.get("command", 1)) + 1 if previous else 1
    return {"started": began, "deadline": deadline, "command": number,
            "lease_started": float(previous.get("lease_started", previous["started"])) if previous else began,
            "lease_left_s": lease_left_s, "runs": {}, "plan": {"runs": {}}}


def archive_command(state_dir: Path, state: dict[str, Any]) -> str:
    """Keep a finished command's ``state.json`` (and its ``measure.json``) beside, as ``state.N.json``
    (``measure.N.json``), N its command number; returns the state's new name. Records and logs stay where they are."""
    number = int(state.get("command", 1))
    for name in ("state", "measure"):
        if (state_dir / f"{name}.json").is_file():
            (state_dir / f"{name}.json").replace(state_dir / f"{name}.{number}.json")
    return f"state.{number}.json"


# ---------------------------------------------------------------------------------------------------- the status


def log_progress(log: Path) -> dict[str, Any]:
    """The last training progress a run's log shows: ``{"step", "steps", "steps_per_s"}`` (empty: none yet)."""
    if not log.is_file():
        return {}
    text = _tail(log, 1 << 16)
    match = ([None] + list(_PROGRESS.finditer(text)))[-1]
    if match is not None:
        rate = float(match.group(3))
        rate = rate if match.group(4) == "step/s" else (1 / rate if rate else 0.0)
        return {"step": int(match.group(1)), "steps": int(match.group(2)), "steps_per_s": round(rate, 2)}
    found = list(_PROGRESS_NO_RATE.finditer(text))
    return {"step": int(found[-1].group(1)), "steps": int(found[-1].group(2))} if found else {}


def measure_running(names: Sequence[str], state: dict[str, Any], logs_dir: Path, steps: int, timeout_s: float, *,
                    poll_s: float = 2.0, utilization: list[float] | None = None) -> dict[str, dict[str, Any] | None]:
    """Each started run's steps/s over its own first ``steps`` steps, read off its log while it trains (from the
    first progress at or past step ``steps // 10``, so start-up is not counted, to the first ``steps`` further on),
    and its GPU memory then; a run still short of ``steps`` after ``timeout_s`` gets its rate so far
    (``"partial": true``), one that ended first the rate its log shows, one that never made a step None. With
    ``utilization``, the GPU's busy share (0-1) is appended to it at each look while runs are measured."""
    first: dict[str, tuple[float, int]] = {}
    result: dict[str, dict[str, Any] | None] = {}
    end = time.monotonic() + timeout_s
    while True:
        now, memory = time.monotonic(), None
        if utilization is not None and first and len(result) < len(names):
            busy = gpu_utilization()
            utilization.extend([] if busy is None else [busy])
        for name in (n for n in names if n not in result):
            entry, progress = state["runs"][name], log_progress(logs_dir / f"{name}.log")
            step, alive = progress.get("step", 0), pid_alive(int(entry["pid"]), entry["marker"])
            if step >= max(1, steps // 10) and name not in first:
                first[name] = (now, step)
            since, at = first.get(name, (now, step))
            # ``steps`` more than at the first reading, never the log's own rate while the run goes on: a fast run
            # passes both marks between two looks, and tqdm's figure then still holds its first step's capture
            # (WRN on the H200: 0.12 steps/s, "8.58s/step", for a run of 131)
            if not (step >= at + steps or not alive or now >= end):
                continue
            rate = (step - at) / (now - since) if step > at and now > since else progress.get("steps_per_s")
            memory = gpu_facts()["memory_mib"] if memory is None else memory
            result[name] = {"name": name, "steps": step, "steps_per_second": None if rate is None else round(rate, 2),
                            "gpu_memory_mib": memory.get(int(entry["pid"])), "partial": step < steps} if step else None
        if len(result) == len(names) or now >= end:
            return {name: result.get(name) for name in names}
        time.sleep(poll_s)


def _tail(path: Path, size: int) -> str:
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - size))
        return handle.read().decode("utf-8", errors="replace")


def clean_tail(path: Path, size: int) -> str:
    """The last ``size`` bytes of a log as it reads on a terminal: of each progress line its last update only."""
    return "\n".join(line.rsplit("\r", 1)[-1] for line in _tail(path, size).split("\n"))


def paused_at(log: Path) -> int | None:
    """The step at which a run's last call paused and checkpointed (``run --slot-s``), from its log (after the last
    command :func:`spawn` wrote there); None if it did not."""
    found = _PAUSED.findall(_tail(log, 1 << 16).rsplit("\n$ ", 1)[-1]) if log.is_file() else []
    return int(found[-1]) if found else None


def run_status(name: str, records_dirs: Sequence[Path], state: dict[str, Any], logs_dir: Path) -> dict[str, Any]:
    """``{"name", "status", "step", "steps", "steps_per_s", "device", "full_schedule"}`` of a run on the machine:
    done where one of ``records_dirs`` (the machine's, the repository's) holds its record; a probe (``"probe"`` in its
    state entry: started for its first steps only) that ended at its slot is ``probed (checkpointed at step S)``,
    not failed."""
    entry = (state.get("runs") or {}).get(name)
    status: dict[str, Any] = {"name": name, "status": "not started"}
    for records_dir in records_dirs:
        if record_path(records_dir, name).is_file():
            info = json.loads(record_path(records_dir, name).read_text(encoding="utf-8"))["run"]
            return {**status, "status": "done", "step": info["steps_completed"], "steps": info["steps_scheduled"],
                    "steps_per_s": info.get("steps_per_s"), "device": info.get("device"),
                    "full_schedule": info.get("full_schedule"), "record": str(record_path(records_dir, name))}
    if entry is not None:
        alive = pid_alive(int(entry["pid"]), entry["marker"])
        paused = None if alive or not entry.get("probe") else paused_at(logs_dir / f"{name}.log")
        status.update(log_progress(logs_dir / f"{name}.log"), pid=int(entry["pid"]),
                      status="running" if alive else "failed" if paused is None else
                      f"probed (checkpointed at step {paused})")
    return status


def gpu_facts() -> dict[str, Any]:
    """The GPU's name and each process's memory (MiB by pid), from ``nvidia-smi``; empty without one."""
    def query(*args: str) -> list[list[str]]:
        try:
            out = subprocess.run(["nvidia-smi", *args, "--format=csv,noheader,nounits"], capture_output=True,
                                 text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return []
        return [[cell.strip() for cell in line.split(",")] for line in out.splitlines() if line.strip()]
    names = query("--query-gpu=name")
    memory = {int(pid): float(mib) for pid, mib in query("--query-compute-apps=pid,used_memory")
              if pid.isdigit() and mib.replace(".", "", 1).isdigit()}
    return {"gpu": names[0][0] if names else None, "memory_mib": memory}


def gpu_utilization() -> float | None:
    """The share of the last moment (1/6 to 1 s) in which the GPU ran a kernel (``nvidia-smi``); None without one."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return float(out[0]) / 100 if out and out[0].replace(".", "", 1).isdigit() else None


def travelling_files(repo: str | Path = ".") -> list[Path]:
    """The files a GPU machine gets of the working tree: tracked and untracked-not-ignored (``git ls-files``)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                         capture_output=True, timeout=120, check=True).stdout
    return [Path(repo) / name for name in sorted(set(out.decode().split("\0"))) if name
            and (Path(repo) / name).is_file()]
