"""Packing a feature cache for another machine: the unpacked cache is byte-identical to the original."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from embeddings.store import load_split
from embeddings.pack import main as pack_main
from embeddings.pack import pack_feature_cache, unpack_feature_cache
from tests.fixture_corpus import write_feature_cache


def tree_digest(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return write_feature_cache(tmp_path_factory.mktemp("pack"), talks=8, sentences_per_talk=10, train_tokens=1500)


def test_unpacked_cache_is_byte_identical_and_smaller(cache, tmp_path):
    packed = pack_feature_cache(cache, tmp_path / "features.npz")
    unpacked = unpack_feature_cache(packed, tmp_path / "copy")
    assert tree_digest(unpacked) == tree_digest(cache)
    original = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    assert packed.stat().st_size < original / 2
    np.testing.assert_array_equal(load_split(unpacked, "train").vectors, load_split(cache, "train").vectors)


def test_unpack_replaces_an_existing_directory_and_rejects_other_files(cache, tmp_path):
    packed = pack_feature_cache(cache, tmp_path / "features.npz")
    target = tmp_path / "copy"
    (target / "stale").mkdir(parents=True)
    unpack_feature_cache(packed, target)
    assert not (target / "stale").exists()
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    with pytest.raises(ValueError, match="not a feature-cache pack"):
        unpack_feature_cache(other, tmp_path / "bad")


def test_cli_reports_a_missing_cache(tmp_path, capsys):
    assert pack_main(["pack", str(tmp_path / "nothing"), str(tmp_path / "x.npz")]) == 2
    assert "no feature cache manifest" in capsys.readouterr().err
