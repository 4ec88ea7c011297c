"""DVC stage ``features``: per-token prosodic features and MFCC frames over each split's full token sequence.

    python -m pipeline.features [--params params.yaml] [--alignments data/alignments] [--audio data/audio]
                                [--prepared data/prepared] [--out data/acoustic]
                                [--metrics metrics/acoustic.json] [--report reports/audio_report.md]

Reads the ``features`` section of the params file (``splits``; ``config``: fields of
:class:`audio.features.FeatureConfig`) and runs :func:`audio.stage.token_features`: per split
``features.npy``/``missing.npy``/``has_audio.npy``/``feature_names.json`` and the MFCC store
(``mfcc.npy``, ``mfcc_offsets.npy``) under ``<out>/<split>/``. Writes the coverage figures to the metrics
file, and the audio half's report -- audio made, alignment, ASR timing coverage, features, excluded and
failed talks -- from the three stages' reports to ``reports/audio_report.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from audio.features import FeatureConfig
from audio.stage import audio_report_markdown, token_features
from punctuation.params import ParamsError, load_params, require

METRICS_PATH = Path("metrics/acoustic.json")
REPORT_PATH = Path("reports/audio_report.md")


def _read(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.features", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    parser.add_argument("--alignments", default="data/alignments", help="align stage output (default: data/alignments)")
    parser.add_argument("--audio", default="data/audio", help="synthesize stage output (default: data/audio)")
    parser.add_argument("--prepared", default="data/prepared", help="prepared splits (default: data/prepared)")
    parser.add_argument("--out", default="data/acoustic", help="output folder (default: data/acoustic)")
    parser.add_argument("--metrics", default=str(METRICS_PATH), help=f"report as JSON (default: {METRICS_PATH})")
    parser.add_argument("--report", default=str(REPORT_PATH), help=f"Markdown report (default: {REPORT_PATH})")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)

    params = load_params(args.params)
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
        progress=not args.quiet,
    )
    metrics_path, report_path = Path(args.metrics), Path(args.report)
    metrics_path.parent.mkdir(parents=True, exist_ok=True)
    metrics_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    markdown = audio_report_markdown(_read(Path(args.audio) / "audio_report.json"),
                                     _read(Path(args.alignments) / "alignment_report.json"), report)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(markdown, encoding="utf-8")

    print(f"features: {report['seconds']:.1f} s -> {args.out}")
    for split, info in report["splits"].items():
        timed = f"{info['coverage_timed']:.1%}" if info["coverage_timed"] is not None else "-"
        print(f"  {split}: {info['tokens']:,} tokens, {info['tokens_with_audio']:,} with audio, "
              f"{info['tokens_timed']:,} timed ({timed}); talks {info['talks']}; "
              f"{info['compute_seconds_per_audio_minute']} s per audio minute")
        for failure in info["failed"]:
            print(f"    FAILED {failure['talk']}: {failure['error']}")
    print(f"  wrote {metrics_path} and {report_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
