"""DVC stage ``draw@NAME``: a longer draw of training text and its word features, for the experiments that read it.

    python -m pipeline.draw --draw NAME [--params params.yaml] [--out data/draws/NAME]
                            [--metrics metrics/draws/NAME.json]

``draws.NAME`` in the params file is the draw's training tokens, or ``{tokens: N, extra_corpora: [...]}`` to append
another corpus's text (:func:`trainset.draws.draw_spec`); the rest is what the prepare and embed stages read (the
``data`` section with the active profile's overrides, ``embed.word_source``, ``embed.oov``,
``embed.vocab_min_count``). Writes ``OUT/prepared`` (as ``data/prepared``) and ``OUT/features`` (as
``data/features``) through :func:`trainset.draws.make_draw`, and as metrics the draw's tokens and talks, the talks
it left out and why, and the corpora appended (:func:`trainset.draws.draw_metrics`).
An experiment reads it when ``experiments.EXPERIMENT.features`` names ``data/draws/NAME/features``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.stage import stage_parser, start, write_metrics
from trainset.draws import DrawSpecError, draw_from_params


def main(argv: Sequence[str] | None = None) -> int:
    parser = stage_parser("pipeline.draw", __doc__)
    parser.add_argument("--draw", required=True, help="the entry of params' draws")
    parser.add_argument("--out", help="output folder (default: data/draws/DRAW)")
    parser.add_argument("--metrics", help="metrics (default: metrics/draws/DRAW.json)")
    args, params = start(parser, argv, log=True)

    try:
        draw, metrics = draw_from_params(params, args.draw, args.out or f"data/draws/{args.draw}")
    except DrawSpecError as error:
        raise SystemExit(f"error: params' {error}") from None
    write_metrics(args.metrics or f"metrics/draws/{args.draw}.json", metrics)
    appended = "".join(f" + {name} ({figures['tokens']:,} tokens of {figures['calls']} calls)"
                       for name, figures in draw.extra.items())
    print(f"draw {args.draw}: {metrics['tokens']['train']:,} training tokens from {metrics['talks']:,} talks{appended} "
          f"-> {draw.features}")
    print(f"  left out: {metrics['exclusions']['summary']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
