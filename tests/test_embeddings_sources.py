"""Word-vector sources: every spec type loads; bad specs and missing files fail clearly; fingerprints."""

from __future__ import annotations

import os

import numpy as np
import pytest
from gensim.models import KeyedVectors

from embeddings.sources import (
    SourceSpecError,
    load_word_vectors,
    source_fingerprint,
    validate_spec,
)
from tests.helpers import write_word2vec_text

WORDS = {
    "the": [0.1, 0.2, 0.3, 0.4],
    "cat": [0.5, -0.5, 0.25, 1.0],
    "sat": [-1.0, 0.0, 0.5, 0.75],
    "on": [0.0, 0.0, 1.0, -1.0],
    "mat": [0.3, 0.3, -0.3, 0.3],
    "n't": [0.9, -0.1, 0.2, 0.0],
}


def assert_matches_words(kv):
    assert kv.vector_size == 4
    assert kv.vectors.dtype == np.float32
    assert list(kv.index_to_key) == list(WORDS)
    for word, vector in WORDS.items():
        np.testing.assert_allclose(kv[word], np.float32(vector), rtol=0, atol=1e-6)


def test_word2vec_text(tmp_path):
    kv = load_word_vectors({"type": "word2vec-text", "path": str(write_word2vec_text(tmp_path / "v.txt", WORDS))})
    assert_matches_words(kv)


def test_word2vec_text_without_header(tmp_path):
    path = write_word2vec_text(tmp_path / "glove.txt", WORDS, header=False)
    assert_matches_words(load_word_vectors({"type": "word2vec-text", "path": str(path), "no_header": True}))


def test_word2vec_binary_and_keyedvectors(tmp_path):
    kv = load_word_vectors({"type": "word2vec-text", "path": str(write_word2vec_text(tmp_path / "v.txt", WORDS))})
    kv.save_word2vec_format(str(tmp_path / "v.bin"), binary=True)
    kv.save(str(tmp_path / "v.kv"))
    assert_matches_words(load_word_vectors({"type": "word2vec-binary", "path": str(tmp_path / "v.bin")}))
    loaded = load_word_vectors({"type": "keyedvectors", "path": str(tmp_path / "v.kv")})
    assert isinstance(loaded, KeyedVectors)
    assert_matches_words(loaded)


def test_none_source():
    assert load_word_vectors({"type": "none", "path": None}) is None
    assert source_fingerprint({"type": "none"}) == "none"


def test_glove_package():
    spec = {"type": "glove-6b-50d", "path": None}
    kv = load_word_vectors(spec)
    assert kv.vectors.shape == (400000, 50) and kv.vectors.dtype == np.float32
    assert kv.index_to_key[0] == "the" and kv.key_to_index["the"] == 0
    np.testing.assert_allclose(kv["the"][:3], [0.418, 0.24968, -0.41242], atol=1e-6)
    assert {"n't", "'m", "'s"} <= kv.key_to_index.keys()
    fingerprint = source_fingerprint(spec)
    assert fingerprint.startswith("sha256:") and fingerprint == source_fingerprint({"type": "glove-6b-50d"})


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"type": "fasttext", "path": "x.bin"}, "unknown type 'fasttext'"),
        ({"path": "x.txt"}, "unknown type None"),
        ({"type": "word2vec-text", "path": None}, "needs a 'path'"),
        ({"type": "keyedvectors"}, "needs a 'path'"),
        ({"type": "word2vec-text", "path": "x.txt", "binary": True}, "unknown key"),
        ({"type": "word2vec-binary", "path": "x.bin", "no_header": True}, "no_header"),
        ("glove-6b-50d", "must be a mapping"),
    ],
)
def test_bad_spec(spec, message):
    with pytest.raises(ValueError, match=message) as info:
        load_word_vectors(spec)
    assert isinstance(info.value, SourceSpecError)
    assert repr(spec) in str(info.value)  # the error names the spec
    with pytest.raises(SourceSpecError):
        source_fingerprint(spec)


def test_missing_file_names_path(tmp_path):
    missing = tmp_path / "nope" / "vectors.txt"
    for kind in ("word2vec-text", "word2vec-binary", "keyedvectors"):
        with pytest.raises(FileNotFoundError, match=str(missing)):
            load_word_vectors({"type": kind, "path": str(missing)})
    with pytest.raises(FileNotFoundError, match="glove_6B_50d_emb.npy"):
        load_word_vectors({"type": "glove-6b-50d", "path": str(tmp_path)})


def test_validate_spec_returns_copy():
    spec = {"type": "none", "path": None}
    assert validate_spec(spec) == spec and validate_spec(spec) is not spec


def test_fingerprint_follows_content_not_path_or_mtime(tmp_path):
    path = write_word2vec_text(tmp_path / "v.txt", WORDS)
    spec = {"type": "word2vec-text", "path": str(path)}
    before = source_fingerprint(spec)
    assert before == source_fingerprint(spec)
    # Same content elsewhere: same fingerprint.
    copy = tmp_path / "copy.txt"
    copy.write_bytes(path.read_bytes())
    assert source_fingerprint({"type": "word2vec-text", "path": str(copy)}) == before
    # Same path, same size, same mtime, different content: different fingerprint.
    stat = path.stat()
    data = path.read_bytes().replace(b"0.10", b"0.90")
    assert len(data) == stat.st_size
    path.write_bytes(data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert source_fingerprint(spec) != before
    # The type is part of the identity.
    assert source_fingerprint({**spec, "no_header": True}) != source_fingerprint(spec)
