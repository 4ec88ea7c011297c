"""DVC stage ``train@EXPERIMENT``: train one experiment of the active profile on the cached features.

    python -m pipeline.train --experiment transformer [--params params.yaml] [--features data/features]

The experiment is ``experiment_defs.EXPERIMENT`` of the params file with the active profile's overrides
(:func:`experiments.params.experiment_config`). Writes ``artifacts/EXPERIMENT/model`` (best checkpoint by dev
F1, self-contained for ``punctuate``), keeps a resumable checkpoint in ``checkpoints/EXPERIMENT`` and the
summary in ``metrics/train/EXPERIMENT.json``.

    python -m pipeline.train --variant RUN --features data/feature_sets/SET --artifacts variant_artifacts/RUN ...

trains run ``RUN`` of ``variants`` (stage ``train_variant@RUN``): its experiment on another feature set, with the
run's own ``train`` settings over the experiment's.

    python -m pipeline.train --tuning RUN --features data/feature_sets/SET --artifacts variant_artifacts/RUN ...

trains run ``RUN`` of ``tunings`` (stage ``tune@RUN``): the trained model of its experiment ``from``
(``--source-artifacts``/FROM/model) tuned on another feature set, its new input columns starting at zero
(:mod:`training.warm_start`).

Outside DVC, the same command takes another profile (``--profile paper``), device (``--device cuda``) or
training setting (``--set KEY=VALUE``, checked like params), and a budget for this call: ``--pause-after-s S``
checkpoints after S seconds and exits with status 3 (the same command resumes there), ``--stop-after-s S``
ends training for good after S seconds and writes the model as it is. Several GPUs train one model with
``torchrun --nproc_per_node N -m pipeline.train ...`` (the global batch stays ``batch_size``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from embeddings.store import FeatureCacheError
from experiments.params import ParamsError, experiment_config, load_params, tuning_config, variant_config
from inference.model_dir import ModelDirectoryError
from pipeline.stage import option, stage_parser, start, write_metrics
from training import Budget, ConfigError, DeviceUnavailable, TrainingFolderLocked, train_model
from training.checkpoints import exit_with_parent
from training.config import PAUSED_EXIT_STATUS, parse_setting
from training.warm_start import WarmStartError

ERROR_EXIT_STATUS = 2


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("pipeline.train", __doc__, metrics="metrics/train")
    runs = parser.add_mutually_exclusive_group(required=True)
    runs.add_argument("--experiment", help="name under experiment_defs")
    runs.add_argument("--variant", help="name under variants (a run of an experiment on another feature set)")
    runs.add_argument("--tuning", help="name under tunings (a trained experiment tuned on another feature set)")
    option(parser, "--features", "data/features", "cached features")
    option(parser, "--artifacts", "artifacts", "parent of EXPERIMENT/model")
    option(parser, "--checkpoints", "checkpoints", "parent of EXPERIMENT's resumable checkpoint")
    option(parser, "--source-artifacts", "artifacts", "parent of FROM/model, the trained model a tuning starts from")
    parser.add_argument("--profile", help="profile of the params file to use (default: the file's own)")
    parser.add_argument("--device", help="auto, cpu, cuda or cuda:N (default: the experiment's train.device)")
    parser.add_argument("--set", type=parse_setting, action="append", default=[], metavar="KEY=VALUE",
                        help="override a train setting (repeatable)")
    parser.add_argument("--pause-after-s", type=float, help="checkpoint after this many seconds and exit with "
                        f"status {PAUSED_EXIT_STATUS}; the same command resumes")
    parser.add_argument("--stop-after-s", type=float, help="end training for good after this many seconds")
    args, params = start(parser, argv, log=True)
    exit_with_parent()  # a killed `dvc repro` takes its trainer with it
    try:
        if args.profile:
            params = load_params(args.params, profile=args.profile)
        init_from = None
        if args.variant:
            args.experiment, model_config, train_config = variant_config(params, args.variant)
        elif args.tuning:
            args.experiment, model_config, train_config = tuning_config(params, args.tuning)
            init_from = Path(args.source_artifacts) / args.experiment / "model"
        else:
            model_config, train_config = experiment_config(params, args.experiment)
        train_config.update({**dict(args.set), **({"device": args.device} if args.device else {})})
        result = train_model(
            args.features, Path(args.artifacts) / args.experiment / "model", Path(args.checkpoints) / args.experiment,
            model_config=model_config, train_config=train_config,
            window=params["evaluate"]["window"], stride=params["evaluate"]["stride"],
            budget=Budget.seconds(pause_after=args.pause_after_s, stop_after=args.stop_after_s), init_from=init_from,
        )
    except (ConfigError, DeviceUnavailable, FeatureCacheError, ParamsError, TrainingFolderLocked, WarmStartError,
            ModelDirectoryError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return ERROR_EXIT_STATUS
    if not result.is_main:  # another process of a distributed run: process 0 writes the results
        return 0 if result.metrics["completed"] else PAUSED_EXIT_STATUS
    if not result.metrics["completed"]:
        print(json.dumps({"experiment": args.experiment, "paused_at_step": result.metrics["steps"],
                          "resume": "run the same command again"}))
        return PAUSED_EXIT_STATUS
    write_metrics(Path(args.metrics) / f"{args.experiment}.json", {**result.metrics, **result.timings}, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
