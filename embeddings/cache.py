"""Building the on-disk feature cache of the prepared IWSLT splits (``python -m pipeline.embed``).

``build_feature_cache`` turns the prepared splits into memory-mappable arrays (vectors, vocabulary ids,
label ids, OOV flags) and a ``manifest.json`` that records exactly what they were built from, so an unchanged
build is reused and any change (split file, vector-file *content*, spec, OOV policy, format) rebuilds it.
See ``README.md``. The pieces it is made of:

* :mod:`embeddings.vocab` -- the vocabulary and the OOV rules;
* :mod:`embeddings.embedder` -- the :class:`TokenEmbedder` (the lookup, saved beside the cache);
* :mod:`embeddings.store` -- the layout, its errors, and reading a built cache (``load_split``, ``read_manifest``);
* :mod:`embeddings.directories` -- swapping a finished build in place of the old one.

The few names of those modules that callers import from here are re-exported (``__all__``).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from tqdm import tqdm

from corpus.iwslt import read_iwslt
from corpus.labels import LABEL_TO_ID
from embeddings.directories import replacing_dir
from embeddings.embedder import EMBEDDER_JSON, TABLE_STEM, VOCAB_TXT, TokenEmbedder, normalise_spec
from embeddings.sources import NONE, file_sha256, source_fingerprint
from embeddings.speech_sources import (
    SpeechVectors,
    check_combine,
    combine_vectors,
    speech_fingerprint,
    validate_speech_spec,
)
from embeddings.store import (
    ARRAYS,
    CACHE_FORMAT,
    EMBEDDER_DIR,
    MANIFEST,
    SPEECH_ARRAY,
    SPEECH_JSON,
    SPLITS,
    VOCAB_SPLIT,
    WORDS_FILE,
    FeatureCacheError,
    read_manifest,
)
from embeddings.table import VECTORS_SUFFIX, WORDS_SUFFIX, VectorTable
from embeddings.vocab import UNK_ID, build_vocab, check_policy, vocab_sha256

#: ``build_feature_cache`` and the names that callers (pipeline/embed.py, punctuate)
#: import from here, wherever they live now.
__all__ = ["SPEECH_JSON", "SPLITS", "CachePaths", "TokenEmbedder", "build_feature_cache", "read_manifest"]

log = logging.getLogger(__name__)

_CHUNK_TOKENS = 1 << 16
#: Stem of the type-level speech vectors saved beside the embedder (``speech_vectors_words.txt`` + ``.npy``).
SPEECH_TABLE_STEM = "speech_vectors"


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
    if key["word_source"]["type"] != NONE:  # the embedder carries its vectors (embeddings/embedder.py)
        needed += [out_dir / EMBEDDER_DIR / (TABLE_STEM + suffix) for suffix in (WORDS_SUFFIX, VECTORS_SUFFIX)]
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
    word_vectors: Any = None,
    speech_vectors: Any = None,
) -> CachePaths:
    """Build (or reuse) the feature cache of ``prepared_dir/<split>.tsv`` under ``out_dir``.

    Layout: ``out_dir/<split>/{vectors,ids,labels,oov}.npy``, ``out_dir/embedder/``, ``out_dir/manifest.json``.
    The vocabulary comes from ``train.tsv`` (always read, even if ``train`` is not among ``splits``). An
    existing cache is reused when its manifest matches every input hash, the spec, the source fingerprint,
    the OOV policy, the vocab settings and the format; otherwise everything is rebuilt in a temporary
    sibling directory that replaces ``out_dir`` only when complete.

    ``speech_source`` (see :mod:`embeddings.speech_sources`) adds a speech part to every token's vector,
    summed with or concatenated to the word vector (``combine``); its files' content is part of the key.

    ``word_vectors`` / ``speech_vectors``: the vectors of ``word_source`` / of a type-level ``speech_source``
    already in memory (a gensim ``KeyedVectors`` or a :class:`VectorTable`, float32), used instead of loading
    the source (which needs gensim). They must be what the source's files hold: the key still records the
    files' fingerprint, not these vectors.
    """
    started = time.perf_counter()
    prepared_dir, out_dir = Path(prepared_dir), Path(out_dir)
    spec = normalise_spec(word_source)
    check_policy(oov)
    splits = list(splits)
    if not splits or len(set(splits)) != len(splits):
        raise ValueError(f"splits must be a non-empty list of distinct names, got {splits}")
    if vocab_min_count < 1:
        raise ValueError(f"vocab_min_count must be >= 1, got {vocab_min_count}")
    for name, given in (("word_vectors", word_vectors), ("speech_vectors", speech_vectors)):
        if given is not None and np.asarray(given.vectors).dtype != np.float32:
            raise ValueError(f"{name} must be float32 (as a loaded source is), not {np.asarray(given.vectors).dtype}")
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
    with replacing_dir(out_dir) as tmp:
        data = {split: read_iwslt(path) for split, path in input_paths.items()}
        vocab = build_vocab(data[VOCAB_SPLIT].words, vocab_min_count)
        load_start = time.perf_counter()
        embedder = TokenEmbedder(spec, oov, vocab, vectors=word_vectors, fingerprint=fingerprint)
        speech = SpeechVectors(speech_spec, vectors=speech_vectors) if speech_key is not None else None
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
        # The embedder is saved with the vectors of the words of every split it embedded (and the keys their
        # fallbacks used), not the whole source: it reproduces every cached vector bit for bit and loads in
        # milliseconds; other words get the same rules, else the OOV policy.
        embedder.restricted([w for tokens in data.values() for w in tokens.words]).save(tmp / EMBEDDER_DIR)
        if speech is not None:
            saved: dict[str, Any] = {**speech_key, "dim": speech.dim, "needs_audio": speech.needs_audio}
            if speech.type_level_vectors is not None and not speech.needs_audio:
                # type-level speech vectors of the splits' words, inside, as the word vectors
                table = VectorTable.restrict(speech.type_level_vectors, (w for t in data.values() for w in t.words))
                saved["table"] = {"stem": SPEECH_TABLE_STEM, **table.save(tmp / EMBEDDER_DIR, SPEECH_TABLE_STEM)}
            (tmp / EMBEDDER_DIR / SPEECH_JSON).write_text(json.dumps(saved, indent=2) + "\n", encoding="utf-8")
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
    log.info(
        "built feature cache %s in %.1f s (vector load %.1f s)", out_dir, time.perf_counter() - started, load_seconds
    )
    return CachePaths(split_dirs, root=out_dir, rebuilt=True)
