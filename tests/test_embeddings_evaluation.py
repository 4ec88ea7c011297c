"""Word-similarity and homophone checks of word vectors."""

from __future__ import annotations

import numpy as np
import pytest
from gensim.models import KeyedVectors

from embeddings.evaluation import (
    compare_word_similarity,
    homophone_check,
    read_word_pairs,
    wordsim353_path,
)


def keyed(vectors: dict[str, list[float]]) -> KeyedVectors:
    kv = KeyedVectors(vector_size=len(next(iter(vectors.values()))))
    kv.add_vectors(list(vectors), np.asarray(list(vectors.values()), np.float32))
    return kv


def test_wordsim353_ships_with_gensim():
    pairs = read_word_pairs(wordsim353_path())
    assert len(pairs) == 353 and all(0 <= score <= 10 for _, _, score in pairs)


def test_similarity_is_scored_on_own_and_common_pairs(tmp_path):
    pairs = [("a", "b", 9.0), ("a", "c", 5.0), ("a", "d", 1.0), ("b", "d", 2.0), ("x", "a", 3.0)]
    angles = {"a": 0.0, "b": 0.2, "c": 0.8, "d": 1.5}
    good = keyed({w: [np.cos(t), np.sin(t)] for w, t in angles.items()})     # cosine falls as ratings fall
    bad = keyed({w: [np.cos(-t * 3), np.sin(t)] for w, t in angles.items()} | {"x": [1.0, 0.0]})
    result = compare_word_similarity({"good": good, "bad": bad}, pairs)
    assert result["common_pairs"] == 4
    assert result["sources"]["good"]["covered_pairs"] == 4 and result["sources"]["bad"]["covered_pairs"] == 5
    assert result["sources"]["good"]["spearman_common"] == pytest.approx(1.0)
    assert result["sources"]["bad"]["spearman_common"] < result["sources"]["good"]["spearman_common"]


def test_homophone_rank_and_random_baseline():
    kv = keyed({"write": [1.0, 0.0, 0.0], "right": [0.9, 0.1, 0.0], "left": [0.0, 1.0, 0.0],
                "two": [0.0, 0.0, 1.0], "too": [0.0, 1.0, 0.1], "wood": [0.5, 0.5, 0.5]})
    result = homophone_check(kv, [("write", "right"), ("two", "too"), ("hear", "here")], random_pairs=500)
    rows = {tuple(r["pair"]): r for r in result["rows"]}
    assert result["covered_pairs"] == 2 and ("hear", "here") not in rows
    assert rows[("write", "right")]["rank"] == 1          # the nearest other word
    assert rows[("two", "too")]["rank"] > 1               # "wood" is nearer to "two" than "too" is
    assert -1 <= result["random_pair_mean_cosine"] <= 1
    assert result["median_rank"] == np.median([r["rank"] for r in result["rows"]])
