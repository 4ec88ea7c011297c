"""The speech models on TED's two real talks, each talk scored by a model whose TED cues never came from it.

    python scripts/ted_cross_fitted.py [--runs minilm_word_pauses_mix minilm_word_pauses] [--seeds 1 2]
        [--work runs/ted_cross_fitted] [--out reports/real_speech_cross_fitted]

Stage ``fit_pauses`` draws the simulated cues of TED's training words from the real words of the two development
talks (``data.real_speech_talks``), label by label, and stage ``evaluate_real`` scores the speech models on the same
two talks. A model tuned on TED's cues alone may so learn how these two speakers pause before each mark, and the
Earnings-22 mix, a quarter of whose words carry other speakers' real cues, less. Cross-fitting measures what that
is worth: for each talk the pause model is fitted on the other talk alone (``fit_pauses --talks OTHER``), the
feature sets are built on it and the tunings are trained again; each talk is then scored by the models that never
saw its cues (``evaluate_real --cross-fitted``).

``--runs`` are tunings of the params file; ``minilm_word_pauses``, the TED-only speech model that was
``punctuate.audio_model`` before Earnings-22 (b883b5d), is added when asked: the mix's tuning on feature set
``word_pauses``. Everything but the talks' pools is the pipeline's: its text model (``artifacts/minilm/model``),
prepared splits and Earnings-22. The text model reads no cue, so its figures need no refit.

Writes ``OUT.md`` (evaluate_real's report of the cross-fitted models), ``OUT.json`` (its metrics) and prints the
gains over the text model. A rerun reuses the steps whose outputs exist under ``--work``; remove it to start over.
Nothing is chosen on these talks: they stay a check.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy or torch loads (experiments/numerics.py); each step pins too

import yaml  # noqa: E402

from experiments.params import load_params  # noqa: E402

#: The tuning the TED-only speech model was (b883b5d's punctuate.audio_model): the mix's, on TED's cues alone.
TED_ONLY = "minilm_word_pauses"
TED_ONLY_FEATURES = "word_pauses"
PAUSES_DIR = "data/pauses"


def with_pauses_dir(value: Any, pauses_dir: str) -> Any:
    """``value`` (a params subtree) with every path under ``data/pauses`` moved under ``pauses_dir``."""
    if isinstance(value, dict):
        return {key: with_pauses_dir(item, pauses_dir) for key, item in value.items()}
    if isinstance(value, list):
        return [with_pauses_dir(item, pauses_dir) for item in value]
    if isinstance(value, str) and (value == PAUSES_DIR or value.startswith(PAUSES_DIR + "/")):
        return pauses_dir + value[len(PAUSES_DIR):]
    return value


def fold_params(params: dict[str, Any], pauses_dir: str, runs: list[str]) -> dict[str, Any]:
    """The params of one fold: the feature sets read ``pauses_dir`` instead of ``data/pauses``; the TED-only
    tuning added where ``runs`` asks for it and the file lacks it."""
    params = copy.deepcopy(params)
    params["embed"]["feature_sets"] = with_pauses_dir(params["embed"]["feature_sets"], pauses_dir)
    tunings = params.setdefault("tunings", {})
    if TED_ONLY in runs and TED_ONLY not in tunings:
        tunings[TED_ONLY] = {**copy.deepcopy(tunings["minilm_word_pauses_mix"]), "features": TED_ONLY_FEATURES}
    missing = [run for run in runs if run not in tunings]
    if missing:
        raise SystemExit(f"error: --runs {', '.join(missing)}: not tunings of the params file")
    return params


def step(command: list[str], done: Path, what: str) -> None:
    """Run ``python -m ...`` ``command`` unless ``done`` exists (a rerun resumes)."""
    if done.exists():
        print(f"  {what}: done before ({done})", flush=True)
        return
    print(f"  {what}: {' '.join(command)}", flush=True)
    subprocess.run([sys.executable, "-m", *command], check=True)
    if not done.exists():
        raise SystemExit(f"error: {what} wrote no {done}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--runs", nargs="+", default=["minilm_word_pauses_mix", TED_ONLY])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--work", default="runs/ted_cross_fitted")
    parser.add_argument("--out", default="reports/real_speech_cross_fitted")
    parser.add_argument("--source-artifacts", default="artifacts", help="where the text model is (FROM/model)")
    args = parser.parse_args(argv)
    params = load_params(args.params)  # resolved: its active profile's data
    raw = yaml.safe_load(Path(args.params).read_text(encoding="utf-8"))  # as written: what a fold's file changes
    talks = list(params["data"]["real_speech_talks"])
    if len(talks) < 2:
        raise SystemExit("error: cross-fitting needs two real-speech talks at least (data.real_speech_talks)")
    work = Path(args.work)
    folds: dict[str, dict[str, str]] = {}
    for index, talk in enumerate(talks, 1):
        others = [other for other in talks if other != talk]
        fold = work / f"without_{talk}"
        print(f"[{index}/{len(talks)}] {talk}: pause model of {', '.join(others)}", flush=True)
        fold.mkdir(parents=True, exist_ok=True)
        fold_file = fold / "params.yaml"
        fold_file.write_text(yaml.safe_dump(fold_params(raw, str(fold / "pauses"), args.runs), sort_keys=False),
                             encoding="utf-8")
        p = str(fold_file)
        step(["pipeline.fit_pauses", "--params", p, "--prepared", "data/prepared", "--out", str(fold / "pauses"),
              "--metrics", str(fold / "pauses.json"), "--earnings22", "data/earnings22", "--talks", *others],
             fold / "pauses.json", "fit_pauses")
        tunings = load_params(p)["tunings"]
        for feature_set in sorted({tunings[run]["features"] for run in args.runs}):
            out = fold / "feature_sets" / feature_set
            step(["pipeline.embed", "--params", p, "--feature-set", feature_set, "--prepared", "data/prepared",
                  "--out", str(out), "--metrics", str(out) + ".json"], Path(str(out) + ".json"), f"embed {feature_set}")
        for run in args.runs:
            features = fold / "feature_sets" / tunings[run]["features"]
            for seed in args.seeds:
                runs_dir = fold / f"seed{seed}"
                artifacts = runs_dir / "variant_artifacts" / run
                model_dir = artifacts / tunings[run]["from"] / "model"
                step(["pipeline.train", "--tuning", run, "--params", p, "--features", str(features),
                      "--artifacts", str(artifacts), "--checkpoints", str(runs_dir / "checkpoints" / run),
                      "--metrics", str(runs_dir / "metrics" / run), "--source-artifacts", args.source_artifacts,
                      "--set", f"seed={seed}"], model_dir / "model.pt", f"tune {run} seed {seed}")
                folds.setdefault(f"{run}_seed{seed}", {})[talk] = str(model_dir)
    text_model = params["punctuate"]["text_model"]
    cross = [f"{name}={','.join(f'{talk}:{path}' for talk, path in by_talk.items())}"
             for name, by_talk in folds.items()]
    command = ["pipeline.evaluate_real", "--params", args.params, "--out", f"{args.out}.md", "--metrics",
               f"{args.out}.json", "--pause-model", "data/pauses/model.json", "--model", f"text_model={text_model}"]
    for entry in cross:
        command += ["--cross-fitted", entry]
    print(f"[scoring] {' '.join(command)}", flush=True)
    subprocess.run([sys.executable, "-m", *command], check=True)
    result = json.loads(Path(f"{args.out}.json").read_text(encoding="utf-8"))["models"]
    text = 100 * result["text_model"]["text"]["all"]["OVERALL"]["f1"]
    print(f"text_model: {text:.1f} (both talks, words alone)")
    for name in folds:
        timed = 100 * result[name]["timings"]["all"]["OVERALL"]["f1"]
        print(f"{name}: {timed:.1f} with the real timings, {timed - text:+.1f} over the text model")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
