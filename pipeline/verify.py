"""``python -m pipeline.verify``: this run's metrics against the committed ones (not a DVC stage).

    python -m pipeline.verify                  # after `dvc repro`: the working tree's metrics against HEAD's
    python -m pipeline.verify --against REV    # against another revision
    python -m pipeline.verify --write-spread   # rewrite reports/seed_spread.json from the measured seeds

Where the run computed the committed bytes (Linux; this machine and every stage record under logs/timings at the
committed floor x86-64-v3, the pinned numerics, on MKL's AUTO branch, as on AMD CPUs; every model trained on the
CPU), every value of every metrics file the pipeline writes must be the committed one. Anywhere else (an Intel CPU,
aarch64, a CPU below the floor, macOS, a CUDA GPU, PUNCTUATION_NATIVE_NUMERICS=1) the bytes are the machine's own:
each figure the README shows must lie within its seed spread (reports/seed_spread.json), and figures without a
measured spread of their own are named. Exits 1 naming every figure outside (file, key, committed, run, tolerance).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from experiments.numerics import numeric_facts
from pipeline.stage import TIMINGS_DIR, option
from reporting.verify import (
    EXACT,
    SPREAD,
    SPREAD_FILE,
    Reader,
    VerifyReport,
    numerics_regime,
    pipeline_metrics,
    training_devices,
    verify_metrics,
    write_seed_spread,
)


def git(repo: Path, *args: str) -> str | None:
    """git's output in ``repo`` (None where git fails: no such file at the revision, or no repository)."""
    try:
        result = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    except OSError:
        return None
    return result.stdout if result.returncode == 0 else None


def committed_reader(repo: Path, rev: str) -> Reader:
    """A file's text at ``rev`` (``git show REV:PATH``)."""
    return lambda path: git(repo, "show", f"{rev}:{path}")


def committed_metrics(repo: Path, rev: str) -> list[str]:
    """The metrics files the pipeline writes, as ``rev`` has them (its dvc.lock and its tree)."""
    lock = git(repo, "show", f"{rev}:dvc.lock")
    tracked = git(repo, "ls-tree", "-r", "--name-only", rev, "--", "metrics")
    if lock is None or tracked is None:
        raise SystemExit(f"error: cannot read dvc.lock and metrics/ at {rev!r} with git in {repo} (a git checkout "
                         "is needed: the committed figures are read from it)")
    return pipeline_metrics(lock, tracked.splitlines())


def stage_records(folder: Path) -> list[tuple[str, dict]]:
    """The stage records of the run (logs/timings/STAGE.json), each with its stage's name."""
    records = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            records.append((path.stem, json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError):
            continue
    return records


def run_regime(repo: Path) -> tuple[str, str]:
    """The regime of the run in ``repo`` (:func:`reporting.verify.numerics_regime`): this machine's numerics and
    system, the stage records under logs/timings and the devices its models trained on."""
    return numerics_regime(numeric_facts(), stage_records(repo / TIMINGS_DIR), system=sys.platform,
                           devices=training_devices(repo / "metrics"))


def verify_run(repo: Path, against: str = "HEAD", regime: str | None = None, *,
               spread_file: Path | None = None) -> VerifyReport:
    """The run's metrics in ``repo`` against ``against``'s; ``regime`` None: the run's own (:func:`run_regime`)."""
    why = "chosen on the command line"
    if regime is None:
        regime, why = run_regime(repo)
    spread = None
    if regime == SPREAD:
        spread_path = spread_file or repo / SPREAD_FILE
        spread = json.loads(spread_path.read_text(encoding="utf-8"))
    label = f"{against} ({(git(repo, 'rev-parse', '--short', against) or '?').strip()})"
    return verify_metrics(committed_reader(repo, against), committed_metrics(repo, against), repo, regime, spread,
                          why=why, against=label)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.verify", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    option(parser, "--repo", ".", "the repository whose working tree holds the run's metrics")
    option(parser, "--against", "HEAD", "the revision whose metrics are the committed ones")
    parser.add_argument("--regime", choices=(EXACT, SPREAD), help="force a regime (default: this machine's)")
    option(parser, "--spread", SPREAD_FILE, "the per-figure tolerances")
    parser.add_argument("--write-spread", action="store_true",
                        help="rewrite the tolerances from the measured seeds for the README figures of the working "
                             "tree's metrics, and exit")
    args = parser.parse_args(argv)
    repo = Path(args.repo)
    if args.write_spread:
        files = committed_metrics(repo, "HEAD")
        content = write_seed_spread(repo, files, repo / args.spread)
        count = sum(len(keys) for keys in content["figures"].values())
        print(f"wrote {repo / args.spread}: {count} figures, default ±{content['default']['tolerance']} points")
        return 0
    report = verify_run(repo, args.against, args.regime, spread_file=repo / args.spread)
    print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
