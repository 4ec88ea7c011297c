"""Two complete runs of the default pipeline, each from a fresh clone, on one machine: what a change costs ``dvc
repro`` end to end.

    python -m benchmarks.pipeline_pair run --before REV --after REV [--first after] [--work ../pipeline_pair]
    python -m benchmarks.pipeline_pair arm REV --clone DIR --record FILE      # one complete run
    python -m benchmarks.pipeline_pair compare BEFORE.json AFTER.json [--markdown FILE]

An arm is the README's first command on a fresh machine: ``git clone`` of this repository at REV, ``bash
scripts/setup.sh``, then ``dvc repro`` with the clone's own ``.venv`` first on ``PATH`` (the caller's environment,
unpinned, as a user's shell). The stages it skips -- on a fresh clone, those whose outputs git holds and whose inputs
came back the same bytes -- are forced right after it, so every stage is timed. Then ``dvc status`` and ``git
status``. Its record (JSON, written when the arm ends) holds the commit, the machine, when it started and ended, the
set-up's and ``dvc repro``'s seconds, each stage's seconds from the clone's ``logs/timings/`` (the records the
stages write), whether ``dvc status`` was clean, and the tracked files the run changed (none: the committed bytes
came back). ``run`` runs both arms back to back, then ``compare``: per stage, in all, and how far apart the two runs
were.

The clones sit side by side under ``--work``, each arm's logs beside its clone (``CLONE_logs``). The data paths of
``params.yaml`` that leave the repository (``../shared/data``) are linked under ``--work``, so each clone reads the
data this repository reads.

One process at a time: run nothing else meanwhile (torch on two cores slows several times when another process
competes). Two complete runs take about two and a half hours on two AMD EPYC cores (a Zen 5: 4,293 s and
4,417 s of ``dvc repro`` at b883b5d and 019cd63, ``reports/pipeline_pair/b883b5d_019cd63.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from experiments.numerics import pin_numerics

#: The environment the arms run in: the caller's, as a user's shell is, not this process's pinned one.
USER_ENV = dict(os.environ)
pin_numerics()  # every entry point pins (tests/test_entry_points_pinned.py); the arms' stages pin themselves

from benchmarks.machine import this_machine  # noqa: E402
from benchmarks.timed import run_timed  # noqa: E402
from reporting.stage_times import read_stage_times  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _venv_env(clone: Path) -> dict[str, str]:
    """The user's environment with the clone's ``.venv`` first on ``PATH``, as ``. .venv/bin/activate`` gives."""
    return {**USER_ENV, "PATH": f"{clone / '.venv' / 'bin'}{os.pathsep}{USER_ENV.get('PATH', '')}",
            "VIRTUAL_ENV": str(clone / ".venv")}


def link_outside_data(repo: Path, work: Path) -> list[Path]:
    """Under ``work``, a link for each top folder that ``repo``'s ``params.yaml`` data paths reach outside the
    repository through (``../shared/data`` -> ``work/shared``), so a clone in ``work/ARM`` reads the same data."""
    import yaml

    params = yaml.safe_load((repo / "params.yaml").read_text(encoding="utf-8"))
    tops = sorted({Path(value).parts[1] for value in (params.get("data") or {}).values()
                   if isinstance(value, str) and Path(value).parts[:1] == ("..",) and len(Path(value).parts) > 1})
    links = []
    work.mkdir(parents=True, exist_ok=True)
    for top in tops:
        link, target = work / top, (repo.parent / top).resolve()
        if link.is_symlink() or link.exists():
            if link.resolve() != target:
                raise SystemExit(f"{link} exists and is not a link to {target}: choose another --work")
        else:
            link.symlink_to(target, target_is_directory=True)
        links.append(link)
    return links


def skipped_stages(repro_log: str) -> list[str]:
    """The stages ``dvc repro`` skipped, in its order: on a fresh clone, those whose outputs git holds and whose
    inputs came back the same bytes."""
    return re.findall(r"Stage '([^']+)' didn't change, skipping", repro_log)


def collect(clone: Path, *, commit: str, started: str, ended: str, setup_s: float, repro_s: float,
            log_dir: Path, forced: list[str] | None = None, forced_s: float = 0.0) -> dict[str, Any]:
    """The record of a finished arm: its stage times, ``dvc status`` and the tracked files the run changed."""
    status = subprocess.run(["dvc", "status", "--json"], cwd=clone, env=_venv_env(clone), capture_output=True,
                            text=True)
    (log_dir / "dvc_status.log").write_text(status.stdout + status.stderr, encoding="utf-8")
    if status.returncode != 0:
        raise SystemExit(f"dvc status (in {clone}) exited with {status.returncode}: see {log_dir / 'dvc_status.log'}")
    dvc_status = json.loads(status.stdout.strip() or "{}")
    changed = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True,
                             check=True).stdout.splitlines()
    stages = {name: round(float(record["seconds"] or 0.0), 1)
              for name, record in sorted(read_stage_times(clone / "logs" / "timings").items(),
                                         key=lambda item: item[1].get("finished") or "")}
    return {"commit": commit, "machine": this_machine(), "started": started, "ended": ended,
            "setup_s": round(setup_s, 1), "repro_s": round(repro_s, 1), "forced_stages": forced or [],
            "forced_s": round(forced_s, 1), "stages_s": stages,
            "stages_total_s": round(sum(stages.values()), 1), "dvc_status_clean": not dvc_status,
            "dvc_status": dvc_status, "tracked_files_changed": changed}


def run_arm(revision: str, clone: Path, record: Path, *, repo: Path = REPO) -> dict[str, Any]:
    """One complete run of the default pipeline at ``revision`` in a fresh clone; writes and returns its record."""
    if clone.exists():
        raise SystemExit(f"{clone} exists: an arm starts from a fresh clone (remove it, or choose another --clone)")
    # beside the clone, not the record: a record kept in the repository would take megabytes of logs in with it
    log_dir = clone.parent / f"{clone.name}_logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    record.parent.mkdir(parents=True, exist_ok=True)  # now, not after the run's hour and a half
    started = _now()
    run_timed(["git", "clone", "--quiet", str(repo), str(clone)], log_dir / "clone.log", cwd=repo, env=USER_ENV)
    run_timed(["git", "checkout", "--quiet", revision], log_dir / "checkout.log", cwd=clone, env=USER_ENV)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True,
                            check=True).stdout.strip()
    setup_s = run_timed(["bash", "scripts/setup.sh"], log_dir / "setup.log", cwd=clone, env=USER_ENV)
    repro_s = run_timed(["dvc", "repro"], log_dir / "dvc_repro.log", cwd=clone, env=_venv_env(clone))
    # Stages whose outputs git holds are skipped on a fresh clone when their inputs come back the same bytes; they
    # are forced right after, so every stage of the pipeline is timed (and must give the committed bytes again).
    forced = skipped_stages((log_dir / "dvc_repro.log").read_text(encoding="utf-8", errors="replace"))
    forced_s = run_timed(["dvc", "repro", "--force", "--single-item", *forced], log_dir / "dvc_repro_forced.log",
                         cwd=clone, env=_venv_env(clone)) if forced else 0.0
    facts = collect(clone, commit=commit, started=started, ended=_now(), setup_s=setup_s, repro_s=repro_s,
                    log_dir=log_dir, forced=forced, forced_s=forced_s)
    record.write_text(json.dumps(facts, indent=1) + "\n", encoding="utf-8")
    print(f"{record}: {commit[:7]}, dvc repro {repro_s / 60:.1f} min, dvc status "
          f"{'clean' if facts['dvc_status_clean'] else 'NOT clean'}, {len(facts['tracked_files_changed'])} tracked "
          "files changed", flush=True)
    return facts


def compare_markdown(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The two records side by side: each stage, the totals, and whether the runs hold as a comparison."""
    first, second = sorted((before, after), key=lambda record: record["started"])
    gap_min = (datetime.fromisoformat(second["started"]) - datetime.fromisoformat(first["ended"])).total_seconds() / 60
    lines = ["| stage | before, s | after, s | after − before, s |", "|---|---:|---:|---:|"]
    names = list(before["stages_s"]) + [name for name in after["stages_s"] if name not in before["stages_s"]]
    for name in names:
        b, a = before["stages_s"].get(name), after["stages_s"].get(name)
        diff = (a or 0.0) - (b or 0.0)
        lines.append(f"| {name} | {'–' if b is None else f'{b:.0f}'} | {'–' if a is None else f'{a:.0f}'} | "
                     f"{diff:+.0f} |")
    for label, key in (("the stages in all", "stages_total_s"), ("`dvc repro`, wall", "repro_s"),
                       ("the stages it skipped, forced after it", "forced_s"),
                       ("`scripts/setup.sh` before it", "setup_s")):
        b, a = before[key], after[key]
        lines.append(f"| **{label}** | {b:.0f} | {a:.0f} | {a - b:+.0f} |")
    growth = (after["stages_total_s"] - before["stages_total_s"]) / 60
    # Stages both arms ran did the same work unless the change touched them: their difference is mostly the
    # machine's drift between the runs, which a pair not run back to back cannot tell from the change's cost.
    shared = [name for name in before["stages_s"] if name in after["stages_s"]]
    shared_growth = sum(after["stages_s"][name] - before["stages_s"][name] for name in shared) / 60
    notes = [
        f"- Before: commit {before['commit'][:7]}, {before['started']} to {before['ended']}.",
        f"- After: commit {after['commit'][:7]}, {after['started']} to {after['ended']}.",
        f"- The pipeline's stages grow by **{growth:+.1f} min** ({before['stages_total_s'] / 60:.1f} to "
        f"{after['stages_total_s'] / 60:.1f}): {growth - shared_growth:+.1f} min in the stages of one arm only, "
        f"{shared_growth:+.1f} min in the {len(shared)} stages both ran.",
        f"- The second run started {gap_min:.0f} min after the first ended"
        f"{' (back to back)' if gap_min < 5 else ': not back to back'}.",
        f"- Machines: {before['machine']}" + ("" if before["machine"] == after["machine"]
                                              else f" and {after['machine']}: **not one machine**") + ".",
    ]
    for arm, record in (("before", before), ("after", after)):
        clean = record["dvc_status_clean"] and not record["tracked_files_changed"]
        notes.append(f"- The {arm} run: `dvc status` {'clean' if record['dvc_status_clean'] else 'not clean'}, "
                     f"{len(record['tracked_files_changed'])} tracked files changed"
                     f"{'' if clean else ': ' + ', '.join(record['tracked_files_changed'][:8])}.")
    return "\n".join(lines + [""] + notes) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pipeline_pair", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    both = commands.add_parser("run", help="both arms back to back, then compare")
    both.add_argument("--before", required=True, help="the revision without the change")
    both.add_argument("--after", default="HEAD", help="the revision with it (default: HEAD)")
    both.add_argument("--first", choices=("before", "after"), default="before", help="which arm runs first")
    both.add_argument("--work", type=Path, default=REPO.parent / "pipeline_pair", help="where the clones go")
    one = commands.add_parser("arm", help="one complete run from a fresh clone")
    one.add_argument("revision")
    one.add_argument("--clone", type=Path, required=True)
    one.add_argument("--record", type=Path, required=True)
    pair = commands.add_parser("compare", help="two arm records side by side")
    pair.add_argument("before", type=Path)
    pair.add_argument("after", type=Path)
    pair.add_argument("--markdown", type=Path, help="also write the table here")
    args = parser.parse_args(argv)

    if args.command == "arm":
        link_outside_data(REPO, args.clone.resolve().parent)
        run_arm(args.revision, args.clone.resolve(), args.record.resolve())
        return 0
    if args.command == "run":
        work = args.work.resolve()
        link_outside_data(REPO, work)
        order = ("before", "after") if args.first == "before" else ("after", "before")
        for arm in order:
            run_arm(getattr(args, arm), work / arm, work / f"{arm}.json")
        before_path, after_path, markdown = work / "before.json", work / "after.json", work / "pipeline_pair.md"
    else:
        before_path, after_path, markdown = args.before, args.after, args.markdown
    table = compare_markdown(*(json.loads(path.read_text(encoding="utf-8")) for path in (before_path, after_path)))
    print(table)
    if markdown:
        markdown.write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
