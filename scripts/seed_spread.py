"""How much of a comparison is the seed's luck: repeat the default pipeline's comparisons with other seeds.

    python scripts/seed_spread.py --out runs/seeds [--seeds 2 3] [--params params.yaml] [--reports reports]

Run it after ``dvc repro`` (seed 1 is the default pipeline's own run: its models and metrics). For every other
seed S it trains, through the pipeline's own commands (``python -m pipeline.train`` / ``pipeline.evaluate`` with
``--set seed=S``), into ``OUT``:

* the comparison of Yi & Tao's inputs: the reduced Transformer on words (``words_S``) and on words + type-level
  Speech2Vec (``ws_S``, run ``transformer_word_speech``);
* the chain that ``punctuate`` uses: the text model (``text_S``, experiment ``blstm``), then the speech model
  (``blstm_word_pauses_S``) and its control (``blstm_word_pauses_control_S``), each started from *that seed's*
  text model (``OUT/params_S.yaml``: the params with ``punctuate.text_model`` pointing at it).

A run whose scores exist is not trained again, so an interrupted call resumes. Then it scores every model on the
real-speech development talks exactly as ``punctuate`` labels them and writes
``REPORTS/transformer_speech2vec_seeds.md`` and ``REPORTS/real_speech_seeds.md``, with their figures in
``REPORTS/seed_spread_summary.json``. On 2 CPU cores each seed takes about 17 min (both comparisons).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from punctuation.params import load_params  # noqa: E402

# name prefix -> (experiment, variant run of params.yaml `variants` or None for the experiment on data/features);
# a variant's feature set is read from params.yaml.
RUNS = {
    "words": ("transformer", None),
    "ws": ("transformer", "transformer_word_speech"),
    "text": ("blstm", None),
    "blstm_word_pauses": ("blstm", "blstm_word_pauses"),
    "blstm_word_pauses_control": ("blstm", "blstm_word_pauses_control"),
}


def run_paths(out: Path, prefix: str, seed: int) -> tuple[Path, Path]:
    """The model directory and the scores file of run ``prefix`` with ``seed``; seed 1 is the pipeline's own run
    (``artifacts/EXPERIMENT/model`` and ``metrics/eval/EXPERIMENT.json``, or for a variant
    ``variant_artifacts/RUN/EXPERIMENT/model`` and ``metrics/eval_variants/RUN/EXPERIMENT.json``)."""
    experiment, variant = RUNS[prefix]
    if seed == 1:
        if variant is None:
            return Path("artifacts") / experiment / "model", Path("metrics/eval") / f"{experiment}.json"
        return (Path("variant_artifacts") / variant / experiment / "model",
                Path("metrics/eval_variants") / variant / f"{experiment}.json")
    name = f"{prefix}_{seed}"
    return out / name / experiment / "model", out / "eval" / name / f"{experiment}.json"


def features_dir(params: Mapping[str, Any], prefix: str) -> str:
    """The feature cache run ``prefix`` reads: its variant's feature set in ``params``, or ``data/features``."""
    variant = RUNS[prefix][1]
    return f"data/feature_sets/{params['variants'][variant]['features']}" if variant else "data/features"


def seed_commands(prefix: str, seed: int, out: Path, params: Path, features: str) -> list[list[str]]:
    """The train and evaluate commands of run ``prefix`` with ``seed`` (``params``: the params file it trains with,
    ``features``: the feature cache it reads)."""
    experiment, variant = RUNS[prefix]
    name = f"{prefix}_{seed}"
    target = ["--variant", variant] if variant else ["--experiment", experiment]
    train = [sys.executable, "-m", "pipeline.train", *target, "--params", str(params), "--features", features,
             "--set", f"seed={seed}", "--artifacts", str(out / name), "--checkpoints", str(out / "checkpoints" / name),
             "--metrics", str(out / "train" / name)]
    evaluate = [sys.executable, "-m", "pipeline.evaluate", "--stage", "--experiment", experiment, "--params",
                str(params), "--features", features, "--artifacts", str(out / name), "--metrics",
                str(out / "eval" / name)]
    return [train, evaluate]


def seed_params(params_path: Path, out: Path, seed: int) -> Path:
    """A copy of the params whose ``punctuate.text_model`` is this seed's text model (the speech model and the
    control start from it)."""
    params = yaml.safe_load(params_path.read_text(encoding="utf-8"))
    params.setdefault("punctuate", {})["text_model"] = str(run_paths(out, "text", seed)[0])
    path = out / f"params_{seed}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


def train_seed(seed: int, out: Path, params_path: Path, params: Mapping[str, Any], prefixes: Sequence[str]) -> None:
    """Train and evaluate every run of ``prefixes`` with ``seed`` whose scores are not there yet (text model
    first: the speech model and the control start from it); ``params``: ``params_path`` loaded."""
    for prefix in sorted(prefixes, key=lambda p: p != "text"):
        if run_paths(out, prefix, seed)[1].exists():
            print(f"seed {seed}: {prefix} already scored", flush=True)
            continue
        run_params = seed_params(params_path, out, seed) if RUNS[prefix][1] else params_path
        for command in seed_commands(prefix, seed, out, run_params, features_dir(params, prefix)):
            print("+", " ".join(command), flush=True)
            subprocess.run(command, check=True)


def collect(out: Path, seeds: Sequence[int], prefixes: Sequence[str], real_dir: Path,
            real_talks: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per run and seed (``PREFIX_SEED``): IWSLT2011 Ref/ASR F1 and, on the real talks, the overall and PERIOD F1
    from text alone (``text``) and with the real timings (``timings``), pooled and per talk; in %."""
    from punctuation.real_speech import evaluate_real_speech

    names = {f"{prefix}_{seed}": run_paths(out, prefix, seed) for prefix in prefixes for seed in seeds}
    real = evaluate_real_speech(real_dir, real_talks, {name: paths[0] for name, paths in names.items()})
    rows: dict[str, dict[str, float]] = {}
    for name, (_, scores_path) in names.items():
        scores = json.loads(scores_path.read_text(encoding="utf-8"))
        row = {"ref": 100 * scores["ref"]["OVERALL"]["f1"], "asr": 100 * scores["asr"]["OVERALL"]["f1"]}
        for input_name in ("text", "timings"):
            entry = real["models"][name].get(input_name)
            if entry is None:
                continue
            row[input_name] = 100 * entry["all"]["OVERALL"]["f1"]
            row[f"{input_name}_period"] = 100 * entry["all"]["PERIOD"]["f1"]
            for talk, talk_scores in entry["talks"].items():
                row[f"{input_name}_{talk}"] = 100 * talk_scores["OVERALL"]["f1"]
        rows[name] = row
    return rows


def _sd(values: Sequence[float]) -> str:
    return f"{statistics.stdev(values):.1f}" if len(values) > 1 else "–"


def speech2vec_markdown(rows: Mapping[str, Mapping[str, float]], seeds: Sequence[int],
                        notes: Sequence[str] = ()) -> str:
    """The reduced Transformer on words against words + type-level Speech2Vec, seed by seed."""
    lines = ["# Reduced Transformer: words vs words + type-level Speech2Vec, over seeds", "",
             "Written by `python scripts/seed_spread.py` (not a pipeline stage). Seed 1 is the default pipeline's own "
             "run; the others are the same stages with `--set seed=S`. Real speech: the development talks of "
             "`ted_real` from text alone, as `punctuate` labels them. Overall F1 in %.", "",
             *[line for note in notes for line in (note, "")],
             "| seed | words: Ref | ASR | real speech | + Speech2Vec: Ref | ASR | real speech "
             "| Δ Ref | Δ ASR | Δ real |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    deltas: dict[str, list[float]] = {"ref": [], "asr": [], "text": []}
    for seed in seeds:
        words, both = rows[f"words_{seed}"], rows[f"ws_{seed}"]
        for key in deltas:
            deltas[key].append(both[key] - words[key])
        lines.append(f"| {seed} | {words['ref']:.1f} | {words['asr']:.1f} | {words['text']:.1f} | {both['ref']:.1f} | "
                     f"{both['asr']:.1f} | {both['text']:.1f} | {deltas['ref'][-1]:+.1f} | {deltas['asr'][-1]:+.1f} | "
                     f"{deltas['text'][-1]:+.1f} |")
    cells = []
    for prefix in ("words", "ws"):
        for key in ("ref", "asr", "text"):
            values = [rows[f"{prefix}_{seed}"][key] for seed in seeds]
            cells.append(f"{statistics.mean(values):.1f} ({_sd(values)})")
    mean_deltas = [f"{statistics.mean(deltas[key]):+.1f}" for key in ("ref", "asr", "text")]
    lines.append(f"| mean (sd) | {' | '.join(cells)} | {' | '.join(mean_deltas)} |")
    lines += ["", "Yi & Tao report +3.5 Ref and +3.5 ASR for word + speech over word.", ""]
    return "\n".join(lines)


def real_speech_seeds_markdown(rows: Mapping[str, Mapping[str, float]], seeds: Sequence[int],
                               talks: Sequence[str], notes: Sequence[str] = ()) -> str:
    """The chain ``punctuate`` uses, seed by seed: the speech model with real timings against its own text model
    and against the control with the same timings."""
    lines = ["# Real speech over seeds: text model, speech model and control", "",
             "Written by `python scripts/seed_spread.py` (not a pipeline stage). Seed 1 is the default pipeline's own "
             "run; for every other seed the text model (`blstm`) is trained with `--set seed=S`, and the speech model "
             "(`blstm_word_pauses`) and its control (`blstm_word_pauses_control`) start from *that* text model. Real "
             "speech: the development talks of `ted_real`, labelled as `punctuate` labels them; IWSLT2011 Ref read "
             "without speech. Overall F1 in %.", "",
             *[line for note in notes for line in (note, "")],
             "| seed | text model | speech model, text only | speech model + real timings | control + real timings | "
             "Δ vs text model | Δ PERIOD | Δ vs control | " + " | ".join(f"{talk} Δ" for talk in talks)
             + " | IWSLT Ref: text / speech / control |",
             "|---|---|---|---|---|---|---|---|" + "---|" * len(talks) + "---|"]
    columns: dict[str, list[float]] = {}

    def add(key: str, value: float) -> float:
        columns.setdefault(key, []).append(value)
        return value

    for seed in seeds:
        text, speech = rows[f"text_{seed}"], rows[f"blstm_word_pauses_{seed}"]
        control = rows[f"blstm_word_pauses_control_{seed}"]
        cells = [add("text", text["text"]), add("speech_text", speech["text"]), add("speech", speech["timings"]),
                 add("control", control["timings"])]
        gains = [add("gain", speech["timings"] - text["text"]),
                 add("gain_period", speech["timings_period"] - text["text_period"]),
                 add("gain_control", speech["timings"] - control["timings"])]
        gains += [add(f"gain_{talk}", speech[f"timings_{talk}"] - text[f"text_{talk}"]) for talk in talks]
        ref = [add("ref_text", text["ref"]), add("ref_speech", speech["ref"]), add("ref_control", control["ref"])]
        lines.append(f"| {seed} | " + " | ".join(f"{c:.1f}" for c in cells) + " | "
                     + " | ".join(f"{g:+.1f}" for g in gains) + " | " + " / ".join(f"{r:.1f}" for r in ref) + " |")
    mean = {key: statistics.mean(values) for key, values in columns.items()}
    lines.append("| mean | " + " | ".join(f"{mean[k]:.1f}" for k in ("text", "speech_text", "speech", "control"))
                 + " | " + " | ".join(f"{mean[k]:+.1f}" for k in ["gain", "gain_period", "gain_control"]
                                      + [f"gain_{talk}" for talk in talks])
                 + " | " + " / ".join(f"{mean[k]:.1f}" for k in ("ref_text", "ref_speech", "ref_control")) + " |")
    lines += ["", f"Over these seeds the speech model with real timings gains {min(columns['gain']):+.1f} to "
              f"{max(columns['gain']):+.1f} F1 over its own text model (PERIOD {min(columns['gain_period']):+.1f} to "
              f"{max(columns['gain_period']):+.1f}) and {min(columns['gain_control']):+.1f} to "
              f"{max(columns['gain_control']):+.1f} over the control with the same timings.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder of the runs (resumable)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[2, 3], help="seeds besides the pipeline's (1)")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--reports", type=Path, default=Path("reports"))
    parser.add_argument("--only", choices=["transformer", "punctuate"], default=None,
                        help="one comparison only: Yi & Tao's inputs, or punctuate's chain")
    parser.add_argument("--note", action="append", default=[], help="a paragraph under each report's title, e.g. "
                        "the machine and commit (repeatable)")
    args = parser.parse_args(argv)
    params = load_params(args.params)
    prefixes = {"transformer": ["words", "ws"], "punctuate": ["text", "blstm_word_pauses",
                                                              "blstm_word_pauses_control"]}
    chosen = prefixes[args.only] if args.only else prefixes["transformer"] + prefixes["punctuate"]
    for seed in args.seeds:
        if seed == 1:
            parser.error("seed 1 is the default pipeline's own run: give other seeds")
        train_seed(seed, args.out, args.params, params, chosen)
    seeds = [1, *args.seeds]
    for prefix in chosen:
        if not run_paths(args.out, prefix, 1)[1].exists():
            parser.error(f"{run_paths(args.out, prefix, 1)[1]} is missing: run `dvc repro` first")
    real_dir = Path(params["data"]["real_speech_dir"])
    talks = list(params["data"]["real_speech_talks"])
    rows = collect(args.out, seeds, chosen, real_dir, talks)
    args.reports.mkdir(parents=True, exist_ok=True)
    (args.reports / "seed_spread_summary.json").write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n",
                                                           encoding="utf-8")
    if "ws" in chosen:
        text = speech2vec_markdown(rows, seeds, args.note)
        (args.reports / "transformer_speech2vec_seeds.md").write_text(text, encoding="utf-8")
    if "text" in chosen:
        text = real_speech_seeds_markdown(rows, seeds, talks, args.note)
        (args.reports / "real_speech_seeds.md").write_text(text, encoding="utf-8")
    print(f"wrote the reports and seed_spread_summary.json (the figures) under {args.reports}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
