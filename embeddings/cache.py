"""Per-token word-vector features: the :class:`TokenEmbedder` and the on-disk feature cache.

``build_feature_cache`` turns the prepared IWSLT splits into memory-mappable arrays (vectors, vocabulary ids,
label ids, OOV flags) and a ``manifest.json`` that records exactly what they were built from, so an unchanged
build is reused and any change (split file, vector-file *content*, spec, OOV policy, format) rebuilds it.
``TokenEmbedder.save``/``load`` carry the same lookup to inference time, bit for bit. See ``README.md``.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from tqdm import tqdm

from embeddings.sources import (
    NONE,
    file_sha256,
    load_word_vectors,
    source_fingerprint,
    validate_spec,
)
from embeddings.speech_sources import (
    SpeechVectors,
    check_combine,
    combine_vectors,
    speech_fingerprint,
    validate_speech_spec,
)
from punctuation.iwslt import read_iwslt
from punctuation.labels import LABEL_TO_ID

log = logging.getLogger(__name__)

#: Version of the cache layout and of the lookup rules (OOV vectors, fallback); bump to invalidate caches.
WORDS_FILE = "words.txt"
CACHE_FORMAT = 3  # 2: clitic composition fallback (we've -> mean(we, 've)); 3: words.txt per split
EMBEDDER_FORMAT = 1
SPLITS: tuple[str, ...] = ("train", "dev", "ref", "asr")
VOCAB_SPLIT = "train"
PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
OOV_POLICIES: tuple[str, ...] = ("zero", "random", "mean")
MANIFEST = "manifest.json"
EMBEDDER_DIR = "embedder"
EMBEDDER_JSON = "embedder.json"
VOCAB_TXT = "vocab.txt"
ARRAYS: tuple[str, ...] = ("vectors", "ids", "labels", "oov")
#: Written with a speech source: which tokens got a speech vector; and the speech settings beside the embedder.
SPEECH_ARRAY = "has_speech"
SPEECH_JSON = "speech.json"

#: Salt of the per-word seed of ``random`` OOV vectors (changing it changes every random vector).
_RANDOM_SALT = b"embeddings.oov.random/v1\0"
#: A run of mangled bytes at the start of a token: U+FFFD (or surrogate-escaped bytes), optionally followed by
#: the '?' that replaced the last byte of the original character (e.g. b"\xe2\x99?" = a broken music note).
_MANGLED_PREFIX = re.compile("^(?:[\ufffd\udc80-\udcff]+\\??)+")
_CHUNK_TOKENS = 1 << 16


class FeatureCacheError(RuntimeError):
    """A feature cache (or saved embedder) that is missing, incomplete or inconsistent."""


class SourceMismatchError(FeatureCacheError):
    """A saved embedder whose word source no longer has the content it was built from."""


@dataclass(frozen=True)
class EmbeddedTokens:
    vectors: np.ndarray  # float32 (N, dim)
    ids: np.ndarray  # int32 (N,): vocabulary ids, PAD_ID/UNK_ID reserved
    oov: np.ndarray  # bool (N,): the word source has no vector for the token

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class SplitFeatures:
    vectors: np.ndarray  # float32 (N, dim), memory-mapped
    ids: np.ndarray  # int32 (N,)
    labels: np.ndarray  # int8 (N,), punctuation.labels.LABEL_TO_ID
    oov: np.ndarray  # bool (N,)

    def __len__(self) -> int:
        return len(self.ids)


class CachePaths(dict):
    """``{split: directory}`` as returned by :func:`build_feature_cache`, plus where the rest lives.

    ``rebuilt`` is False when an up-to-date cache was reused.
    """

    def __init__(self, splits: dict[str, Path], *, root: Path, rebuilt: bool):
        super().__init__(splits)
        self.root = root
        self.manifest = root / MANIFEST
        self.embedder = root / EMBEDDER_DIR
        self.rebuilt = rebuilt


# ---------------------------------------------------------------------------------------------------------
# Vocabulary and OOV vectors


def build_vocab(words: Iterable[str], min_count: int = 1) -> list[str]:
    """``[<pad>, <unk>, *types]``: word types seen at least ``min_count`` times, most frequent first, ties
    alphabetical. The list index is the token id."""
    if min_count < 1:
        raise ValueError(f"vocab min_count must be >= 1, got {min_count}")
    counts = Counter(words)
    types = [w for w, c in counts.items() if c >= min_count and w not in (PAD, UNK)]
    types.sort(key=lambda w: (-counts[w], w))
    return [PAD, UNK, *types]


def vocab_sha256(vocab: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(vocab).encode("utf-8", "surrogatepass")).hexdigest()


def fallback_key(word: str) -> str | None:
    """The lookup fallback tried when ``word`` itself is not in the source: the word with a mangled-byte
    prefix removed (``"\\ufffd?gimme"`` -> ``"gimme"``); None when there is no such prefix."""
    stripped = _MANGLED_PREFIX.sub("", word)
    return stripped if stripped and stripped != word else None


def clitic_parts(word: str) -> tuple[str, str] | None:
    """``("we", "'ve")`` for a contraction the benchmark leaves whole (``we've``, ``i'd``, ``it’s``).

    The benchmark splits only some clitics (``n't``, ``'s``, ``'m``, ``'re``, ``'ll``) into tokens of their own;
    ``'ve`` and ``'d`` stay attached, and GloVe has no vector for such words. Their vector is then the mean of
    the two parts' vectors (both must be in the source), which is what the split form would have carried.
    """
    word = word.replace("\u2019", "'")
    cut = word.rfind("'")
    if cut <= 0 or cut == len(word) - 1:
        return None
    return word[:cut], word[cut:]


def random_oov_vector(word: str, dim: int, sigma: float) -> np.ndarray:
    """The ``random`` policy's vector for ``word``: N(0, sigma^2) per dimension, float32, from a generator
    seeded with sha256(salt + UTF-8 word): the same in every process, run and machine."""
    seed = int.from_bytes(hashlib.sha256(_RANDOM_SALT + word.encode("utf-8", "surrogatepass")).digest()[:16], "little")
    rng = np.random.Generator(np.random.PCG64(seed))
    return (rng.standard_normal(dim) * sigma).astype(np.float32)


# ---------------------------------------------------------------------------------------------------------
# TokenEmbedder


def _normalise_spec(spec: dict[str, Any]) -> dict[str, Any]:
    spec = validate_spec(spec)
    out: dict[str, Any] = {"type": spec["type"], "path": None if spec.get("path") is None else str(spec["path"])}
    if spec.get("no_header"):
        out["no_header"] = True
    return out


def _check_policy(oov: str) -> None:
    if oov not in OOV_POLICIES:
        raise ValueError(f"unknown OOV policy {oov!r}; expected one of {list(OOV_POLICIES)}")


class TokenEmbedder:
    """Maps tokens to (source vector, vocabulary id, OOV flag).

    ``vocab`` is the id list (``build_vocab``); ``<pad>``/``<unk>`` are prepended if missing. ``vectors``
    (already loaded KeyedVectors) and ``fingerprint`` may be passed to skip reloading/re-hashing the source;
    ``oov_stats`` (``{"sigma": float, "mean": [float]}``) pins the statistics the OOV vectors use.
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
        self.word_source = _normalise_spec(word_source)
        _check_policy(oov)
        self.oov_policy = oov
        vocab = list(vocab)
        if vocab[:2] != [PAD, UNK]:
            vocab = [PAD, UNK, *(w for w in vocab if w not in (PAD, UNK))]
        if len(set(vocab)) != len(vocab):
            raise ValueError("vocab has duplicate entries")
        self.vocab = vocab
        self._vocab_index = {w: i for i, w in enumerate(vocab)}
        self.fingerprint = fingerprint or source_fingerprint(self.word_source)
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
        }

    def save(self, directory: str | Path) -> Path:
        """Write ``embedder.json`` and ``vocab.txt`` (one token per line; line number = id) to ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        bad = [w for w in self.vocab if "\n" in w or "\r" in w]
        if bad:
            raise ValueError(f"vocab tokens contain a line break and cannot be saved one per line: {bad[:3]!r}")
        with (directory / VOCAB_TXT).open("w", encoding="utf-8", errors="surrogatepass", newline="\n") as handle:
            handle.write("\n".join(self.vocab) + "\n")
        (directory / EMBEDDER_JSON).write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> "TokenEmbedder":
        """Reload a saved embedder, re-loading its vectors from the spec; raises :class:`SourceMismatchError`
        if the source's content no longer matches the saved fingerprint."""
        directory = Path(directory)
        meta_path, vocab_path = directory / EMBEDDER_JSON, directory / VOCAB_TXT
        for path in (meta_path, vocab_path):
            if not path.is_file():
                raise FeatureCacheError(f"{path}: missing; not a saved TokenEmbedder directory")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("embedder_format") != EMBEDDER_FORMAT:
            raise FeatureCacheError(
                f"{meta_path}: embedder_format {meta.get('embedder_format')!r}, this code reads {EMBEDDER_FORMAT}"
            )
        text = vocab_path.read_bytes().decode("utf-8", "surrogatepass")
        vocab = text.split("\n")
        if vocab and vocab[-1] == "":
            vocab.pop()
        if len(vocab) != meta["vocab_size"] or vocab_sha256(vocab) != meta["vocab_sha256"]:
            raise FeatureCacheError(f"{vocab_path}: does not match the vocab size/hash recorded in {meta_path}")
        spec = meta["word_source"]
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


# ---------------------------------------------------------------------------------------------------------
# The feature cache


def _cache_key(inputs: dict[str, str], spec: dict[str, Any], fingerprint: str, oov: str,
               splits: Sequence[str], vocab_min_count: int, speech: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything a cache's content depends on; a cache is reused only if its manifest records all of it.

    ``speech`` (spec, fingerprint, combine) is only part of the key when there is a speech source, so a
    word-only cache keeps the manifest it had before speech sources existed."""
    key = {
        "cache_format": CACHE_FORMAT,
        "inputs": {split: {"file": f"{split}.tsv", "sha256": digest} for split, digest in inputs.items()},
        "word_source": spec,
        "fingerprint": fingerprint,
        "oov": oov,
        "vocab_split": VOCAB_SPLIT,
        "vocab_min_count": vocab_min_count,
        "split_names": list(splits),
    }
    if speech is not None:
        key["speech"] = speech
    return key


def _up_to_date(out_dir: Path, key: dict[str, Any]) -> bool:
    manifest_path = out_dir / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if any(manifest.get(name) != value for name, value in key.items()):
        return False
    needed = [out_dir / EMBEDDER_DIR / EMBEDDER_JSON, out_dir / EMBEDDER_DIR / VOCAB_TXT]
    needed += [out_dir / split / f"{name}.npy" for split in key["split_names"] for name in ARRAYS]
    needed += [out_dir / split / WORDS_FILE for split in key["split_names"]]
    if "speech" in key:
        needed += [out_dir / split / f"{SPEECH_ARRAY}.npy" for split in key["split_names"]]
    return all(path.is_file() for path in needed)


def _coverage(n: int, oov: int) -> float | None:
    return None if n == 0 else round(100.0 * (n - oov) / n, 3)


def _write_split(split: str, words: list[str], labels: list[str], source: Path, embedder: TokenEmbedder,
                 split_dir: Path, speech: SpeechVectors | None = None, combine: str = "sum") -> dict[str, Any]:
    split_dir.mkdir(parents=True)
    n = len(words)
    try:
        label_ids = np.fromiter((LABEL_TO_ID[label] for label in labels), dtype=np.int8, count=len(labels))
    except KeyError as error:
        raise ValueError(f"{source}: unknown label {error.args[0]!r}; expected one of {list(LABEL_TO_ID)}") from None
    if len(label_ids) != n:
        raise ValueError(f"{source}: {n} words but {len(label_ids)} labels")
    speech_vectors, has_speech = (None, None) if speech is None else speech.for_split(split, words)
    dim = embedder.dim if speech is None else combine_vectors(
        np.zeros((0, embedder.dim), np.float32), np.zeros((0, speech.dim), np.float32), combine).shape[1]
    vectors = np.lib.format.open_memmap(split_dir / "vectors.npy", mode="w+", dtype=np.float32, shape=(n, dim))
    ids = np.empty(n, dtype=np.int32)
    oov = np.empty(n, dtype=bool)
    with tqdm(total=n, desc=f"embed {split}", unit="tok", unit_scale=True, leave=False) as bar:
        for start in range(0, n, _CHUNK_TOKENS):
            stop = min(n, start + _CHUNK_TOKENS)
            chunk = embedder.embed(words[start:stop])
            if speech_vectors is None:
                vectors[start:stop] = chunk.vectors
            else:
                vectors[start:stop] = combine_vectors(chunk.vectors, speech_vectors[start:stop], combine)
            ids[start:stop] = chunk.ids
            oov[start:stop] = chunk.oov
            bar.update(stop - start)
    vectors.flush()
    del vectors
    np.save(split_dir / "ids.npy", ids)
    np.save(split_dir / "labels.npy", label_ids)
    np.save(split_dir / "oov.npy", oov)
    # the token strings, for models that tokenise text themselves (one per line; tokens never hold newlines)
    (split_dir / WORDS_FILE).write_text("".join(w + "\n" for w in words), encoding="utf-8", errors="surrogatepass")
    types = set(words)
    oov_types = {w for w, flag in zip(words, oov.tolist()) if flag}
    oov_tokens = int(oov.sum())
    extra: dict[str, Any] = {}
    if has_speech is not None:
        np.save(split_dir / f"{SPEECH_ARRAY}.npy", has_speech)
        extra = {"speech_tokens": int(has_speech.sum()), "coverage_speech_tokens": _coverage(n, n - int(has_speech.sum())),
                 "speech_types": len({w for w, flag in zip(words, has_speech.tolist()) if flag})}
    return {
        **extra,
        "tokens": n,
        "oov_tokens": oov_tokens,
        "oov_types": len(oov_types),
        "types": len(types),
        "coverage_tokens": _coverage(n, oov_tokens),
        "coverage_types": _coverage(len(types), len(oov_types)),
        "unk_tokens": int((ids == UNK_ID).sum()),
    }


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_path(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _clean_leftovers(out_dir: Path) -> None:
    """Remove temp/old directories that a killed build of ``out_dir`` left behind."""
    for path in out_dir.parent.glob(f".{glob.escape(out_dir.name)}.*-*-*"):
        match = re.fullmatch(rf"\.{re.escape(out_dir.name)}\.(?:tmp|old)-(\d+)-[0-9a-f]+", path.name)
        if match and not _pid_alive(int(match.group(1))):
            log.info("removing leftover of an interrupted build: %s", path)
            _remove_path(path)


def _sibling(out_dir: Path, kind: str) -> Path:
    return out_dir.parent / f".{out_dir.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}"


def _replace_dir(tmp: Path, out_dir: Path) -> None:
    """Put ``tmp`` in place of ``out_dir`` with renames: ``out_dir`` is always either the old complete cache,
    absent, or the new complete one."""
    old = None
    if out_dir.exists() or out_dir.is_symlink():
        old = _sibling(out_dir, "old")
        os.rename(out_dir, old)
    os.rename(tmp, out_dir)
    if old is not None:
        _remove_path(old)


def build_feature_cache(
    prepared_dir: str | Path,
    out_dir: str | Path,
    *,
    word_source: dict[str, Any],
    oov: str,
    splits: Sequence[str] = SPLITS,
    vocab_min_count: int = 1,
    force: bool = False,
    speech_source: dict[str, Any] | None = None,
    combine: str = "sum",
) -> CachePaths:
    """Build (or reuse) the feature cache of ``prepared_dir/<split>.tsv`` under ``out_dir``.

    Layout: ``out_dir/<split>/{vectors,ids,labels,oov}.npy``, ``out_dir/embedder/``, ``out_dir/manifest.json``.
    The vocabulary comes from ``train.tsv`` (always read, even if ``train`` is not among ``splits``). An
    existing cache is reused when its manifest matches every input hash, the spec, the source fingerprint,
    the OOV policy, the vocab settings and the format; otherwise everything is rebuilt in a temporary
    sibling directory that replaces ``out_dir`` only when complete.

    ``speech_source`` (see :mod:`embeddings.speech_sources`) adds a speech part to every token's vector,
    summed with or concatenated to the word vector (``combine``); its files' content is part of the key.
    """
    started = time.perf_counter()
    prepared_dir, out_dir = Path(prepared_dir), Path(out_dir)
    spec = _normalise_spec(word_source)
    _check_policy(oov)
    splits = list(splits)
    if not splits or len(set(splits)) != len(splits):
        raise ValueError(f"splits must be a non-empty list of distinct names, got {splits}")
    if vocab_min_count < 1:
        raise ValueError(f"vocab_min_count must be >= 1, got {vocab_min_count}")
    input_paths = {split: prepared_dir / f"{split}.tsv" for split in dict.fromkeys([VOCAB_SPLIT, *splits])}
    for split, path in input_paths.items():
        if not path.is_file():
            raise FileNotFoundError(f"prepared split {split!r} not found: {path}")
    inputs = {split: file_sha256(path) for split, path in input_paths.items()}
    fingerprint = source_fingerprint(spec)
    speech_spec = validate_speech_spec(speech_source)
    check_combine(combine)
    speech_key = None
    if speech_spec["type"] != NONE:
        speech_key = {"source": speech_spec, "fingerprint": speech_fingerprint(speech_spec, splits), "combine": combine}
    key = _cache_key(inputs, spec, fingerprint, oov, splits, vocab_min_count, speech_key)
    split_dirs = {split: out_dir / split for split in splits}

    if not force and _up_to_date(out_dir, key):
        log.info("cache up to date: %s", out_dir)
        return CachePaths(split_dirs, root=out_dir, rebuilt=False)

    log.info("building feature cache %s (source %s, oov %s)", out_dir, spec["type"], oov)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _clean_leftovers(out_dir)
    tmp = _sibling(out_dir, "tmp")
    tmp.mkdir()
    try:
        data = {split: read_iwslt(path) for split, path in input_paths.items()}
        vocab = build_vocab(data[VOCAB_SPLIT].words, vocab_min_count)
        load_start = time.perf_counter()
        embedder = TokenEmbedder(spec, oov, vocab, fingerprint=fingerprint)
        speech = SpeechVectors(speech_spec) if speech_key is not None else None
        if speech is not None:
            # fails early, naming both dimensions, when they cannot be summed
            combine_vectors(np.zeros((0, embedder.dim), np.float32), np.zeros((0, speech.dim), np.float32), combine,
                            where=f"feature cache {out_dir}: ")
        load_seconds = time.perf_counter() - load_start
        stats = {}
        for split in splits:
            tokens = data[split]
            stats[split] = _write_split(
                split, list(tokens.words), list(tokens.labels), input_paths[split], embedder, tmp / split,
                speech, combine,
            )
        embedder.save(tmp / EMBEDDER_DIR)
        if speech is not None:
            (tmp / EMBEDDER_DIR / SPEECH_JSON).write_text(
                json.dumps({**speech_key, "dim": speech.dim, "needs_audio": speech.needs_audio}, indent=2) + "\n",
                encoding="utf-8")
        # Guard against inputs changing while we read them: the manifest must describe what was read.
        if ({s: file_sha256(p) for s, p in input_paths.items()} != inputs or source_fingerprint(spec) != fingerprint
                or (speech_key is not None and speech_fingerprint(speech_spec, splits) != speech_key["fingerprint"])):
            raise FeatureCacheError(f"inputs of {out_dir} changed during the build; run it again")
        manifest = {
            **key,
            "dim": int(np.load(tmp / splits[0] / "vectors.npy", mmap_mode="r").shape[1]),
            "vocab_size": len(vocab),
            "vocab_sha256": vocab_sha256(vocab),
            "oov_fallback": "strip-mangled-prefix",
            "splits": stats,
        }
        # Written last: a directory with a manifest is a complete cache.
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        _replace_dir(tmp, out_dir)
    except BaseException:
        _remove_path(tmp)
        raise
    log.info(
        "built feature cache %s in %.1f s (vector load %.1f s)", out_dir, time.perf_counter() - started, load_seconds
    )
    return CachePaths(split_dirs, root=out_dir, rebuilt=True)


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
