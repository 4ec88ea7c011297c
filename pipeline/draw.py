"""DVC stage ``draw@NAME``: a longer draw of training text and its word features, for the experiments that read it.

    python -m pipeline.draw --draw NAME [--params params.yaml] [--out data/draws/NAME]
                            [--metrics metrics/draws/NAME.json]

``draws.NAME`` in the params file is the draw's training tokens; the rest is what the prepare and embed stages read
(the ``data`` section with the active profile's overrides, ``embed.word_source``, ``embed.oov``,
``embed.vocab_min_count``). Writes ``OUT/prepared`` (as ``data/prepared``) and ``OUT/features`` (as
``data/features``) through :func:`trainset.draws.draw_features`, and the draw's tokens and talks as metrics.
An experiment reads it when ``experiments.EXPERIMENT.features`` names ``data/draws/NAME/features``.
"""

from __future__ import annotations

from collections.abc import Sequence

from embeddings.cache import read_manifest
from experiments.params import require
from pipeline.stage import stage_parser, start, write_metrics
from trainset.draws import PREPARED_DIR, draw_features


def main(argv: Sequence[str] | None = None) -> int:
    parser = stage_parser("pipeline.draw", __doc__)
    parser.add_argument("--draw", required=True, help="the entry of params' draws")
    parser.add_argument("--out", help="output folder (default: data/draws/DRAW)")
    parser.add_argument("--metrics", help="metrics (default: metrics/draws/DRAW.json)")
    args, params = start(parser, argv, log=True)

    draws = params.get("draws") or {}
    if args.draw not in draws:
        raise SystemExit(f"error: params' draws has no entry {args.draw!r} (has {sorted(draws)})")
    tokens = draws[args.draw]
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
        raise SystemExit(f"error: params' draws.{args.draw} is {tokens!r}: give the draw's training tokens, a positive "
                         "whole number")
    embed = require(params, "embed", "params")
    out = args.out or f"data/draws/{args.draw}"
    features = draw_features(require(params, "data", "params"), embed, tokens, out)
    manifest = read_manifest(features)
    lines = (features.parent / PREPARED_DIR / "train_talks.tsv").read_text(encoding="utf-8").splitlines()[1:]
    metrics = {"train_tokens_asked": tokens, "talks": len(lines),
               "tokens": {split: stats["tokens"] for split, stats in manifest["splits"].items()},
               "vocab_size": manifest["vocab_size"]}
    write_metrics(args.metrics or f"metrics/draws/{args.draw}.json", metrics, echo=True)
    print(f"draw {args.draw}: {metrics['tokens']['train']:,} training tokens from {len(lines):,} talks -> {features}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
