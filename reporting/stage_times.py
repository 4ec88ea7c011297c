"""How long each stage of the last ``dvc repro`` took: the table the README shows, from ``logs/timings/``.

Every stage run by DVC writes ``logs/timings/STAGE.json`` when it exits (:class:`pipeline.stage.StageRecord`:
its wall time, when it finished, and the run facts its metrics left out -- training seconds, tokens per second,
peak memory, compute seconds per audio minute). Neither DVC nor git tracks that folder, so a rerun changes no
tracked byte; :func:`stage_times_markdown` turns the records into the README's stage-time table when a person
decides a run is the one to show (``python -m pipeline.stage_times --readme README.md``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The region of docs/benchmarks.md the table is written into, between these two lines.
README_START = "<!-- stage-times:start -->"
README_END = "<!-- stage-times:end -->"
#: The README's one line with the default pipeline's time, between these two lines.
RUN_TIME_START = "<!-- run-time:start -->"
RUN_TIME_END = "<!-- run-time:end -->"


def read_stage_times(directory: str | Path) -> dict[str, dict[str, Any]]:
    """The records in ``directory`` by stage name (a file that is not a record is an error naming it)."""
    records = {}
    for path in sorted(Path(directory).glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            raise ValueError(f"{path}: not a stage record ({error})") from error
        if not isinstance(record, dict) or "stage" not in record or "seconds" not in record:
            raise ValueError(f"{path}: not a stage record (no 'stage' and 'seconds')")
        records[record["stage"]] = record
    return records


def _training_rate(record: dict[str, Any]) -> str:
    """``tokens/s`` of a training stage's record, else empty."""
    for facts in record.values():
        if isinstance(facts, dict) and facts.get("train_tokens_per_second"):
            return f"{facts['train_tokens_per_second']:,.0f} tokens/s"
    return ""


def total_minutes(records: dict[str, dict[str, Any]]) -> float:
    """The wall time of all the stages, in minutes."""
    return sum(float(record["seconds"] or 0.0) for record in records.values()) / 60


def run_time_line(records: dict[str, dict[str, Any]], *, machine: str, setup_seconds: float | None = None) -> str:
    """The README's line: how long the default pipeline took end to end, and where."""
    setup = f" (set-up {setup_seconds:.0f} s before it)" if setup_seconds else ""
    return (f"The default `dvc repro` takes **{total_minutes(records):.1f} min**{setup} on {machine} (each stage: "
            "[docs/benchmarks.md](docs/benchmarks.md#how-long-the-default-pipeline-takes)).\n")


def stage_times_markdown(records: dict[str, dict[str, Any]], *, machine: str) -> str:
    """The stage-time table (stages in the order they finished, two to a row) with the total, on ``machine``."""
    ordered = sorted(records.values(), key=lambda record: record.get("finished") or "")
    total = total_minutes(records) * 60
    last = ordered[-1].get("finished", "") if ordered else ""
    lines = [f"Wall time of each stage of one complete `dvc repro` ({machine}; finished {last[:10] or '–'}; from "
             f"`logs/timings/`, which the stages write): **{total / 60:.1f} min** in all.", "",
             "| stage | s | stage | s |", "|---|---:|---|---:|"]
    cells = []
    for record in ordered:
        rate = _training_rate(record)
        cells.append(f"{record['stage']}{f' ({rate})' if rate else ''} | {float(record['seconds'] or 0):.0f}")
    half = (len(cells) + 1) // 2
    for left, right in zip(cells[:half], cells[half:] + [" | "]):
        lines.append(f"| {left} | {right} |")
    return "\n".join(lines) + "\n"
