"""The paper-profile runs on a GPU, one record each (``metrics/paper/NAME.json``), and their report.

    python -m pipeline.paper run next            # the first run without a record (or: run NAME)
    python -m pipeline.paper status              # which records exist, which are missing
    python -m pipeline.paper report              # reports/paper_results.md from the records

``run`` trains NAME (:data:`reporting.paper.PAPER_RUNS`: an experiment on a feature set) in the
``paper`` profile with ``pipeline.train`` for at most ``--slot-s`` seconds, checkpointing under ``--runs``; a
call whose slot ends first exits with status 3 and the same command resumes. The call that finishes the
schedule scores Ref and ASR with ``pipeline.evaluate`` and writes the record (scores + provenance) and the
learning curve (``NAME.history.csv``). Each call is one experiment, so each fits a time-limited GPU command.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from corpus.io import atomic_write_text
from experiments.params import load_params
from pipeline import evaluate as evaluate_stage
from pipeline import train as train_stage
from pipeline.stage import StageRecord, option, read_json, setup_logging, write_json
from reporting.paper import (
    PAPER_RUNS,
    load_records,
    missing_records,
    paper_markdown,
    paper_record,
    record_path,
    small_profile_scores,
)
from reporting.results import load_published

PROFILE = "paper"


def run(args: argparse.Namespace) -> int:
    name = args.name
    if name == "next":
        missing = missing_records(args.records)
        if not missing:
            print(f"all {len(PAPER_RUNS)} records present in {args.records}")
            return 0
        name = missing[0]
    if name not in PAPER_RUNS:
        print(f"error: {name!r} is not a paper run ({', '.join(PAPER_RUNS)})", file=sys.stderr)
        return 2
    spec = PAPER_RUNS[name]
    features = spec.features(args.features, args.feature_sets)
    folder = Path(args.runs) / name
    print(f"paper run {name}: {spec.experiment} on {features}", flush=True)
    common = ["--experiment", spec.experiment, "--params", args.params, "--features", str(features),
              "--artifacts", str(folder)]
    status = train_stage.main([*common, "--profile", PROFILE, "--checkpoints", str(folder / "checkpoints"),
                               "--metrics", str(folder / "train"), "--pause-after-s", str(args.slot_s),
                               *(["--device", args.device] if args.device else [])])
    if status != 0:
        if status == train_stage.PAUSED_EXIT_STATUS:
            print(f"{name}: paused; run the same command again to go on", flush=True)
        return status
    train_metrics = folder / "train" / f"{spec.experiment}.json"
    train_facts = StageRecord.facts_of(train_metrics)  # before the evaluation, which starts a record of its own
    status = evaluate_stage.main(["--stage", *common, "--prepared", args.prepared, "--metrics", str(folder / "eval")])
    if status != 0:
        return status

    params = load_params(args.params, profile=PROFILE)
    trained = read_json(folder / spec.experiment / "model" / "config.json")  # the settings it was trained with
    record = paper_record(
        name, scores=read_json(folder / "eval" / f"{spec.experiment}.json"),
        # the record is provenance, not a DVC output: it keeps the wall times the metrics file leaves out
        train_metrics={**read_json(train_metrics), **train_facts},
        model_config=trained["model"], train_config=trained["train"], features_dir=features, window=int(trained["window"]),
        stride=int(trained["stride"]), profile=PROFILE,
        published=spec.published or params["active"]["experiments"][spec.experiment].get("published"))
    path = write_json(record_path(args.records, name), record)
    shutil.copyfile(folder / spec.experiment / "model" / "history.csv", path.with_suffix(".history.csv"))
    print(json.dumps({"record": str(path), "steps": record["run"]["steps_completed"],
                      "ref_f1": record["ref"]["OVERALL"]["f1"], "asr_f1": record["asr"]["OVERALL"]["f1"]}))
    return 0


def status(args: argparse.Namespace) -> int:
    missing = missing_records(args.records)
    for name in PAPER_RUNS:
        print(f"{name}: {'missing' if name in missing else 'recorded'}")
    print(f"{len(PAPER_RUNS) - len(missing)} of {len(PAPER_RUNS)} records in {args.records}")
    return 0


def report(args: argparse.Namespace) -> int:
    params = load_params(args.params, profile=PROFILE)
    defaults = {name: e.get("published") for name, e in params["active"]["experiments"].items()}
    small = {name: small_profile_scores(name, args.eval_metrics, args.variant_metrics) for name in PAPER_RUNS}
    text = paper_markdown(load_records(args.records), load_published(), small=small, default_published=defaults,
                          records_dir=str(args.records))
    atomic_write_text(args.out, text)
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.paper", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    option(parser, "--params", "params.yaml", "params file")
    option(parser, "--records", "metrics/paper", "folder of NAME.json records")
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="train, score and record one paper run")
    run_parser.add_argument("name", help=f"'next' or one of: {', '.join(PAPER_RUNS)}")
    run_parser.add_argument("--slot-s", type=float, default=480.0,
                            help="seconds of training in this call before it checkpoints (default: 480)")
    option(run_parser, "--features", "data/features", "the word-vector cache")
    option(run_parser, "--feature-sets", "data/feature_sets", "parent of the other inputs' caches")
    option(run_parser, "--prepared", "data/prepared", "prepared splits")
    option(run_parser, "--runs", "gpu_runs/paper", "parent of each run's checkpoints and model")
    run_parser.add_argument("--device", help="override train.device (default: auto)")
    commands.add_parser("status", help="which records exist")
    report_parser = commands.add_parser("report", help="render the records")
    option(report_parser, "--out", "reports/paper_results.md", "the report")
    option(report_parser, "--eval-metrics", "metrics/eval", "small-profile scores of each experiment")
    option(report_parser, "--variant-metrics", "metrics/eval_variants", "small-profile scores of each variant")
    args = parser.parse_args(argv)
    setup_logging()
    return {"run": run, "status": status, "report": report}[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
