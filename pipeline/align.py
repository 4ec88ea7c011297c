"""DVC stage ``align``: word timings of every talk with audio, by forced alignment of its prepared tokens.

    python -m pipeline.align [--params params.yaml] [--audio data/audio] [--prepared data/prepared]
                             [--out data/alignments] [--metrics metrics/alignment.json]

Reads the ``align`` section of the params file (``backend``, ``config``: fields of :class:`aligner.AlignConfig`;
``workers``: local processes, null = every core; ``scheduler``: the address of a Dask scheduler, or null) and
runs :func:`audio.align_stage.align_talks`, talks in parallel with a progress bar:
``<out>/<split>/<talk>.parquet`` (+ ``.TextGrid``) per talk, ASR tokens aligned on the reference talk's audio with inherited times where their own alignment fails, and
``<out>/alignment_report.json`` (hours aligned, share of tokens aligned, boundary error against the engine's
own timings). Resumable: a talk whose audio, tokens and settings are unchanged is kept. Talks where most words
stayed unplaced are reported; with ``align.config.min_placed_share`` they fail. A failed talk does not stop the
others, but the stage then exits 1 (after writing every output), so that DVC does not record it as done.
"""

from __future__ import annotations

from collections.abc import Sequence

from audio.align_stage import align_talks
from audio.stage_common import failed_talks_exit
from experiments.params import require
from pipeline.stage import option, stage_parser, start, write_metrics


def _ms(summary: dict) -> str:
    if not summary.get("n"):
        return "n/a"
    return (f"median {summary['median_ms']:.1f} ms, mean {summary['mean_ms']:.1f} ms, "
            f"<=20 ms {summary['within_20ms']:.1%}, <=50 ms {summary['within_50ms']:.1%} (n={summary['n']:,})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = stage_parser("pipeline.align", __doc__, out="data/alignments", metrics="metrics/alignment.json",
                          prepared=True, quiet=True)
    option(parser, "--audio", "data/audio", "output of the synthesize stage")
    args, params = start(parser, argv)

    section = require(params, "align", "params")
    report = align_talks(
        args.audio,
        args.prepared,
        args.out,
        backend=require(section, "backend", "align"),
        backend_config=dict(require(section, "config", "align") or {}),
        workers=require(section, "workers", "align"),
        scheduler=require(section, "scheduler", "align"),
        progress=not args.quiet,
    )
    metrics_path = write_metrics(args.metrics, report, ensure_ascii=False)

    print(f"align: {report['backend']} ({report['engine']}), {report['seconds']:.1f} s -> {args.out}; "
          f"{report['hours_aligned_total']:.2f} h aligned")
    print(f"  boundary error vs engine timings: {_ms(report['boundary_error']['all'])}")
    print(f"    at pauses {_ms(report['boundary_error']['pause'])}; "
          f"junctions {_ms(report['boundary_error']['junction'])}")
    for split, info in report["splits"].items():
        share = f"{info['share_aligned']:.1%}" if info["share_aligned"] is not None else "-"
        line = (f"  {split}: {info['talks_aligned']}/{info['talks_with_audio']} talks "
                f"({info['talks_aligned_this_run']} this run), {info['hours_aligned']:.2f} h, "
                f"{share} of tokens aligned, "
                f"{info['compute_seconds_per_audio_minute']} s per audio minute")
        if split == "asr":
            line += f"; timing sources {info['timing_sources']}"
        print(line)
        for talk in info["talks_mostly_unplaced"]:
            print(f"    WARNING {talk['talk']}: only {talk['placed']} of {talk['tokens']} tokens placed")
    print(f"  wrote {metrics_path}")
    return failed_talks_exit(report["failed"], "align")


if __name__ == "__main__":
    raise SystemExit(main())
