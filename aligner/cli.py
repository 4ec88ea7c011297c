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
backend), 3 fewer words placed than ``--min-placed`` (default 0.5; the output is written all the same).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aligner.audio import SAMPLE_RATE, load_audio
from aligner.output import write_alignment_table, write_textgrid, write_tsv
from aligner.registry import DEFAULT_BACKEND, align, backend_names
from aligner.types import MOSTLY_UNPLACED, AlignmentError, placement_problem
from corpus.text import tokenize_for_inference


class InputError(Exception):
    """Bad command-line input; the message names it."""


def read_transcript(path: str) -> str:
    source = Path(path)
    if not source.exists():
        raise InputError(f"transcript not found: {source}")
    if not source.is_file():
        raise InputError(f"transcript is not a file: {source}")
    data = source.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"transcript {source} is not UTF-8 text (byte offset {error.start})") from error


def main(argv: list[str] | None = None) -> int:
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
    parser.add_argument("--min-placed", type=float, default=MOSTLY_UNPLACED, metavar="SHARE",
                        help="exit with status 3 when fewer than this share of the words are placed "
                             f"(default {MOSTLY_UNPLACED}; 0 accepts any)")
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
    if placed < MOSTLY_UNPLACED * len(timings):
        print(f"warning: {placement_problem(args.audio, placed, len(timings))}", file=sys.stderr)
    if placed < args.min_placed * len(timings):
        print(f"error: fewer than {args.min_placed:.0%} of the words placed (--min-placed)", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
