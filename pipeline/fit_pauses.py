"""DVC stage ``fit_pauses``: the pause model of real speech, simulated timing cues for the prepared splits, and the
speech models' training set with Earnings-22's real cues.

    python -m pipeline.fit_pauses [--params params.yaml] [--prepared data/prepared] [--out data/pauses]
                                  [--metrics metrics/pauses.json] [--talks TALK ...] [--earnings22 data/earnings22]

Fits :class:`embeddings.timing_features.PauseModel` on the real-speech talks ``data.real_speech_talks`` of
``data.real_speech_dir`` (``--talks`` fits on others, e.g. one talk to score on the other), writes it to
``OUT/model.json`` and the raw timing cues of every prepared split to ``OUT/timed/<split>/timing.npy``
(label-conditioned) and ``OUT/control/<split>/timing.npy`` (label-independent): simulated for
``pauses.simulate_splits``, missing for the others (:func:`realspeech.cues.simulate_split_cues`).
The feature sets of ``embed.feature_sets`` with ``speech_source: {type: pauses, path: OUT/timed}`` read them.
``OUT/mix`` is the speech models' training set of ``pauses.mix`` (:func:`realspeech.speech_mix.write_speech_mix`):
TED's training text with those simulated cues and Earnings-22's calls with their real ones (``--earnings22``, the
prepare_earnings22 stage's output); the feature sets with ``prepared: OUT/mix/prepared`` read it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from embeddings.cache import SPLITS
from experiments.params import require
from pipeline.stage import stage_parser, start, write_metrics
from realspeech.cues import fit_pause_model, simulate_split_cues
from realspeech.speech_mix import write_speech_mix


def main(argv: Sequence[str] | None = None) -> int:
    parser = stage_parser("pipeline.fit_pauses", __doc__, out="data/pauses", metrics="metrics/pauses.json",
                          prepared=True)
    parser.add_argument("--talks", nargs="+", help="real-speech talks to fit on (default: data.real_speech_talks)")
    parser.add_argument("--earnings22", default="data/earnings22",
                        help="the prepared Earnings-22 (default: data/earnings22), read for pauses.mix")
    args, params = start(parser, argv)
    data = require(params, "data", "params")
    settings = require(params, "pauses", "params")
    talks = args.talks or list(require(data, "real_speech_talks", "data"))
    started = time.perf_counter()
    model = fit_pause_model(require(data, "real_speech_dir", "data"), talks,
                            min_pool=int(settings.get("min_pool", 30)))
    out = Path(args.out)
    model.save(out / "model.json")
    splits = simulate_split_cues(
        model, args.prepared, out, splits=SPLITS, simulate=list(require(settings, "simulate_splits", "pauses")),
        seed=int(require(settings, "seed", "pauses")),
        dropout_fraction=float(require(settings, "dropout_fraction", "pauses")),
        dropout_span=int(require(settings, "dropout_span", "pauses")),
        missing_rate=settings.get("missing_rate"),
    )
    mix = settings.get("mix")
    report = {"pause_model": model.summary(), "splits": splits}
    if mix:
        report["mix"] = write_speech_mix(args.prepared, out, args.earnings22 if mix.get("earnings22_splits") else None,
                                         out / "mix", ted=bool(mix.get("ted", True)),
                                         earnings22_splits=list(mix.get("earnings22_splits") or []),
                                         seed=int(mix.get("seed", 22)),
                                         ted_cues=str(mix.get("ted_cues", "simulated")))
    report["seconds"] = round(time.perf_counter() - started, 1)
    write_metrics(args.metrics, report, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
