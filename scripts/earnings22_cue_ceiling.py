"""What Earnings-22's real timing cues add to a model's labels through a classifier fitted beside it, on Earnings-22 dev only.

    python scripts/earnings22_cue_ceiling.py --control DIR --speech DIR [--earnings22 data/earnings22]
        [--folds 5] [--classifier linear|trees] [--decode f1|argmax] [--out reports/earnings22_cue_ceiling]

The issue asks the speech model for 3 F1 over its label-free control on Earnings-22 (test, through ``punctuate``);
on dev it gives +0.9 (``reports/comparisons/speech_model_cues.md``). Is that the head leaving the cues' information
unread, or is there not much more in them once the words are read? This script looks for what the head leaves.

A small classifier (``--classifier linear``, the default: scikit-learn's logistic regression; ``trees``:
gradient-boosted trees, seeded, the first report's) relabels every token of Earnings-22 dev from

* **the model's label probabilities** alone (``probabilities``): what re-weighting the classes gives, no cue;
* the same **and the real cues** of the token and its neighbours (``+ cues``): the pause after the token, the one
  before it (the previous token's), the next token's, how long the word was held, the missing flags;
* the same and the cues **against the speaker's local rate** (``+ local rate``): pause and duration minus their
  mean over the timed words within ``--rate-window`` tokens in the same call.

It is fitted and scored by cross-validation over calls (``--folds`` groups: a call's tokens are never in the fold
that fits the classifier that labels them), so nothing is fitted to the tokens it scores. The cues' gain is
``+ cues`` minus ``probabilities`` of the control: what a decision that sees both the control's reading of the words
and the cues gains from the cues. Fitted to accuracy, the classifier's most probable label marks too little for F1;
so it decides (``--decode f1``, the default) by the arg-max after one offset per mark, tuned for F1 on the fitting
calls alone (their out-of-fold probabilities). ``--decode argmax`` takes the most probable label (the first
report's decision: with trees it scored below the models' own labels, and so did trees tuned for F1). Where the
classifier over the probabilities alone scores below the model's own labels, its gain bounds nothing from above:
the report says so. Set beside it: the
speech model's own gain over the control, and the same classifier over the speech model's probabilities (what cues
the speech model still leaves unread). Differences come with the paired bootstrap over the 15 calls
(``comparisons.bootstrap``).

Both models read the calls' real word times (``data/earnings22/timing/dev``, as ``punctuate --alignment``
computes them). No test split is read. Writes ``OUT.md`` and ``OUT.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy or torch loads (experiments/numerics.py)

import numpy as np  # noqa: E402

from comparisons.bootstrap import f1_from_confusions, paired_bootstrap, read_confusions, talk_confusions  # noqa: E402
from corpus.io import atomic_write_text  # noqa: E402
from corpus.iwslt import read_iwslt  # noqa: E402
from corpus.labels import LABEL_TO_ID, LABELS, PUNCTUATION_CLASSES  # noqa: E402
from corpus.talks import Talk, train_talks  # noqa: E402
from embeddings.timing_features import encode, local_mean, word_groups  # noqa: E402
from evaluation.scoring import confusion_matrix  # noqa: E402

CUES = ("pause", "duration")
FEATURE_SETS = ("probabilities", "+ cues", "+ local rate")
#: How the classifier decides (relabel): the most probable label, or the arg-max after offsets tuned for F1
DECODES = ("argmax", "f1")
#: The classifier (relabel): logistic regression, or gradient-boosted trees
CLASSIFIERS = ("linear", "trees")


def cue_columns(tokens: list[str], raw: np.ndarray, talks: list[Talk], rate_window: int) -> dict[str, np.ndarray]:
    """The cue features of every token (module docstring): its encoded cues, its neighbours', and the local rate's."""
    cues = encode(raw, CUES)                                  # (N, 3): pause, duration, missing
    pause, duration, missing = cues[:, 0], cues[:, 1], cues[:, 2]
    carries = word_groups(tokens) & (missing == 0)            # the tokens that hold a word's cues

    def shifted(values: np.ndarray, by: int, fill: float) -> np.ndarray:
        out = np.full_like(values, fill)
        if by > 0:
            out[by:] = values[:-by]
        else:
            out[:by] = values[-by:]
        return out

    local_pause = np.zeros_like(pause)
    local_duration = np.zeros_like(duration)
    for talk in talks:  # a call's own words only
        span = slice(talk.first_token, talk.first_token + talk.tokens)
        for values, out in ((pause, local_pause), (duration, local_duration)):
            mean = local_mean(values[span], carries[span], rate_window)
            out[span] = np.where(carries[span], values[span] - mean, 0.0)
    return {
        "cues": np.stack([pause, duration, missing, carries.astype(np.float32),
                          shifted(pause, 1, 0.0), shifted(missing, 1, 1.0),
                          shifted(pause, -1, 0.0), shifted(duration, -1, 0.0), shifted(missing, -1, 1.0)], axis=1),
        "local": np.stack([local_pause, local_duration], axis=1),
    }


def micro_f1(reference: np.ndarray, predicted: np.ndarray) -> float:
    """Micro-averaged F1 over the marks of label-id arrays, the scorer's (``f1_from_confusions``); the confusions
    counted with one ``bincount``, as the offset search scores thousands of decisions."""
    classes = len(LABELS)
    confusions = np.bincount(np.asarray(reference) * classes + np.asarray(predicted), minlength=classes * classes)
    return float(f1_from_confusions(confusions.reshape(classes, classes))[0])


def f1_offsets(log_p: np.ndarray, reference: np.ndarray, *, grid: np.ndarray = np.arange(-3.0, 3.01, 0.25),
               passes: int = 3) -> np.ndarray:
    """Offsets added to each mark's log-probability (no mark's stays 0) that maximise micro F1 of the arg-max on
    these tokens: coordinate ascent over ``grid``, ``passes`` times. A classifier fitted to accuracy picks too few
    marks for F1; this is the decision a scorer of F1 rewards."""
    offsets = np.zeros(log_p.shape[1])
    best = micro_f1(reference, log_p.argmax(axis=1))
    for _ in range(passes):
        for label in range(1, log_p.shape[1]):
            for value in grid:
                trial = offsets.copy()
                trial[label] = value
                score = micro_f1(reference, (log_p + trial).argmax(axis=1))
                if score > best + 1e-12:
                    best, offsets = score, trial
    return offsets


def _classifier(kind: str, seed: int):
    """``linear``: multinomial logistic regression on standardised inputs (the model's own arg-max is one of its
    decisions, so over the probabilities alone it can match the model's labels); ``trees``: gradient-boosted trees
    (the first report's)."""
    if kind == "trees":
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier(max_iter=150, learning_rate=0.1, max_leaf_nodes=31,
                                              early_stopping=False, random_state=seed)
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=seed))


def _log_probabilities(classifier, features: np.ndarray, classes: int) -> np.ndarray:
    out = np.full((len(features), classes), np.log(1e-6))
    out[:, np.asarray(classifier.classes_)] = np.log(np.clip(classifier.predict_proba(features), 1e-6, 1.0))
    return out


def relabel(features: np.ndarray, reference: np.ndarray, groups: np.ndarray, *, folds: int, seed: int,
            decode: str = "f1", kind: str = "linear", inner_folds: int = 3) -> np.ndarray:
    """Each token's label from a classifier fitted on the other calls' tokens (cross-validation over calls).

    ``decode``: ``argmax``, the most probable label; ``f1``, the arg-max after :func:`f1_offsets` chosen on the
    fitting calls alone (their out-of-fold probabilities, ``inner_folds`` groups of calls), never on the calls
    scored. ``kind``: the classifier (:func:`_classifier`)."""
    from sklearn.model_selection import GroupKFold

    if decode not in DECODES:
        raise ValueError(f"decode must be one of {list(DECODES)}, got {decode!r}")
    if kind not in CLASSIFIERS:
        raise ValueError(f"kind must be one of {list(CLASSIFIERS)}, got {kind!r}")
    classes = len(LABELS)
    predicted = np.zeros(len(reference), dtype=np.int64)
    for fit_rows, score_rows in GroupKFold(n_splits=folds).split(features, reference, groups):
        classifier = _classifier(kind, seed).fit(features[fit_rows], reference[fit_rows])
        log_p = _log_probabilities(classifier, features[score_rows], classes)
        offsets = np.zeros(classes)
        if decode == "f1":
            inner = np.zeros((len(fit_rows), classes))
            for inner_fit, inner_score in GroupKFold(n_splits=inner_folds).split(fit_rows, groups=groups[fit_rows]):
                fitted = _classifier(kind, seed).fit(features[fit_rows[inner_fit]], reference[fit_rows[inner_fit]])
                inner[inner_score] = _log_probabilities(fitted, features[fit_rows[inner_score]], classes)
            offsets = f1_offsets(inner, reference[fit_rows])
        predicted[score_rows] = (log_p + offsets).argmax(axis=1)
    return predicted


def scores(reference: list[str], predicted: list[str], talks: list[Talk], mask: np.ndarray) -> dict[str, Any]:
    """F1 in points, micro and per class, on all tokens and on the tokens of ``mask``; the calls' confusions."""
    confusions = talk_confusions(reference, predicted, talks)
    micro, per_class = f1_from_confusions(read_confusions(confusions).sum(axis=0).reshape(4, 4))
    kept = np.flatnonzero(mask)
    timed_micro, _ = f1_from_confusions(confusion_matrix([reference[i] for i in kept], [predicted[i] for i in kept]))
    return {"f1": round(100 * float(micro), 2), "f1_tokens_with_cues": round(100 * float(timed_micro), 2),
            "classes": {c: round(100 * float(per_class[i]), 2) for i, c in enumerate(PUNCTUATION_CLASSES)},
            "confusions": confusions}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--control", type=Path, required=True, help="the label-free control's model directory")
    parser.add_argument("--speech", type=Path, required=True, help="the speech model's model directory")
    parser.add_argument("--earnings22", type=Path, default=Path("data/earnings22"))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--rate-window", type=int, default=50, help="tokens either side for the local rate")
    parser.add_argument("--seed", type=int, default=61)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--decode", choices=DECODES, default="f1",
                        help="the classifier's decision: f1 (offsets tuned for F1 on the fitting calls) or argmax")
    parser.add_argument("--classifier", choices=CLASSIFIERS, default="linear",
                        help="linear (logistic regression) or trees (gradient-boosted, the first report's)")
    parser.add_argument("--out", type=Path, default=Path("reports/earnings22_cue_ceiling"))
    args = parser.parse_args(argv)
    import torch

    from inference.punctuator import Punctuator

    torch.set_num_threads(args.threads)
    dev = read_iwslt(args.earnings22 / "dev.tsv")
    raw = np.load(args.earnings22 / "timing" / "dev" / "timing.npy")
    talks = train_talks(args.earnings22 / "dev.tsv", args.earnings22 / "dev_talks.tsv")
    reference = np.asarray([LABEL_TO_ID[label] for label in dev.labels])
    groups = np.zeros(len(dev), dtype=np.int64)
    for number, talk in enumerate(talks):
        groups[talk.first_token:talk.first_token + talk.tokens] = number
    has_cue = raw[:, 2] == 0
    columns = cue_columns(list(dev.words), raw, talks, args.rate_window)

    results: dict[str, dict[str, Any]] = {}
    for name, directory in (("control", args.control), ("speech", args.speech)):
        print(f"{name}: {directory}", flush=True)
        labels, probabilities = Punctuator(directory, device="cpu", batch_size=64).predict_label_probabilities(
            list(dev.words), raw)
        results[name] = scores(dev.labels, labels, talks, has_cue)
        log_p = np.log(np.clip(probabilities, 1e-6, 1.0))
        inputs = {"probabilities": log_p,
                  "+ cues": np.concatenate([log_p, columns["cues"]], axis=1),
                  "+ local rate": np.concatenate([log_p, columns["cues"], columns["local"]], axis=1)}
        for feature_set in FEATURE_SETS:
            predicted = relabel(inputs[feature_set], reference, groups, folds=args.folds, seed=args.seed,
                                decode=args.decode, kind=args.classifier)
            results[f"{name}, {feature_set}"] = scores(dev.labels, [LABELS[i] for i in predicted], talks, has_cue)
            print(f"  {feature_set}: F1 {results[f'{name}, {feature_set}']['f1']:.2f}", flush=True)

    pairs = {"the speech model over the control": ("control", "speech"),
             "the cues, over the control's probabilities (+ cues against probabilities)":
                 ("control, probabilities", "control, + cues"),
             "the local rate, over the control (+ local rate against + cues)":
                 ("control, + cues", "control, + local rate"),
             "cues the speech model leaves unread (+ local rate against probabilities)":
                 ("speech, probabilities", "speech, + local rate"),
             "the speech model relabelled with every cue, over the control's relabelled probabilities":
                 ("control, probabilities", "speech, + local rate")}
    differences = {what: paired_bootstrap([read_confusions(results[a]["confusions"])],
                                          [read_confusions(results[b]["confusions"])],
                                          resamples=10000, seed=59, level=0.95)
                   for what, (a, b) in pairs.items()}
    figures = {"split": "earnings22 dev", "tokens": len(dev), "calls": len(talks),
               "share_with_cues": round(float(has_cue.mean()), 4), "folds": args.folds,
               "rate_window": args.rate_window, "seed": args.seed, "decode": args.decode,
               "classifier": args.classifier,
               "models": {"control": str(args.control), "speech": str(args.speech)},
               "results": {name: {k: v for k, v in r.items() if k != "confusions"} for name, r in results.items()},
               "differences": {what: {"arms": list(pairs[what]), **{k: (round(v, 2) if isinstance(v, float) else v)
                                                                    for k, v in d.items() if k != "classes"},
                                      "classes": {c: {k: round(v, 2) for k, v in d["classes"][c].items()}
                                                  for c in PUNCTUATION_CLASSES}}
                               for what, d in differences.items()}}
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(figures, indent=1) + "\n")
    atomic_write_text(args.out.with_suffix(".md"), markdown(figures))
    print(args.out.with_suffix(".md").read_text(encoding="utf-8"))
    return 0


def markdown(figures: dict[str, Any]) -> str:
    lines = ["# What Earnings-22's real timing cues add through a classifier beside the model, on dev", "",
             "Written by `python scripts/earnings22_cue_ceiling.py` on Earnings-22 dev "
             f"({figures['tokens']:,} tokens, {figures['calls']} calls, {100 * figures['share_with_cues']:.0f} % of "
             f"the tokens with cues), cross-validated over calls ({figures['folds']} folds). F1 in points, "
             "micro-averaged over COMMA, PERIOD, QUESTION. No test split is read.", "",
             "| labels from | F1 | on tokens with cues | COMMA | PERIOD | QUESTION |", "|---|---|---|---|---|---|"]
    for name, r in figures["results"].items():
        c = r["classes"]
        lines.append(f"| {name} | {r['f1']:.1f} | {r['f1_tokens_with_cues']:.1f} | {c['COMMA']:.1f} | "
                     f"{c['PERIOD']:.1f} | {c['QUESTION']:.1f} |")
    lines += ["", "| difference | B − A | 95 % interval (bootstrap over calls) |", "|---|---|---|"]
    for what, d in figures["differences"].items():
        lines.append(f"| {what} | {d['difference']:+.2f} | {d['low']:+.2f} to {d['high']:+.2f} |")
    lines += ["", "- `control` and `speech`: the models' own labels, reading the real word times.",
              "- `probabilities`: a classifier over the model's label probabilities alone.",
              "- `+ cues`: the same and the real cues of the token and its neighbours.",
              f"- `+ local rate`: the same and the cues minus their mean within {figures['rate_window']} tokens.",
              "- Each classifier labels a call it was not fitted on.",
              "- The classifier: " + ("logistic regression on standardised inputs." if figures.get("classifier")
                                      == "linear" else "gradient-boosted trees."),
              "- Its decision: " + ("the arg-max after one offset per mark, tuned for F1 on the calls it was fitted "
                                    "on." if figures.get("decode", "argmax") == "f1" else "the most probable label.")]
    results = figures["results"]
    for name in ("control", "speech"):
        own, relabelled = results[name]["f1"], results[f"{name}, probabilities"]["f1"]
        if relabelled < own:
            lines.append(f"- Over {name}'s probabilities alone the classifier scores {relabelled:.1f}, below its own "
                         f"labels' {own:.1f}. So its gains are what it finds, not a ceiling.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
