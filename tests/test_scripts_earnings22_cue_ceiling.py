"""scripts/earnings22_cue_ceiling.py: micro F1 as the scorer counts it, offsets tuned for F1, and a relabelling
whose offsets never see the calls it labels."""

from __future__ import annotations

import numpy as np
import pytest

from corpus.labels import LABELS
from evaluation.scoring import score_labels
from tests.helpers import load_script

ceiling = load_script("earnings22_cue_ceiling")


def test_micro_f1_is_the_scorer_s():
    rng = np.random.default_rng(0)
    reference, predicted = rng.integers(0, 4, 500), rng.integers(0, 4, 500)
    expected = score_labels([LABELS[i] for i in reference], [LABELS[i] for i in predicted])["OVERALL"]["f1"]
    assert ceiling.micro_f1(reference, predicted) == pytest.approx(expected)
    assert ceiling.micro_f1(np.zeros(5, int), np.zeros(5, int)) == 0.0


def test_offsets_mark_more_where_the_classifier_marks_too_little():
    """A calibrated but timid classifier: every mark has probability 0.4 against no mark's 0.6, and is right. The
    arg-max marks nothing (F1 0); a positive offset marks them all (F1 100)."""
    reference = np.array([0, 1, 0, 2, 0, 3] * 20)
    probabilities = np.full((len(reference), 4), 0.0)
    probabilities[:, 0] = 0.6
    probabilities[np.arange(len(reference)), np.where(reference > 0, reference, 0)] = np.where(reference > 0, 0.4,
                                                                                               1.0)
    log_p = np.log(np.clip(probabilities, 1e-6, 1.0))
    assert ceiling.micro_f1(reference, log_p.argmax(axis=1)) == 0.0
    offsets = ceiling.f1_offsets(log_p, reference)
    assert offsets[0] == 0 and (offsets[1:] > 0).all()
    assert ceiling.micro_f1(reference, (log_p + offsets).argmax(axis=1)) == pytest.approx(1.0)


def test_relabelling_tunes_offsets_on_other_calls_and_beats_the_argmax_on_a_rare_mark():
    """A feature that makes a mark likely but hardly ever more likely than no mark: the arg-max marks few tokens;
    tuned for F1 on the fitting calls, the decision marks more and F1 rises on the calls scored."""
    rng = np.random.default_rng(1)
    calls, per_call = 6, 600
    signal = rng.random(calls * per_call)
    reference = np.where(rng.random(len(signal)) < 0.45 * signal, 1, 0)  # at most 45 % PERIOD where signal is 1
    groups = np.repeat(np.arange(calls), per_call)
    features = signal[:, None]
    for kind in ceiling.CLASSIFIERS:
        argmax = ceiling.relabel(features, reference, groups, folds=3, seed=0, decode="argmax", kind=kind)
        tuned = ceiling.relabel(features, reference, groups, folds=3, seed=0, decode="f1", kind=kind)
        assert (argmax > 0).mean() < 0.1 < 0.4 < (tuned > 0).mean(), kind  # about 21 % of the tokens are marked
        assert ceiling.micro_f1(reference, tuned) > ceiling.micro_f1(reference, argmax) + 0.2, kind
    with pytest.raises(ValueError, match="decode"):
        ceiling.relabel(features, reference, groups, folds=3, seed=0, decode="best")
    with pytest.raises(ValueError, match="kind"):
        ceiling.relabel(features, reference, groups, folds=3, seed=0, kind="forest")


def test_the_linear_classifier_over_probabilities_alone_keeps_the_model_s_labels():
    """Over the model's log-probabilities the linear classifier can take the model's own arg-max: on calls it was
    not fitted on, it labels as the model does (the trees, fitted on other calls, need not)."""
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(3000, 4)) * 2
    reference = logits.argmax(axis=1)
    noisy = np.where(rng.random(3000) < 0.15, rng.integers(0, 4, 3000), reference)  # the model 85 % right
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    groups = np.repeat(np.arange(6), 500)
    relabelled = ceiling.relabel(log_p, noisy, groups, folds=3, seed=0, decode="argmax", kind="linear")
    assert np.mean(relabelled == reference) > 0.95
