"""The feature cache on disk: its layout, its errors, and reading a built cache back.

``embeddings.cache`` writes this layout (see ``README.md``); training and evaluation read it with
:func:`load_split` and :func:`load_split_words`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: Version of the cache layout and of the lookup rules (OOV vectors, fallback); bump to invalidate caches.
CACHE_FORMAT = 3  # 2: clitic composition fallback (we've -> mean(we, 've)); 3: words.txt per split
WORDS_FILE = "words.txt"
SPLITS: tuple[str, ...] = ("train", "dev", "ref", "asr")
VOCAB_SPLIT = "train"
MANIFEST = "manifest.json"
#: The token embedder's folder, in a feature cache and in a model directory alike.
EMBEDDER_DIR = "embedder"
ARRAYS: tuple[str, ...] = ("vectors", "ids", "labels", "oov")
#: Written with a speech source: which tokens got a speech vector; and the speech settings beside the embedder.
SPEECH_ARRAY = "has_speech"
SPEECH_JSON = "speech.json"


class FeatureCacheError(RuntimeError):
    """A feature cache (or saved embedder) that is missing, incomplete or inconsistent."""


class SourceMismatchError(FeatureCacheError):
    """A saved embedder whose word source no longer has the content it was built from."""


@dataclass(frozen=True)
class SplitFeatures:
    vectors: np.ndarray  # float32 (N, dim), memory-mapped
    ids: np.ndarray  # int32 (N,)
    labels: np.ndarray  # int8 (N,), corpus.labels.LABEL_TO_ID
    oov: np.ndarray  # bool (N,)

    def __len__(self) -> int:
        return len(self.ids)


def read_manifest(cache_dir: str | Path) -> dict[str, Any]:
    """The manifest of a built cache; :class:`FeatureCacheError` naming the path if absent or unreadable."""
    path = Path(cache_dir) / MANIFEST
    if not path.is_file():
        raise FeatureCacheError(f"{path}: no feature cache manifest (build the cache with `python -m pipeline.embed`)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise FeatureCacheError(f"{path}: not valid JSON: {error}") from error
    if manifest.get("cache_format") != CACHE_FORMAT:
        raise FeatureCacheError(
            f"{path}: cache_format {manifest.get('cache_format')!r}, this code reads {CACHE_FORMAT}; rebuild the cache"
        )
    return manifest


def load_split_words(cache_dir: str | Path, split: str) -> list[str]:
    """The token strings of one cached split, aligned with its arrays."""
    path = Path(cache_dir) / split / WORDS_FILE
    if not path.is_file():
        raise FeatureCacheError(f"{path}: missing from the feature cache")
    words = path.read_text(encoding="utf-8", errors="surrogatepass").split("\n")[:-1]
    expected = read_manifest(cache_dir)["splits"][split]["tokens"]
    if len(words) != expected:
        raise FeatureCacheError(f"{path}: {len(words)} words, manifest expects {expected}")
    return words


def load_split(cache_dir: str | Path, split: str) -> SplitFeatures:
    """Memory-map one split of a built cache, checking it against the manifest."""
    cache_dir = Path(cache_dir)
    manifest = read_manifest(cache_dir)
    if split not in manifest["splits"]:
        raise FeatureCacheError(f"{cache_dir / MANIFEST}: no split {split!r}; has {list(manifest['splits'])}")
    arrays = {}
    for name in ARRAYS:
        path = cache_dir / split / f"{name}.npy"
        if not path.is_file():
            raise FeatureCacheError(f"{path}: missing from the feature cache")
        arrays[name] = np.load(path, mmap_mode="r")
    n = manifest["splits"][split]["tokens"]
    expected = {"vectors": (np.float32, (n, manifest["dim"])), "ids": (np.int32, (n,)),
                "labels": (np.int8, (n,)), "oov": (np.bool_, (n,))}
    for name, (dtype, shape) in expected.items():
        array = arrays[name]
        if array.dtype != dtype or array.shape != shape:
            raise FeatureCacheError(
                f"{cache_dir / split / (name + '.npy')}: {array.dtype} {array.shape}, manifest expects "
                f"{np.dtype(dtype)} {shape}"
            )
    return SplitFeatures(**arrays)
