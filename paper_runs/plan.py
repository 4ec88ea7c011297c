"""The time plan of the paper runs in one GPU lease: which runs end their schedules in it, and why.

Every figure comes from params (``gpu_kit``; paper_runs/README.md, gives what they rest on) or from the
rates earlier leases measured (``metrics/gpu/leases``, :mod:`paper_runs.rates`):

* **the training deadline** (:func:`lease_budget`) is derived from the lease, never set beside it: the lease less
  the machine's start, the unpacking, the scoring, the collect and a margin, and no later than the one command
  (``command_s``) less its unpacking, scoring and collect; a later command of the same lease has the lease left
  less scoring, collect and margin (:func:`command_training_s`), and the plan marks the runs a second command
  would start (``lease_budget(...)["later"]``);
* **each run's steps** are counted as its trainer counts them (``training.batches.schedule_steps`` of its own
  settings, :func:`paper_runs.records.run_config`), so a new recipe changes the plan by itself;
* **its rate**: the best measured one for its run (else its experiment at the same batch) and step mode, else the
  assumed one -- eager: ``gpu_kit.assumed_steps_per_s``; graph: :func:`graph_step_s`, the step's GPU time
  derived from its kernels, its arithmetic and its recurrent time steps;
* **how runs share the GPU**: one process per run; their kernels never overlap, so the GPU is time-sliced and
  their GPU-busy seconds add up. A run ends at :func:`project`: its own pace, or its share of the GPU under fair
  time-slicing (``sum_j min(B_j, B_i)`` times ``time_slice_overhead``), whichever is later, plus its start and its
  dev evaluations;
* **which runs a lease starts** (:func:`select`): in priority order (:data:`paper_runs.records.PAPER_RUNS`, the
  Transformers first), each run that ends within the deadline with every run already chosen still ending in it;
* **which runs it probes** (:func:`probe_plan`): with ``launch --measure-steps``, each waiting run the first wave does
  not start whose rate is assumed trains for a short slot beside it (``run NAME --slot-s S``), so that its rate is
  measured; it checkpoints without a record, and the second wave starts it again if it then fits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from paper_runs.kit import KIT_FILE, read_index
from paper_runs.records import PAPER_RUNS, run_config
from training.batches import schedule_steps

MODES = ("graph", "eager")


def lease_budget(kit: dict[str, Any], lease_s: float | None = None) -> dict[str, Any]:
    """``{"lease_s", "command_s", "train_s", "by_lease", "by_command", "allowance", "later"}``: the seconds of training
    a lease holds (``train_s``, counted from the launch's unpacking on), derived from ``gpu_kit`` of params.

    ``later`` is a second command of the same lease, after the first ran its full ``command_s``: ``{"left_s"}`` (the
    lease left when it starts: the lease less the machine's start and the first command), ``"command_s"`` (what it
    may take: that less the give-back/idle margin, at most ``command_s``) and ``"train_s"`` (its training, counted
    from its start: :func:`command_training_s` of ``left_s``; no machine start, no unpacking, the kit is there)."""
    allowance = {key: float(value) for key, value in kit["allowance_s"].items()}
    lease_s, command_s = float(lease_s or kit["lease_s"]), float(kit["command_s"])
    by_lease = lease_s - sum(allowance.values())
    by_command = command_s - allowance["unpack"] - allowance["scoring"] - allowance["collect"]
    budget = {"lease_s": lease_s, "command_s": command_s, "train_s": max(0.0, min(by_lease, by_command)),
              "by_lease": by_lease, "by_command": by_command, "allowance": allowance}
    left_s = max(0.0, lease_s - allowance["machine_start"] - command_s)
    budget["later"] = {"left_s": left_s, "command_s": command_length_s(budget, left_s),
                       "train_s": command_training_s(budget, lease_left_s=left_s, later=True)}
    return budget


def command_length_s(budget: dict[str, Any], lease_left_s: float | None = None) -> float:
    """How long a command may run (:func:`lease_budget`'s ``budget``): one command's ``command_s``, and, where the
    lease left at its start is known, no longer than that less the give-back/idle margin."""
    if lease_left_s is None:
        return budget["command_s"]
    return max(0.0, min(budget["command_s"], float(lease_left_s) - budget["allowance"]["margin"]))


def command_training_s(budget: dict[str, Any], *, train_s: float | None = None, lease_left_s: float | None = None,
                       later: bool = False) -> float:
    """Seconds from a command's start (``launch --began``) to its training deadline (:func:`lease_budget`'s
    ``budget``): the unpacking's allowance and the training (``train_s``, else the lease's: ``budget["train_s"]``;
    a ``later`` command of the lease: the one command's, ``budget["by_command"]``), and, where the lease left at the
    command's start is known (``lease_left_s``: the device tool's ``budget_left_s``), no later than that less the
    allowances that still apply -- scoring, collect, margin (the machine has started; the unpacking's time is
    inside the command's own seconds)."""
    allowance = budget["allowance"]
    default = budget["by_command"] if later else budget["train_s"]
    offset = allowance["unpack"] + float(default if train_s is None else train_s)
    if lease_left_s is not None:
        offset = min(offset, float(lease_left_s) - allowance["scoring"] - allowance["collect"] - allowance["margin"])
    return max(0.0, offset)


def step_mode(train: dict[str, Any]) -> str:
    """The step mode a run's settings ask for: ``graph`` (``compile: graph``; eager without CUDA) or ``eager``."""
    return "graph" if train.get("compile") == "graph" else "eager"


def graph_step_s(kit: dict[str, Any], experiment: str, train: dict[str, Any]) -> float | None:
    """GPU seconds of one training step of ``experiment`` with ``train``'s batch, derived (paper_runs/README.md):
    ``kernels x kernel_us + MFLOP/token x tokens / tflops + recurrent layers x window x 2 x recurrent_step_us``.
    Replayed as one CUDA graph, this is the step's time; run eagerly, it is what the step keeps the GPU busy."""
    graph = kit["graph"]
    facts = graph["experiments"].get(experiment)
    if facts is None:
        return None
    seq_len, tokens = int(train["seq_len"]), int(train["batch_size"]) * int(train["seq_len"])
    return (float(facts["kernels"]) * float(graph["kernel_us"]) * 1e-6
            + float(facts["mflop_per_token"]) * 1e6 * tokens / (float(graph["tflops"]) * 1e12)
            + float(facts.get("recurrent_layers", 0)) * seq_len * 2 * float(graph["recurrent_step_us"]) * 1e-6)


def dev_eval_s(kit: dict[str, Any], name: str, experiment: str) -> tuple[float, str]:
    """(seconds, where from) of one dev evaluation of paper run ``name`` on the GPU, derived (``gpu_kit.dev_eval``;
    paper_runs/README.md): run eagerly, an evaluation costs ``kernels x kernel_us`` of host time and ``GFLOP /
    tflops`` of arithmetic. A measured evaluation keeps what its own code's counts do not explain (the host's work,
    the checkpoint written after it) and takes the kernels' and arithmetic's part from today's counts, but never
    comes under the fastest evaluation measured (conv's 2.2 s, of which its kernels explain 0.08: the host's share
    that no count shows); without a measurement, the assumed seconds."""
    facts = kit["dev_eval"]

    def part(counts: dict[str, Any]) -> float:
        return (float(counts["kernels"]) * float(facts["kernel_us"]) * 1e-6
                + float(counts["gflop"]) / (float(facts["tflops"]) * 1e3))

    measured = facts["measured"].get(experiment)
    counted = facts["counted"].get(name) or facts["counted"].get(experiment)
    if measured is None or counted is None:
        assumed = facts["assumed_s"]
        return float(assumed.get(experiment, assumed["default"])), "assumed"
    floor = min(float(each["s"]) for each in facts["measured"].values())
    return max(floor, max(0.0, float(measured["s"]) - part(measured)) + part(counted)), "derived"


def run_schedule(params: dict[str, Any], name: str, num_tokens: int,
                 settings: Sequence[str] = ()) -> tuple[int, dict[str, Any]]:
    """(steps, train settings) of paper run ``name`` on ``num_tokens`` training tokens, as its trainer counts them."""
    _, train = run_config(params, name, settings)
    steps = schedule_steps(num_tokens, train)
    if train.get("max_steps") is not None:
        steps = min(steps, int(train["max_steps"]))
    return steps, train


def plan_rows(params: dict[str, Any], names: Sequence[str], num_tokens: int, *, known: dict[str, Any] | None = None,
              mode: str | None = None, settings: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Each run's schedule, step mode, rates (eager and graph: measured where ``known``, :func:`paper_runs.rates.
    known_rates`, has them, else assumed) and what it costs: its own seconds, its GPU-busy seconds, its start and
    dev evaluations. ``mode`` plans every run in that mode instead of the one its settings ask for."""
    kit, known = params["gpu_kit"], known or {"rates": {}, "eval_s": {}, "fallbacks": {}, "scale": None}
    assumed, scale = kit["assumed_steps_per_s"], (known.get("scale") or {}).get("gpu_busy_scale") or 1.0
    rows = []
    for name in names:
        experiment = PAPER_RUNS[name].experiment
        steps, train = run_schedule(params, name, num_tokens, settings)
        tokens = int(train["batch_size"]) * int(train["seq_len"])
        gpu_s = graph_step_s(kit, experiment, train)
        gpu_s = None if gpu_s is None else gpu_s * scale
        rates = {"eager": (float(assumed.get(experiment, assumed["default"])), "assumed"),
                 "graph": (1 / gpu_s, "derived") if gpu_s else (None, "not derived")}
        for which in MODES:
            found = known["rates"].get((name, which)) or known["rates"].get((experiment, tokens, which))
            if found:
                rates[which] = (float(found["steps_per_s"]), f"measured, {found['where']}")
        wanted = mode or step_mode(train)
        planned, note = wanted, None
        refusal = (kit["graph"]["experiments"].get(experiment) or {}).get("eager_only")
        if refusal:
            rates["graph"] = (None, "eager only")
            planned, note = "eager", (f"eager only: {refusal}" if wanted == "graph" else None)
        if wanted == "graph" and name in known.get("fallbacks", {}) and (name, "graph") not in known["rates"]:
            planned, note = "eager", f"fell back to eager: {known['fallbacks'][name]}"
        if rates[planned][0] is None and not refusal:
            planned, note = "eager", f"no graph rate for {experiment} (gpu_kit.graph.experiments)"
        rate = rates[planned][0]
        own_s = steps / rate if rate > 0 else float("inf")
        per_epoch = max(1, schedule_steps(num_tokens, train) // int(train["epochs"]))
        evaluations = steps // int(train["eval_every_steps"]) + min(int(train["epochs"]), -(-steps // per_epoch))
        leases_eval_s = known.get("eval_s") or {}
        measured_eval_s = leases_eval_s.get(name) or leases_eval_s.get((experiment, tokens))
        eval_s, eval_from = (float(measured_eval_s), "measured") if measured_eval_s else dev_eval_s(kit, name, experiment)
        rows.append({"name": name, "experiment": experiment, "batch": f"{train['batch_size']} x {train['seq_len']}",
                     "steps": steps, "requested": wanted, "mode": planned, "note": note, "rates": rates,
                     "steps_per_s": rate, "own_s": own_s, "busy_s": steps * gpu_s if gpu_s else own_s,
                     "eager_only": bool(refusal),
                     "gpu_step_s": None if gpu_s is None else gpu_s / scale, "tokens": tokens,
                     "evaluations": evaluations, "eval_each_s": eval_s, "eval_from": eval_from,
                     "eval_s": evaluations * eval_s, "extra_s": float(kit["run_start_s"]) + evaluations * eval_s})
    return rows


def project(rows: Sequence[dict[str, Any]], overhead: float) -> dict[str, float]:
    """When each of ``rows``, started together, ends (seconds from its start): its own pace or its share of the
    time-sliced GPU (fair sharing: each run ``j`` takes at most ``min(B_j, B_i)`` of the GPU before ``i`` is done),
    whichever is later, plus its start and dev evaluations."""
    return {row["name"]: row["extra_s"] + max(row["own_s"], overhead * sum(min(other["busy_s"], row["busy_s"])
                                                                           for other in rows))
            for row in rows}


def select(rows: Sequence[dict[str, Any]], budget_s: float, overhead: float,
           running: Sequence[dict[str, Any]] = ()) -> list[str]:
    """The runs of ``rows`` to start, in their order: each that ends within ``budget_s`` while every run chosen before
    it and every one ``running`` (what is left of them: :func:`remaining`) still ends within it."""
    chosen: list[dict[str, Any]] = []
    for row in rows:
        if all(end <= budget_s for end in project([*running, *chosen, row], overhead).values()):
            chosen.append(row)
    return [row["name"] for row in chosen]


def remaining(row: dict[str, Any], step: int) -> dict[str, Any]:
    """``row`` of a run that has made ``step`` steps: what is left of its own and GPU-busy seconds and evaluations."""
    left = max(0.0, 1 - step / row["steps"]) if row["steps"] else 0.0
    return {**row, "own_s": row["own_s"] * left, "busy_s": row["busy_s"] * left, "extra_s": row["eval_s"] * left}


def probe_plan(rows: Sequence[dict[str, Any]], selected: Sequence[str], *, kit: dict[str, Any], steps: int,
               budget_s: float, overhead: float, running: Sequence[dict[str, Any]] = ()) -> dict[str, float]:
    """``{run: slot seconds}``: the runs of ``rows`` that ``launch --measure-steps steps`` probes beside the runs
    ``selected`` (its first wave), in their order: each not selected whose planned rate is *assumed* (never measured
    on a GPU, not derived). A probe trains ``slot`` seconds (``run NAME --slot-s``: its start and
    ``gpu_kit.probe.slot_factor`` x the time ``steps`` steps take at its assumed rate, at most ``max_slot_s``),
    enough for the measurement of its first ``steps`` steps, then checkpoints without a record. A probe is left out
    when its slot would reach the deadline (``budget_s``: it would stop for good and write a partial record) or when
    its slot's share of the GPU would make a run ``selected`` or ``running`` end past the deadline."""
    probe, start_s = kit["probe"], float(kit["run_start_s"])
    beside = [*running, *(row for row in rows if row["name"] in selected)]
    slots: dict[str, float] = {}
    for row in rows:
        if row["name"] in selected or row["rates"][row["mode"]][1] != "assumed" or not row["steps_per_s"]:
            continue
        slot = round(min(float(probe["max_slot_s"]),
                         start_s + float(probe["slot_factor"]) * steps / row["steps_per_s"]), 1)
        if slot >= budget_s:
            continue
        # the share of its schedule the slot trains at its rate: that share of its own and GPU-busy seconds
        share = min(1.0, max(0.0, slot - start_s) * row["steps_per_s"] / row["steps"]) if row["steps"] else 0.0
        probed = {**row, "own_s": row["own_s"] * share, "busy_s": row["busy_s"] * share, "extra_s": start_s}
        if all(end <= budget_s for name, end in project([*beside, probed], overhead).items() if name != row["name"]):
            slots[row["name"]] = slot
            beside.append(probed)
    return slots


def calibration(rows: Sequence[dict[str, Any]], measured: dict[str, float], utilization: float | None) -> float | None:
    """How much GPU time a step really takes, relative to :func:`graph_step_s`: the GPU's measured busy share
    (``utilization``, 0-1, while the runs of ``measured`` made their first steps) over the share the derivation
    predicts at their measured rates (``sum_i rate_i x step_i``). None without a utilization or a rate."""
    predicted = sum(measured[row["name"]] * row["gpu_step_s"] for row in rows
                    if row["gpu_step_s"] and measured.get(row["name"]))
    if utilization is None or predicted <= 0:
        return None
    return round(min(5.0, max(0.2, utilization / predicted)), 3)


def train_tokens(kit_dir: str | Path, features: str | Path, params: dict[str, Any]) -> tuple[int, str]:
    """The training split's tokens (what each run's schedule counts): from the kit, the cache here, or params."""
    kit = Path(kit_dir) / KIT_FILE
    if kit.is_file():
        tokens = read_index(kit)["caches"].get("data/features", {}).get("train_tokens")
        if tokens:
            return int(tokens), str(kit)
    manifest = Path(features) / "manifest.json"
    if manifest.is_file():
        return int(json.loads(manifest.read_text(encoding="utf-8"))["splits"]["train"]["tokens"]), str(manifest)
    return int(params["data"]["train_tokens"]), "params data.train_tokens (no cache here)"


def _seconds(value: float) -> str:
    return "–" if value == float("inf") else f"{value:,.0f}"


def plan_markdown(rows: list[dict[str, Any]], *, budget: dict[str, Any], budget_s: float, selected: Sequence[str],
                  overhead: float, num_tokens: int, recorded: Sequence[str] = (), known: dict[str, Any] | None = None,
                  lease: str = "this lease", budget_why: str = "`--train-budget-s`", later: Sequence[str] | None = None,
                  later_s: float | None = None, probes: dict[str, float] | None = None,
                  measure_steps: int | None = None) -> str:
    """The plan: each run's rates (graph and eager, measured or assumed), GPU-busy seconds, when it would end beside
    the runs ``selected``, their sum beside the lease, and which runs ``lease`` starts.

    The header gives the lease's training as derived (``budget["train_s"]``); where the plan has other seconds
    (``budget_s``: what a launch's wave has left before its deadline, or ``--train-budget-s``), it says so beside
    it, with ``budget_why``, so that the two figures never read as one. With ``later_s`` (a second command's
    training, ``budget["later"]``), it gives that command too and marks the runs ``later`` starts in it
    ("starts (2nd command)"), their ends counted from that command's start. With ``probes`` (:func:`probe_plan` of
    ``launch --measure-steps measure_steps``), one line names the runs probed and their slots."""
    allowance = budget["allowance"]
    lines = [f"Lease {budget['lease_s'] / 60:.0f} min of device time: machine start {allowance['machine_start']:.0f} s, "
             f"unpacking {allowance['unpack']:.0f} s, **training {budget['train_s']:.0f} s**, scoring "
             f"{allowance['scoring']:.0f} s, collect {allowance['collect']:.0f} s, margin {allowance['margin']:.0f} s; "
             f"the training is min(lease less allowances {budget['by_lease']:.0f} s, one command of "
             f"{budget['command_s']:.0f} s less unpacking, scoring and collect {budget['by_command']:.0f} s)."
             + (f" **This plan has {budget_s:.0f} s of training**: {budget_why}."
                if round(budget_s) != round(budget["train_s"]) else "")
             + (f" A second command of the lease, after the first at its full {budget['command_s']:.0f} s "
                f"({budget['later']['left_s']:.0f} s of the lease left, {budget['later']['command_s']:.0f} s less the "
                f"margin), has **training {later_s:.0f} s** from its start: min(one command less scoring and collect "
                f"{budget['command_s'] - allowance['scoring'] - allowance['collect']:.0f} s, the lease left less "
                f"scoring, collect and margin {budget['later']['left_s'] - allowance['scoring'] - allowance['collect'] - allowance['margin']:.0f}"
                " s; no machine start, no unpacking)." if later_s is not None else "")
             + f" {num_tokens:,} training tokens.", "",
             "| run | batch | steps | mode | eager steps/s | graph steps/s | graph / eager | GPU-busy s | dev evaluations s | "
             f"ends at s (of {budget_s:.0f}) | {lease} |", "|---|---|---:|---|---|---|---:|---:|---:|---:|---|"]
    later = list(later or [])
    ends = project([row for row in rows if row["name"] in selected], overhead)
    later_ends = project([row for row in rows if row["name"] in later], overhead)
    for row in rows:
        (eager, eager_from), (graph, graph_from) = row["rates"]["eager"], row["rates"]["graph"]
        ratio = f"{graph / eager:.1f}x" if graph and eager else "–"
        verdict = ("starts" if row["name"] in selected else "starts (2nd command)" if row["name"] in later
                   else "next lease")
        end = (_seconds(ends[row["name"]]) if row["name"] in ends else
               f"{_seconds(later_ends[row['name']])} (of {later_s:.0f}, 2nd command)" if row["name"] in later_ends
               else "–")
        mode = row["mode"] + (f" ({row['note']})" if row["note"] else "")
        lines.append(f"| {row['name']} | {row['batch']} | {row['steps']:,} | {mode} | {eager:.1f} ({eager_from}) | "
                     + (f"{graph:.0f} ({graph_from})" if graph else "–") + f" | {ratio} | {_seconds(row['busy_s'])} | "
                     f"{row['evaluations']} x {row['eval_each_s']:.1f} ({row['eval_from']}) = "
                     f"{_seconds(row['eval_s'])} | "
                     f"{end} | {verdict} |")
    busy_all = sum(row["busy_s"] for row in rows)
    busy_chosen = sum(row["busy_s"] for row in rows if row["name"] in selected)
    lines += ["", f"GPU-busy: {_seconds(busy_all)} s for all {len(rows)} runs planned, {_seconds(busy_chosen)} s for the "
              f"{len(selected)} {lease} starts, beside {budget_s:.0f} s of training in a {budget['lease_s']:.0f}-s lease "
              f"(time-slicing overhead x{overhead:g} on top)"
              + (f"; {_seconds(sum(row['busy_s'] for row in rows if row['name'] in later))} s for the {len(later)} "
                 f"of its second command, beside {later_s:.0f} s." if later else ".")]
    if recorded:
        lines.append(f"Complete records, not planned again: {', '.join(recorded)}.")
    if later_s is None:
        lines.append(f"{lease.capitalize()} starts {len(selected)} of {len(rows)}: {', '.join(selected) or 'none'}. "
                     "A run is started only when it ends its schedule within the training deadline at these rates (no "
                     "partial records); the others wait for the next lease, when the rates it measured plan them.")
    else:
        waiting = [row["name"] for row in rows if row["name"] not in selected and row["name"] not in later]
        lines.append(f"{lease.capitalize()} starts {len(selected) + len(later)} of {len(rows)}: in its first command "
                     f"{', '.join(selected) or 'none'}; in a second command {', '.join(later) or 'none'}. A run is "
                     "started only when it ends its schedule within its command's training deadline at these rates "
                     f"(no partial records); {'the others wait' if waiting else 'none waits'} for the lease after"
                     + (f" ({', '.join(waiting)})" if waiting else "") + ", planned with the rates this one measures.")
    if probes:
        lines.append(f"`launch --measure-steps {measure_steps or 'N'}` probes "
                     + ", ".join(f"{name} ({slot:.0f} s)" for name, slot in probes.items())
                     + ": their rates are assumed, never measured, and at them they do not start. Each trains beside "
                     "the first wave for its slot (`run NAME --slot-s S`), is measured, checkpoints and writes no "
                     "record; the second wave starts it again, from its checkpoint, if it then ends its schedule.")
    lines += ["",
              "How the runs share the GPU: one process per run (a failure stays its own; each run's graph capture, "
              "data and memory are its own). Their kernels do not overlap, so the GPU is time-sliced and their "
              "GPU-busy seconds add up. `launch --measure-steps` samples the GPU's utilization while every started run "
              "makes its first steps, scales the derived GPU time per step by what it measured (`gpu_busy_scale`) and "
              "starts a second wave of runs that then fit: near 100 % busy with the rates below the derivation means "
              "time-slicing is the limit (a shared process, a CUDA stream per run, would be next); well below 100 % "
              "means the runs are not GPU-bound."]
    scale = (known or {}).get("scale")
    if scale:
        lines.append(f"GPU time per step scaled by {scale['gpu_busy_scale']:.2f}, as measured in lease {scale['lease']}.")
    if any(row["requested"] == "eager" for row in rows):
        lines.append("Runs planned as eager ask for `compile` other than `graph` in their settings (`--mode graph` "
                     "plans them as graph mode).")
    lines += ["", "Rates: *assumed* eager rates are `gpu_kit.assumed_steps_per_s`; *derived* graph rates are one step's "
              "GPU time, `gpu_kit.graph` (kernels x kernel_us + arithmetic + recurrent time steps; "
              "paper_runs/README.md); *measured* ones are the best of `metrics/gpu/leases` for the run (else its experiment at "
              "the same batch) and mode. Ends include each run's start (`run_start_s`) and its dev evaluations: "
              "*measured*, the fewest seconds a lease measured; *derived*, `gpu_kit.dev_eval` (an eager evaluation's "
              "kernels x kernel_us + arithmetic, with what its measurement's counts did not explain); else *assumed*."]
    return "\n".join(lines) + "\n"


def lease_plan(params: dict[str, Any], names: Sequence[str], num_tokens: int, budget_s: float,
               known: dict[str, Any], *, mode: str | None = None, settings: Sequence[str] = (),
               running: Sequence[dict[str, Any]] = (), later_s: float | None = None) -> dict[str, Any]:
    """``{"rows", "selected", "later", "overhead"}``: :func:`plan_rows` of ``names`` and which of them start
    (:func:`select`) within ``budget_s`` beside the rows ``running``; with ``later_s`` (a second command's training,
    ``lease_budget(...)["later"]["train_s"]``), which of the others then start in a second command of the lease, on
    a GPU the first command's runs have left (``later``; empty without it)."""
    rows = plan_rows(params, names, num_tokens, known=known, mode=mode, settings=settings)
    overhead = float(params["gpu_kit"]["graph"]["time_slice_overhead"])
    selected = select(rows, budget_s, overhead, running)
    later = [] if later_s is None else select([row for row in rows if row["name"] not in selected], later_s, overhead)
    return {"rows": rows, "selected": selected, "later": later, "overhead": overhead}
