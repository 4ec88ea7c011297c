"""Speech sources in the feature cache: sum/concat, coverage masks, acoustic features, per-occurrence vectors,
content-based invalidation, and text-only inference refusing audio-only models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from embeddings.cache import build_feature_cache
from embeddings.sources import SourceSpecError
from embeddings.speech_sources import SpeechVectors, combine_vectors, validate_speech_spec
from embeddings.store import SPEECH_JSON, load_split, read_manifest
from tests.helpers import write_word2vec_text
from tests.test_embeddings_cache import SPLITS, VECTORS, write_split

SPEECH = {"the": [1.0, 0.0, 0.0, 0.0], "cat": [0.0, 2.0, 0.0, 0.0], "mat": [0.0, 0.0, 3.0, 0.0]}


@pytest.fixture()
def setup(tmp_path):
    prepared = tmp_path / "prepared"
    for split, rows in SPLITS.items():
        write_split(prepared / f"{split}.tsv", rows)
    word = {"type": "word2vec-text", "path": str(write_word2vec_text(tmp_path / "word.txt", VECTORS))}
    speech = {"type": "word2vec-text", "path": str(write_word2vec_text(tmp_path / "speech.txt", SPEECH))}
    return prepared, word, speech, tmp_path


def words_of(split):
    return [w for w, _ in SPLITS[split]]


def test_sum_adds_speech_where_the_word_has_a_speech_vector(setup):
    prepared, word, speech, tmp = setup
    paths = build_feature_cache(prepared, tmp / "f", word_source=word, oov="zero", speech_source=speech, combine="sum")
    train = load_split(paths.root, "train")
    has_speech = np.load(paths.root / "train" / "has_speech.npy")
    for i, w in enumerate(words_of("train")):
        expected = np.asarray(VECTORS.get(w, [0.0] * 4), np.float32) + np.asarray(SPEECH.get(w, [0.0] * 4), np.float32)
        np.testing.assert_allclose(train.vectors[i], expected, atol=1e-6)
        assert has_speech[i] == (w in SPEECH)
    manifest = read_manifest(paths.root)
    assert manifest["dim"] == 4 and manifest["speech"]["combine"] == "sum"
    assert manifest["splits"]["train"]["speech_tokens"] == sum(w in SPEECH for w in words_of("train"))
    assert json.loads((paths.root / "embedder" / SPEECH_JSON).read_text())["needs_audio"] is False


def test_concat_and_speech_only_and_dimension_mismatch(setup):
    prepared, word, speech, tmp = setup
    paths = build_feature_cache(prepared, tmp / "c", word_source=word, oov="zero", speech_source=speech,
                                combine="concat")
    ref = load_split(paths.root, "ref")
    assert ref.vectors.shape == (3, 8)
    np.testing.assert_allclose(ref.vectors[2], VECTORS["mat"] + SPEECH["mat"], atol=1e-6)  # list concatenation

    only = build_feature_cache(prepared, tmp / "s", word_source={"type": "none"}, oov="zero", speech_source=speech)
    np.testing.assert_allclose(load_split(only.root, "ref").vectors[2], SPEECH["mat"])

    three = {"type": "word2vec-text", "path": str(tmp / "three.txt")}
    Path(three["path"]).write_text("1 3\nthe 1 2 3\n", encoding="utf-8")
    with pytest.raises(SourceSpecError, match="word vectors have 4 and the speech vectors 3.*concat"):
        build_feature_cache(prepared, tmp / "bad", word_source=word, oov="zero", speech_source=three)
    assert not (tmp / "bad").exists()


def test_word_only_manifest_is_unchanged_by_speech_support(setup):
    prepared, word, _, tmp = setup
    paths = build_feature_cache(prepared, tmp / "w", word_source=word, oov="zero")
    manifest = read_manifest(paths.root)
    assert "speech" not in manifest and not (paths.root / "train" / "has_speech.npy").exists()
    assert not (paths.root / "embedder" / SPEECH_JSON).exists()


def test_changed_speech_vectors_rebuild_the_cache(setup):
    prepared, word, speech, tmp = setup
    first = build_feature_cache(prepared, tmp / "f", word_source=word, oov="zero", speech_source=speech)
    again = build_feature_cache(prepared, tmp / "f", word_source=word, oov="zero", speech_source=speech)
    assert first.rebuilt and not again.rebuilt
    write_word2vec_text(Path(speech["path"]), {**SPEECH, "the": [9.0, 9.0, 9.0, 9.0]})  # same path, new content
    rebuilt = build_feature_cache(prepared, tmp / "f", word_source=word, oov="zero", speech_source=speech)
    assert rebuilt.rebuilt
    np.testing.assert_allclose(load_split(rebuilt.root, "train").vectors[0], np.add(VECTORS["the"], 9.0))
    combined = build_feature_cache(prepared, tmp / "f", word_source=word, oov="zero", speech_source=speech,
                                   combine="concat")
    assert combined.rebuilt  # the combine mode is part of the key too


def write_acoustic_split(root: Path, split: str, values: np.ndarray, missing: np.ndarray) -> None:
    (root / split).mkdir(parents=True, exist_ok=True)
    np.save(root / split / "features.npy", values.astype(np.float32))
    np.save(root / split / "missing.npy", missing)


def test_acoustic_features_are_standardised_on_train_with_a_missing_mask(setup):
    prepared, word, _, tmp = setup
    acoustic = tmp / "acoustic"
    n = {split: len(rows) for split, rows in SPLITS.items()}
    train_values = np.arange(n["train"] * 3, dtype=np.float32).reshape(-1, 3)
    train_missing = np.zeros((n["train"], 3), bool)
    train_missing[0] = True  # a token without audio
    write_acoustic_split(acoustic, "train", train_values, train_missing)
    for split in ("dev", "ref", "asr"):
        write_acoustic_split(acoustic, split, np.full((n[split], 3), 7.0), np.zeros((n[split], 3), bool))
    spec = {"type": "acoustic", "path": str(acoustic)}
    with pytest.raises(SourceSpecError, match="concat"):  # 4 word dimensions, 3 + 3 acoustic ones
        build_feature_cache(prepared, tmp / "a", word_source=word, oov="zero", speech_source=spec)
    paths = build_feature_cache(prepared, tmp / "a", word_source=word, oov="zero", speech_source=spec,
                                combine="concat")
    train = load_split(paths.root, "train")
    assert train.vectors.shape == (n["train"], 4 + 6)
    speech = train.vectors[:, 4:]
    present = train_values[1:]
    mean, std = present.mean(axis=0), present.std(axis=0)
    np.testing.assert_allclose(speech[1:, :3], (present - mean) / std, atol=1e-5)
    assert np.all(speech[0, :3] == 0) and np.all(speech[0, 3:] == 1) and np.all(speech[1:, 3:] == 0)
    assert not np.load(paths.root / "train" / "has_speech.npy")[0]
    np.testing.assert_allclose(load_split(paths.root, "ref").vectors[:, 4:7], np.tile((7.0 - mean) / std, (3, 1)), atol=1e-5)

    write_acoustic_split(acoustic, "ref", np.zeros((2, 3)), np.zeros((2, 3), bool))  # wrong token count
    with pytest.raises(SourceSpecError, match="ref split has 3"):
        build_feature_cache(prepared, tmp / "a2", word_source=word, oov="zero", speech_source=spec, combine="concat")


def test_occurrence_vectors_fall_back_to_type_level(setup):
    prepared, _, speech, tmp = setup
    s2v = tmp / "s2v"
    s2v.mkdir()
    (s2v / "vectors.txt").write_text(Path(speech["path"]).read_text(encoding="utf-8"), encoding="utf-8")
    for split, rows in SPLITS.items():
        target = s2v / "occurrences" / split
        target.mkdir(parents=True)
        np.save(target / "index.npy", np.array([1], np.int64))  # only the second token has audio
        np.save(target / "vectors.npy", np.full((1, 4), 5.0, np.float32))
    words = words_of("train")  # the cat sat the ...
    typed = SpeechVectors({"type": "speech2vec-occurrence", "path": str(s2v)})
    vectors, mask = typed.for_split("train", words)
    np.testing.assert_allclose(vectors[1], 5.0)                       # the occurrence itself
    np.testing.assert_allclose(vectors[0], SPEECH["the"])             # no audio: the word's type vector
    assert mask[0] and mask[1] and not mask[2]                        # "sat" has neither
    zero = SpeechVectors({"type": "speech2vec-occurrence", "path": str(s2v), "fallback": "zero"})
    vectors, mask = zero.for_split("train", words)
    assert mask.tolist() == [i == 1 for i in range(len(words))] and np.all(vectors[0] == 0)
    assert typed.needs_audio


def test_spec_validation_names_the_problem():
    assert validate_speech_spec(None) == {"type": "none"}
    with pytest.raises(SourceSpecError, match="unknown type"):
        validate_speech_spec({"type": "wav2vec"})
    with pytest.raises(SourceSpecError, match="needs a 'path'"):
        validate_speech_spec({"type": "speech2vec"})
    with pytest.raises(SourceSpecError, match="fallback"):
        validate_speech_spec({"type": "acoustic", "path": "x", "fallback": "type"})
    with pytest.raises(SourceSpecError, match="combine"):
        combine_vectors(np.zeros((1, 2)), np.zeros((1, 2)), "product")


def test_punctuate_refuses_a_model_that_needs_audio(tmp_path, monkeypatch):
    from inference import punctuator as inference

    model_dir = tmp_path / "model"
    (model_dir / "embedder").mkdir(parents=True)
    (model_dir / "embedder" / SPEECH_JSON).write_text(json.dumps(
        {"source": {"type": "acoustic", "path": "data/acoustic"}, "combine": "concat", "needs_audio": True}))
    monkeypatch.setattr(inference, "load_trained_model", lambda *a, **k: (None, {"window": 10, "stride": 5}))
    monkeypatch.setattr(inference.TokenEmbedder, "load", classmethod(lambda cls, d: None))
    with pytest.raises(ValueError, match="per-token audio features.*'acoustic'"):
        inference.Punctuator(model_dir)


def test_type_level_speech_vectors_are_saved_inside_and_read_without_their_source(setup):
    """As the word vectors: the speech vectors of the splits' words go beside the embedder, so a model directory
    built on type-level speech needs no speech source file (and runs from any folder)."""
    from embeddings.embedder import TokenEmbedder

    prepared, word, speech, tmp = setup
    paths = build_feature_cache(prepared, tmp / "f", word_source=word, oov="zero", speech_source=speech,
                                combine="sum")
    saved = json.loads((paths.root / "embedder" / SPEECH_JSON).read_text())
    assert saved["table"]["rows"] == 3 and saved["table"]["dim"] == 4  # the, cat, mat: all in the splits
    Path(speech["path"]).unlink()
    Path(word["path"]).unlink()
    loaded = SpeechVectors.load_saved(paths.root / "embedder")
    embedder = TokenEmbedder.load(paths.root / "embedder")
    for split in SPLITS:
        words = words_of(split)
        again = combine_vectors(embedder.embed(words).vectors, loaded.type_level(words)[0], "sum")
        assert again.tobytes() == np.asarray(load_split(paths.root, split).vectors).tobytes(), split
