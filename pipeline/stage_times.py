"""The README's stage-time table from the stage records of the last ``dvc repro`` (``logs/timings/``).

    python -m pipeline.stage_times [--timings logs/timings] [--machine "2 CPU cores, ..."] [--readme README.md]

Prints the table (:func:`reporting.stage_times.stage_times_markdown`); with ``--readme`` also writes it into the
README between ``<!-- stage-times:start -->`` and ``<!-- stage-times:end -->``. Not a DVC stage: wall times
change at every run, so they are shown when a person decides which run to show, never hashed by DVC.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from corpus.io import atomic_write_text
from pipeline.stage import TIMINGS_DIR
from reporting.results import replace_marked_region
from reporting.stage_times import README_END, README_START, read_stage_times, stage_times_markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.stage_times", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timings", type=Path, default=TIMINGS_DIR, help=f"stage records (default: {TIMINGS_DIR})")
    parser.add_argument("--machine", default="2 CPU cores", help="what the run ran on, for the table's caption")
    parser.add_argument("--readme", type=Path, help="also write the table into this README's marked region")
    args = parser.parse_args(argv)
    records = read_stage_times(args.timings)
    if not records:
        print(f"error: no stage records in {args.timings} (run `dvc repro` first)")
        return 2
    table = stage_times_markdown(records, machine=args.machine)
    print(table)
    if args.readme:
        text = args.readme.read_text(encoding="utf-8")
        atomic_write_text(args.readme, replace_marked_region(text, table, where=str(args.readme), start=README_START,
                                                             end=README_END))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
