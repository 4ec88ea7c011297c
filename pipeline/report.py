"""DVC stage ``report``: all experiments side by side with the published figures (reports/results.md)."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from punctuation.params import load_params
from punctuation.reporting import (
    analysis_figures,
    collect_experiments,
    collect_figures,
    load_published,
    results_markdown,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--eval-metrics", default="metrics/eval")
    parser.add_argument("--train-metrics", default="metrics/train")
    parser.add_argument("--artifacts", default="artifacts")
    parser.add_argument("--features", default="data/features")
    parser.add_argument("--figures", default="reports/figures")
    parser.add_argument("--out", default="reports/results.md")
    args = parser.parse_args(argv)
    params = load_params(args.params)
    experiments = collect_experiments(list(params["experiments"]), params["active"]["experiments"],
                                      Path(args.eval_metrics), Path(args.train_metrics))
    figures = Path(args.figures)
    if figures.exists():
        shutil.rmtree(figures)  # only this run's figures: no stale plot of a dropped experiment
    for name, experiment in experiments.items():
        experiment["figures"] = collect_figures(name, Path(args.artifacts), figures) + analysis_figures(
            name, Path(args.artifacts) / name / "model", Path(args.features), params["report"]["example_split"],
            int(params["report"]["example_after_token"]), figures)
    text = results_markdown(params["profile"], experiments, load_published())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
