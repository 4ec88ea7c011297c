"""The stage-time table and the README's run-time line from the stage records of the last ``dvc repro``.

    python -m pipeline.stage_times [--timings logs/timings] [--machine "2 CPU cores, ..."] [--setup-seconds S]
                                   [--page docs/benchmarks.md] [--readme README.md]

Prints the table (:func:`reporting.stage_times.stage_times_markdown`); ``--page`` writes it into that page between
``<!-- stage-times:start -->`` and ``<!-- stage-times:end -->``, ``--readme`` the one line with the total
(:func:`reporting.stage_times.run_time_line`) between ``<!-- run-time:start -->`` and ``<!-- run-time:end -->``.
Not a DVC stage: wall times change at every run, so they are shown when a person decides which run to show,
never hashed by DVC.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from corpus.io import atomic_write_text
from pipeline.stage import TIMINGS_DIR
from reporting.results import replace_marked_region
from reporting.stage_times import (
    README_END,
    README_START,
    RUN_TIME_END,
    RUN_TIME_START,
    read_stage_times,
    run_time_line,
    stage_times_markdown,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.stage_times", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timings", type=Path, default=TIMINGS_DIR, help=f"stage records (default: {TIMINGS_DIR})")
    parser.add_argument("--machine", default="2 CPU cores", help="what the run ran on, for the table's caption")
    parser.add_argument("--setup-seconds", type=float, help="how long scripts/setup.sh took before the run")
    parser.add_argument("--page", type=Path, help="also write the table into this page's marked region")
    parser.add_argument("--readme", type=Path, help="also write the run-time line into this README's marked region")
    args = parser.parse_args(argv)
    records = read_stage_times(args.timings)
    if not records:
        print(f"error: no stage records in {args.timings} (run `dvc repro` first)")
        return 2
    table = stage_times_markdown(records, machine=args.machine)
    print(table)
    for path, content, start, end in ((args.page, table, README_START, README_END),
                                      (args.readme, run_time_line(records, machine=args.machine,
                                                                  setup_seconds=args.setup_seconds),
                                       RUN_TIME_START, RUN_TIME_END)):
        if path:
            text = path.read_text(encoding="utf-8")
            atomic_write_text(path, replace_marked_region(text, content, where=str(path), start=start, end=end))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
