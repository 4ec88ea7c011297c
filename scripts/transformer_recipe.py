"""Which reading of Yi & Tao's training recipe lets their strict Transformer learn: dev F1 against steps, per reading.

    python scripts/transformer_recipe.py run [--readings paper vaswani ...] [--steps 1000] [--width reduced]
    python scripts/transformer_recipe.py diagnose NAME [--tokens 20000]     # teacher-forced argmax vs greedy
    python scripts/transformer_recipe.py report                              # reports/transformer_recipe.md
    python scripts/transformer_recipe.py strides MODEL_DIR [--strides 5 2 1]  # decoding strides, no training
    python scripts/transformer_recipe.py candidate NAME --model '{...}' --train '{...}'   # a small-profile run

The paper fixes the architecture (6+6 layers, d_model 512, 8 heads, FFN 2048, dropout 0.1, post-norm as in Vaswani
et al.), label smoothing 0.1, Adam with clipping, an "initial learning rate" of 1e-4, 4,000 warm-up steps "according
to the formula in [19]", exponential decay and "batch_size 32"; it leaves open what a batch of 32 counts, the peak
rate (1e-4 as a peak contradicts the formula, whose peak for d_model 512 and 4,000 warm-up steps is ~7e-4), the
decay, the embedding scale and the decoding of unsegmented text. Each *reading* below is one answer to those open
points, applied to the strict encoder-decoder of experiment ``transformer`` (params.yaml ``experiment_defs``: no
aligned memory, no relative-position bias) at a width that trains on 2 CPU cores (``--width reduced``: 2+2 layers,
d_model 128, 4 heads, FFN 512) or at the paper's (``--width full``). Every reading trains from the same seed for the
same number of steps, its dev F1 (greedy-decoded, the first ``--dev-tokens`` tokens of dev2012, scored as the
benchmark) measured every ``--steps``/10 steps.

Each reading's curve is a small JSON file in ``--out`` (committed with the report); its model stays in ``--work``. A
reading whose result exists is not run again, so an interrupted call resumes and the report is redrawn from the
committed results alone. One thread per run (``--threads``): two calls with different readings can share two cores.
Needs ``data/features`` (``dvc repro embed``).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy or torch loads (experiments/numerics.py)

from corpus.io import atomic_write_text  # noqa: E402
from experiments.params import experiment_config, load_params, merged  # noqa: E402

#: the reduced width of the study: small enough for 2 CPU cores, deep enough to have the paper's two stacks
REDUCED = {"d_model": 128, "heads": 4, "ffn": 512, "encoder_layers": 2, "decoder_layers": 2}
WIDTHS = {"reduced": REDUCED, "full": {}}
#: the paper's training text is ~2.1M tokens; 20 epochs of 32 x 100-token windows are ~13,100 steps, of which
#: the 4,000 warm-up steps are 30 %
PAPER_WARMUP = 4000


def vaswani_peak(d_model: int, warmup: int) -> float:
    """The peak of Vaswani et al.'s formula lr = d^-0.5 * min(step^-0.5, step * warmup^-1.5), reached at ``warmup``."""
    return d_model ** -0.5 * warmup ** -0.5


def readings(d_model: int) -> dict[str, tuple[str, dict[str, Any], dict[str, Any]]]:
    """name -> (what it is, model overrides, train overrides) over the strict model and the paper's recipe as
    the project ran it (peak 1e-4 at step 4,000, then 1/sqrt(step); 32 windows of 100 tokens)."""
    formula = vaswani_peak(d_model, PAPER_WARMUP)
    short = {"lr": formula, "warmup_steps": 100}
    TEN = {"seq_len": 10, "decode_window": 10, "decode_stride": 5}  # noqa: N806
    return {
        "paper": ("the project's paper profile: peak 1e-4 at step 4,000, 1/sqrt(step) after; 32 x 100 tokens",
                  {}, {}),
        "vaswani": (f"Vaswani's formula as written for this width: peak {formula:.2g} at step 4,000",
                    {}, {"lr": formula}),
        "short_warmup": ("peak 1e-4 as the paper says, warm-up 100 steps (a fraction of the budget)",
                         {}, {"warmup_steps": 100}),
        "vaswani_short": (f"the formula's peak {formula:.2g}, warm-up 100 steps", {}, short),
        "scaled_input": ("as vaswani_short, input x sqrt(d_model) (Vaswani's embedding scale)",
                         {"input_scale": round(math.sqrt(d_model), 2)}, short),
        "exponential": ("as vaswani_short, exponential decay to a tenth after warm-up (Yi & Tao's 'decayed')",
                        {}, {**short, "lr_schedule": "exponential"}),
        "pre_norm": ("as vaswani_short, LayerNorm before each sublayer (diagnosis)", {"norm": "pre"}, short),
        "aligned_memory": ("as vaswani_short, the decoder given the aligned encoder state (diagnosis)",
                           {"aligned_memory": True}, short),
        "kyubyong": ("Kyubyong/transformer: 32 x 10 tokens, Adam at a constant 1e-4, learned positions, input x "
                     "sqrt(d); decoded in windows of 10, stride 5",
                     {"learned_positions": 10, "input_scale": round(math.sqrt(d_model), 2)},
                     {"lr": 0.0001, "lr_schedule": "constant", "warmup_steps": 1, "seq_len": 10,
                      "decode_window": 10, "decode_stride": 5}),
        "short_windows": ("as vaswani_short on 32 x 10 tokens, decoded in windows of 10, stride 5",
                          {}, {**short, "seq_len": 10, "decode_window": 10, "decode_stride": 5}),
        "windows_30": ("as vaswani_short on 32 x 30 tokens, decoded in windows of 30, stride 15",
                       {}, {**short, "seq_len": 30, "decode_window": 30, "decode_stride": 15}),
        # the same questions on 32 x 10 tokens (short_windows), where the strict model leaves the plateau in 1,000
        # steps: on 32 x 100 no reading learns within them, which hides every other difference
        **{f"w10_{name}": (f"{what}; on 32 x 10 tokens, decoded in windows of 10, stride 5", model,
                           {**short, **train, **TEN})
           for name, (what, model, train) in {
               "paper_schedule": ("peak 1e-4 at step 4,000, 1/sqrt(step) after", {},
                                  {"lr": 0.0001, "warmup_steps": PAPER_WARMUP}),
               "vaswani": (f"the formula as written: peak {formula:.2g} at step 4,000", {},
                           {"warmup_steps": PAPER_WARMUP}),
               "peak_1e-4": ("peak 1e-4 after 100 warm-up steps", {}, {"lr": 0.0001}),
               "exponential": ("as short_windows, exponential decay to a tenth", {}, {"lr_schedule": "exponential"}),
               "scaled_input": ("as short_windows, input x sqrt(d_model)", {"input_scale": round(math.sqrt(d_model), 2)},
                                {}),
               "pre_norm": ("as short_windows, pre-norm (diagnosis)", {"norm": "pre"}, {}),
               "learned_positions": ("as short_windows, learned positions", {"learned_positions": 10}, {}),
               "aligned_memory": ("as short_windows, the decoder given the aligned encoder state (diagnosis)",
                                  {"aligned_memory": True}, {}),
               # at the paper's depth (6+6 post-norm layers) a 100-step warm-up to the peak may be what keeps the
               # model on the plateau (post-norm stacks need the warm-up, Xiong et al. 2020): the same peak later
               "warmup_1000": ("as short_windows, warm-up 1,000 steps to the same peak", {}, {"warmup_steps": 1000}),
           }.items()},
        "windows_20": ("as vaswani_short on 32 x 20 tokens, decoded in windows of 20, stride 10",
                       {}, {**short, "seq_len": 20, "decode_window": 20, "decode_stride": 10}),
        "windows_30_scaled_pre": ("as windows_30, input x sqrt(d_model) and pre-norm",
                                  {"input_scale": round(math.sqrt(d_model), 2), "norm": "pre"},
                                  {**short, "seq_len": 30, "decode_window": 30, "decode_stride": 15}),
    }


def reading_config(params: dict, width: str, name: str) -> tuple[dict, dict]:
    model, train = experiment_config(params, "transformer")
    model = merged(model, WIDTHS[width], f"width {width}", "model")
    _, model_changes, train_changes = readings(int(model["d_model"]))[name]
    # decode_window/decode_stride are optional trainer settings that params.yaml's `train` need not name
    return (merged(model, model_changes, f"reading {name}", "model"), {**train, **train_changes})


def run_reading(params: dict, width: str, name: str, *, steps: int, dev_tokens: int, threads: int,
                features: Path, work: Path, device: str = "cpu") -> dict:
    """Train reading ``name`` for ``steps`` steps; its dev-F1 curve and final figures."""
    from training import train_model

    model, train = reading_config(params, width, name)
    settings = {**train, "max_steps": steps, "eval_every_steps": max(steps // 10, 1), "log_every_steps":
                max(steps // 50, 1), "dev_eval_tokens": dev_tokens, "threads": threads, "device": device}
    started = time.perf_counter()
    result = train_model(features, work / "model", work / "state", model_config=model, train_config=settings,
                         window=params["evaluate"]["window"], stride=params["evaluate"]["stride"])
    seconds = time.perf_counter() - started
    with open(work / "model" / "history.csv", encoding="utf-8") as handle:
        history = list(csv.DictReader(handle))
    return {"reading": name, "width": width, "what": readings(int(model["d_model"]))[name][0],
            "model": model, "train": settings, "best_dev_f1": result.metrics["best_dev_f1"],
            "best_step": result.metrics["best_step"], "seconds": round(seconds, 1),
            "dev_f1": [[int(r["step"]), float(r["dev_f1"])] for r in history if r["dev_f1"]],
            "train_loss": [[int(r["step"]), float(r["train_loss"])] for r in history if r["train_loss"]]}


def diagnose(work: Path, tokens: int, features: Path) -> dict:
    """The trained reading's dev F1 greedy-decoded (its own labels fed back, as at test time) and teacher-forced
    (the gold previous labels fed back): the gap is what exposure bias costs, with no training."""
    import numpy as np
    import torch

    from corpus.labels import LABELS
    from embeddings.store import load_split
    from evaluation.scoring import score_labels
    from inference.model_dir import load_trained_model
    from inference.windows import predict_windows
    from training.batches import TokenStore
    from training.dev_eval import TokenSlice

    model, config = load_trained_model(work / "model", device=torch.device("cpu"))
    model.eval()
    dev = TokenSlice(load_split(features, "dev"), tokens, None)
    labels = np.asarray(dev.labels).astype(np.int64)
    store = TokenStore(dev.vectors, dev.ids, labels, words=None, device=torch.device("cpu"), resident=False)
    window, stride = int(config["window"]), int(config["stride"])

    def teacher_forced(batch: dict) -> torch.Tensor:
        with torch.no_grad():
            return model(batch).argmax(-1)

    gold = [LABELS[i] for i in labels]
    scores = {}
    for how, predict, with_labels in (("greedy", model.predict, False), ("teacher_forced", teacher_forced, True)):
        predicted = predict_windows(predict, lambda s, w=with_labels: store.batch(np.asarray(s), window,
                                                                                 with_labels=w),
                                    store.num_tokens, window=window, stride=stride, batch_size=64)
        scores[how] = score_labels(gold, [LABELS[i] for i in predicted])["OVERALL"]["f1"]
    return {"tokens": int(store.num_tokens), **scores}


def strides(model_dir: Path, window: int, stride_values: list[int], features: Path, prepared: Path) -> list[dict]:
    """The trained model decoded as ``punctuate`` decodes, in windows of ``window`` tokens at each stride, on the
    dev features cache (as training's dev evaluation reads it) and on Ref: what centring each token costs and
    gives, with no training."""
    from corpus.iwslt import read_iwslt
    from corpus.labels import LABELS
    from embeddings.store import load_split, load_split_words
    from evaluation.scoring import score_labels
    from inference.punctuator import Punctuator

    dev = load_split(features, "dev")
    dev_words, dev_gold = load_split_words(features, "dev"), [LABELS[i] for i in dev.labels]
    ref = read_iwslt(prepared / "ref.tsv")
    rows = []
    for stride in stride_values:
        punctuator = Punctuator(model_dir, window=window, stride=stride)
        started = time.perf_counter()
        dev_scores = score_labels(dev_gold, punctuator.label_vectors(dev.vectors, dev.ids, dev_words))
        dev_seconds = time.perf_counter() - started
        ref_scores = score_labels(list(ref.labels), punctuator.punctuate_words(ref.words, source=str(prepared)))
        rows.append({"window": window, "stride": stride, "dev_f1": dev_scores["OVERALL"]["f1"],
                     "ref_f1": ref_scores["OVERALL"]["f1"], "ref_question_f1": ref_scores["QUESTION"]["f1"],
                     "dev_decode_s": round(dev_seconds, 1)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def plot(results: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for index, (name, result) in enumerate(results.items()):
        style = {"color": f"C{index % 10}", "ls": "-" if index < 10 else "--"}
        steps, f1 = zip(*result["dev_f1"])
        axes[0].plot(steps, [100 * f for f in f1], marker="o", ms=3, label=name, **style)
        if result["train_loss"]:
            steps, loss = zip(*result["train_loss"])
            axes[1].plot(steps, loss, label=name, **style)
    axes[0].set(xlabel="step", ylabel="dev F1 (%)", title="dev F1 (greedy, windows as punctuate)")
    axes[1].set(xlabel="step", ylabel="training loss (label smoothing 0.1)", title="training loss", ylim=(0.55, 0.85))
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


#: a run has left the plateau of the label prior once its dev F1 reaches this (an untrained model's few scattered
#: marks can score a few points at the first evaluation, before it settles on O everywhere)
LEFT_PLATEAU_F1 = 0.10


def f1_at(result: dict, step: int) -> float | None:
    reached = [f1 for s, f1 in result["dev_f1"] if s <= step]
    return max(reached) if reached else None


def summary_table(results: dict[str, dict]) -> str:
    steps = sorted({s for r in results.values() for s, _ in r["dev_f1"]})
    marks = [s for s in (200, 500, steps[-1] if steps else 0) if s]
    rows = ["| reading | what | " + " | ".join(f"best dev F1 by step {s}" for s in marks)
            + f" | first step with dev F1 >= {LEFT_PLATEAU_F1:.0%} | last training loss | training tokens seen |",
            "|---|---|" + "---|" * len(marks) + "---|---|---|"]
    for name, r in results.items():
        first = next((s for s, f in r["dev_f1"] if f >= LEFT_PLATEAU_F1), None)
        loss = r["train_loss"][-1][1] if r["train_loss"] else float("nan")
        cells = [f"{100 * f1_at(r, s):.1f}" if f1_at(r, s) is not None else "–" for s in marks]
        tokens = r["train"]["batch_size"] * r["train"]["seq_len"] * r["dev_f1"][-1][0]
        rows.append(f"| {name} | {r['what']} | " + " | ".join(cells)
                    + f" | {first if first is not None else 'never'} | {loss:.3f} | {tokens / 1e6:.2f}M |")
    return "\n".join(rows)


def scheduled_sampling(rate: float) -> None:
    """A diagnosis of the exposure bias (greedy decoding below teacher-forced argmax), not a setting of the
    pipeline: in training, each previous label the decoder reads is, with probability ``rate``, the model's own
    prediction from a first, teacher-forced pass without gradient (two-pass scheduled sampling, Mihaylova &
    Martins 2019), so that it learns to read labels it got wrong, as it must when decoding greedily."""
    import torch

    from models.transformer import SelfAttentionPunctuator

    def forward(self, batch: dict) -> torch.Tensor:
        labels = batch["labels"]
        start = torch.full_like(labels[:, :1], self.start_label)
        previous = torch.cat([start, labels[:, :-1]], dim=1)
        memory = self.encode(batch)
        if self.training:
            with torch.no_grad():
                predicted = self._decode(previous, memory, batch["mask"]).argmax(dim=-1)
            own = torch.cat([start, predicted[:, :-1]], dim=1)
            previous = torch.where(torch.rand(previous.shape, device=previous.device) < rate, own, previous)
        return self._decode(previous, memory, batch["mask"])

    SelfAttentionPunctuator.forward = forward


def run_candidate(args: argparse.Namespace) -> int:
    """Train and score one candidate of the small profile; its figures go to ``--out``/candidates/NAME.json."""
    from evaluation.benchmark import evaluate_model
    from training import train_model

    params = load_params(args.params, profile="small")
    model, train = experiment_config(params, "transformer")
    model, train = {**model, **args.model}, {**train, **args.train}
    if args.scheduled_sampling:
        scheduled_sampling(args.scheduled_sampling)
    work = args.work / "candidates" / args.name
    started = time.perf_counter()
    result = train_model(args.features, work / "model", work / "state", model_config=model, train_config=train,
                         window=params["evaluate"]["window"], stride=params["evaluate"]["stride"])
    seconds = time.perf_counter() - started
    scores = evaluate_model(work / "model", "data/prepared", work / "predictions", splits=["ref", "asr"],
                            segmented_splits=["ref"])
    record = {"name": args.name, "model": model, "train": train, "train_s": round(seconds),
              **({"scheduled_sampling": args.scheduled_sampling} if args.scheduled_sampling else {}),
              "best_dev": result.metrics["best_dev_f1"], "best_step": result.metrics["best_step"],
              "steps": result.metrics["steps"], "ref": scores["ref"]["OVERALL"]["f1"],
              "asr": scores["asr"]["OVERALL"]["f1"], "ref_seg": scores["ref_segmented"]["OVERALL"]["f1"]}
    path = args.out / "candidates" / f"{args.name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=1) + "\n")
    print(json.dumps(record))
    return 0


TABLE_START, TABLE_END = "<!-- readings:start -->", "<!-- readings:end -->"


def load_results(out: Path, suffix: str = "") -> dict[str, dict]:
    """The committed results of every reading of one width (``suffix``: "" reduced, "_full"), in study order."""
    found = {}
    for path in sorted(out.glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        if path.stem == f"{result['reading']}{suffix}" and (suffix or result["width"] == "reduced"):
            found[result["reading"]] = result
    order = list(readings(128))
    return dict(sorted(found.items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order)))


def write_report(out: Path, report: Path) -> int:
    """Redraw the figure and the generated tables of ``report`` (between its markers) from the results in ``out``;
    the rest of the report is prose about them and stays as written."""
    reduced, full = load_results(out), load_results(out, "_full")
    if not reduced:
        print(f"error: no results in {out}; run the readings first", file=sys.stderr)
        return 2
    figure = out / "dev_f1.png"
    plot(reduced, figure)
    lines = [TABLE_START, "", f"Reduced width (2+2 layers, d_model 128, 4 heads, FFN 512), seed 1, dev F1 on the "
             f"first {reduced[next(iter(reduced))]['train']['dev_eval_tokens']:,} tokens of dev2012, greedy-decoded "
             "as `punctuate` decodes; written by `python scripts/transformer_recipe.py report`.", "",
             summary_table(reduced), "", f"![dev F1 and training loss against steps]({figure.relative_to(report.parent)})",
             ""]
    decoded = {name: r["decoding"] for name, r in reduced.items() if "decoding" in r}
    if decoded:
        lines += ["Exposure bias, no training: the same trained model and dev tokens decoded greedily (its own labels "
                  "fed back, as at test time) and teacher-forced (the gold previous labels fed back).", "",
                  "| reading | dev tokens | greedy F1 | teacher-forced F1 |", "|---|---|---|---|"]
        lines += [f"| {name} | {d['tokens']:,} | {100 * d['greedy']:.1f} | {100 * d['teacher_forced']:.1f} |"
                  for name, d in decoded.items()]
        lines.append("")
    if full:
        lines += ["Paper size (6+6 layers, d_model 512, 8 heads, FFN 2048) on the CPU:", "",
                  summary_table(full), ""]
    lines.append(TABLE_END)
    text = report.read_text(encoding="utf-8") if report.exists() else f"# The Transformer's recipe\n\n{TABLE_START}\n{TABLE_END}\n"
    if TABLE_START not in text or TABLE_END not in text:
        print(f"error: {report} lacks the markers {TABLE_START} / {TABLE_END}", file=sys.stderr)
        return 2
    head, rest = text.split(TABLE_START, 1)
    atomic_write_text(report, head + "\n".join(lines) + rest.split(TABLE_END, 1)[1])
    print(f"wrote {report} and {figure}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/transformer_recipe.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--features", type=Path, default=Path("data/features"))
    parser.add_argument("--out", type=Path, default=Path("reports/transformer_recipe"))
    parser.add_argument("--work", type=Path, default=Path("runs/transformer_recipe"))
    parser.add_argument("--width", choices=sorted(WIDTHS), default="reduced")
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run")
    run_parser.add_argument("--readings", nargs="*")
    run_parser.add_argument("--steps", type=int, default=1000)
    run_parser.add_argument("--dev-tokens", type=int, default=5000)
    run_parser.add_argument("--threads", type=int, default=1)
    run_parser.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU machine (the same readings)")
    diagnose_parser = commands.add_parser("diagnose")
    diagnose_parser.add_argument("names", nargs="+")
    diagnose_parser.add_argument("--tokens", type=int, default=20000)
    candidate_parser = commands.add_parser(
        "candidate", help="a small-profile candidate: experiment transformer of profile small with MODEL and TRAIN "
        "settings over it, trained, then scored on Ref/ASR (and Ref cut at gold sentence ends)")
    candidate_parser.add_argument("name")
    candidate_parser.add_argument("--model", type=json.loads, default={}, help="JSON object over the model")
    candidate_parser.add_argument("--train", type=json.loads, default={}, help="JSON object over train")
    candidate_parser.add_argument("--scheduled-sampling", type=float, default=0.0,
                                  help="diagnosis: the decoder reads its own predictions at this rate in training")
    strides_parser = commands.add_parser(
        "strides", help="a trained model decoded at several strides (dev features cache and Ref), no training")
    strides_parser.add_argument("model_dir", type=Path)
    strides_parser.add_argument("--window", type=int, default=10)
    strides_parser.add_argument("--strides", type=int, nargs="+", default=[5, 2, 1])
    strides_parser.add_argument("--prepared", type=Path, default=Path("data/prepared"))
    commands.add_parser("list")
    report_parser = commands.add_parser("report", help="the table and figure of every reading in --out")
    report_parser.add_argument("--report", type=Path, default=Path("reports/transformer_recipe.md"))
    args = parser.parse_args(argv)
    if args.command == "candidate":
        return run_candidate(args)
    if args.command == "strides":
        rows = strides(args.model_dir, args.window, args.strides, args.features, args.prepared)
        (args.out / "decoding").mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out / "decoding" / "strides.json", json.dumps(rows, indent=1) + "\n")
        return 0
    params = load_params(args.params, profile="paper")
    d_model = int(reading_config(params, args.width, "paper")[0]["d_model"])
    names = list(readings(d_model))
    tag = "" if args.width == "reduced" else f"_{args.width}"
    if args.command == "list":
        for name, (what, _, _) in readings(d_model).items():
            print(f"{name}: {what}")
        return 0
    if args.command == "report":
        return write_report(args.out, args.report)
    if args.command == "run":
        for name in args.readings or names:
            path = args.out / f"{name}{tag}.json"
            if path.exists():
                print(f"{name}: done ({path})")
                continue
            result = run_reading(params, args.width, name, steps=args.steps, dev_tokens=args.dev_tokens,
                                 threads=args.threads, features=args.features, work=args.work / f"{name}{tag}",
                                 device=args.device)
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps(result, indent=1) + "\n")
            print(f"{name}: best dev F1 {100 * result['best_dev_f1']:.1f} at step {result['best_step']}", flush=True)
        return 0
    for name in args.names:
        path = args.out / f"{name}{tag}.json"
        result = json.loads(path.read_text(encoding="utf-8"))
        result["decoding"] = diagnose(args.work / f"{name}{tag}", args.tokens, args.features)
        atomic_write_text(path, json.dumps(result, indent=1) + "\n")
        print(name, result["decoding"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
