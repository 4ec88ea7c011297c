"""Speech sources for the feature cache and how they combine with the word vectors.

``embed.feature_sets.<name>.speech_source`` in ``params.yaml`` is one of:

========================  =========================================================================================
``type``                  what each token gets
========================  =========================================================================================
``none``                  nothing (a word-only feature set)
``speech2vec``            the type-level Speech2Vec vector of its word (``<path>/vectors.txt`` from the speech2vec
                          stage); words without one get zeros
``speech2vec-occurrence`` the Speech2Vec embedding of *this* occurrence's audio (``<path>/occurrences/<split>/``);
                          tokens without audio get the word's type-level vector (``fallback: type``, default) or
                          zeros (``fallback: zero``)
``acoustic``              the prosodic features of the ``features`` stage (``<path>/<split>/features.npy``),
                          standardised with the training split's statistics, missing values set to 0 (the mean),
                          followed by the 0/1 missing mask: ``2 x 9`` values
``word2vec-text`` /       any type-level vector file (as for word sources); words without a vector get zeros
``word2vec-binary`` /
``keyedvectors``
``pauses``                timing cues of speech (:mod:`embeddings.timing_features`): the pause after the word
                          and how long it was held, and a missing flag; ``<path>/<split>/timing.npy`` holds the
                          raw per-token cues (simulated for training text by the ``fit_pauses`` stage, computed
                          from word timings at inference); ``features`` picks the cues (``[pause]`` default,
                          ``[pause, duration]``; ``local_pause``, ``local_duration``: against the speaker's own
                          rate). Tokens whose flag is set count as without speech
========================  =========================================================================================

Speech vectors never get random OOV vectors: zeros mean "no speech information", which is what summing
with a word vector should add for a word never heard. ``has_speech`` records, per token, whether it got one.

``combine``: ``sum`` (Yi & Tao: word vector + speech vector; the dimensions must be equal, otherwise a
:class:`SourceSpecError` names both and suggests ``concat``) or ``concat`` (any dimensions).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from embeddings.sources import (
    KEYED_VECTORS,
    NONE,
    WORD2VEC_BINARY,
    WORD2VEC_TEXT,
    SourceSpecError,
    file_sha256,
    load_word_vectors,
    source_fingerprint,
)
from embeddings.store import SPEECH_JSON
from embeddings.table import VectorTable
from embeddings.timing_features import check_features, encode, missing_raw

SPEECH2VEC = "speech2vec"
SPEECH2VEC_OCCURRENCE = "speech2vec-occurrence"
ACOUSTIC = "acoustic"
PAUSES = "pauses"
PAUSES_FILE = "timing.npy"
VECTOR_FILE_TYPES = (WORD2VEC_TEXT, WORD2VEC_BINARY, KEYED_VECTORS)
SPEECH_TYPES: tuple[str, ...] = (NONE, SPEECH2VEC, SPEECH2VEC_OCCURRENCE, ACOUSTIC, PAUSES, *VECTOR_FILE_TYPES)
#: Types whose vectors depend on the audio of the token, not only on its word: text-only inference cannot make them
#: (except ``pauses``, whose models also read text without speech: every cue flagged missing).
AUDIO_TYPES: tuple[str, ...] = (SPEECH2VEC_OCCURRENCE, ACOUSTIC, PAUSES)
COMBINE_MODES = ("sum", "concat")
_ALLOWED_KEYS = {"type", "path", "fallback", "no_header", "features"}
_FALLBACKS = ("type", "zero")


def validate_speech_spec(spec: Any) -> dict[str, Any]:
    if spec is None:
        return {"type": NONE}
    if not isinstance(spec, dict):
        raise SourceSpecError(f"speech source spec must be a mapping with 'type' (and 'path'), got {spec!r}")
    unknown = set(spec) - _ALLOWED_KEYS
    if unknown:
        raise SourceSpecError(f"speech source spec {spec!r}: unknown key(s) {sorted(unknown)}")
    kind = spec.get("type")
    if kind not in SPEECH_TYPES:
        raise SourceSpecError(f"speech source spec {spec!r}: unknown type {kind!r}; expected one of {list(SPEECH_TYPES)}")
    if kind != NONE and not spec.get("path"):
        raise SourceSpecError(f"speech source spec {spec!r}: type {kind!r} needs a 'path'")
    if "fallback" in spec and (kind != SPEECH2VEC_OCCURRENCE or spec["fallback"] not in _FALLBACKS):
        raise SourceSpecError(
            f"speech source spec {spec!r}: 'fallback' ({'/'.join(_FALLBACKS)}) only applies to {SPEECH2VEC_OCCURRENCE!r}"
        )
    if "features" in spec and kind != PAUSES:
        raise SourceSpecError(f"speech source spec {spec!r}: 'features' only applies to {PAUSES!r}")
    out = {k: v for k, v in spec.items() if v is not None}
    if kind == NONE:
        return {"type": NONE}
    if kind == PAUSES:
        try:
            out["features"] = check_features(out.get("features", ["pause"]))
        except ValueError as error:
            raise SourceSpecError(f"speech source spec {spec!r}: {error}") from None
    if kind == SPEECH2VEC_OCCURRENCE:
        out.setdefault("fallback", "type")
    return out


def check_combine(combine: str) -> str:
    if combine not in COMBINE_MODES:
        raise SourceSpecError(f"combine must be one of {list(COMBINE_MODES)}, got {combine!r}")
    return combine


def _vector_file_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The word-source style spec of a type-level speech vector file."""
    if spec["type"] in (SPEECH2VEC, SPEECH2VEC_OCCURRENCE):
        from embeddings.speech2vec import VECTORS_FILE  # speech2vec imports torch: only for Speech2Vec sources

        return {"type": WORD2VEC_TEXT, "path": str(Path(spec["path"]) / VECTORS_FILE)}
    return {k: spec[k] for k in ("type", "path", "no_header") if k in spec}


def _split_files(spec: dict[str, Any], split: str) -> list[Path]:
    root = Path(spec["path"])
    if spec["type"] == SPEECH2VEC_OCCURRENCE:
        return [root / "occurrences" / split / "index.npy", root / "occurrences" / split / "vectors.npy"]
    if spec["type"] == ACOUSTIC:
        return [root / split / "features.npy", root / split / "missing.npy"]
    if spec["type"] == PAUSES:
        return [root / split / PAUSES_FILE]
    return []


def speech_fingerprint(spec: dict[str, Any], splits: Sequence[str]) -> str:
    """Content hash of everything the speech vectors of ``splits`` are made from."""
    spec = validate_speech_spec(spec)
    if spec["type"] == NONE:
        return "none"
    digest = hashlib.sha256(b"embeddings.speech_fingerprint/v1\0" + spec["type"].encode() + b"\0")
    needs_type = spec["type"] in (SPEECH2VEC, *VECTOR_FILE_TYPES) or spec.get("fallback") == "type"
    if needs_type:
        digest.update(source_fingerprint(_vector_file_spec(spec)).encode())
    if spec["type"] in AUDIO_TYPES:
        stat_splits = ["train"] if spec["type"] == ACOUSTIC else []
        for split in dict.fromkeys([*stat_splits, *splits]):
            for path in _split_files(spec, split):
                if not path.is_file():
                    raise FileNotFoundError(f"speech source {spec!r}: {path} not found (split {split!r})")
                digest.update(f"{split}/{path.name}:{file_sha256(path)}\0".encode())
    if "fallback" in spec:
        digest.update(spec["fallback"].encode())
    if "features" in spec:
        digest.update(",".join(spec["features"]).encode())
    return "sha256:" + digest.hexdigest()


class SpeechVectors:
    """Looks up the speech part of every token of a split (see the module docstring).

    ``vectors``: the type-level vectors to use instead of loading the source (a :class:`VectorTable`, as a
    model directory saves them: :meth:`load_saved`)."""

    def __init__(self, spec: dict[str, Any], *, vectors: Any = None):
        self.spec = validate_speech_spec(spec)
        self.kind = self.spec["type"]
        self._kv = None
        self._acoustic_stats: tuple[np.ndarray, np.ndarray] | None = None
        if self.kind in (SPEECH2VEC, *VECTOR_FILE_TYPES) or self.spec.get("fallback") == "type":
            self._kv = vectors if vectors is not None else load_word_vectors(_vector_file_spec(self.spec))
        if self.kind == NONE:
            self.dim = 0
        elif self.kind == ACOUSTIC:
            self.dim = 2 * int(np.load(Path(self.spec["path"]) / "train" / "features.npy", mmap_mode="r").shape[1])
        elif self.kind == PAUSES:
            from embeddings.timing_features import feature_dim

            self.dim = feature_dim(self.spec["features"])
        elif self.kind == SPEECH2VEC_OCCURRENCE and self._kv is None:
            vectors = np.load(Path(self.spec["path"]) / "occurrences" / "train" / "vectors.npy", mmap_mode="r")
            self.dim = int(vectors.shape[1])
        else:
            self.dim = int(self._kv.vector_size)

    @classmethod
    def load_saved(cls, embedder_dir: str | Path) -> "SpeechVectors":
        """The speech part as a cache (and so a model directory) saved it in ``<embedder_dir>/speech.json``: with
        the type-level vectors of its words inside (``speech_vectors_*``), no source is read; without (a cache
        built before they were saved), from the source its spec names."""
        embedder_dir = Path(embedder_dir)
        saved = json.loads((embedder_dir / SPEECH_JSON).read_text(encoding="utf-8"))
        table = saved.get("table")
        vectors = None if table is None else VectorTable.load(embedder_dir, table["stem"], table)
        return cls(saved["source"], vectors=vectors)

    @property
    def needs_audio(self) -> bool:
        return self.kind in AUDIO_TYPES

    @property
    def type_level_vectors(self) -> Any:
        """The word -> vector table of a type-level source (KeyedVectors or VectorTable); None for other kinds."""
        return self._kv

    def type_level(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Type-level vectors of ``words`` (zeros where the source has none) and which tokens have one."""
        out = np.zeros((len(words), self.dim), np.float32)
        has = np.zeros(len(words), bool)
        if self._kv is None:
            return out, has
        index_of: dict[str, int] = {}
        for i, word in enumerate(words):
            index = index_of.get(word)
            if index is None:
                index = self._kv.key_to_index.get(word, -1)
                index_of[word] = index
            if index >= 0:
                out[i] = self._kv.vectors[index]
                has[i] = True
        return out, has

    def from_timing(self, raw: np.ndarray | None, n: int | None = None) -> np.ndarray:
        """``pauses`` only: the speech part of tokens from their raw timing cues
        (:func:`embeddings.timing_features.token_raw`), or of ``n`` tokens without speech when ``raw`` is None."""
        if self.kind != PAUSES:
            raise SourceSpecError(f"speech source {self.kind!r} is not made from word timings")
        return encode(missing_raw(int(n or 0)) if raw is None else raw, self.spec["features"])

    def _acoustic_standardisation(self) -> tuple[np.ndarray, np.ndarray]:
        if self._acoustic_stats is None:
            root = Path(self.spec["path"]) / "train"
            values = np.load(root / "features.npy", mmap_mode="r")
            missing = np.load(root / "missing.npy", mmap_mode="r")
            rows = np.flatnonzero(~np.all(missing, axis=1))
            if len(rows) == 0:
                raise SourceSpecError(f"speech source {self.spec!r}: the train split has no acoustic features")
            present = np.where(missing[rows], np.nan, values[rows])
            mean = np.nanmean(present, axis=0)
            std = np.nanstd(present, axis=0)
            self._acoustic_stats = (np.nan_to_num(mean).astype(np.float32),
                                    np.where(np.nan_to_num(std) > 0, np.nan_to_num(std), 1.0).astype(np.float32))
        return self._acoustic_stats

    def for_split(self, split: str, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(N, dim)`` speech vectors of a split's tokens and the ``(N,)`` mask of tokens that got one."""
        n = len(words)
        if self.kind == NONE:
            return np.zeros((n, 0), np.float32), np.zeros(n, bool)
        if self.kind == ACOUSTIC:
            root = Path(self.spec["path"]) / split
            values, missing = np.load(root / "features.npy"), np.load(root / "missing.npy")
            if len(values) != n:
                raise SourceSpecError(
                    f"{root / 'features.npy'}: {len(values)} tokens, the {split} split has {n}; re-run the features stage"
                )
            mean, std = self._acoustic_standardisation()
            standard = np.where(missing, 0.0, (values - mean) / std).astype(np.float32)
            return np.concatenate([standard, missing.astype(np.float32)], axis=1), ~np.all(missing, axis=1)
        if self.kind == PAUSES:
            path = Path(self.spec["path"]) / split / PAUSES_FILE
            raw = np.load(path)
            if raw.ndim != 2 or len(raw) != n or raw.shape[1] != 3:
                raise SourceSpecError(f"{path}: shape {raw.shape}, the {split} split needs ({n}, 3); "
                                      f"re-run the fit_pauses stage")
            return self.from_timing(raw), raw[:, 2] == 0
        if self.kind == SPEECH2VEC_OCCURRENCE:
            from embeddings.speech2vec import load_occurrences  # torch: see _vector_file_spec

            dense, mask = load_occurrences(self.spec["path"], split, n)
            if self.spec.get("fallback") == "type":
                typed, has_type = self.type_level(words)
                fill = ~mask & has_type
                dense[fill] = typed[fill]
                mask = mask | has_type
            return dense, mask
        return self.type_level(words)


def combine_vectors(word: np.ndarray, speech: np.ndarray, combine: str, *, where: str = "") -> np.ndarray:
    """Sum or concatenate the word part ``(N, dw)`` and the speech part ``(N, ds)`` of the token vectors."""
    check_combine(combine)
    if speech.shape[1] == 0:
        return word
    if word.shape[1] == 0:
        return speech
    if combine == "concat":
        return np.concatenate([word, speech], axis=1)
    if word.shape[1] != speech.shape[1]:
        raise SourceSpecError(
            f"{where}combine: sum needs equal dimensions, but the word vectors have {word.shape[1]} and the speech "
            f"vectors {speech.shape[1]}; use combine: concat, or a speech source of dimension {word.shape[1]}"
        )
    return word + speech
