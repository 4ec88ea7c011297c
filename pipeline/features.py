"""DVC stage ``features``: per-token prosodic features and MFCC frames over each split's full token sequence.

    python -m pipeline.features [--params params.yaml] [--alignments data/alignments] [--audio data/audio]
                                [--prepared data/prepared] [--out data/acoustic]
                                [--metrics metrics/acoustic.json] [--report reports/audio_report.md]

Reads the ``features`` section of the params file (``splits``; ``config``: fields of
:class:`audio.features.FeatureConfig`; ``workers`` and ``scheduler`` as in ``align``) and runs
:func:`audio.features_stage.token_features`, talks in parallel with a progress bar: per split
``features.npy``/``missing.npy``/``has_audio.npy``/``feature_names.json`` and the MFCC store
(``mfcc.npy``, ``mfcc_offsets.npy``) under ``<out>/<split>/``. Writes the coverage figures to the metrics
file, and the audio half's report -- audio made, alignment, ASR timing coverage, features, excluded and
failed talks -- from the three stages' reports to ``reports/audio_report.md``. A talk that fails does not stop
the others, but the stage then exits 1 (after writing every output), so that DVC does not record it as done.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from audio.features import FeatureConfig
from audio.features_stage import audio_report_markdown, token_features
from audio.stage_common import failed_talks_exit
from corpus.io import atomic_write_text
from experiments.params import ParamsError, require
from pipeline.stage import option, read_json, stage_parser, start, write_metrics

REPORT_PATH = Path("reports/audio_report.md")


def main(argv: Sequence[str] | None = None) -> int:
    parser = stage_parser("pipeline.features", __doc__, out="data/acoustic", metrics="metrics/acoustic.json",
                          prepared=True, quiet=True)
    option(parser, "--alignments", "data/alignments", "output of the align stage")
    option(parser, "--audio", "data/audio", "output of the synthesize stage")
    option(parser, "--report", REPORT_PATH, "Markdown report")
    args, params = start(parser, argv)

    section = require(params, "features", "params")
    overrides = dict(require(section, "config", "features") or {})
    known = {field.name for field in dataclasses.fields(FeatureConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ParamsError(f"params: features.config has unknown settings {unknown}; known: {sorted(known)}")
    report = token_features(
        args.alignments,
        args.audio,
        args.prepared,
        args.out,
        splits=list(require(section, "splits", "features")),
        config=FeatureConfig(**overrides),
        workers=require(section, "workers", "features"),
        scheduler=require(section, "scheduler", "features"),
        progress=not args.quiet,
    )
    metrics_path = write_metrics(args.metrics, report, ensure_ascii=False)
    markdown = audio_report_markdown(read_json(Path(args.audio) / "audio_report.json", missing_ok=True),
                                     read_json(Path(args.alignments) / "alignment_report.json", missing_ok=True),
                                     report)
    report_path = atomic_write_text(args.report, markdown)

    print(f"features ({report['engine']}): {report['seconds']:.1f} s -> {args.out}")
    for split, info in report["splits"].items():
        timed = f"{info['coverage_timed']:.1%}" if info["coverage_timed"] is not None else "-"
        print(f"  {split}: {info['tokens']:,} tokens, {info['tokens_with_audio']:,} with audio, "
              f"{info['tokens_timed']:,} timed ({timed}); talks {info['talks']}; "
              f"{info['compute_seconds_per_audio_minute']} s per audio minute")
    print(f"  wrote {metrics_path} and {report_path}")
    return failed_talks_exit([{**failure, "split": split} for split, info in report["splits"].items()
                        for failure in info["failed"]], "features")


if __name__ == "__main__":
    raise SystemExit(main())
