"""A small word -> vector table that loads in milliseconds: what a model directory carries instead of a source.

A feature cache (and every model directory trained from it) keeps, beside its vocabulary, the vectors of the
words its lookup rules touched -- the words of its splits and the keys their fallbacks used -- as two files:

    <stem>_words.txt     one key per line (line number = row; keys never hold a line break)
    <stem>_vectors.npy   float32 (rows, dim), opened memory-mapped

:class:`VectorTable` answers the two questions the lookup asks of a gensim ``KeyedVectors`` --
``key_to_index`` and ``vectors`` (and ``vector_size``) -- so :class:`embeddings.embedder.TokenEmbedder` and
:class:`embeddings.speech_sources.SpeechVectors` use either without knowing which. Loading needs numpy only:
no gensim, and no reading of a 400k-word source.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from corpus.io import atomic_path, atomic_write_bytes

WORDS_SUFFIX = "_words.txt"
VECTORS_SUFFIX = "_vectors.npy"


class VectorTableError(RuntimeError):
    """A table whose files are missing, unreadable or inconsistent (the message names the file)."""


class VectorTable:
    """``keys`` (distinct strings) and their ``vectors`` (float32, one row per key)."""

    def __init__(self, keys: Sequence[str], vectors: np.ndarray):
        keys = list(keys)
        if vectors.ndim != 2 or vectors.shape[0] != len(keys):
            raise ValueError(f"vector table: {len(keys)} keys but vectors of shape {vectors.shape}")
        if vectors.dtype != np.float32:
            raise ValueError(f"vector table: vectors must be float32, not {vectors.dtype}")
        self.index_to_key = keys
        self.key_to_index = {key: i for i, key in enumerate(keys)}
        if len(self.key_to_index) != len(keys):
            raise ValueError("vector table: duplicate keys")
        self.vectors = vectors
        self.vector_size = int(vectors.shape[1])

    def __len__(self) -> int:
        return len(self.index_to_key)

    @classmethod
    def restrict(cls, source: Any, keys: Iterable[str]) -> "VectorTable":
        """The rows of ``source`` (a ``KeyedVectors`` or a table) for ``keys`` it has, in first-seen order."""
        index = source.key_to_index
        kept = [key for key in dict.fromkeys(keys) if key in index]
        rows = np.fromiter((index[key] for key in kept), dtype=np.int64, count=len(kept))
        vectors = np.asarray(source.vectors, dtype=np.float32)
        return cls(kept, np.ascontiguousarray(vectors[rows], dtype=np.float32).reshape(len(kept), source.vector_size))

    def sha256(self) -> str:
        """Content hash of the keys and the vectors' bytes (recorded beside the table, checked on load)."""
        digest = hashlib.sha256("\n".join(self.index_to_key).encode("utf-8", "surrogatepass") + b"\0")
        digest.update(str(self.vectors.shape).encode() + b"\0")
        digest.update(np.ascontiguousarray(self.vectors).tobytes())
        return digest.hexdigest()

    def save(self, directory: str | Path, stem: str) -> dict[str, Any]:
        """Write ``<stem>_words.txt`` and ``<stem>_vectors.npy`` (each atomically); returns their description."""
        directory = Path(directory)
        bad = [key for key in self.index_to_key if "\n" in key or "\r" in key]
        if bad:
            raise ValueError(f"vector table keys contain a line break and cannot be saved one per line: {bad[:3]!r}")
        text = "".join(key + "\n" for key in self.index_to_key)
        atomic_write_bytes(directory / (stem + WORDS_SUFFIX), text.encode("utf-8", "surrogatepass"))
        with atomic_path(directory / (stem + VECTORS_SUFFIX)) as temporary, temporary.open("wb") as handle:
            np.save(handle, np.ascontiguousarray(self.vectors, dtype=np.float32))
        return {"rows": len(self), "dim": self.vector_size, "sha256": self.sha256()}

    @classmethod
    def load(cls, directory: str | Path, stem: str, expected: dict[str, Any] | None = None) -> "VectorTable":
        """Open a saved table (vectors memory-mapped); ``expected`` (what :meth:`save` returned) is checked
        for the row count and dimension, which catches a truncated or swapped file without reading it all."""
        directory = Path(directory)
        words_path, vectors_path = directory / (stem + WORDS_SUFFIX), directory / (stem + VECTORS_SUFFIX)
        for path in (words_path, vectors_path):
            if not path.is_file():
                raise VectorTableError(f"{path}: missing (the model or cache directory is incomplete)")
        try:
            vectors = np.load(vectors_path, mmap_mode="r")
        except (OSError, ValueError) as error:
            raise VectorTableError(f"{vectors_path}: cannot be read as a .npy array ({error})") from error
        keys = words_path.read_bytes().decode("utf-8", "surrogatepass").split("\n")
        if keys and keys[-1] == "":
            keys.pop()
        if vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape[0] != len(keys):
            raise VectorTableError(f"{vectors_path}: {vectors.dtype} {vectors.shape} does not fit the {len(keys)} "
                                   f"keys of {words_path}")
        if expected is not None and (expected.get("rows") != len(keys) or expected.get("dim") != vectors.shape[1]):
            raise VectorTableError(f"{vectors_path}: {len(keys)} x {vectors.shape[1]}, but {expected.get('rows')} x "
                                   f"{expected.get('dim')} were saved")
        return cls(keys, vectors)
