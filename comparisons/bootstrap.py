"""The paired bootstrap over talks: how sure a difference in F1 between two arms is, given which talks dev holds.

A split is cut into talks (:func:`split_talks`): the talks of a ``talk first_token tokens`` file where the spec
names one, else the pseudo-talks the audio half cuts ``dev2012`` into (:func:`corpus.talks.pseudo_talks`, about
``audio.dev_pseudo_talk_tokens`` tokens each, cut at a sentence end). A model's predictions are kept as one 4x4
confusion matrix per talk (:func:`talk_confusions`), from which the benchmark's scores of any set of talks follow.

:func:`paired_bootstrap` draws talks with replacement (seeded) and scores arm A and arm B on the same draw, seed by
seed, so a talk that is hard for both counts against both: the difference B - A of the micro-averaged F1
(COMMA/PERIOD/QUESTION, :mod:`evaluation.scoring`'s definitions), averaged over the seeds, per draw. Its
percentile interval is the report's interval; per class likewise.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from corpus.iwslt import read_iwslt
from corpus.labels import LABEL_TO_ID, LABELS, PUNCTUATION_CLASSES
from corpus.talks import Talk, pseudo_talks, train_talks
from evaluation.scoring import confusion_matrix

#: the label ids of the marks scored (COMMA, PERIOD, QUESTION), in the scorer's order
MARK_IDS = [LABEL_TO_ID[c] for c in PUNCTUATION_CLASSES]


def split_talks(split_tsv: str | Path, *, talks_tsv: str | Path | None, pseudo_talk_tokens: int) -> list[Talk]:
    """The talks of the prepared split ``split_tsv``: those of ``talks_tsv`` (``talk first_token tokens``), or its
    pseudo-talks of about ``pseudo_talk_tokens`` tokens (the blocks the audio half makes of dev2012)."""
    if talks_tsv is not None:
        return train_talks(split_tsv, talks_tsv)
    data = read_iwslt(split_tsv)
    return pseudo_talks(data.words, data.labels, target_tokens=pseudo_talk_tokens, prefix=Path(split_tsv).stem)


def talks_sha256(talks: Sequence[Talk]) -> str:
    """What the talk blocks are (names and token ranges): results scored on other blocks are not paired."""
    ranges = [[talk.talk_id, talk.first_token, talk.tokens] for talk in talks]
    return hashlib.sha256(json.dumps(ranges).encode()).hexdigest()


def talk_confusions(reference: Sequence[str], predicted: Sequence[str], talks: Sequence[Talk]) -> list[str]:
    """One confusion matrix per talk (rows reference, columns prediction, :data:`corpus.labels.LABELS` order),
    each flattened to a line of 16 integers (:func:`read_confusions` reads them back)."""
    if len(reference) != len(predicted):
        raise ValueError(f"{len(reference)} reference labels but {len(predicted)} predicted")
    return [" ".join(map(str, confusion_matrix(reference[t.first_token:t.first_token + t.tokens],
                                               predicted[t.first_token:t.first_token + t.tokens]).ravel()))
            for t in talks]


def read_confusions(lines: Sequence[str]) -> np.ndarray:
    """:func:`talk_confusions`' lines as a (talks, 16) array."""
    return np.asarray([[int(n) for n in line.split()] for line in lines], dtype=np.int64).reshape(-1, len(LABELS) ** 2)


def f1_from_confusions(matrices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(micro F1 (...), per-class F1 (..., 3))`` of confusion matrices (..., 4, 4), as fractions: the scorer's
    definitions (:func:`evaluation.scoring.score_labels`), where F1 = 2 C / (predicted + reference) marks and a
    zero denominator gives 0."""
    matrices = np.asarray(matrices, dtype=np.float64)
    diagonal = matrices[..., MARK_IDS, MARK_IDS]                 # (..., 3): true positives per class
    predicted = matrices[..., :, MARK_IDS].sum(axis=-2)          # (..., 3): predicted as the class
    reference = matrices[..., MARK_IDS, :].sum(axis=-1)          # (..., 3): the class in the reference
    per_class = _f1(diagonal, predicted + reference)
    micro = _f1(diagonal.sum(axis=-1), (predicted + reference).sum(axis=-1))
    return micro, per_class


def _f1(correct: np.ndarray, marks: np.ndarray) -> np.ndarray:
    return np.divide(2 * correct, marks, out=np.zeros_like(correct, dtype=np.float64), where=marks > 0)


def paired_bootstrap(arm_a: Sequence[np.ndarray], arm_b: Sequence[np.ndarray], *, resamples: int, seed: int,
                     level: float) -> dict[str, Any]:
    """The paired bootstrap of B - A over talks. ``arm_a``/``arm_b``: per seed (in the same order), the talks'
    flattened confusion matrices (talks, 16) of the same talks. Returns F1 points: ``difference`` (the mean over
    seeds of B - A on all talks), ``low``/``high`` (the ``level`` percentile interval of that mean over
    ``resamples`` draws of talks), and the same per class (``classes``)."""
    if not arm_a or len(arm_a) != len(arm_b):
        raise ValueError("give both arms' confusions for the same seeds")
    stacked = {name: np.stack([np.asarray(c, dtype=np.float64).reshape(-1, len(LABELS) ** 2) for c in arm])
               for name, arm in (("A", arm_a), ("B", arm_b))}          # (seeds, talks, 16)
    talks = stacked["A"].shape[1]
    if stacked["B"].shape != stacked["A"].shape:
        raise ValueError("both arms must be scored on the same talks")
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(talks, np.full(talks, 1.0 / talks), size=resamples).astype(np.float64)  # (R, talks)

    def scores(confusions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # (seeds, talks, 16) -> per draw
        drawn = np.einsum("rt,stk->srk", weights, confusions).reshape(*confusions.shape[:1], resamples, 4, 4)
        return f1_from_confusions(drawn)                                  # (seeds, R), (seeds, R, 3)

    def whole(confusions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return f1_from_confusions(confusions.sum(axis=1).reshape(-1, 4, 4))  # (seeds,), (seeds, 3)

    (micro_a, class_a), (micro_b, class_b) = scores(stacked["A"]), scores(stacked["B"])
    (all_a, all_class_a), (all_b, all_class_b) = whole(stacked["A"]), whole(stacked["B"])
    tail = (1 - level) / 2 * 100
    micro_draws = 100 * (micro_b - micro_a).mean(axis=0)                  # (R,)
    class_draws = 100 * (class_b - class_a).mean(axis=0)                  # (R, 3)
    low, high = np.percentile(micro_draws, [tail, 100 - tail])
    class_low, class_high = np.percentile(class_draws, [tail, 100 - tail], axis=0)
    return {
        "difference": float(100 * (all_b - all_a).mean()), "low": float(low), "high": float(high),
        "classes": {c: {"difference": float(100 * (all_class_b[:, i] - all_class_a[:, i]).mean()),
                        "low": float(class_low[i]), "high": float(class_high[i])}
                    for i, c in enumerate(PUNCTUATION_CLASSES)},
        "talks": talks, "seeds": len(arm_a), "resamples": resamples, "seed": seed, "level": level,
    }
