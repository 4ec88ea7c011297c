"""Move a built feature cache to another machine in a fraction of its size, bit for bit.

A cache stores one vector per *token* (2.1M x 50 float32 = 420 MB for the training split), but for a
type-level source every occurrence of a word has the same vector. ``pack_feature_cache`` therefore stores
each split's vectors as a table of distinct rows plus one row index per token (plus the small arrays, the
words, the manifest and the embedder), compressed into one ``.npz`` file; ``unpack_feature_cache`` rebuilds
the cache directory exactly (every ``.npy`` byte-identical, so the training fingerprint, which hashes the
manifest, is unchanged). Per-occurrence sources simply have more distinct rows.

    python -m embeddings.pack pack data/features features.npz
    python -m embeddings.pack unpack features.npz data/features     # on the other machine
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from corpus.io import atomic_path
from embeddings.directories import replacing_dir
from embeddings.store import ARRAYS, EMBEDDER_DIR, MANIFEST, SPEECH_ARRAY, WORDS_FILE, FeatureCacheError, read_manifest

PACK_FORMAT = 1


def pack_feature_cache(cache_dir: str | Path, out_file: str | Path) -> Path:
    """Write ``cache_dir`` (a built feature cache) into one compressed ``out_file``; returns its path."""
    cache_dir, out_file = Path(cache_dir), Path(out_file)
    manifest = read_manifest(cache_dir)
    members: dict[str, np.ndarray] = {}
    files: dict[str, bytes] = {MANIFEST: (cache_dir / MANIFEST).read_bytes()}
    for path in sorted((cache_dir / EMBEDDER_DIR).rglob("*")):
        if path.is_file():
            files[str(path.relative_to(cache_dir))] = path.read_bytes()
    for split in manifest["splits"]:
        for name in (*ARRAYS, SPEECH_ARRAY):
            path = cache_dir / split / f"{name}.npy"
            if not path.is_file():
                continue
            array = np.load(path)
            if name == "vectors":
                table, rows = np.unique(array, axis=0, return_inverse=True)
                members[f"{split}/vectors.table"] = table
                members[f"{split}/vectors.rows"] = rows.reshape(-1).astype(np.int32)
            else:
                members[f"{split}/{name}"] = array
        files[f"{split}/{WORDS_FILE}"] = (cache_dir / split / WORDS_FILE).read_bytes()
    for name, content in files.items():
        members[f"file:{name}"] = np.frombuffer(content, dtype=np.uint8)
    members["pack_format"] = np.array(PACK_FORMAT)
    with atomic_path(out_file) as temporary, temporary.open("wb") as handle:
        np.savez_compressed(handle, **members)
    return out_file


def unpack_feature_cache(pack_file: str | Path, cache_dir: str | Path) -> Path:
    """Rebuild the feature cache packed in ``pack_file`` at ``cache_dir`` (replaced if present)."""
    pack_file, cache_dir = Path(pack_file), Path(cache_dir)
    with np.load(pack_file) as pack:
        if "pack_format" not in pack or int(pack["pack_format"]) != PACK_FORMAT:
            raise ValueError(f"{pack_file}: not a feature-cache pack of format {PACK_FORMAT}")
        with replacing_dir(cache_dir) as tmp:
            for key in pack.files:
                if key.startswith("file:"):
                    target = tmp / key[len("file:"):]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(pack[key].tobytes())
            manifest = json.loads((tmp / MANIFEST).read_text(encoding="utf-8"))
            for split in manifest["splits"]:
                (tmp / split).mkdir(parents=True, exist_ok=True)
                for key in pack.files:
                    if not key.startswith(f"{split}/"):
                        continue
                    name = key[len(split) + 1:]
                    if name == "vectors.rows":
                        continue
                    if name == "vectors.table":
                        array, name = pack[key][pack[f"{split}/vectors.rows"]], "vectors"
                    else:
                        array = pack[key]
                    np.save(tmp / split / f"{name}.npy", np.ascontiguousarray(array))
    read_manifest(cache_dir)
    return cache_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m embeddings.pack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["pack", "unpack"])
    parser.add_argument("source", type=Path, help="cache directory (pack) or pack file (unpack)")
    parser.add_argument("target", type=Path, help="pack file (pack) or cache directory (unpack)")
    args = parser.parse_args(argv)
    try:
        if args.action == "pack":
            out = pack_feature_cache(args.source, args.target)
        else:
            out = unpack_feature_cache(args.source, args.target)
    except (OSError, ValueError, FeatureCacheError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
