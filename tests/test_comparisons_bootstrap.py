"""comparisons.bootstrap: the scorer's F1 from per-talk confusion matrices, the audio half's dev pseudo-talks as the
talk blocks, and a paired bootstrap that pairs."""

from __future__ import annotations

import numpy as np
import pytest

from comparisons.bootstrap import (f1_from_confusions, paired_bootstrap, read_confusions, split_talks, talk_confusions,
                                   talks_sha256)
from corpus.iwslt import write_iwslt
from corpus.labels import LABELS, PUNCTUATION_CLASSES
from corpus.talks import pseudo_talks
from corpus.text import normalize_transcript
from evaluation.scoring import score_labels
from tests.fixture_corpus import talk_text


def noisy(labels, rng, rate):
    """``labels`` with each one replaced by a random label at ``rate``."""
    return [LABELS[rng.integers(4)] if rng.random() < rate else label for label in labels]


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    words, labels = normalize_transcript(talk_text(7, 400))
    path = tmp_path_factory.mktemp("prepared") / "dev.tsv"
    write_iwslt(path, words, labels)
    return path, words, labels


def test_f1_from_confusions_is_the_scorers(dev):
    _, _, labels = dev
    rng = np.random.default_rng(0)
    for rate in (0.0, 0.3, 1.0):
        predicted = noisy(labels, rng, rate)
        talks = pseudo_talks(dev[1], labels, target_tokens=200)
        matrices = read_confusions(talk_confusions(labels, predicted, talks)).sum(axis=0).reshape(4, 4)
        micro, per_class = f1_from_confusions(matrices)
        scores = score_labels(labels, predicted)
        assert micro == pytest.approx(scores["OVERALL"]["f1"], abs=1e-12)
        assert per_class == pytest.approx([scores[c]["f1"] for c in PUNCTUATION_CLASSES], abs=1e-12)
    nothing = np.zeros((4, 4))
    assert f1_from_confusions(nothing)[0] == 0.0 and score_labels(["O"], ["O"])["OVERALL"]["f1"] == 0.0


def test_dev_is_cut_into_the_audio_halfs_pseudo_talks_unless_a_talks_file_says(dev, tmp_path):
    path, words, labels = dev
    talks = split_talks(path, talks_tsv=None, pseudo_talk_tokens=300)
    assert [(t.talk_id, t.first_token, t.tokens) for t in talks] == [
        (t.talk_id, t.first_token, t.tokens) for t in pseudo_talks(words, labels, target_tokens=300, prefix="dev")]
    assert sum(t.tokens for t in talks) == len(words) and len(talks) > 5
    ranges = tmp_path / "talks.tsv"
    ranges.write_text(f"talk\tfirst_token\ttokens\none\t0\t1000\ntwo\t1000\t{len(words) - 1000}\n", encoding="utf-8")
    named = split_talks(path, talks_tsv=ranges, pseudo_talk_tokens=300)
    assert [t.talk_id for t in named] == ["one", "two"] and talks_sha256(named) != talks_sha256(talks)


def test_the_bootstrap_pairs_the_arms_on_the_same_talks(dev):
    _, words, labels = dev
    talks = pseudo_talks(words, labels, target_tokens=150)
    rng = np.random.default_rng(1)
    arm_a = [read_confusions(talk_confusions(labels, noisy(labels, rng, 0.3), talks)) for _ in range(2)]
    arm_b = [read_confusions(talk_confusions(labels, noisy(labels, rng, 0.2), talks)) for _ in range(2)]
    same = paired_bootstrap(arm_a, arm_a, resamples=500, seed=3, level=0.95)
    assert same["difference"] == same["low"] == same["high"] == 0.0
    better = paired_bootstrap(arm_a, arm_b, resamples=500, seed=3, level=0.95)
    whole = [100 * (f1_from_confusions(b.sum(axis=0).reshape(4, 4))[0] - f1_from_confusions(
        a.sum(axis=0).reshape(4, 4))[0]) for a, b in zip(arm_a, arm_b)]
    assert better["difference"] == pytest.approx(np.mean(whole))
    assert 0 < better["low"] < better["difference"] < better["high"]
    assert set(better["classes"]) == set(PUNCTUATION_CLASSES) and better["talks"] == len(talks)
    assert paired_bootstrap(arm_a, arm_b, resamples=500, seed=3, level=0.95) == better  # seeded
    wider = paired_bootstrap(arm_a, arm_b, resamples=500, seed=3, level=0.99)
    assert wider["low"] < better["low"] and wider["high"] > better["high"]
    # paired: B is A with one error in fifty put right, a gain far below the talks' own spread of F1, still resolved
    a_labels = noisy(labels, rng, 0.3)
    b_labels = [ref if index % 50 == 0 else a for index, (ref, a) in enumerate(zip(labels, a_labels))]
    a_talks, b_talks = (read_confusions(talk_confusions(labels, p, talks)) for p in (a_labels, b_labels))
    small = paired_bootstrap([a_talks], [b_talks], resamples=500, seed=3, level=0.95)
    per_talk = f1_from_confusions(a_talks.reshape(-1, 4, 4))[0] * 100
    assert 0 < small["low"] and small["high"] - small["low"] < per_talk.std()
    with pytest.raises(ValueError, match="same talks"):
        paired_bootstrap(arm_a, [b[:-1] for b in arm_b], resamples=100, seed=0, level=0.95)
