"""The time plan of the paper runs in one GPU lease: each run's schedule against a step rate and the training budget.

Each run's steps are counted as its trainer counts them (``training.batches.schedule_steps`` of its params, never
a fixed count), so a new recipe changes the plan by itself. The rates are measured in the lease (``launch
--measure-steps``: the runs' own first steps) or, before one, assumed (``gpu_kit.assumed_steps_per_s`` of params,
by experiment; docs/method.md, "GPU kit", gives what they rest on).
"""

from __future__ import annotations

from typing import Any, Sequence

from experiments.params import experiment_config
from reporting.paper import PAPER_RUNS
from training.batches import schedule_steps


def run_schedule(params: dict[str, Any], name: str, num_tokens: int) -> tuple[int, dict[str, Any]]:
    """(steps, train settings) of paper run ``name`` on ``num_tokens`` training tokens, as its trainer counts them."""
    _, train = experiment_config(params, PAPER_RUNS[name].experiment)
    steps = schedule_steps(num_tokens, train)
    if train.get("max_steps") is not None:
        steps = min(steps, int(train["max_steps"]))
    return steps, train


def measured_rates(measurement: dict[str, Any]) -> dict[str, float]:
    """The steps/s of each run a launch's measurement (``measure.json``) has a rate for."""
    return {name: float(result["steps_per_second"]) for name, result in measurement.items()
            if isinstance(result, dict) and result.get("steps_per_second")}


def plan_rows(params: dict[str, Any], names: Sequence[str], num_tokens: int, budget_s: float,
              measured: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Each run's schedule, step rate (measured where given, else ``gpu_kit.assumed_steps_per_s`` of params: by
    experiment, else ``default``), the minutes it needs and whether it ends within ``budget_s`` of training."""
    assumed = params["gpu_kit"]["assumed_steps_per_s"]
    rows = []
    for name in names:
        experiment = PAPER_RUNS[name].experiment
        steps, train = run_schedule(params, name, num_tokens)
        rate, source = (measured[name], "measured") if measured and measured.get(name) else \
            (float(assumed.get(experiment, assumed["default"])), "assumed")
        seconds = steps / rate if rate > 0 else float("inf")
        rows.append({"name": name, "experiment": experiment, "batch_size": int(train["batch_size"]),
                     "epochs": int(train["epochs"]), "steps": steps, "steps_per_s": rate, "rate_source": source,
                     "minutes": seconds / 60, "fits": seconds <= budget_s,
                     "reached": min(1.0, budget_s / seconds) if seconds else 1.0})
    return rows


def plan_markdown(rows: list[dict[str, Any]], *, budget_s: float, num_tokens: int, lease_s: float) -> str:
    """The plan as a table and a verdict: which runs end within the lease's training budget."""
    lines = [f"Training budget {budget_s / 60:.0f} min of a {lease_s / 60:.0f}-min lease (all runs at once, "
             f"{num_tokens:,} training tokens).", "",
             "| run | experiment | batch | epochs | steps | steps/s | min needed | ends in the budget |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        verdict = "yes" if row["fits"] else f"no: stops at {100 * row['reached']:.0f} % (a partial record)"
        lines.append(f"| {row['name']} | {row['experiment']} | {row['batch_size']} | {row['epochs']} | {row['steps']:,} "
                     f"| {row['steps_per_s']:.2f} ({row['rate_source']}) | {row['minutes']:.1f} | {verdict} |")
    short = [row["name"] for row in rows if not row["fits"]]
    lines += ["", f"All {len(rows)} runs end within one lease." if not short else
              f"{len(rows) - len(short)} of {len(rows)} runs end within one lease; {', '.join(short)} would need "
              f"{max(row['minutes'] for row in rows):.0f} min at these rates and stop at the deadline with a partial "
              "record (`full_schedule: false`).",
              "", "Training steps only: dev evaluations (every `eval_every_steps` and epoch, `dev_eval_tokens` in "
              "batches of 1,024 windows on a GPU) come on top; when each decoded all 296k dev tokens, four paper "
              "Transformers sharing an H100 spent as long on them as on the steps (docs/results_history.md)."]
    return "\n".join(lines) + "\n"
