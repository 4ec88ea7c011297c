"""Evaluate punctuation predictions with the IWSLT2011 scorer.

File mode::

    python -m pipeline.evaluate REFERENCE PREDICTION

prints one JSON object (the :func:`evaluation.scoring.score_files` result) to stdout
and exits 0. A malformed file, a token mismatch between the two files or an unreadable
file is reported on stderr (naming the file and line) with exit code 2.

Stage mode (the DVC ``evaluate`` stage)::

    python -m pipeline.evaluate --stage --experiment NAME [--params params.yaml] ...

runs the experiment's trained model (``artifacts/NAME/model``) on the test sets (the ``evaluate`` section
of the params file) through the decoding path of ``punctuate`` (:mod:`evaluation.benchmark`), writes the
predictions and confusion matrices to ``artifacts/NAME/predictions`` and the scores, with the model directory
they belong to, to ``metrics/eval/NAME.json`` (the ``report`` stage puts all experiments side by side). The
experiments of ``evaluate.segmented_experiments`` are also scored with the input cut at the gold sentence ends
(``evaluate.segmented_splits``, recorded as ``<split>_segmented``).

Where it decodes: ``evaluate.device`` (``cpu`` in params.yaml: a GPU that happens to be visible does not change
the stage's outputs; ``--device`` asks for another, as the paper runs ask for theirs), on ``evaluate.threads``
torch threads (the labels are the same bytes on 1, 2 or 8: tests/test_inference_threads.py). Both go to the
stage's record in ``logs/timings/`` with the numeric environment.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

import torch

from corpus.iwslt import IwsltFormatError
from inference.device import DeviceUnavailable
from evaluation.scoring import TokenMismatchError, score_files
from experiments.params import load_params
from pipeline.stage import StageRecord, option, write_metrics

EXIT_OK = 0
EXIT_INPUT_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.evaluate",
        description="Score word<TAB>LABEL predictions against a reference (IWSLT2011 scorer).",
    )
    parser.add_argument("reference", type=Path, nargs="?", help="reference word<TAB>LABEL file")
    parser.add_argument("prediction", type=Path, nargs="?", help="predicted word<TAB>LABEL file")
    stage = parser.add_argument_group("stage mode")
    stage.add_argument("--stage", action="store_true", help="evaluate the trained model on the test sets")
    stage.add_argument("--experiment", help="name under experiment_defs")
    option(stage, "--params", "params.yaml", "params file")
    option(stage, "--features", "data/features", "cached features")
    option(stage, "--prepared", "data/prepared", "prepared splits")
    option(stage, "--artifacts", "artifacts", "parent of NAME/model and NAME/predictions")
    option(stage, "--metrics", "metrics/eval", "folder of NAME.json")
    stage.add_argument("--device", help="auto, cpu, cuda or cuda:N (default: evaluate.device of the params)")
    return parser


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_INPUT_ERROR


def score_command(reference: str | Path, prediction: str | Path) -> int:
    """Score two files, print the scores as one JSON object; return the exit code."""
    try:
        scores = score_files(reference, prediction)
    except (IwsltFormatError, TokenMismatchError) as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"cannot read {exc.filename or ''}: {exc.strerror or exc}")
    print(json.dumps(scores))
    return EXIT_OK


def stage_command(args: argparse.Namespace) -> int:
    """Evaluate one experiment's trained model on the test splits named in params (``evaluate.test_splits``)."""
    from evaluation.benchmark import evaluate_model

    StageRecord.begin("pipeline.evaluate")  # its wall time in logs/timings/ like every other stage's
    settings = load_params(args.params)["evaluate"]
    experiment_dir = Path(args.artifacts) / args.experiment
    device = args.device or str(settings["device"])
    threads = settings.get("threads")  # a params file without it: torch's count as it is (recorded all the same)
    try:
        results = evaluate_model(
            experiment_dir / "model", args.prepared, experiment_dir / "predictions",
            splits=list(settings["test_splits"]), batch_size=int(settings["batch_size"]),
            device=device, threads=None if threads is None else int(threads), features_dir=args.features,
            segmented_splits=(list(settings.get("segmented_splits") or [])
                              if args.experiment in (settings.get("segmented_experiments") or []) else []),
        )
    except (DeviceUnavailable, FileNotFoundError, ValueError) as error:
        return _error(str(error))
    StageRecord.add({"device": device, "torch_threads": torch.get_num_threads()})
    write_metrics(Path(args.metrics) / f"{args.experiment}.json", results, echo=True)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.stage:
        if args.reference or args.prediction:
            parser.error("--stage takes no REFERENCE/PREDICTION files")
        if not args.experiment:
            parser.error("--stage needs --experiment NAME")
        return stage_command(args)
    if args.reference is None or args.prediction is None:
        parser.error("give REFERENCE and PREDICTION files (or --stage)")
    return score_command(args.reference, args.prediction)


if __name__ == "__main__":
    raise SystemExit(main())
