"""The paper-profile runs on a GPU, one record each (``metrics/paper/NAME.json``), and their report.

The GPU kit (paper_runs/README.md): the runs on GPU machines lent 15 minutes at a time, records accumulating::

    python -m paper_runs speech2vec           # here, once: Speech2Vec covering the training vocabulary
    python -m paper_runs plan                 # here: which runs the next lease starts, at the best known rates
    python -m paper_runs pack                 # here: every input the runs need -> gpu_kit/kit.zip (<= 56 MiB)
    python -m paper_runs launch --measure-steps 200 --out $OUT   # there, ONE command: unpack, start the
                                                  # runs that end in this lease, measure, start those that then fit,
                                                  # wait, one tarball of the records and rates into $OUT
    python -m paper_runs collect --out $OUT   # there, only while runs are still going
    python -m paper_runs launch --began $T0 --lease-left-s S --out $OUT   # there, a later command of the lease:
                                                  # the last command's state kept as state.N.json, a new deadline
    python -m paper_runs import results.tar.gz        # here: records -> metrics/paper, rates -> metrics/gpu/leases

One run, in this process::

    python -m paper_runs run NAME             # train (optionally --slot-s S: pause, the same command resumes;
                                                  # --stop-after-s S: end for good), score Ref and ASR, record
    python -m paper_runs status | report      # which records exist | reports/paper_results.md from them

``run`` trains NAME (:data:`paper_runs.records.PAPER_RUNS`: an experiment on a feature set, with its own settings) in
the ``paper`` profile with ``pipeline.train``, scores it with ``pipeline.evaluate`` and writes the record (scores +
provenance) and the learning curve (``NAME.history.csv``). ``launch`` starts one ``run`` per run without a complete
record that ends its schedule before the lease's training deadline (:mod:`paper_runs.plan`), each in a session
of its own.
"""

from __future__ import annotations

# The pipeline's numerics first, before any import below loads numpy or torch (embeddings.store does): the runs
# then train as the stages do, and those launched inherit the pinned environment (experiments/numerics.py).
from experiments.numerics import pin_numerics

pin_numerics()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from corpus.io import atomic_write_text  # noqa: E402
from embeddings.store import MANIFEST  # noqa: E402
from experiments.params import load_params  # noqa: E402
from pipeline import evaluate as evaluate_stage  # noqa: E402
from pipeline import train as train_stage  # noqa: E402
from pipeline.stage import StageRecord, option, read_json, setup_logging, write_json  # noqa: E402
from paper_runs import lease as gpu_lease, plan as gpu_plan, processes as gpu_runs, rates as gpu_rates  # noqa: E402
from paper_runs import tarball as gpu_tarball  # noqa: E402
from paper_runs.kit import KIT_FILE, KitError, KitSources, pack_kit  # noqa: E402
from paper_runs.records import (  # noqa: E402
    PAPER_RUNS,
    complete,
    coverage_summary,
    git_commit,
    load_gaps,
    load_records,
    missing_records,
    paper_markdown,
    paper_record,
    plot_records,
    record_path,
    small_profile_scores,
)
from reporting.results import load_published  # noqa: E402

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
                               "--metrics", str(folder / "train"), *budget, *_sets([*spec.settings(), *args.set]),
                               *(["--device", args.device] if args.device else [])])
    if status != 0:
        if status == train_stage.PAUSED_EXIT_STATUS:
            print(f"{name}: paused; run the same command again to go on", flush=True)
        return status
    train_metrics = folder / "train" / f"{spec.experiment}.json"
    train_facts = StageRecord.facts_of(train_metrics)  # before the evaluation, which starts a record of its own
    trained = read_json(folder / spec.experiment / "model" / "config.json")  # the settings it was trained with
    # scored where it trained: the paper profile's GPU (train.device: cuda), not evaluate.device (the CPU)
    status = evaluate_stage.main(["--stage", *common, "--prepared", args.prepared, "--metrics", str(folder / "eval"),
                                  "--device", str(trained["train"]["device"])])
    if status != 0:
        return status

    params = load_params(args.params, profile=PROFILE)
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
    records = load_records(args.records)
    figure = plot_records(records, args.records, Path(args.out).with_name(Path(args.out).stem + "_dev_f1.png"))
    text = paper_markdown(records, load_published(), small=small, default_published=defaults,
                          records_dir=str(args.records), gap_groups=load_gaps(), figure=figure and figure.name)
    atomic_write_text(args.out, text)
    print(text)
    return 0


# ------------------------------------------------------------------------------------------------------ the GPU kit


def _plan_text(params: dict, tokens: int, budget: dict, budget_s: float, known: dict, plan: dict, *,
               recorded: list[str] = (), lease: str = "this lease", budget_why: str = "`--train-budget-s`",
               later_s: float | None = None, probes: dict[str, float] | None = None,
               measure_steps: int | None = None) -> str:
    return gpu_plan.plan_markdown(plan["rows"], budget=budget, budget_s=budget_s, selected=plan["selected"],
                                  overhead=plan["overhead"], num_tokens=tokens, recorded=recorded, known=known,
                                  lease=lease, budget_why=budget_why, later=plan.get("later"), later_s=later_s,
                                  probes=probes, measure_steps=measure_steps)


def plan(args: argparse.Namespace) -> int:
    """Which runs the next lease starts: every run without a complete record, at the best known rates."""
    params = load_params(args.params, profile=PROFILE)
    kit = params["gpu_kit"]
    tokens, source = gpu_plan.train_tokens(args.kit, args.features, params)
    budget = gpu_plan.lease_budget(kit, args.lease_s)
    budget_s = float(args.train_budget_s or budget["train_s"])
    records = load_records(args.records)
    recorded = [name for name in PAPER_RUNS if complete(records.get(name))]
    leases = gpu_rates.load_leases(args.rates_dir or kit["rates_dir"])
    known = gpu_rates.known_rates(leases)
    names = [name for name in PAPER_RUNS if name not in recorded]
    later_s = budget["later"]["train_s"]  # a second command of the lease: the runs that fit it, not the first
    chosen = gpu_plan.lease_plan(params, names, tokens, budget_s, known, mode=args.mode, later_s=later_s)
    # the runs the lease's launch --measure-steps probes beside its first wave (paper_runs/README.md, step 4)
    probes = gpu_plan.probe_plan(chosen["rows"], chosen["selected"], kit=kit, steps=args.measure_steps,
                                 budget_s=budget_s, overhead=chosen["overhead"]) if args.measure_steps else {}
    text = _plan_text(params, tokens, budget, budget_s, known, chosen, recorded=recorded, lease="the next lease",
                      later_s=later_s, probes=probes, measure_steps=args.measure_steps)
    print(text)
    print(f"(training tokens from {source}; rates of {len(leases)} lease(s) in {args.rates_dir or kit['rates_dir']})")
    if args.write:  # the plan committed beside the records (paper_runs/README.md, step 6)
        atomic_write_text(Path(args.write), f"# The next lease's plan\n\nWritten by `python -m paper_runs plan "
                          f"--lease-s {budget['lease_s']:.0f} --write FILE` from {len(recorded)} complete "
                          f"record(s) and the rates of {len(leases)} lease(s).\n\n{text}")
    return 0


def pack(args: argparse.Namespace) -> int:
    """Collect (and build where their sources are here) every input of the paper runs into the kit."""
    params = load_params(args.params, profile=PROFILE)
    inputs = gpu_runs.kit_inputs(params, features=args.features, feature_sets=args.feature_sets,
                                 prepared=args.prepared, build_dir=args.build_dir, encoder=args.encoder)
    if inputs.missing:
        return _error("the kit cannot be packed; missing:\n  " + "\n  ".join(inputs.missing) +
                      "\nBuild them, then run `python -m paper_runs pack` again (it builds "
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
    """Unpack the kit, check the machine and start the runs without a record that end their schedules in this lease;
    with ``--measure-steps``, probe the waiting runs whose rates are assumed (:func:`paper_runs.plan.probe_plan`),
    measure them all and start those that then fit; with ``--out``, wait and collect."""
    # the command's allowances (its training deadline, its collect) count from the command's start: checks run
    # before launch in the same command (the CUDA tests) come out of its training, not out of its collect
    began = time.time() if args.began is None else min(float(args.began), time.time())
    params = load_params(args.params, profile=PROFILE)
    kit = params["gpu_kit"]
    budget = gpu_plan.lease_budget(kit)
    state_dir = Path(args.state)
    site, records_dir, logs, kit_info = (state_dir / name for name in ("site", "records", "logs", "kit_info.json"))
    try:
        facts = gpu_lease.prepare_machine(args.kit, state_dir, device=args.device)
    except gpu_lease.LeaseError as error:
        return _error(str(error))

    state_file = state_dir / "state.json"
    wanted = args.only.split(",") if args.only else list(PAPER_RUNS)
    unknown = [name for name in wanted if name not in PAPER_RUNS]
    if unknown:
        return _error(f"not paper runs: {', '.join(unknown)}")
    state = gpu_runs.load_state(state_file)
    names, skipped = gpu_runs.runs_to_start(wanted, state, [records_dir, Path(args.records)])
    print("".join(f"{name}: {why}, skipped\n" for name, why in skipped.items()), end="")
    going = gpu_runs.alive_runs(state)
    if not state or (names and state["deadline"] - time.time() < 60 and not going):
        # the lease's first command, or a later one: the last command's deadline has passed and none of its runs
        # is alive; its state (and measurement) are kept beside, as state.N.json, and the records stay
        archived = gpu_runs.archive_command(state_dir, state) if state else None
        state = gpu_runs.command_state(state, began, began + gpu_plan.command_training_s(
            budget, train_s=args.train_budget_s, lease_left_s=args.lease_left_s, later=bool(state)),
                                       lease_left_s=args.lease_left_s)
        print(f"command {state['command']} of this lease" + (f" (the last one's state kept as {archived})"
                                                             if archived else "") +
              f": training deadline {state['deadline'] - began:.0f} s after its start" +
              (f", the lease having {args.lease_left_s:.0f} s left" if args.lease_left_s is not None else ""))
        if state["command"] > 1 and args.lease_left_s is None:
            print("warning: a later command without --lease-left-s (the device tool's budget_left_s) may pass the "
                  "lease's end")
    if state["deadline"] - time.time() < 60 and names:
        print(f"the training deadline of command {state.get('command', 1)} has passed or is less than 60 s away "
              f"({state_file})" +
              (f"; runs still going ({', '.join(going)}): collect them, then launch again" if going else ""))
        names = []
    if not names:
        print("nothing to start")
    tokens = read_json(Path("data/features") / MANIFEST)["splits"]["train"]["tokens"]
    known = gpu_rates.known_rates(gpu_rates.load_leases(kit["rates_dir"]))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    alive = [name for name, why in skipped.items() if why.startswith("still running")]
    threads = max(1, cores // max(1, len(names) + len(alive)))
    env = gpu_runs.child_environment(threads=threads, site_dir=site, git_commit=(facts.get("git") or {}).get("commit"))

    launched: set[str] = set()
    probed: dict[str, float] = {}  # run: its slot (s), started only to measure its first steps (no record)
    exit_wait_s = float(kit["probe"]["exit_wait_s"])

    def spawn(row: dict, wave: int, slot_s: float | None = None) -> tuple[int, int]:
        """Start ``row``'s run (a probe with ``slot_s``: ``run --slot-s``, the same command otherwise); (pid, its
        seconds to the training deadline)."""
        name, stop_after = row["name"], int(state["deadline"] - time.time())
        command = [sys.executable, "-m", "paper_runs", "--params", args.params, "--records", str(records_dir),
                   "run", name, "--runs", args.runs, *(["--slot-s", f"{slot_s:g}"] if slot_s is not None else []),
                   "--stop-after-s", str(stop_after), *(["--kit-info", str(kit_info)] if kit_info.is_file() else []),
                   *_sets([f"threads={threads}", *args.set]), *(["--device", args.device] if args.device else [])]
        process = gpu_runs.spawn(command, logs / f"{name}.log", env)
        probe = {"probe": True, "slot_s": slot_s} if slot_s is not None else {}
        state["runs"][name] = {"pid": process.pid, "marker": ["paper_runs", "run", name], "started": time.time(),
                               "log": str(logs / f"{name}.log"), **probe}
        state["plan"]["runs"][name] = {"experiment": row["experiment"], "tokens": row["tokens"],
                                       "mode": row["requested"], "wave": wave,
                                       **({"eager_only": True} if row.get("eager_only") else {}),
                                       **({"probe": True} if probe else {})}
        return process.pid, stop_after

    def probe_ended(name: str) -> bool:
        """Whether run ``name``'s probe has checkpointed and exited (its training folder is locked while it runs),
        waiting for it at most ``exit_wait_s`` past its slot."""
        entry = state["runs"][name]
        until = float(entry["started"]) + float(entry["slot_s"]) + exit_wait_s
        while gpu_runs.pid_alive(int(entry["pid"]), entry["marker"]):
            if time.time() >= until:
                return False
            time.sleep(1.0)
        return True

    def start(wave: int, known_now: dict, running: list[dict], probe_steps: int | None = None) -> list[str]:
        budget_s, waiting = state["deadline"] - time.time(), [n for n in names if n not in launched]
        if not waiting:
            return []
        chosen = gpu_plan.lease_plan(params, waiting, tokens, budget_s, known_now, settings=args.set, running=running)
        probes = gpu_plan.probe_plan(chosen["rows"], chosen["selected"], kit=kit, steps=probe_steps,
                                     budget_s=budget_s, overhead=chosen["overhead"],
                                     running=running) if probe_steps else {}
        print(_plan_text(params, tokens, budget, budget_s, known_now, chosen, lease=f"wave {wave}",
                         budget_why=f"what is left, now, before the training deadline of command "
                                    f"{state.get('command', 1)} of this lease (from its start: the unpacking's "
                                    "allowance and the training, no later than the lease left less scoring, collect "
                                    "and margin)", probes=probes, measure_steps=probe_steps))
        rows = {row["name"]: row for row in chosen["rows"]}
        # a run probed in this command starts again once its probe has exited, after the others
        for name in sorted(chosen["selected"], key=lambda n: bool((state["runs"].get(n) or {}).get("probe"))):
            again = bool((state["runs"].get(name) or {}).get("probe"))
            if again and not probe_ended(name):
                print(f"{name}: its probe (pid {state['runs'][name]['pid']}) still runs {exit_wait_s:.0f} s after "
                      "its slot: not started again")
                continue
            pid, stop_after = spawn(rows[name], wave)
            launched.add(name)
            print(f"{name}: started (pid {pid}, {threads} threads, training ends within {stop_after} s)" +
                  (", resuming from its probe's checkpoint" if again else ""))
        for name, slot in probes.items():
            pid, _ = spawn(rows[name], wave, slot)
            probed[name] = slot
            print(f"{name}: probed (pid {pid}, {threads} threads, a slot of {slot:.0f} s): its rate, "
                  f"{rows[name]['steps_per_s']:.1f} steps/s, is assumed (never measured on a GPU), and at it the run "
                  f"does not end its schedule in this lease; its first {probe_steps} steps are measured, then it "
                  "checkpoints and exits without a record")
        if probes:
            state["plan"]["probes"] = {**(state["plan"].get("probes") or {}), **probes}
        gpu_runs.save_state(state_file, state)
        return [name for name in chosen["selected"] if name in launched]

    running = [gpu_plan.remaining(row, gpu_runs.log_progress(logs / f"{row['name']}.log").get("step", 0))
               for row in gpu_plan.plan_rows(params, alive, tokens, known=known, settings=args.set)]
    first = start(1, known, running, probe_steps=args.measure_steps) if names else []
    state["plan"].setdefault("first_wave", first)
    measured = [*first, *probed]  # the probes are measured with the first wave, and only with --measure-steps
    if measured:
        time.sleep(args.grace_s)  # a run that cannot start at all says so now, not at the first collect
        for name in measured:
            if not gpu_runs.pid_alive(state["runs"][name]["pid"], state["runs"][name]["marker"]):
                print(f"{name}: FAILED at once; the end of {logs / f'{name}.log'}:\n" +
                      gpu_runs.clean_tail(logs / f"{name}.log", 2000))
    if measured and args.measure_steps:  # the runs' own first steps: the measurement costs no training time
        busy: list[float] = []
        results = gpu_runs.measure_running(measured, state, logs, args.measure_steps,
                                           float(kit["measure_timeout_s"]), utilization=busy)
        utilization = round(sum(busy) / len(busy), 3) if busy else None
        print(gpu_rates.measure_markdown(results, logs, gpu_runs.gpu_facts().get("gpu"), utilization))
        write_json(state_dir / "measure.json", results)
        rates = {name: (result or {}).get("steps_per_second") for name, result in results.items()}
        modes = {name: gpu_rates.measured_mode(state["plan"]["runs"][name]) for name in measured}
        rows = gpu_plan.plan_rows(params, measured, tokens, known=known, settings=args.set)
        scale = gpu_plan.calibration(rows, rates, utilization)
        state["plan"].update(utilization=utilization, gpu_busy_scale=scale)
        known = gpu_rates.with_measurement(known, rates, modes, scale, "this lease's first steps")
        running += [gpu_plan.remaining(row, (results.get(row["name"]) or {}).get("steps", 0))
                    for row in gpu_plan.plan_rows(params, first, tokens, known=known, settings=args.set)]
        state["plan"]["second_wave"] = start(2, known, running)
        for name in probed:
            if name not in state["plan"]["second_wave"]:
                rate = rates.get(name)
                print(f"{name}: probed at {f'{rate} steps/s' if rate else 'no rate (see its log)'}; at it the run "
                      "does not end its schedule in what is left, so it stays checkpointed without a record; this "
                      "lease's rates carry its rate to the next plan")
    gpu_runs.save_state(state_file, state)
    only_probed = sum(bool(entry.get("probe")) for entry in state["runs"].values())
    print(f"{len(state['runs'])} runs started in command {state.get('command', 1)} of this lease" +
          (f" ({only_probed} of them only probed: checkpointed, no record)" if only_probed else "") +
          "; `python -m paper_runs collect --out DIR` waits for them")
    if args.out is None:
        return 0
    command_s = gpu_plan.command_length_s(budget, args.lease_left_s)
    wait_s = began + command_s - budget["allowance"]["collect"] - time.time()
    return _collect(params, state_dir, Path(args.records), Path(args.out), max(0.0, wait_s))


def collect(args: argparse.Namespace) -> int:
    """Wait for the runs (at most --wait-s), then one tarball of their records, curves, logs, status and rates."""
    params = load_params(args.params, profile=PROFILE)
    wait_s = float(params["gpu_kit"]["collect_wait_s"] if args.wait_s is None else args.wait_s)
    return _collect(params, Path(args.state), Path(args.records), Path(args.out), wait_s)


def _collect(params: dict, state_dir: Path, repo_records: Path, out: Path, wait_s: float) -> int:
    try:
        return gpu_lease.collect_lease(params["gpu_kit"], state_dir, repo_records, out / TARBALL, wait_s)
    except (gpu_lease.LeaseError, gpu_runs.RunsError) as error:
        return _error(str(error))


def import_records(args: argparse.Namespace) -> int:
    try:
        done = gpu_tarball.import_tarball(args.tarball, args.records, args.status_dir, replace=args.replace)
    except gpu_runs.RunsError as error:
        return _error(str(error))
    for key in ("imported", "unchanged", "kept"):
        print(f"{key}: {', '.join(done[key]) or '–'}")
    rates_dir = args.rates_dir or load_params(args.params, profile=PROFILE)["gpu_kit"]["rates_dir"]
    if gpu_rates.RATES_FILE in done["status"]:
        lease = gpu_rates.file_lease(read_json(Path(args.status_dir) / gpu_rates.RATES_FILE), rates_dir)
        print(f"the lease's measured rates: {lease}")
    print(f"status and log tails in {args.status_dir}; next: python -m paper_runs report, then commit "
          f"{args.records}, {rates_dir} and reports/paper_results.md")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m paper_runs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    option(parser, "--params", "params.yaml", "params file")
    option(parser, "--records", "metrics/paper", "folder of NAME.json records")
    commands = parser.add_subparsers(dest="command", required=True)

    def data_options(sub: argparse.ArgumentParser, runs: str) -> None:
        option(sub, "--features", "data/features", "the word-vector cache")
        option(sub, "--feature-sets", "data/feature_sets", "parent of the other inputs' caches")
        option(sub, "--prepared", "data/prepared", "prepared splits")
        option(sub, "--runs", runs, "parent of each run's checkpoints and model")
        sub.add_argument("--device", help="override train.device of the paper profile (cuda; the run is scored on "
                         "the device it trained on)")
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

    plan_parser = commands.add_parser("plan", help="which runs the next lease starts, at the best known rates")
    option(plan_parser, "--kit", "gpu_kit", "the kit folder (for the training split's size)")
    option(plan_parser, "--features", "data/features", "the word-vector cache (when there is no kit)")
    plan_parser.add_argument("--rates-dir", help="the leases' measured rates (default: gpu_kit.rates_dir)")
    plan_parser.add_argument("--mode", choices=gpu_plan.MODES, help="plan every run in this step mode")
    plan_parser.add_argument("--train-budget-s", type=float, help="override the training the lease holds")
    plan_parser.add_argument("--lease-s", type=float, help="override gpu_kit.lease_s (the training is derived)")
    plan_parser.add_argument("--write", help="also write the plan to this markdown file (metrics/gpu/next_lease.md)")
    plan_parser.add_argument("--measure-steps", type=int, default=200, help="the lease's launch --measure-steps: "
                             "which runs it probes, and their slots (default: 200, as paper_runs/README.md; 0: none)")
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
    launch_parser = commands.add_parser("launch", help="there: unpack, start the runs that end in this lease")
    option(launch_parser, "--kit", "gpu_kit", "the kit folder")
    option(launch_parser, "--state", "gpu_runs/kit", "the runs' state, logs and records on this machine")
    option(launch_parser, "--runs", "gpu_runs/paper", "parent of each run's checkpoints and model")
    launch_parser.add_argument("--measure-steps", type=int, help="then wait until every run has made this many "
                               "steps, print their steps/s and GPU memory, and start the runs that then fit; the "
                               "waiting runs whose rates are assumed are probed beside the first wave (run --slot-s: "
                               "measured, checkpointed, no record) and start in the second wave if they then fit")
    launch_parser.add_argument("--out", help="then collect into this folder (e.g. $OUT) before the command's end")
    launch_parser.add_argument("--only", help="comma-separated runs (default: every paper run)")
    launch_parser.add_argument("--device", help="override train.device (cpu: a rehearsal without a GPU)")
    launch_parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                               help="override a train setting of every run (a rehearsal's tiny schedules)")
    launch_parser.add_argument("--train-budget-s", type=float, help="override the training the lease holds")
    launch_parser.add_argument("--lease-left-s", type=float, metavar="S", help="the lease's device time left when "
                               "this command began (the device tool's budget_left_s): the training deadline is then "
                               "no later than that less scoring, collect and margin, and the collect ends before it")
    launch_parser.add_argument("--grace-s", type=float, default=15.0, help="then look whether each run still runs")
    launch_parser.add_argument("--began", type=float, metavar="EPOCH_S", help="when the lease's command began "
                               "(`date +%%s` before the checks that precede launch in it): the training deadline and "
                               "the collect count from it (default: launch's own start)")
    collect_parser = commands.add_parser("collect", help="there: wait, then one tarball into --out")
    option(collect_parser, "--state", "gpu_runs/kit", "the runs' state, logs and records on this machine")
    collect_parser.add_argument("--out", required=True, help="folder of the tarball (e.g. $OUT)")
    collect_parser.add_argument("--wait-s", type=float, help="wait at most this long (default gpu_kit.collect_wait_s)")
    import_parser = commands.add_parser("import", help="here: the records of a collect tarball into --records")
    import_parser.add_argument("tarball")
    import_parser.add_argument("--replace", action="store_true", help="replace a different partial record")
    option(import_parser, "--status-dir", "logs/gpu_kit", "where its status table and log tails go")
    import_parser.add_argument("--rates-dir", help="where the lease's rates go (default: gpu_kit.rates_dir)")
    args = parser.parse_args(argv)
    setup_logging()
    return {"run": run, "status": status, "report": report, "plan": plan, "pack": pack,
            "speech2vec": speech2vec, "launch": launch, "collect": collect,
            "import": import_records}[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
