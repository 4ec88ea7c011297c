"""Train and evaluate one experiment within a wall-clock budget, e.g. a paper configuration on a borrowed GPU.

    python scripts/time_boxed_run.py --experiment transformer --profile paper --budget-s 420 \\
        --features data/features --prepared data/prepared --out runs/transformer [--set dev_eval_tokens=100000]

The papers' configurations train for many epochs; a GPU slot is often shorter. This measures the
experiment's own step rate (a short throw-away run), sets ``max_steps`` so that training fits the budget
(with ``eval_every_steps`` giving ``--evals`` dev evaluations), trains through the library
(:func:`punctuation.training.train_model` under a :class:`punctuation.train_config.Budget`: this script holds
no training loop of its own; everything else as in ``params.yaml``), scores Ref and ASR
(:func:`punctuation.evaluation.evaluate_model`) and writes ``run.json``: the exact settings used (so the run
can be repeated with ``pipeline.train`` and those settings), the step rate, the training summary and the
scores. Several experiments can share one GPU: start one process each.

A schedule longer than one slot (each command on a borrowed GPU is time-limited) runs in several calls:

    python scripts/time_boxed_run.py --experiment transformer --profile paper --steps schedule \
        --pause-after-s 540 --out runs/transformer ...

trains a fixed number of steps (``schedule`` = the profile's whole schedule, or a number) without calibration,
checkpoints under ``OUT/state`` when this call's time is up and exits with status 3; the same command again
resumes there (the checkpoint is reused only if every setting matches), and the call that finishes the schedule
scores the test sets and writes ``run.json`` like a budgeted run.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus.io import atomic_write_text  # noqa: E402
from embeddings.cache import read_manifest  # noqa: E402
from punctuation.evaluation import evaluate_model  # noqa: E402
from punctuation.params import ParamsError, experiment_config, load_params  # noqa: E402
from punctuation.checkpoints import exit_with_parent  # noqa: E402
from punctuation.train_config import PAUSED_EXIT_STATUS, parse_setting  # noqa: E402
from punctuation.training import CHECKPOINT_FILE, Budget, choose_device, schedule_steps, train_model  # noqa: E402

CALIBRATION_STEPS = 60


def _calibrate(out: Path, features: str, model_config: dict, train_config: dict, window: int,
               stride: int) -> tuple[float, float]:
    """The step rate of this experiment on this machine (throw-away state; includes warm-up, so conservative)."""
    calibration_dir = out / "calibration"
    shutil.rmtree(calibration_dir, ignore_errors=True)
    started = time.perf_counter()
    train_model(features, calibration_dir / "model", calibration_dir / "state", model_config=model_config,
                train_config=train_config, window=window, stride=stride, budget=Budget(steps=CALIBRATION_STEPS))
    state = torch.load(calibration_dir / "state" / CHECKPOINT_FILE, map_location="cpu", weights_only=False)["state"]
    shutil.rmtree(calibration_dir, ignore_errors=True)
    return state["step"] / max(state["train_seconds"], 1e-9), time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiment", required=True, help="name under experiment_defs")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--profile", default=None, help="profile to use (default: the file's own)")
    parser.add_argument("--features", default="data/features")
    parser.add_argument("--prepared", default="data/prepared")
    parser.add_argument("--out", type=Path, required=True)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--budget-s", type=float, help="seconds for calibration and training, dev evaluations included "
                      "(the final Ref/ASR scoring comes on top)")
    mode.add_argument("--steps", help="train exactly this many steps ('schedule' = the profile's whole schedule), "
                      "resumably; with --pause-after-s across several calls")
    parser.add_argument("--pause-after-s", type=float, default=None,
                        help="with --steps: checkpoint and exit with status 3 after this many seconds of training")
    parser.add_argument("--stop-after-s", type=float, default=None,
                        help="with --steps: end training for good after this many seconds of this call (the last "
                        "slot of a schedule that does not fit): score what there is, record the steps reached")
    parser.add_argument("--evals", type=int, default=None, help="dev evaluations in the run (default: 4 for a "
                        "budgeted run; a fixed-steps run keeps the profile's eval_every_steps)")
    parser.add_argument("--published", default=None, help="the published row to show beside the run, e.g. "
                        "yi_tao_2019/speech for another input; 'none' for no row (default: the experiment's own)")
    parser.add_argument("--set", type=parse_setting, action="append", default=[], metavar="KEY=VALUE",
                        help="override a train setting of the experiment (repeatable)")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps != "schedule" and not args.steps.isdigit():
        parser.error(f"--steps wants a number or 'schedule', got {args.steps!r}")
    if args.steps is None and (args.pause_after_s is not None or args.stop_after_s is not None):
        parser.error("--pause-after-s and --stop-after-s go with --steps (a budgeted run ends at its budget)")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    exit_with_parent()

    params = load_params(args.params, profile=args.profile)
    model_config, train_config = experiment_config(params, args.experiment)
    unknown = sorted(key for key, _ in args.set if key not in train_config)
    if unknown:  # a typo would otherwise be recorded as a setting that changed nothing
        raise ParamsError(f"--set: {', '.join(unknown)} is not a train setting of {args.experiment!r} "
                          f"(settings: {', '.join(sorted(train_config))})")
    train_config.update(dict(args.set))
    window, stride = int(params["evaluate"]["window"]), int(params["evaluate"]["stride"])
    train_tokens = int(read_manifest(args.features)["splits"]["train"]["tokens"])
    planned_steps = schedule_steps(train_tokens, train_config)
    args.out.mkdir(parents=True, exist_ok=True)

    # 1. how many steps: a fixed number, or as many as the measured step rate fits into the budget
    if args.steps is not None:
        steps_per_second, calibration_seconds = None, 0.0
        fixed_steps = planned_steps if args.steps == "schedule" else int(args.steps)
    else:
        steps_per_second, calibration_seconds = _calibrate(args.out, args.features, model_config, train_config,
                                                           window, stride)
        # the budgeted run: ~10 % of the budget is kept for the dev evaluations
        fixed_steps = max(int(steps_per_second * (args.budget_s - calibration_seconds) * 0.9), 1)
    train_config["max_steps"] = fixed_steps if train_config.get("max_steps") is None else min(
        fixed_steps, int(train_config["max_steps"]))
    evals = args.evals if args.evals is not None or args.steps is not None else 4
    if evals is not None:  # None: a fixed-steps run keeps the profile's eval_every_steps
        train_config["eval_every_steps"] = max(train_config["max_steps"] // max(evals, 1), 1)

    # 2. training: the step budget of a budgeted run is an estimate, so its deadline makes the budget hard
    # whatever the rate turns out to be; a fixed-steps run pauses instead and is resumed by the next call
    started = time.perf_counter()
    stop_after = args.budget_s - calibration_seconds if args.budget_s is not None else args.stop_after_s
    budget = Budget.seconds(pause_after=args.pause_after_s, stop_after=stop_after)
    result = train_model(args.features, args.out / "model", args.out / "state", model_config=model_config,
                         train_config=train_config, window=window, stride=stride, budget=budget)
    wall_seconds = time.perf_counter() - started
    if not result.metrics["completed"]:
        print(json.dumps({"experiment": args.experiment, "paused_at_step": result.metrics["steps"],
                          "of_steps": train_config["max_steps"], "resume": "run the same command again"}))
        return PAUSED_EXIT_STATUS
    shutil.rmtree(args.out / "state", ignore_errors=True)

    # 3. Ref and ASR
    scores = evaluate_model(args.out / "model", args.features, args.prepared, args.out / "predictions",
                            splits=list(params["evaluate"]["test_splits"]), window=window, stride=stride,
                            batch_size=int(params["evaluate"]["batch_size"]), device=str(params["evaluate"]["device"]))
    device = choose_device(str(train_config["device"]))
    record = {
        "experiment": args.experiment, "profile": params["profile"], "features": str(args.features),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__, "budget_s": args.budget_s, "fixed_steps": args.steps,
        "published": (None if args.published == "none"
                      else args.published or params["active"]["experiments"][args.experiment].get("published")),
        "planned_steps": planned_steps, "train_tokens_per_epoch": train_tokens,
        "calibration_steps_per_second": None if steps_per_second is None else round(steps_per_second, 2),
        "model": model_config, "train": train_config,
        "train_result": result.metrics,
        # of this call only when the run was resumed (train_result.train_seconds covers every call)
        "train_wall_seconds": round(wall_seconds, 1),
        "eval": scores,
    }
    atomic_write_text(args.out / "run.json", json.dumps(record, indent=2) + "\n")
    summary = {split: round(100 * s["OVERALL"]["f1"], 1) for split, s in scores.items()}
    print(json.dumps({"experiment": args.experiment, "steps": result.metrics["steps"], "overall_f1": summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
