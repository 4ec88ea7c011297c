"""One command of a benchmark, timed by the wall clock, its output kept in a log."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def run_timed(argv: list[str], log: Path, *, cwd: Path | None = None, env: dict[str, str] | None = None) -> float:
    """Run ``argv`` (in ``cwd``, with ``env``; the caller's when not given), its output to ``log``; its seconds of
    wall time. A failure stops the benchmark, naming the log."""
    started = time.perf_counter()
    with open(log, "w", encoding="utf-8") as handle:
        status = subprocess.run(argv, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"{' '.join(argv)}{f' (in {cwd})' if cwd else ''} exited with {status}: see {log}")
    return seconds
