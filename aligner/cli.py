"""``python -m aligner``: word timings of a transcript in an audio file.

    .venv/bin/python -m aligner talk.wav talk.txt -o talk.words.tsv [--backend pocketsphinx|mfa]

TRANSCRIPT is plain UTF-8 text; it is tokenised with ``corpus.text.tokenize_for_inference`` so the
words are the benchmark's tokens (marks dropped, contractions split: ``don't`` -> ``do n't``). The output is
a TSV with the header ``word<TAB>start<TAB>end`` (seconds, 3 decimals) and one row per transcript token, in
order; a token the aligner could not place confidently has empty start/end cells (``--estimates`` writes
its estimated times instead). ``--textgrid`` and ``--table`` also write a Praat TextGrid and a Parquet
table. It reports how many words were placed, with a warning when most were not (the transcript does not
match the audio, or the header states the wrong sample rate). Exit status: 0 done, 2 bad input
(missing/unreadable/silent/truncated audio, missing/empty/non-UTF-8 transcript, unknown or unavailable
backend), 3 no more than ``--min-placed`` of the words placed (default 0.5: half or more unplaced fails, 11 of
22 included; ``--min-placed 0`` accepts any alignment; the output is written all the same).

A whole folder of talks, resumable and in parallel (:mod:`aligner.batch`)::

    .venv/bin/python -m aligner batch AUDIO_DIR TRANSCRIPT_DIR -o OUT_DIR [--workers N] [--dask ADDRESS]
                                      [--backend B] [--estimates] [--min-placed SHARE] [--report FILE] [--quiet]

writes ``OUT_DIR/NAME.tsv`` (this command's format) for every ``NAME.wav|flac|sph`` with its ``NAME.txt``;
talks already complete are skipped. ``--workers`` local processes (default: every core), ``--dask`` the
address of a Dask distributed scheduler instead (``--workers`` is then ignored). Exit status: 0 done, 1 a talk
failed (every failed talk is named; the others are done), 2 bad input (a folder missing, an unknown backend, a
Dask scheduler that cannot be reached), 3 no talk failed but some placed no more than ``--min-placed`` of their
words.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aligner.audio import SAMPLE_RATE, load_audio
from aligner.output import write_alignment_table, write_textgrid, write_tsv
from aligner.registry import DEFAULT_BACKEND, align, backend_names
from aligner.transcript import InputError, read_transcript
from aligner.types import MOSTLY_UNPLACED, AlignmentError, mostly_unplaced, placement_problem, too_few_placed
from corpus.text import tokenize_for_inference

__all__ = ["InputError", "batch_main", "main", "read_transcript"]


def _share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a share between 0 and 1, not {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["batch"]:
        return batch_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m aligner", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("audio", help="audio file (WAV/FLAC/OGG...; any rate, mono or stereo)")
    parser.add_argument("transcript", help="plain-text transcript of the audio (UTF-8)")
    parser.add_argument("-o", "--output", required=True, help="TSV to write (word, start, end)")
    parser.add_argument("--backend", default=DEFAULT_BACKEND, help=f"one of {', '.join(backend_names())}")
    parser.add_argument("--estimates", action="store_true",
                        help="write estimated times for unaligned words instead of empty cells")
    parser.add_argument("--textgrid", help="also write a Praat TextGrid here")
    parser.add_argument("--table", help="also write a Parquet alignment table here")
    parser.add_argument("--talk", help="talk id for --table (default: the audio file's stem)")
    parser.add_argument("--min-placed", type=_share, default=MOSTLY_UNPLACED, metavar="SHARE",
                        help="exit with status 3 when no more than this share of the words is placed "
                             f"(default {MOSTLY_UNPLACED}: half or more unplaced fails; 0 accepts any)")
    args = parser.parse_args(argv)

    try:
        if args.backend not in backend_names():
            raise InputError(f"unknown backend {args.backend!r}; known: {', '.join(backend_names())}")
        words = tokenize_for_inference(read_transcript(args.transcript))
        if not words:
            raise InputError(f"transcript {args.transcript} has no words")
        timings = align(args.audio, words, backend=args.backend)
    except (InputError, AlignmentError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    write_tsv(timings, args.output, unaligned_times=args.estimates)
    if args.textgrid:
        duration = len(load_audio(args.audio)) / SAMPLE_RATE
        write_textgrid(timings, args.textgrid, duration)
    if args.table:
        write_alignment_table(timings, args.talk or Path(args.audio).stem, args.table)
    placed = sum(timing.aligned for timing in timings)
    print(f"{args.output}: {len(timings)} words, {placed} aligned, {len(timings) - placed} unaligned",
          file=sys.stderr)
    if mostly_unplaced(placed, len(timings)):
        print(f"warning: {placement_problem(args.audio, placed, len(timings))}", file=sys.stderr)
    if too_few_placed(placed, len(timings), args.min_placed):
        print(f"error: no more than {args.min_placed:.0%} of the words placed (--min-placed)", file=sys.stderr)
        return 3
    return 0


def batch_main(argv: list[str] | None = None) -> int:
    """``python -m aligner batch``: see the module docstring and :mod:`aligner.batch`."""
    from aligner.batch import align_batch
    from executor.tasks import SchedulerUnavailable, available_cores

    parser = argparse.ArgumentParser(
        prog="python -m aligner batch", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Align every NAME.wav|flac|sph of AUDIO_DIR with its NAME.txt of TRANSCRIPT_DIR into "
                    "OUT_DIR/NAME.tsv (the single-file command's format). Resumable: complete talks are skipped.")
    parser.add_argument("audio_dir", help="folder of recordings (NAME.wav, NAME.flac or NAME.sph)")
    parser.add_argument("transcript_dir", help="folder of transcripts (NAME.txt, UTF-8)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT_DIR", help="folder of the outputs")
    parser.add_argument("--workers", type=int, default=None,
                        help=f"local worker processes (default: every core, {available_cores()} here)")
    parser.add_argument("--dask", metavar="ADDRESS", default=None,
                        help="address of a Dask distributed scheduler (e.g. tcp://10.0.0.5:8786) to run the talks on, "
                             "instead of local processes; its workers must see the same paths")
    parser.add_argument("--backend", default=DEFAULT_BACKEND, help=f"one of {', '.join(backend_names())}")
    parser.add_argument("--estimates", action="store_true",
                        help="write estimated times for unaligned words instead of empty cells")
    parser.add_argument("--min-placed", type=_share, default=MOSTLY_UNPLACED, metavar="SHARE",
                        help="report a talk where no more than this share of the words is placed, and exit with "
                             f"status 3 when there is one (default {MOSTLY_UNPLACED}; 0 accepts any)")
    parser.add_argument("--report", help="also write the run's report here (JSON, talks sorted by name)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        parser.error("--workers must be at least 1")
    try:
        report = align_batch(args.audio_dir, args.transcript_dir, args.output, workers=args.workers,
                             scheduler=args.dask, backend=args.backend, estimates=args.estimates,
                             min_placed=args.min_placed, progress=not args.quiet)
    except (InputError, SchedulerUnavailable) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    summary = report.to_dict()
    if args.report:
        import json

        from corpus.io import atomic_write_text

        atomic_write_text(args.report, json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    counts = summary["counts"]
    print(f"{args.output}: {summary['talks']} talks ({report.engine}): {counts['aligned']} aligned, "
          f"{counts['skipped']} already complete, {counts['failed']} failed; {summary['placed']} of "
          f"{summary['words']} words placed", file=sys.stderr)
    for name in summary["transcripts_without_audio"]:
        print(f"note: transcript {name}.txt has no audio file", file=sys.stderr)
    for talk in report.mostly_unplaced:
        print(f"warning: {talk.name}: only {talk.placed} of {talk.words} words placed: does the transcript match "
              "the audio?", file=sys.stderr)
    for talk in report.failed:
        print(f"FAILED {talk.name}: {talk.error}", file=sys.stderr)
    status = report.exit_status()
    if status == 1:
        print(f"error: {len(report.failed)} talk(s) failed (the others are done and kept; run again to resume)",
              file=sys.stderr)
    elif status == 3:
        print(f"error: {len(report.below_threshold)} talk(s) with no more than {args.min_placed:.0%} of the words "
              "placed (--min-placed)", file=sys.stderr)
    return status


if __name__ == "__main__":  # python -m aligner.cli: pinned as python -m aligner is (aligner/__main__.py)
    from experiments.numerics import pin_or_restart

    pin_or_restart()
    sys.exit(main())
