"""DVC stage ``report``: all experiments side by side with the published figures (reports/results.md), and the
summary table of the default pipeline's runs (reports/summary.md) that the README shows.

Also reports runs kept outside the default pipeline (e.g. the FF2 ablations)::

    python -m pipeline.report --experiments ff2 ffa ff2_no_rdrop --eval-metrics metrics/eval_ablations \\
        --eval-metrics metrics/eval --train-metrics metrics/train_ablations --train-metrics metrics/train \\
        --artifacts ablation_artifacts --artifacts artifacts --figures reports/ablation_figures \\
        --title "FF2 ablations" --out reports/ablations.md

Each experiment's metrics and model are taken from the first of the given folders that has them.

The summary (params ``experiments``, ``variants`` and ``tunings``, from ``--metrics``) is written on the default run (no
``--experiments``). ``--summary-only --readme README.md`` writes just the summary, and also into the README
between its lines ``<!-- results:start -->`` and ``<!-- results:end -->``, and the "All talks" table of the
``evaluate_real`` stage's report (``--real-speech``, where it exists) between ``<!-- real-speech:start -->`` and
``<!-- real-speech:end -->``, and that of the ``evaluate_earnings22`` stage (``--earnings22``) between
``<!-- earnings22:start -->`` and ``<!-- earnings22:end -->``, so the README's figures are the pipeline's
(``tests/test_readme_results.py`` fails when they differ).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from corpus.io import atomic_write_text
from experiments.params import runs_on_feature_sets
from pipeline.stage import option, stage_parser, start
from reporting.results import (
    analysis_figures,
    collect_experiments,
    collect_figures,
    EARNINGS22_END,
    EARNINGS22_START,
    REAL_SPEECH_END,
    REAL_SPEECH_HEADING,
    REAL_SPEECH_START,
    load_published,
    markdown_table_after,
    replace_marked_region,
    results_markdown,
    summary_markdown,
    summary_rows,
)


def summary_text(params: dict, metrics_dir: Path) -> str:
    """The summary table of the default pipeline's runs (params ``experiments``, ``variants`` and ``tunings``)."""
    rows = summary_rows(list(params["experiments"]), runs_on_feature_sets(params),
                        params["active"]["experiments"], metrics_dir)
    return summary_markdown(params["profile"], rows, load_published())


def write_readme(readme: Path, summary: str, real_speech_report: Path | None = None,
                 earnings22_report: Path | None = None) -> None:
    """``summary`` into ``readme``'s results region and, where ``real_speech_report`` (``earnings22_report``)
    exists, its "All talks" table into the real-speech (Earnings-22) region (a README without that region is an
    error naming it)."""
    text = replace_marked_region(readme.read_text(encoding="utf-8"), summary, where=str(readme))
    for report, start, end in ((real_speech_report, REAL_SPEECH_START, REAL_SPEECH_END),
                               (earnings22_report, EARNINGS22_START, EARNINGS22_END)):
        if report is not None and report.is_file():
            table = markdown_table_after(report.read_text(encoding="utf-8"), REAL_SPEECH_HEADING, where=str(report))
            text = replace_marked_region(text, table, where=str(readme), start=start, end=end)
    atomic_write_text(readme, text)


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("pipeline.report", __doc__, out="reports/results.md")
    parser.add_argument("--experiments", nargs="+", help="names to report (default: params' experiments)")
    parser.add_argument("--eval-metrics", action="append", help="folder of EXPERIMENT.json scores (repeatable)")
    parser.add_argument("--train-metrics", action="append", help="folder of EXPERIMENT.json training summaries")
    parser.add_argument("--artifacts", action="append", help="parent of EXPERIMENT/model (repeatable)")
    parser.add_argument("--title", default=None)
    parser.add_argument("--no-analysis", action="store_true",
                        help="skip the analysis plots (which need each model): a report from the metrics and "
                             "whatever plots the artifacts hold")
    option(parser, "--features", "data/features", "cached features (for the analysis plots)")
    option(parser, "--figures", "reports/figures", "folder of the report's figures")
    option(parser, "--metrics", "metrics", "parent of eval/, train/, eval_variants/, train_variants/ (the summary)")
    option(parser, "--summary", "reports/summary.md", "summary table of the default pipeline's runs")
    parser.add_argument("--summary-only", action="store_true", help="write only the summary")
    parser.add_argument("--readme", help="also write the summary (and the real-speech table) into this file's "
                                         "marked regions")
    option(parser, "--real-speech", "reports/real_speech.md",
           "the evaluate_real stage's report, whose \"All talks\" table --readme copies (skipped where absent)")
    option(parser, "--earnings22", "reports/earnings22_test.md",
           "the evaluate_earnings22 stage's report, whose \"All talks\" table --readme copies (skipped where absent)")
    args, params = start(parser, argv)
    if args.summary_only or not args.experiments:
        summary = summary_text(params, Path(args.metrics))
        atomic_write_text(args.summary, summary)
        if args.readme:
            write_readme(Path(args.readme), summary, Path(args.real_speech), Path(args.earnings22))
        if args.summary_only:
            print(summary)
            return 0
    eval_dirs = [Path(p) for p in args.eval_metrics or ["metrics/eval"]]
    train_dirs = [Path(p) for p in args.train_metrics or ["metrics/train"]]
    artifact_dirs = [Path(p) for p in args.artifacts or ["artifacts"]]
    experiments, artifacts_of = {}, {}
    for name in args.experiments or list(params["experiments"]):
        eval_dir = _first_with(eval_dirs, f"{name}.json")
        train_dir = _first_with(train_dirs, f"{name}.json")
        experiments.update(collect_experiments([name], params["active"]["experiments"], eval_dir, train_dir))
        artifacts_of[name] = _first_with(artifact_dirs, name)
    figures = Path(args.figures)
    if figures.exists():
        shutil.rmtree(figures)  # only this run's figures: no stale plot of a dropped experiment
    for name, experiment in experiments.items():
        experiment["figures"] = collect_figures(name, artifacts_of[name], figures)
        if not args.no_analysis:
            experiment["figures"] += analysis_figures(
                name, artifacts_of[name] / name / "model", Path(args.features), params["report"]["example_split"],
                int(params["report"]["example_after_token"]), figures)
    out = Path(args.out)
    text = results_markdown(params["profile"], experiments, load_published(), title=args.title,
                            figures_link=os.path.relpath(figures, out.parent))
    atomic_write_text(out, text)
    print(text)
    return 0


def _first_with(folders: list[Path], name: str) -> Path:
    """The first folder holding ``name`` (the last one if none does, so the error names a real place)."""
    return next((folder for folder in folders if (folder / name).exists()), folders[-1])


if __name__ == "__main__":
    raise SystemExit(main())
