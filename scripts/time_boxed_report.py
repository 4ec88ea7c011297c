"""Put the records of ``scripts/time_boxed_run.py`` runs into one Markdown report beside the published figures.

    python scripts/time_boxed_report.py metrics/gpu/*/*.json --title "..." --out reports/gpu_paper_profile.md

Each record is a ``run.json``; its ``run`` field (or the name of the folder holding it) names the run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from punctuation.reporting import load_published, time_boxed_markdown  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--title", default="Time-boxed runs")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--figure", action="append", default=[], metavar="NAME=PATH",
                        help="a plot to show under the table (path relative to the report)")
    args = parser.parse_args(argv)
    runs = []
    for path in args.records:
        record = json.loads(path.read_text(encoding="utf-8"))
        record.setdefault("run", path.parent.name)
        runs.append(record)
    figures = dict(item.split("=", 1) for item in args.figure)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(time_boxed_markdown(args.title, runs, load_published(), figures), encoding="utf-8")
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
