"""Pipeline stage ``prepare``: evaluation splits and an overlap-free training set from the shared data.

Reads ``params.yaml`` (section ``data`` and the active profile's ``data.train_tokens``), runs
:func:`punctuation.prepare.prepare_data`, and writes ``metrics/data.json`` and ``reports/data_report.md``.

    python -m pipeline.prepare [--params params.yaml] [--out data/prepared]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

from punctuation.params import load_params, require
from punctuation.prepare import prepare_data, report_markdown

METRICS_PATH = Path("metrics/data.json")
REPORT_PATH = Path("reports/data_report.md")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.prepare", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    parser.add_argument("--out", default="data/prepared", help="output folder (default: data/prepared)")
    parser.add_argument("--metrics", default=str(METRICS_PATH), help=f"report as JSON (default: {METRICS_PATH})")
    parser.add_argument("--report", default=str(REPORT_PATH), help=f"report as Markdown (default: {REPORT_PATH})")
    args = parser.parse_args(argv)

    params = load_params(args.params)
    data = require(params, "data", "params")
    active_data = require(params["active"], "data", f"profiles.{params['profile']}")
    started = time.perf_counter()
    prepared = prepare_data(
        require(data, "iwslt_dir", "data"),
        require(data, "ted_talks", "data"),
        args.out,
        eval_splits=require(data, "eval_splits", "data"),
        train_tokens=int(require(active_data, "train_tokens", f"profiles.{params['profile']}.data")),
        overlap_ngram=int(require(data, "overlap_ngram", "data")),
        overlap_min_shared_fraction=float(require(data, "overlap_min_shared_fraction", "data")),
        seed=int(require(data, "seed", "data")),
    )
    seconds = time.perf_counter() - started
    report = prepared.report

    metrics_path, report_path = Path(args.metrics), Path(args.report)
    metrics_path.parent.mkdir(parents=True, exist_ok=True)
    metrics_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(report_markdown(report), encoding="utf-8")

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
    main()
