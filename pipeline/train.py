"""DVC stage ``train@EXPERIMENT``: train one experiment of the active profile on the cached features.

    python -m pipeline.train --experiment transformer [--params params.yaml] [--features data/features]

Writes ``artifacts/EXPERIMENT/model`` (best checkpoint by dev F1, self-contained for ``punctuate``),
keeps a resumable checkpoint in ``checkpoints/EXPERIMENT`` and the summary in ``metrics/train/EXPERIMENT.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from punctuation.params import experiment_config, load_params
from punctuation.training import train_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiment", required=True, help="name under profiles.<profile>.experiments")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--features", default="data/features")
    parser.add_argument("--artifacts", default="artifacts", help="parent of EXPERIMENT/model")
    parser.add_argument("--checkpoints", default="checkpoints", help="parent of EXPERIMENT's resumable checkpoint")
    parser.add_argument("--metrics", default="metrics/train")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    params = load_params(args.params)
    model_config, train_config = experiment_config(params, args.experiment)
    experiment_dir = Path(args.artifacts) / args.experiment
    result = train_model(
        args.features, experiment_dir / "model", Path(args.checkpoints) / args.experiment,
        model_config=model_config, train_config=train_config,
        window=params["evaluate"]["window"], stride=params["evaluate"]["stride"],
    )
    metrics_path = Path(args.metrics) / f"{args.experiment}.json"
    metrics_path.parent.mkdir(parents=True, exist_ok=True)
    metrics_path.write_text(json.dumps(result.metrics, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result.metrics, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
