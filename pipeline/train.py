"""DVC stage ``train@EXPERIMENT``: train one experiment of the active profile on the cached features.

    python -m pipeline.train --experiment transformer [--params params.yaml] [--features data/features]

The experiment is ``experiment_defs.EXPERIMENT`` of the params file with the active profile's overrides
(:func:`punctuation.params.experiment_config`). Writes ``artifacts/EXPERIMENT/model`` (best checkpoint by dev
F1, self-contained for ``punctuate``), keeps a resumable checkpoint in ``checkpoints/EXPERIMENT`` and the
summary in ``metrics/train/EXPERIMENT.json``.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.stage import option, stage_parser, start, write_json
from punctuation.params import experiment_config
from punctuation.training import train_model


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("pipeline.train", __doc__, metrics="metrics/train")
    parser.add_argument("--experiment", required=True, help="name under experiment_defs")
    option(parser, "--features", "data/features", "cached features")
    option(parser, "--artifacts", "artifacts", "parent of EXPERIMENT/model")
    option(parser, "--checkpoints", "checkpoints", "parent of EXPERIMENT's resumable checkpoint")
    args, params = start(parser, argv, log=True)

    model_config, train_config = experiment_config(params, args.experiment)
    experiment_dir = Path(args.artifacts) / args.experiment
    result = train_model(
        args.features, experiment_dir / "model", Path(args.checkpoints) / args.experiment,
        model_config=model_config, train_config=train_config,
        window=params["evaluate"]["window"], stride=params["evaluate"]["stride"],
    )
    write_json(Path(args.metrics) / f"{args.experiment}.json", result.metrics, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
