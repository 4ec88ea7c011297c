"""DVC stage ``prepare_earnings22``: Earnings-22's splits as the repository's splits, with real timing cues, and
its data report.

    python -m pipeline.prepare_earnings22 [--params params.yaml] [--out data/earnings22]
        [--metrics metrics/earnings22.json] [--report reports/earnings22_report.md]
        [--figures reports/earnings22_figures] [--quiet]

Reads the calls of ``data.earnings22_dir`` (Rev.com's Earnings-22, Del Rio et al. 2022, CC BY-SA 4.0) and writes
``OUT/SPLIT.tsv``, ``OUT/SPLIT_talks.tsv``, ``OUT/timing/SPLIT/`` and ``OUT/calls/SPLIT/{text,timings,ref}/`` for
train, dev and test (:func:`realspeech.earnings22.prepare_earnings22`; the test split is for reporting only). The
report puts the calls' cues beside the real TED talks ``data.real_speech_talks`` of ``data.real_speech_dir`` and
the simulated cues of params ``pauses`` (:func:`realspeech.earnings22_report.write_earnings22_report`); the
metrics are its figures.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.params import require
from pipeline.stage import option, stage_parser, start, write_metrics
from realspeech.earnings22 import prepare_earnings22, split_totals
from realspeech.earnings22_report import write_earnings22_report


def main(argv: Sequence[str] | None = None) -> int:
    parser = stage_parser("pipeline.prepare_earnings22", __doc__, out="data/earnings22",
                          metrics="metrics/earnings22.json", quiet=True)
    option(parser, "--report", "reports/earnings22_report.md", "report as Markdown")
    option(parser, "--figures", "reports/earnings22_figures", "folder of the report's figure")
    args, params = start(parser, argv)
    data = require(params, "data", "params")
    prepared = prepare_earnings22(require(data, "earnings22_dir", "data"), args.out, progress=not args.quiet)
    report = write_earnings22_report(
        prepared, real_speech_dir=require(data, "real_speech_dir", "data"),
        real_speech_talks=list(require(data, "real_speech_talks", "data")), pauses=require(params, "pauses", "params"),
        report_path=args.report, figure_dir=args.figures)
    write_metrics(args.metrics, report, ensure_ascii=False)
    totals = split_totals(report)
    print(f"prepare_earnings22: {totals['calls']} calls, {totals['words']:,} words ({totals['timed_words']:,} timed), "
          f"{totals['tokens']:,} tokens -> {args.out}")
    for split, figures in report["splits"].items():
        shares = figures["cues"]
        print(f"  {split}: {figures['calls']} calls, {figures['tokens']:,} tokens, timed {figures['timed_share']:.1%}; "
              "pause >= 0.2 s: " + ", ".join(f"{label} {shares[label]['share_pause_0.2s']:.1%}"
                                              for label in ("O", "COMMA", "PERIOD", "QUESTION")
                                              if shares[label]["share_pause_0.2s"] is not None))
    print(f"  wrote {args.report} and {args.metrics}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
