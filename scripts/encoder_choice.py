"""How to spend a CPU budget on the pretrained-encoder punctuator: dev F1 against training minutes, per choice.

    python scripts/encoder_choice.py [--out reports/encoder_choice] [--work runs/encoder_choice] [--minutes 10]
                                     [--choices ft_lr1e-4 frozen ...] [--report reports/encoder_choice.md]

Each choice is experiment ``minilm`` of params.yaml (profile ``small``) with a few settings changed: fine-tuned
or frozen layers, fewer layers, the subword a word's label is read at, the window, the learning rate, the batch.
For every choice the script

1. measures its training speed alone (no dev evaluation; runs of ``--rate-steps`` and three times as many steps,
   the rate of their difference): steps per second on this machine -- all choices' speeds first, one after the
   other; keep the CPU otherwise idle, it is the only timed part;
2. then trains it for the steps those minutes buy (``--minutes`` x 60 x steps/s), scoring the first ``dev_eval_tokens``
   tokens of dev2012 eight times on the way (the same model selection as the pipeline). Steps, not seconds,
   bound this run, so its curve does not depend on what else the machine did meanwhile.

Each choice's result (its measured speed and dev-F1 curve) is a small JSON file in ``--out``, committed with the
report; the trained models stay in ``--work``. A choice whose results exist is not run again (an interrupted call
resumes, and the report can be redrawn from the committed results alone). Rows of an earlier measurement whose
curves were not kept (``earlier_rows.json`` in ``--out``: the table's figures only) are listed below the others,
marked as such. The report plots dev F1 against
training minutes (steps / measured steps per second) for every choice, tabulates dev F1 at fixed minutes, and
is what the ``small`` profile's ``minilm`` settings were chosen by. Needs ``data/features`` (``dvc repro embed``).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy or torch loads (experiments/numerics.py)

from corpus.io import atomic_write_text  # noqa: E402
from experiments.params import experiment_config, load_params, merged  # noqa: E402

#: name -> (what it is, model overrides, train overrides) of experiment minilm in the small profile
CHOICES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "ft_lr1e-4": ("fine-tune all 6 layers, lr 1e-4, batch 16 x 100 words, label at the last subword", {},
                  {"lr": 0.0001}),
    "ft_lr2e-4": ("as ft_lr1e-4, lr 2e-4", {}, {"lr": 0.0002}),
    "ft_lr4e-4": ("as ft_lr1e-4, lr 4e-4", {}, {"lr": 0.0004}),
    "ft_lr8e-4": ("as ft_lr1e-4, lr 8e-4", {}, {"lr": 0.0008}),
    "ft_batch8": ("as ft_lr2e-4, batch 8 (twice the steps for the same words)", {}, {"lr": 0.0002, "batch_size": 8}),
    "ft_first_subword": ("as ft_lr2e-4, label at the first subword", {"label_subword": "first"}, {"lr": 0.0002}),
    "ft_window50": ("as ft_lr2e-4, windows of 50 words (batch 32)", {}, {"lr": 0.0002, "seq_len": 50,
                                                                         "batch_size": 32}),
    "ft_4_layers": ("the first 4 of 6 layers, fine-tuned, lr 2e-4", {"layers": 4}, {"lr": 0.0002}),
    "top3": ("embeddings and layers 1-3 frozen, layers 4-6 fine-tuned, lr 2e-4", {"freeze_layers": 3},
             {"lr": 0.0002}),
    "frozen": ("the encoder frozen: features only, the classifier trained", {"freeze_layers": 6}, {"lr": 0.001}),
    "frozen_mix_blstm": ("the encoder frozen; a learned mix of its layers read by a BiLSTM (256 per direction)",
                         {"freeze_layers": 6, "layer_mix": True, "head": "blstm", "head_hidden": 256},
                         {"lr": 0.001}),
    "ft_mix_blstm": ("as ft_lr2e-4; a learned mix of the layers read by a BiLSTM (256 per direction)",
                     {"layer_mix": True, "head": "blstm", "head_hidden": 256}, {"lr": 0.0002}),
    "ft_lr4e-4_mix_blstm": ("as ft_mix_blstm, lr 4e-4", {"layer_mix": True, "head": "blstm", "head_hidden": 256},
                            {"lr": 0.0004}),
    "ft_4_layers_lr4e-4_mix_blstm_first": (
        "the best of each: 4 layers, lr 4e-4, layer mix and BiLSTM head, label at the first subword",
        {"layers": 4, "layer_mix": True, "head": "blstm", "head_hidden": 256, "label_subword": "first"},
        {"lr": 0.0004}),
}
EVALUATIONS = 8


def choice_config(params: dict, name: str) -> tuple[dict, dict]:
    model, train = experiment_config(params, "minilm")
    _, model_changes, train_changes = CHOICES[name]
    return merged(model, model_changes, f"choice {name}", "model"), merged(train, train_changes, f"choice {name}",
                                                                           "train")


def measure_rate(name: str, model: dict, train: dict, features: Path, work: Path, steps: int) -> float:
    """Steps per second of the choice's training alone (no dev evaluation): two runs, of ``steps`` and of
    ``3 * steps`` steps, and the rate of the difference -- what the first steps cost beyond the others (loading,
    allocation, warm-up) cancels out."""
    from training import train_model

    seconds = []
    for count in (steps, 3 * steps):
        shutil.rmtree(work, ignore_errors=True)
        settings = {**train, "max_steps": count, "eval_every_steps": 10 * count, "log_every_steps": count}
        result = train_model(features, work / "model", work / "state", model_config=model, train_config=settings,
                             window=100, stride=50)
        # the final dev evaluation is counted apart (eval_seconds); train_seconds is the steps alone
        seconds.append(result.timings["train_seconds"])
    shutil.rmtree(work, ignore_errors=True)
    return 2 * steps / (seconds[1] - seconds[0])


def train_curve(model: dict, train: dict, features: Path, work: Path, steps: int, window: int, stride: int) -> dict:
    from training import train_model

    settings = {**train, "max_steps": steps, "eval_every_steps": max(steps // EVALUATIONS, 1)}
    result = train_model(features, work / "model", work / "state", model_config=model, train_config=settings,
                         window=window, stride=stride)
    with open(work / "model" / "history.csv", encoding="utf-8") as handle:
        history = [row for row in csv.DictReader(handle) if row["dev_f1"]]
    return {"metrics": result.metrics, "curve": [[int(row["step"]), float(row["dev_f1"])] for row in history]}


def best_by(curve: list[list[float]], rate: float, minutes: float) -> float | None:
    """The best dev F1 reached within ``minutes`` of training (the model the pipeline would keep)."""
    reached = [f1 for step, f1 in curve if step / rate / 60 <= minutes + 1e-9]
    return max(reached) if reached else None


def report(results: dict[str, dict], minutes: float, figure: Path, figure_link: str,
           earlier: list[dict] | None = None) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for name, result in results.items():
        xs = [step / result["steps_per_second"] / 60 for step, _ in result["curve"]]
        ax.plot(xs, [100 * f1 for _, f1 in result["curve"]], marker="o", label=name)
    ax.set_xlabel("training minutes on this machine (steps / measured steps per second)")
    ax.set_ylabel("dev F1 (%)")
    ax.set_title("The pretrained-encoder punctuator: dev F1 per CPU minute")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    figure.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(figure, dpi=110, bbox_inches="tight")
    plt.close(fig)
    marks = [minutes * share for share in (0.25, 0.5, 0.75, 1.0)]
    lines = ["# The pretrained-encoder punctuator on a CPU budget", "",
             "Experiment `minilm` (MiniLM-L6 of the pinned package, `models/encoder_tagger.py`) in the `small` "
             "profile, one setting changed per row; written by `python scripts/encoder_choice.py`. Dev F1 is the "
             "model selection of the pipeline (the first `dev_eval_tokens` of dev2012, greedy decoding in the "
             "pipeline's windows); minutes are training steps over the steps per second measured for the choice "
             "alone on this machine (2 CPU threads).", "",
             f"![dev F1 per training minute]({figure_link})", "",
             "| choice | what | steps/s | steps (min) | " + " | ".join(f"best dev F1 by {m:g} min" for m in marks)
             + " |", "|---|---|---|---|" + "---|" * len(marks)]
    def final(item: tuple[str, dict]) -> float:
        return -(best_by(item[1]["curve"], item[1]["steps_per_second"], minutes) or 0)

    for name, result in sorted(results.items(), key=final):
        steps = result["metrics"]["steps"]
        cells = [f"`{name}`", CHOICES[name][0], f"{result['steps_per_second']:.3f}",
                 f"{steps} ({steps / result['steps_per_second'] / 60:.1f})"]
        for mark in marks:
            value = best_by(result["curve"], result["steps_per_second"], mark)
            cells.append("–" if value is None else f"{100 * value:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    for row in earlier or []:  # an earlier measurement's table rows: figures kept, curves lost (not in the plot)
        if row["choice"] in results:
            continue
        cells = [f"`{row['choice']}` (earlier run, curve not kept)", CHOICES[row["choice"]][0],
                 f"{row['steps_per_second']:.3f}", f"{row['steps']} ({row['steps'] / row['steps_per_second'] / 60:.1f})"]
        cells += ["–" if value is None else f"{value:.1f}" for value in row["best_dev_f1_by_minutes"]]
        lines.append("| " + " | ".join(cells) + " |")
    notes = sorted({row["note"] for row in earlier or [] if row.get("note")})
    return "\n".join(lines + [""] + notes) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/encoder_choice.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("reports/encoder_choice"),
                        help="each choice's measured speed and curve (JSON, committed)")
    parser.add_argument("--work", type=Path, default=Path("runs/encoder_choice"), help="the trained models")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--features", type=Path, default=Path("data/features"))
    parser.add_argument("--choices", nargs="+", default=list(CHOICES), choices=list(CHOICES))
    parser.add_argument("--minutes", type=float, default=10.0, help="training minutes each choice gets")
    parser.add_argument("--rate-steps", type=int, default=10,
                        help="the speed is measured over runs of this many and three times as many steps")
    parser.add_argument("--report", type=Path, default=Path("reports/encoder_choice.md"))
    parser.add_argument("--figure", type=Path, default=Path("reports/encoder_choice/dev_f1_per_minute.png"))
    args = parser.parse_args(argv)
    params = load_params(args.params, profile="small")
    window, stride = int(params["evaluate"]["window"]), int(params["evaluate"]["stride"])
    rates = {}
    for name in args.choices:  # every speed first, together: the only timed part (keep the machine idle)
        rate_path = args.out / f"{name}.rate.json"
        if not rate_path.is_file():
            model, train = choice_config(params, name)
            rate = measure_rate(name, model, train, args.features, args.work / "rate" / name, args.rate_steps)
            atomic_write_text(rate_path, json.dumps({"steps_per_second": rate}) + "\n")
        rates[name] = json.loads(rate_path.read_text(encoding="utf-8"))["steps_per_second"]
        print(f"{name}: {rates[name]:.3f} steps/s", flush=True)
    results = {}
    for name in args.choices:
        path = args.out / f"{name}.json"
        if not path.is_file():
            model, train = choice_config(params, name)
            steps = max(int(round(rates[name] * args.minutes * 60)), EVALUATIONS)
            print(f"{name}: {steps} steps for {args.minutes:g} min", flush=True)
            result = train_curve(model, train, args.features, args.work / name, steps, window, stride)
            result.update(steps_per_second=rates[name], model=model, train=train, minutes=args.minutes)
            atomic_write_text(path, json.dumps(result, indent=1) + "\n")
        results[name] = {**json.loads(path.read_text(encoding="utf-8")), "steps_per_second": rates[name]}
    earlier_path = args.out / "earlier_rows.json"
    earlier = json.loads(earlier_path.read_text(encoding="utf-8")) if earlier_path.is_file() else None
    text = report(results, args.minutes, args.figure, args.figure.relative_to(args.report.parent), earlier)
    atomic_write_text(args.report, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
