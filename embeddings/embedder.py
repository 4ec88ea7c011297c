"""The :class:`TokenEmbedder`: the one token -> (vector, vocabulary id, OOV flag) lookup of the project.

The feature cache (:mod:`embeddings.cache`) stores its output per token; ``TokenEmbedder.save``/``load`` carry
the same lookup to inference time, bit for bit. The lookup rules themselves live in :mod:`embeddings.vocab`.

A saved embedder is self-contained (format 2): beside ``embedder.json`` and ``vocab.txt`` it holds the vectors
of the words it was saved for (:meth:`TokenEmbedder.restricted`: the cache saves the words of its splits) as a
:class:`embeddings.table.VectorTable` (``word_vectors_words.txt`` + memory-mapped ``word_vectors_vectors.npy``).
Loading it reads those two files, in milliseconds, with numpy alone -- never the source it came from, so a
model directory works from any folder and whatever has since happened to the source file. Any other word gets
the same rules against the table: the fallbacks where their keys are in it, else the OOV policy (whose
statistics, taken from the whole source, are saved in ``embedder.json``). Directories of format 1 (no table)
still load, by re-reading the source named in their spec.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from embeddings.sources import NONE, load_word_vectors, source_fingerprint, validate_spec
from embeddings.store import FeatureCacheError, SourceMismatchError
from embeddings.table import VectorTable, VectorTableError
from embeddings.vocab import (
    PAD,
    UNK,
    UNK_ID,
    check_policy,
    clitic_parts,
    fallback_key,
    random_oov_vector,
    vocab_sha256,
)

EMBEDDER_FORMAT = 2  # 2: the vectors inside (a VectorTable), no reloading of the source
#: Formats :meth:`TokenEmbedder.load` reads (1: re-reads its source, which must still have the same content).
READABLE_FORMATS = (1, 2)
EMBEDDER_JSON = "embedder.json"
VOCAB_TXT = "vocab.txt"
#: Stem of the saved table's two files (``word_vectors_words.txt``, ``word_vectors_vectors.npy``).
TABLE_STEM = "word_vectors"


@dataclass(frozen=True)
class EmbeddedTokens:
    vectors: np.ndarray  # float32 (N, dim)
    ids: np.ndarray  # int32 (N,): vocabulary ids, PAD_ID/UNK_ID reserved
    oov: np.ndarray  # bool (N,): the word source has no vector for the token

    def __len__(self) -> int:
        return len(self.ids)


def normalise_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A word-source spec as the embedder and the cache manifest record it (validated, path as a string)."""
    spec = validate_spec(spec)
    out: dict[str, Any] = {"type": spec["type"], "path": None if spec.get("path") is None else str(spec["path"])}
    if spec.get("no_header"):
        out["no_header"] = True
    return out


class TokenEmbedder:
    """Maps tokens to (source vector, vocabulary id, OOV flag).

    ``vocab`` is the id list (``build_vocab``); ``<pad>``/``<unk>`` are prepended if missing. ``vectors``
    (already loaded KeyedVectors, or a :class:`VectorTable`) and ``fingerprint`` may be passed to skip
    reloading/re-hashing the source; ``oov_stats`` (``{"sigma": float, "mean": [float]}``) pins the statistics
    the OOV vectors use (computed from ``vectors`` when not given: pass them with a restricted table).
    """

    def __init__(
        self,
        word_source: dict[str, Any],
        oov: str,
        vocab: Sequence[str],
        *,
        vectors: Any = None,
        fingerprint: str | None = None,
        oov_stats: dict[str, Any] | None = None,
    ):
        self.word_source = normalise_spec(word_source)
        check_policy(oov)
        self.oov_policy = oov
        vocab = list(vocab)
        if vocab[:2] != [PAD, UNK]:
            vocab = [PAD, UNK, *(w for w in vocab if w not in (PAD, UNK))]
        if len(set(vocab)) != len(vocab):
            raise ValueError("vocab has duplicate entries")
        self.vocab = vocab
        self._vocab_index = {w: i for i, w in enumerate(vocab)}
        self.fingerprint = fingerprint or source_fingerprint(self.word_source)
        self.table_info: dict[str, Any] | None = None
        if self.word_source["type"] == NONE:
            self._kv = None
        else:
            self._kv = vectors if vectors is not None else load_word_vectors(self.word_source)
        self.dim = 0 if self._kv is None else int(self._kv.vector_size)
        if self._kv is not None and oov_stats is None:
            matrix = self._kv.vectors
            oov_stats = {
                "sigma": float(np.std(matrix, dtype=np.float64)),
                "mean": [float(x) for x in matrix.mean(axis=0, dtype=np.float64).astype(np.float32)],
            }
        self.oov_stats = oov_stats or {}
        if self._kv is not None:
            self._sigma = float(self.oov_stats["sigma"])
            self._mean = np.asarray(self.oov_stats["mean"], dtype=np.float32)
            if self._mean.shape != (self.dim,):
                raise ValueError(f"oov_stats mean has shape {self._mean.shape}, expected ({self.dim},)")
        self._memo: dict[str, tuple[np.ndarray, bool]] = {}

    # -- lookup -------------------------------------------------------------------------------------------

    def source_keys(self, word: str) -> tuple[str, ...]:
        """The keys of the source whose vectors :meth:`lookup` uses for ``word`` (none for an OOV word)."""
        if self._kv is None:
            return ()
        index = self._kv.key_to_index
        if word in index:
            return (word,)
        alt = fallback_key(word)
        if alt is not None and alt in index:
            return (alt,)
        parts = clitic_parts(word)
        if parts is not None and all(part in index for part in parts):
            return parts
        return ()

    def restricted(self, words: Sequence[str]) -> "TokenEmbedder":
        """The same lookup carrying only the vectors that ``words`` use (:meth:`source_keys`).

        For every one of ``words`` it gives bitwise the vector, id and OOV flag this embedder gives (the
        rules are the same, and every key they touch for these words is kept); any other word gets what the
        rules find among the kept keys, else the OOV policy, with this embedder's OOV statistics."""
        table = None
        if self._kv is not None:
            keys = [key for word in dict.fromkeys(words) for key in self.source_keys(word)]
            table = VectorTable.restrict(self._kv, keys)
        return TokenEmbedder(self.word_source, self.oov_policy, self.vocab, vectors=table,
                             fingerprint=self.fingerprint, oov_stats=self.oov_stats if self._kv is not None else None)

    def lookup(self, word: str) -> tuple[np.ndarray, bool]:
        """``(vector, is_oov)`` for one word type (memoised)."""
        hit = self._memo.get(word)
        if hit is not None:
            return hit
        if self._kv is None:
            result = (np.zeros(0, dtype=np.float32), True)
        else:
            index = self._kv.key_to_index.get(word)
            if index is None:
                alt = fallback_key(word)
                if alt is not None:
                    index = self._kv.key_to_index.get(alt)
            parts = clitic_parts(word) if index is None else None
            if index is not None:
                result = (np.asarray(self._kv.vectors[index], dtype=np.float32), False)
            elif parts is not None and all(part in self._kv.key_to_index for part in parts):
                vectors = [self._kv.vectors[self._kv.key_to_index[part]] for part in parts]
                result = (np.mean(vectors, axis=0).astype(np.float32), False)
            elif self.oov_policy == "zero":
                result = (np.zeros(self.dim, dtype=np.float32), True)
            elif self.oov_policy == "mean":
                result = (self._mean, True)
            else:
                result = (random_oov_vector(word, self.dim, self._sigma), True)
        self._memo[word] = result
        return result

    def embed(self, words: Sequence[str]) -> EmbeddedTokens:
        """Vectors (float32, (N, dim)), ids (int32) and OOV flags (bool) for a token sequence."""
        type_of: dict[str, int] = {}
        positions = np.fromiter((type_of.setdefault(w, len(type_of)) for w in words), dtype=np.int64, count=len(words))
        types = list(type_of)
        looked_up = [self.lookup(w) for w in types]
        type_vectors = (
            np.stack([v for v, _ in looked_up]).astype(np.float32, copy=False)
            if types
            else np.zeros((0, self.dim), dtype=np.float32)
        )
        type_oov = np.fromiter((o for _, o in looked_up), dtype=bool, count=len(types))
        type_ids = np.fromiter((self._vocab_index.get(w, UNK_ID) for w in types), dtype=np.int32, count=len(types))
        return EmbeddedTokens(
            vectors=np.ascontiguousarray(type_vectors[positions]).reshape(len(words), self.dim),
            ids=type_ids[positions],
            oov=type_oov[positions],
        )

    # -- persistence --------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "embedder_format": EMBEDDER_FORMAT,
            "word_source": self.word_source,
            "fingerprint": self.fingerprint,
            "oov": self.oov_policy,
            "dim": self.dim,
            "vocab_size": len(self.vocab),
            "vocab_sha256": vocab_sha256(self.vocab),
            "oov_stats": self.oov_stats,
            "table": self.table_info,
        }

    def save(self, directory: str | Path) -> Path:
        """Write ``embedder.json``, ``vocab.txt`` (one token per line; line number = id) and the table of every
        vector this embedder holds (save a :meth:`restricted` embedder, not a whole source) to ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        bad = [w for w in self.vocab if "\n" in w or "\r" in w]
        if bad:
            raise ValueError(f"vocab tokens contain a line break and cannot be saved one per line: {bad[:3]!r}")
        with (directory / VOCAB_TXT).open("w", encoding="utf-8", errors="surrogatepass", newline="\n") as handle:
            handle.write("\n".join(self.vocab) + "\n")
        if self._kv is not None:
            table = self._kv
            if not isinstance(table, VectorTable):
                table = VectorTable.restrict(table, table.index_to_key)
            self.table_info = {"stem": TABLE_STEM, **table.save(directory, TABLE_STEM)}
        (directory / EMBEDDER_JSON).write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> "TokenEmbedder":
        """Reload a saved embedder from its own files (format 2: vectors memory-mapped, no source read).

        A directory of format 1 re-loads its vectors from the spec and raises :class:`SourceMismatchError` if
        the source's content no longer matches the saved fingerprint. A missing, damaged or inconsistent file
        raises :class:`FeatureCacheError` naming it."""
        directory = Path(directory)
        meta_path, vocab_path = directory / EMBEDDER_JSON, directory / VOCAB_TXT
        for path in (meta_path, vocab_path):
            if not path.is_file():
                raise FeatureCacheError(f"{path}: missing; not a saved TokenEmbedder directory")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise FeatureCacheError(f"{meta_path}: not valid JSON ({error})") from error
        if meta.get("embedder_format") not in READABLE_FORMATS:
            raise FeatureCacheError(
                f"{meta_path}: embedder_format {meta.get('embedder_format')!r}, this code reads {READABLE_FORMATS}"
            )
        text = vocab_path.read_bytes().decode("utf-8", "surrogatepass")
        vocab = text.split("\n")
        if vocab and vocab[-1] == "":
            vocab.pop()
        if len(vocab) != meta["vocab_size"] or vocab_sha256(vocab) != meta["vocab_sha256"]:
            raise FeatureCacheError(f"{vocab_path}: does not match the vocab size/hash recorded in {meta_path}")
        spec = meta["word_source"]
        if meta["embedder_format"] >= 2:
            table = None
            if meta.get("table") is not None:
                try:
                    table = VectorTable.load(directory, meta["table"]["stem"], meta["table"])
                except VectorTableError as error:
                    raise FeatureCacheError(str(error)) from error
            elif spec["type"] != NONE:
                raise FeatureCacheError(f"{meta_path}: records no vector table for word source {spec['type']!r}")
            embedder = cls(spec, meta["oov"], vocab, vectors=table, fingerprint=meta["fingerprint"],
                           oov_stats=meta.get("oov_stats") or None)
            embedder.table_info = meta.get("table")
            if embedder.dim != meta["dim"]:
                raise FeatureCacheError(f"{meta_path}: dim {meta['dim']} recorded, its table has {embedder.dim}")
            return embedder
        current = source_fingerprint(spec)
        if current != meta["fingerprint"]:
            raise SourceMismatchError(
                f"{meta_path}: built from word source {spec!r} with fingerprint {meta['fingerprint']}, but that "
                f"source now has fingerprint {current}: its vector file changed. Rebuild the features and model "
                f"(dvc repro) or restore the original vectors."
            )
        embedder = cls(spec, meta["oov"], vocab, fingerprint=current, oov_stats=meta.get("oov_stats") or None)
        if embedder.dim != meta["dim"]:
            raise FeatureCacheError(f"{meta_path}: dim {meta['dim']} recorded, source has {embedder.dim}")
        return embedder
