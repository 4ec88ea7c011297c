"""DVC stage ``prepare``: evaluation splits and an overlap-free training set from the shared data.

    python -m pipeline.prepare [--params params.yaml] [--out data/prepared]

Reads the ``data`` section of the params file (with the active profile's overrides, e.g. ``train_tokens``),
runs :func:`trainset.prepare.prepare_data` (through :func:`trainset.from_params.prepare_from_params`, as the
longer draws of ``trainset.draws`` do), and writes ``metrics/data.json`` and ``reports/data_report.md``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from corpus.io import atomic_write_text
from experiments.params import require
from pipeline.stage import option, stage_parser, start, write_metrics
from trainset.from_params import prepare_from_params
from trainset.prepare import report_markdown

METRICS_PATH = Path("metrics/data.json")
REPORT_PATH = Path("reports/data_report.md")


def main(argv: Sequence[str] | None = None) -> int:
    parser = stage_parser("pipeline.prepare", __doc__, out="data/prepared", metrics=METRICS_PATH)
    option(parser, "--report", REPORT_PATH, "report as Markdown")
    args, params = start(parser, argv)

    data = require(params, "data", "params")
    started = time.perf_counter()
    prepared = prepare_from_params(data, args.out)
    seconds = time.perf_counter() - started
    report = prepared.report
    metrics_path = write_metrics(args.metrics, report, ensure_ascii=False)
    report_path = atomic_write_text(args.report, report_markdown(report))

    talks = report["talks"]
    tokens = ", ".join(f"{split} {count:,}" for split, count in report["tokens"].items())
    reasons = ", ".join(f"{reason} {count}" for reason, count in talks["excluded_by_reason"].items())
    coverage = ", ".join(
        f"{split} {info['ngram_coverage_by_excluded_talks']:.1%}" for split, info in report["eval_splits"].items()
    )
    print(f"prepare: profile {params['profile']}, {seconds:.1f} s -> {args.out}")
    print(f"  tokens: {tokens}")
    print(f"  talks: {talks['available']} in file, {talks['kept']} used, {talks['excluded']} excluded ({reasons})")
    print(f"  eval n-grams covered by excluded talks: {coverage}")
    print(f"  label distribution of train (%): {report['label_distribution']['train']}")
    print(f"  wrote {metrics_path} and {report_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
