"""DVC stage ``embed``: look up word vectors for every prepared token and cache them as arrays.

    python -m pipeline.embed [--params params.yaml] [--prepared data/prepared] [--out data/features]
                             [--metrics metrics/embedding_coverage.json] [--feature-set NAME]

Reads ``embed.word_source``, ``embed.oov`` and ``embed.vocab_min_count`` from the params file; the splits are
``train dev ref asr``, as the prepare stage writes them. An up-to-date cache is reused.
With ``--feature-set NAME`` (DVC stage ``embed_set@NAME``) the entry ``embed.feature_sets.NAME`` chooses the
inputs instead: its ``word_source`` (default ``embed.word_source``), ``speech_source`` (see
``embeddings/speech_sources.py``) and ``combine`` (``sum`` or ``concat``).
Writes the per-split coverage figures to the metrics file and prints them.
"""

from __future__ import annotations

import time
from typing import Sequence

from embeddings.cache import SPLITS, build_feature_cache, read_manifest
from pipeline.stage import stage_parser, start, write_json
from punctuation.params import require

COVERAGE_FIELDS = ("tokens", "oov_tokens", "oov_types", "types", "coverage_tokens", "coverage_types", "unk_tokens",
                   "speech_tokens", "coverage_speech_tokens", "speech_types")
FEATURE_SET_KEYS = {"word_source", "speech_source", "combine"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = stage_parser("pipeline.embed", __doc__, out="data/features", metrics="metrics/embedding_coverage.json",
                          prepared=True)
    parser.add_argument("--force", action="store_true", help="rebuild even if the cache is up to date")
    parser.add_argument("--feature-set", help="build embed.feature_sets.NAME instead of the main word features")
    args, params = start(parser, argv, log=True)

    embed = require(params, "embed", "params")
    word_source, speech_source, combine = require(embed, "word_source", "embed"), None, "sum"
    if args.feature_set:
        sets = embed.get("feature_sets") or {}
        if args.feature_set not in sets:
            raise SystemExit(f"error: embed.feature_sets has no entry {args.feature_set!r} (has {sorted(sets)})")
        entry = sets[args.feature_set] or {}
        unknown = set(entry) - FEATURE_SET_KEYS
        if unknown:
            raise SystemExit(f"error: embed.feature_sets.{args.feature_set}: unknown keys {sorted(unknown)}; "
                             f"expected {sorted(FEATURE_SET_KEYS)}")
        word_source = entry.get("word_source") or word_source
        speech_source, combine = entry.get("speech_source"), entry.get("combine", "sum")
    started = time.perf_counter()
    paths = build_feature_cache(
        args.prepared,
        args.out,
        word_source=word_source,
        oov=require(embed, "oov", "embed"),
        splits=SPLITS,
        vocab_min_count=int(embed["vocab_min_count"]),
        force=args.force,
        speech_source=speech_source,
        combine=combine,
    )
    seconds = time.perf_counter() - started
    manifest = read_manifest(paths.root)
    coverage = {split: {k: stats[k] for k in COVERAGE_FIELDS if k in stats}
                for split, stats in manifest["splits"].items()}
    write_json(args.metrics, coverage, echo=True)
    print(
        f"{'rebuilt' if paths.rebuilt else 'reused'} {paths.root} in {seconds:.1f} s "
        f"(source {manifest['word_source']['type']}, oov {manifest['oov']}, dim {manifest['dim']}, "
        f"vocab {manifest['vocab_size']})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
