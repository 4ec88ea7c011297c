"""The step rates each GPU lease measured, kept across leases: ``metrics/gpu/leases/LEASE.json``, one file a command
of a lease (LEASE: the command's start to the second and the device; the first lease's files, to the minute).

A lease's rates are what its runs made there, with the device's name, torch's version and each run's step mode
(graph or eager, and why): the rate launch measured over each run's own first steps (``measure.json``) and the
rate of each finished run's whole training (its record). ``collect`` writes them into every tarball
(``gpu_kit_status/rates.json``); ``import`` files them under ``metrics/gpu/leases`` (committed beside the
records); the next ``plan`` and ``launch`` take the best known rate of each run and mode from them
(:func:`known_rates`; a rehearsal's, on a CPU, never counts).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from corpus.io import atomic_write_bytes

RATES_FILE = "rates.json"


def lease_id(started: float, gpu: str | None) -> str:
    """``20250601T120342Z_nvidia-h100-80gb-hbm3``: when the lease's command began (UTC, to the second: each command
    of a lease has its own) and on what. Files of earlier leases, named to the minute (``20250601T1203Z_...``), are
    read as they are."""
    slug = re.sub(r"[^a-z0-9]+", "-", (gpu or "cpu").lower()).strip("-")
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(started))}_{slug}"


def measured_mode(facts: dict[str, Any]) -> str | None:
    """The step mode a started run trains in, as far as launch knows it (``facts``: its entry in the state's
    ``plan.runs``): eager for a run that reads words (``eager_only``, whatever its settings ask), else the mode its
    settings ask for (its record says which ran)."""
    return "eager" if facts.get("eager_only") else facts.get("mode")


def lease_record(state: dict[str, Any], measurement: dict[str, Any], records: dict[str, dict[str, Any]], *,
                 gpu: str | None, software: dict[str, Any], git: dict[str, Any] | None) -> dict[str, Any]:
    """The rates of the lease's command that ``state`` (launch's ``state.json``) describes: per run started, its
    requested and actual step mode, the rate measured over its first steps and the rate of its whole training
    (``probe``: a run started only for its first steps, with its slot and whether the second wave started it again);
    the command's number in its lease and when the lease's first command began (``lease_started``)."""
    plan = state.get("plan") or {}
    probes = plan.get("probes") or {}
    beside = len(plan.get("first_wave") or []) + len(probes) - 1  # the first wave and the probes, measured together
    runs = {}
    for name, started in sorted((state.get("runs") or {}).items()):
        facts = (plan.get("runs") or {}).get(name) or {}
        entry: dict[str, Any] = {"experiment": facts.get("experiment"), "tokens_per_step": facts.get("tokens"),
                                 "requested_mode": facts.get("mode"), "wave": facts.get("wave"),
                                 "started_s": round(float(started.get("started", 0)) - float(state["started"]), 1)}
        measured = measurement.get(name)
        if isinstance(measured, dict) and measured.get("steps_per_second"):
            entry["first_steps"] = {"steps_per_s": measured["steps_per_second"], "steps": measured["steps"],
                                    "partial": measured.get("partial"), "gpu_memory_mib": measured.get("gpu_memory_mib"),
                                    "runs_beside": beside}
        if name in probes:
            entry["probe"] = {"slot_s": probes[name], "started_again": not started.get("probe")}
        record = (records.get(name) or {}).get("run")
        if record:
            entry["whole_run"] = {key: record.get(key) for key in ("steps_per_s", "steps_completed", "steps_scheduled",
                                                                 "full_schedule", "train_s", "eval_s")}
            train = record.get("train") or {}
            if train.get("eval_every_steps") and train.get("epochs") and record.get("eval_s") is not None:
                evaluations = int(record["steps_completed"]) // int(train["eval_every_steps"]) + int(train["epochs"])
                entry["whole_run"]["eval_s_each"] = round(float(record["eval_s"]) / max(1, evaluations), 2)
        mode = (record or {}).get("step_mode")
        entry["mode"] = mode or measured_mode(facts)
        entry["mode_from"] = "record" if mode else "eager only" if facts.get("eager_only") else "requested"
        entry["mode_reason"] = (record or {}).get("step_mode_reason")
        runs[name] = entry
    lease_started = float(state.get("lease_started", state["started"]))
    return {"lease": lease_id(float(state["started"]), gpu), "device": gpu, "software": software, "git": git,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(state["started"]))),
            "command": int(state.get("command", 1)),
            "lease_started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(lease_started)),
            "train_s": round(float(state["deadline"]) - float(state["started"]), 1),
            "gpu_utilization": plan.get("utilization"), "gpu_busy_scale": plan.get("gpu_busy_scale"),
            "first_wave": plan.get("first_wave"), "second_wave": plan.get("second_wave"),
            **({"probes": sorted(probes)} if probes else {}), "runs": runs}


def file_lease(record: dict[str, Any], folder: str | Path) -> Path:
    """Write a lease command's rates as ``folder/LEASE.json`` (LEASE: :func:`lease_id`, the command's start to the
    second, so each command of a lease has its own file; a later collect of the same command replaces it)."""
    path = Path(folder) / f"{record['lease']}.json"
    atomic_write_bytes(path, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())
    return path


def load_leases(folder: str | Path) -> list[dict[str, Any]]:
    """Every lease command's rates in ``folder``, oldest first by when it began (``started``; files named to the
    minute or to the second alike), a file that is not one an error naming it."""
    leases = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            leases.append((json.loads(path.read_text(encoding="utf-8")), path.name))
        except ValueError as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from error
    return [lease for lease, _ in sorted(leases, key=lambda pair: (str(pair[0].get("started") or ""), pair[1]))]


def known_rates(leases: list[dict[str, Any]]) -> dict[str, Any]:
    """The best rate known of each run and mode, and of each experiment at a batch size and mode:
    ``{"rates": {(run, mode) | (experiment, tokens_per_step, mode): {"steps_per_s", "where"}}, "eval_s": {run |
    (experiment, tokens_per_step): the fewest seconds a dev evaluation took}, "fallbacks": {run: why it trained
    eagerly when graph was asked}, "scale": the latest lease's GPU-busy scale or None}``.
    Only leases on a GPU count (a rehearsal's CPU rates never plan a lease)."""
    rates: dict[tuple, dict[str, Any]] = {}
    evaluations: dict[Any, float] = {}
    fallbacks: dict[str, str] = {}
    scale = None
    for lease in leases:
        if not lease.get("device") or lease["device"] == "cpu":
            continue
        if lease.get("gpu_busy_scale"):
            scale = {"gpu_busy_scale": float(lease["gpu_busy_scale"]), "lease": lease["lease"]}
        for name, run in (lease.get("runs") or {}).items():
            mode = run.get("mode")
            if run.get("requested_mode") == "graph" and mode == "eager" and run.get("mode_from") == "record":
                fallbacks[name] = run.get("mode_reason") or "no reason recorded"
            keys = [name] + ([(run["experiment"], int(run["tokens_per_step"]))]
                             if run.get("experiment") and run.get("tokens_per_step") else [])
            each = (run.get("whole_run") or {}).get("eval_s_each")
            for key in keys if each is not None else []:
                evaluations[key] = min(float(each), evaluations.get(key, float("inf")))
            if mode not in ("graph", "eager"):
                continue
            for source in ("first_steps", "whole_run"):
                rate = (run.get(source) or {}).get("steps_per_s")
                if not rate:
                    continue
                found = {"steps_per_s": float(rate), "where": f"{lease['device']}, lease {lease['lease']}"}
                for key in [(name, mode)] + [(*key, mode) for key in keys[1:]]:
                    if key not in rates or rates[key]["steps_per_s"] < found["steps_per_s"]:
                        rates[key] = found
    return {"rates": rates, "eval_s": evaluations, "fallbacks": fallbacks, "scale": scale}


def measure_markdown(results: dict[str, dict | None], logs_dir: Path, gpu: str | None,
                     utilization: float | None = None) -> str:
    """The measurement of each run (:func:`paper_runs.processes.measure_running`) as a table; a failed one names its
    log."""
    busy = "" if utilization is None else f" The GPU was busy {100 * utilization:.0f} % of the time (nvidia-smi)."
    lines = [f"Measured on {gpu or 'no GPU (nvidia-smi)'}: each run's own first steps, all running at once.{busy}", "",
             "| run | steps measured to | steps/s | GPU MiB |", "|---|---:|---:|---:|"]
    for name, result in results.items():
        if result is None:
            lines.append(f"| {name} | failed: {logs_dir / f'{name}.log'} | – | – |")
            continue
        memory = result.get("gpu_memory_mib")
        lines.append(f"| {name} | {result['steps']}{' (timed out)' if result['partial'] else ''} | "
                     f"{result['steps_per_second'] or '–'} | {'–' if memory is None else f'{memory:.0f}'} |")
    return "\n".join(lines) + "\n"


def with_measurement(known: dict[str, Any], measured: dict[str, float], modes: dict[str, str],
                     scale: float | None, where: str) -> dict[str, Any]:
    """``known`` (:func:`known_rates`) with this lease's first-step rates (``measured``, by run, in ``modes``) and
    its GPU-busy scale taking precedence."""
    rates = {**known["rates"], **{(name, modes[name]): {"steps_per_s": rate, "where": where}
                                  for name, rate in measured.items() if rate}}
    return {**known, "rates": rates, "scale": {"gpu_busy_scale": scale, "lease": where} if scale else known["scale"]}
