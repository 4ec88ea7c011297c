"""The most a speaker-turn cue could add on Earnings-22 dev: each model's labels with every turn's end set right.

    python scripts/earnings22_turn_bound.py --models NAME=MODEL_DIR_OR_FILE [...] [--params params.yaml]
        [--calls ../shared/data/earnings22] [--earnings22 data/earnings22] [--out reports/earnings22_turn_bound]

Earnings-22 marks who speaks (the ``speaker`` column). A recogniser with diarisation knows it too, and a turn's last
word ends a sentence nine times in ten. No model here reads turns. Before building one, this script bounds what it
could give: a model's labels of Earnings-22 dev scored as they are, and again with the gold label put on every token
that ends a speaker's turn. A model is a model directory (labelled here through ``punctuate``'s decoding path, with
the calls' real word times where it reads them, on the ``evaluate`` settings of ``--params``) or a
``word<TAB>LABEL`` file of its labels (as the comparisons write them under
``runs/comparisons/SPEC/ARM/seedN/predictions/``). The difference is an upper bound: a real turn cue can do no
better than the gold label there, and it changes nothing elsewhere.

The turns are read from the calls' ``.nlp`` files (:func:`realspeech.earnings22.call_cues`, as the
``prepare_earnings22`` stage reads them); the tokens must be ``data/earnings22/dev.tsv``'s, call by call. No test
split is read. Writes ``OUT.md`` and ``OUT.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy loads (experiments/numerics.py)

import numpy as np  # noqa: E402

from corpus.earnings22 import call_path, read_call  # noqa: E402
from corpus.io import atomic_write_text  # noqa: E402
from corpus.iwslt import read_iwslt  # noqa: E402
from corpus.labels import LABELS, PUNCTUATION_CLASSES  # noqa: E402
from corpus.talks import Talk, train_talks  # noqa: E402
from evaluation.scoring import score_labels  # noqa: E402
from realspeech.earnings22 import call_cues  # noqa: E402


def turn_ends(calls_dir: Path, split_tsv: Path, talks_tsv: Path) -> tuple[list[Talk], np.ndarray]:
    """The split's calls (its talks, tiling the split) and whether each token ends a speaker's turn (the next word
    is another speaker's), the calls' tokens checked against the prepared split's."""
    talks = train_talks(split_tsv, talks_tsv)
    turn = np.zeros(sum(talk.tokens for talk in talks), dtype=bool)
    for talk in talks:
        path = call_path(calls_dir, talk.talk_id)
        cues = call_cues(read_call(path, talk.talk_id))
        if cues.tokens != talk.words:
            raise ValueError(f"{split_tsv}: call {talk.talk_id}'s tokens are not those of {path}")
        turn[talk.first_token:talk.first_token + talk.tokens] = cues.turn
    return talks, turn


def f1(reference: list[str], predicted: list[str]) -> tuple[float, dict[str, float]]:
    """Overall and per-class F1 in points, by the project's scorer."""
    scores = score_labels(reference, predicted)
    return round(100 * scores["OVERALL"]["f1"], 2), {c: round(100 * scores[c]["f1"], 2) for c in PUNCTUATION_CLASSES}


def turn_bound(labels: list[str], predicted: list[str], turn: np.ndarray) -> dict[str, Any]:
    """F1 as predicted and with the gold label on every turn's end; how many turn ends were right."""
    if len(predicted) != len(labels):
        raise ValueError(f"{len(predicted)} predicted labels for {len(labels)} tokens")
    corrected = [gold if at_turn else label for label, gold, at_turn in zip(predicted, labels, turn)]
    as_is, per_class = f1(labels, predicted)
    bound, bound_per_class = f1(labels, corrected)
    ends = np.flatnonzero(turn)
    return {"f1": as_is, "classes": per_class, "f1_turn_ends_gold": bound, "classes_turn_ends_gold": bound_per_class,
            "bound": round(bound - as_is, 2), "right_at_turn_ends": int(sum(predicted[i] == labels[i] for i in ends))}


def model_labels(source: Path, words: list[str], timing: np.ndarray, evaluate: dict[str, Any]) -> list[str]:
    """A model's labels of the split: read from its file, or given by the model directory ``source``."""
    if not source.is_dir():
        return read_predictions(source, words)
    from comparisons.ab import punctuator_labels

    return punctuator_labels(source, words, evaluate, timing)


def read_predictions(path: Path, words: list[str]) -> list[str]:
    predicted = read_iwslt(path)
    if list(predicted.words) != words:
        raise ValueError(f"{path}: its words are not the split's ({len(predicted.words)} rows, {len(words)} tokens)")
    return list(predicted.labels)


def markdown(figures: dict[str, Any]) -> str:
    counts = figures["turn_end_labels"]
    lines = ["# Speaker turns on Earnings-22 dev: the most a turn cue could add", "",
             f"Written by `python scripts/earnings22_turn_bound.py` from each model's labels of Earnings-22 dev "
             f"({figures['tokens']:,} tokens, {figures['calls']} calls, {figures['turn_ends']} turn ends: "
             + ", ".join(f"{label} {counts[label]}" for label in LABELS)
             + "). F1 in points, micro-averaged over COMMA, PERIOD, QUESTION. No test split is read.", "",
             "| model | F1 | right at turn ends | F1, every turn end gold | bound | COMMA | PERIOD | QUESTION |",
             "|---|---|---|---|---|---|---|---|"]
    for name, row in figures["models"].items():
        classes = " | ".join(f"{row['classes'][c]:.1f} → {row['classes_turn_ends_gold'][c]:.1f}"
                             for c in PUNCTUATION_CLASSES)
        lines.append(f"| {name} | {row['f1']:.2f} | {row['right_at_turn_ends']} of {figures['turn_ends']} | "
                     f"{row['f1_turn_ends_gold']:.2f} | +{row['bound']:.2f} | {classes} |")
    lines += ["", "- bound: F1 with every turn end gold minus F1 as predicted; a turn cue can add no more.",
              "- Per class: as predicted → with every turn end gold.",
              "- Models that read timing cues read the calls' real word times.",
              "", "Models: " + ", ".join(f"`{name}`: `{path}`" for name, path in figures["models_read"].items()), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", required=True, metavar="NAME=PATH",
                        help="a model directory, or a file of its labels of Earnings-22 dev (word<TAB>LABEL)")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"), help="its evaluate settings label")
    parser.add_argument("--calls", type=Path, default=Path("../shared/data/earnings22"),
                        help="Earnings-22 as distributed (data.earnings22_dir)")
    parser.add_argument("--earnings22", type=Path, default=Path("data/earnings22"), help="the prepared splits")
    parser.add_argument("--out", type=Path, default=Path("reports/earnings22_turn_bound"))
    args = parser.parse_args(argv)
    from experiments.params import load_params

    named = dict(item.split("=", 1) for item in args.models)
    evaluate = load_params(args.params)["evaluate"]
    talks, turn = turn_ends(args.calls, args.earnings22 / "dev.tsv", args.earnings22 / "dev_talks.tsv")
    words = [word for talk in talks for word in talk.words]
    labels = [label for talk in talks for label in talk.labels]
    timing = np.load(args.earnings22 / "timing" / "dev" / "timing.npy")
    figures: dict[str, Any] = {
        "tokens": len(words), "calls": len(talks), "turn_ends": int(turn.sum()),
        "turn_end_labels": {label: int(sum(labels[i] == label for i in np.flatnonzero(turn))) for label in LABELS},
        "models_read": named,
        "models": {name: turn_bound(labels, model_labels(Path(path), words, timing, evaluate), turn)
                   for name, path in named.items()},
    }
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(figures, indent=1) + "\n")
    atomic_write_text(args.out.with_suffix(".md"), markdown(figures))
    print(markdown(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
