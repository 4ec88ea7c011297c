"""Put the records of ``scripts/time_boxed_run.py`` runs into one Markdown report beside the published figures.

    python scripts/time_boxed_report.py metrics/gpu/*/*.json --title "..." --out reports/gpu_paper_profile.md

Each record is a ``run.json``; its ``run`` field (or the name of the folder holding it) names the run.
``--curves PATH`` draws every run's dev F1 against the step in one figure, from the training history beside
each record (``NAME.history.csv`` next to ``NAME.json``, or ``model/history.csv`` next to ``run.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from punctuation.plots import plot_dev_f1_curves  # noqa: E402
from punctuation.reporting import load_published, time_boxed_markdown  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--title", default="Time-boxed runs")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--figure", action="append", default=[], metavar="NAME=PATH",
                        help="a plot to show under the table (path relative to the report)")
    parser.add_argument("--note", action="append", default=[], help="a paragraph under the title, e.g. how the runs "
                        "were made (repeatable)")
    parser.add_argument("--baseline", default=None, help="a run's name: add each row's F1 difference to it, and "
                        "the published difference")
    parser.add_argument("--curves", type=Path, default=None, help="write the runs' dev F1 curves to this image "
                        "and show it under the table")
    args = parser.parse_args(argv)
    runs, histories = [], {}
    for path in args.records:
        record = json.loads(path.read_text(encoding="utf-8"))
        record.setdefault("run", path.parent.name)
        runs.append(record)
        # NAME.json beside NAME.history.csv (the stored records), or run.json beside model/history.csv (a run folder)
        label, history = ((path.parent.name, path.parent / "model" / "history.csv") if path.name == "run.json"
                          else (path.stem, path.with_suffix(".history.csv")))
        if history.exists():
            histories[label] = history
        elif args.curves is not None:
            raise SystemExit(f"--curves: no training history beside {path} (looked for {history})")
    figures = dict(item.split("=", 1) for item in args.figure)
    if args.curves is not None:
        plot_dev_f1_curves(histories, args.curves, title=args.title)
        figures["dev F1 against the step"] = os.path.relpath(args.curves, args.out.parent)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = time_boxed_markdown(args.title, runs, load_published(), figures, notes=args.note, baseline=args.baseline)
    args.out.write_text(text, encoding="utf-8")
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
