"""Speech2Vec on tiny synthetic word segments: training, type-level and per-occurrence export, neighbourhoods."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from embeddings.speech2vec import (
    Speech2VecConfig,
    Speech2VecError,
    collect_training_data,
    keep_probabilities,
    load_occurrences,
    load_segments,
    train_speech2vec,
)

WORDS = ["the", "cat", "sat", "on", "mat", "rare"]
N_MFCC = 5


def write_acoustic(root: Path, split: str, words: list[str], *, has_audio: np.ndarray | None = None,
                   seed: int = 0) -> None:
    """MFCC frames whose level depends on the word (so words are tellable apart), random lengths."""
    rng = np.random.default_rng(seed)
    has_audio = np.ones(len(words), bool) if has_audio is None else has_audio
    pieces, offsets = [], [0]
    for word, audio in zip(words, has_audio):
        length = int(rng.integers(4, 12)) if audio else 0
        level = WORDS.index(word) if word in WORDS else 0
        pieces.append(level + 0.3 * rng.normal(size=(length, N_MFCC)))
        offsets.append(offsets[-1] + length)
    target = root / split
    target.mkdir(parents=True, exist_ok=True)
    np.save(target / "mfcc.npy", np.concatenate(pieces).astype(np.float32))
    np.save(target / "mfcc_offsets.npy", np.asarray(offsets, np.int64))
    np.save(target / "has_audio.npy", has_audio)


def write_prepared(root: Path, split: str, words: list[str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{split}.tsv").write_text("".join(f"{w}\tO\n" for w in words), encoding="utf-8")


@pytest.fixture()
def corpus(tmp_path):
    rng = np.random.default_rng(1)
    train = [WORDS[i] for i in rng.integers(0, 5, size=240)] + ["rare"]  # "rare" occurs once
    ref = [WORDS[i] for i in rng.integers(0, 5, size=40)]
    acoustic, prepared = tmp_path / "acoustic", tmp_path / "prepared"
    for split, words in (("train", train), ("ref", ref)):
        write_prepared(prepared, split, words)
    no_audio = np.ones(len(train), bool)
    no_audio[10:20] = False  # tokens without audio get no occurrence vector
    write_acoustic(acoustic, "train", train, has_audio=no_audio)
    write_acoustic(acoustic, "ref", ref, seed=2)
    return acoustic, prepared, train, ref


CONFIG = dict(dim=6, encoder_hidden=8, decoder_hidden=8, window=2, min_count=2, subsample=0.0, max_frames=10,
              epochs=4, batch_size=16, lr=0.01, threads=1, train_splits=("train",))


def test_training_writes_type_and_occurrence_vectors(corpus, tmp_path):
    from gensim.models import KeyedVectors

    acoustic, prepared, train, ref = corpus
    out = tmp_path / "s2v"
    summary = train_speech2vec(acoustic, prepared, out, config=Speech2VecConfig(**CONFIG), embed_splits=["train", "ref"])
    assert summary["epoch_losses"][-1] < summary["epoch_losses"][0]  # it learns to reconstruct neighbours

    kv = KeyedVectors.load_word2vec_format(str(out / "vectors.txt"), binary=False)
    assert kv.vector_size == 6
    assert set(kv.index_to_key) == set(WORDS[:5])  # "rare" is below min_count
    assert summary["vocabulary"] == 5

    # a word's type vector is the mean of the embeddings of its training segments
    dense, mask = load_occurrences(out, "train", len(train))
    assert mask.sum() == len(train) - 10 and not mask[10:20].any()
    assert np.all(dense[~mask] == 0)
    for word in WORDS[:5]:
        rows = [i for i, w in enumerate(train) if w == word and mask[i]]
        np.testing.assert_allclose(kv[word], dense[rows].mean(axis=0), atol=1e-5)
    assert mask[len(train) - 1]  # the rare word still gets its occurrence vector

    dense_ref, mask_ref = load_occurrences(out, "ref", len(ref))
    assert mask_ref.all() and dense_ref.shape == (len(ref), 6)
    assert summary["occurrences"]["ref"] == {"tokens": len(ref), "tokens_with_vector": len(ref)}


def test_neighbours_stay_within_window_and_talk(corpus, tmp_path):
    acoustic, prepared, train, _ = corpus
    talks = tmp_path / "talks.tsv"
    from corpus.talks_table import TALK_COLUMNS

    rows = ["\t".join(TALK_COLUMNS)]
    for talk, (first, count) in enumerate(((0, 100), (100, len(train) - 100))):
        values = {"split": "train", "talk": f"t{talk}", "first_token": str(first), "tokens": str(count)}
        rows.append("\t".join(values.get(column, "") for column in TALK_COLUMNS))
    talks.write_text("\n".join(rows) + "\n", encoding="utf-8")
    segments = load_segments(acoustic, prepared, "train", talks)
    assert segments.talk_of_token[99] == 0 and segments.talk_of_token[100] == 1
    config = Speech2VecConfig(**{**CONFIG, "min_count": 1})
    data = collect_training_data([segments], config)
    tokens = segments.audio_tokens  # min_count 1: every segment is kept, in token order
    for position, near in enumerate(data.neighbours):
        token = tokens[position]
        for other_position, offset in near:
            other = tokens[other_position]
            assert other - token == offset and 0 < abs(offset) <= config.window
            assert segments.talk_of_token[other] == segments.talk_of_token[token]
            assert segments.has_audio[other]


def test_subsampling_keeps_rare_words():
    counts = Counter({"the": 900, "cat": 90, "zebra": 10})
    keep = keep_probabilities(["the", "cat", "zebra"], counts, 0.01)
    assert keep[0] < keep[1] <= keep[2] == 1.0
    np.testing.assert_allclose(keep[0], np.sqrt(0.01 / 0.9) + 0.01 / 0.9)
    assert np.all(keep_probabilities(["the"], counts, 0.0) == 1.0)


def test_bad_input_is_named(corpus, tmp_path):
    acoustic, prepared, train, _ = corpus
    write_prepared(prepared, "train", train[:-5])  # the features no longer match the tokens
    with pytest.raises(Speech2VecError, match="train.tsv"):
        load_segments(acoustic, prepared, "train")
    with pytest.raises(FileNotFoundError, match="features stage"):
        load_segments(acoustic, prepared, "dev")
    write_prepared(prepared, "train", train)
    write_acoustic(acoustic, "train", train, has_audio=np.zeros(len(train), bool))
    with pytest.raises(Speech2VecError, match="no training segments"):
        train_speech2vec(acoustic, prepared, tmp_path / "s2v", config=Speech2VecConfig(**CONFIG))
    with pytest.raises(Speech2VecError, match="unknown keys"):
        Speech2VecConfig.from_dict({"dims": 3})
