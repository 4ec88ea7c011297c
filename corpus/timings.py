"""Word timings: where each transcript word was spoken, and the three file formats that hold them.

* ``WORD TSV`` (:func:`write_word_tsv` / :func:`read_word_tsv`): header ``word<TAB>start<TAB>end``, one row per
  word in transcript order, seconds; both time cells empty for a word without a time. The aligner writes it
  and ``punctuate --alignment`` reads it (as an ASR system's word timings would come).
* ``ENGINE TSV`` (:func:`write_engine_timings` / :func:`read_engine_timings`): header
  ``index<TAB>word<TAB>start<TAB>end<TAB>aligned<TAB>source``, the speech engine's own timings of a synthesised talk.
* ``ALIGNMENT TABLE`` (:func:`write_alignment_table` / :func:`read_alignment_table`): Parquet with columns
  :data:`TABLE_COLUMNS` (and optionally ``source``), the align stage's per-talk output.

Every reader raises :class:`TimingsFormatError` naming the file and 1-based line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from corpus.io import atomic_path, atomic_write_text

__all__ = [
    "TABLE_COLUMNS",
    "TimingsFormatError",
    "WordTiming",
    "read_alignment_table",
    "read_engine_timings",
    "read_word_tsv",
    "write_alignment_table",
    "write_engine_timings",
    "write_word_tsv",
]

NAN = float("nan")
TABLE_COLUMNS = ("talk", "token_index", "word", "start", "end", "aligned")
WORD_TSV_HEADER = "word\tstart\tend"
ENGINE_TSV_HEADER = "index\tword\tstart\tend\taligned\tsource"


@dataclass(frozen=True)
class WordTiming:
    """Where one transcript word was spoken, in seconds from the start of the audio.

    ``aligned`` is True when the word was placed with confidence (an aligner's confidence test, or the speech
    engine's own timing). When it is False, ``start``/``end`` are an *estimate* (a forced position that failed
    the confidence test, or an interpolation between neighbours) or NaN when nothing could be estimated --
    never a made-up zero. ``source`` says where the span comes from when that matters (the synthesis engine's
    ``engine``, ``join_rule``, ``clitic_rule``, ...); empty otherwise.
    """

    word: str
    start: float
    end: float
    aligned: bool
    source: str = ""

    @property
    def has_time(self) -> bool:
        return math.isfinite(self.start) and math.isfinite(self.end)


class TimingsFormatError(ValueError):
    """A timings file that does not follow its format; the message names the file and line."""


# --- word TSV ------------------------------------------------------------------------------------------


def _cell(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) else ""


def write_word_tsv(timings: Sequence[WordTiming], path: str | os.PathLike, *, unaligned_times: bool = False) -> Path:
    """TSV with header ``word<TAB>start<TAB>end`` (seconds, 3 decimals), one row per word in order.

    An unaligned word's row has empty start/end cells (unless ``unaligned_times``, which writes its estimate
    when it has one). Written atomically.
    """
    lines = [WORD_TSV_HEADER]
    for timing in timings:
        if timing.aligned or unaligned_times:
            lines.append(f"{timing.word}\t{_cell(timing.start)}\t{_cell(timing.end)}")
        else:
            lines.append(f"{timing.word}\t\t")
    return atomic_write_text(path, "\n".join(lines) + "\n")


def _seconds(text: str, path: Path, number: int, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TimingsFormatError(f"{path}:{number}: {what} time {text!r} is not a number") from None
    if not math.isfinite(value):
        raise TimingsFormatError(f"{path}:{number}: {what} time {text!r} is not a finite number")
    if value < 0:
        raise TimingsFormatError(f"{path}:{number}: {what} time {value} is negative")
    return value


def read_word_tsv(path: str | os.PathLike) -> list[WordTiming]:
    """Read a word TSV (see :func:`write_word_tsv`); CRLF or LF, the header optional.

    A row with both time cells filled is an aligned word; with both empty, a word without a time (NaN,
    ``aligned=False``). Raises :class:`TimingsFormatError` naming the file and line for a row without three
    cells, one time cell empty and the other not, a time that is not a non-negative number, an end before its
    start, or a word that starts before the previous timed word started (times out of order).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        line = path.read_bytes()[: error.start].count(b"\n") + 1
        raise TimingsFormatError(f"{path}:{line}: not valid UTF-8") from None
    timings: list[WordTiming] = []
    last_start, last_line = -math.inf, 0
    for number, line in enumerate(text.splitlines(), start=1):
        if number == 1 and line.strip().lower() == WORD_TSV_HEADER:
            continue
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise TimingsFormatError(f"{path}:{number}: expected word<TAB>start<TAB>end, found {len(parts)} cell(s)")
        word, start_text, end_text = parts[0], parts[1].strip(), parts[2].strip()
        if not word.strip():
            raise TimingsFormatError(f"{path}:{number}: empty word")
        if not start_text and not end_text:
            timings.append(WordTiming(word, NAN, NAN, False))
            continue
        if not start_text or not end_text:
            raise TimingsFormatError(f"{path}:{number}: only one of start and end is given")
        start = _seconds(start_text, path, number, "start")
        end = _seconds(end_text, path, number, "end")
        if end < start:
            raise TimingsFormatError(f"{path}:{number}: end {end} is before start {start}")
        if start < last_start:
            raise TimingsFormatError(
                f"{path}:{number}: times out of order: starts at {start} s, before line {last_line} ({last_start} s)")
        last_start, last_line = start, number
        timings.append(WordTiming(word, start, end, True))
    return timings


# --- engine TSV ----------------------------------------------------------------------------------------


def write_engine_timings(path: str | os.PathLike, timings: Sequence[WordTiming]) -> Path:
    """Write an engine timings TSV (header :data:`ENGINE_TSV_HEADER`) atomically; returns its path."""
    lines = [ENGINE_TSV_HEADER]
    for index, t in enumerate(timings):
        word = t.word.replace("\t", " ").replace("\n", " ")
        lines.append(f"{index}\t{word}\t{t.start:.6f}\t{t.end:.6f}\t{int(bool(t.aligned))}\t{t.source}")
    return atomic_write_text(path, "\n".join(lines) + "\n")


def read_engine_timings(path: str | os.PathLike) -> list[WordTiming]:
    """Read an engine timings TSV written by :func:`write_engine_timings`."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    if not lines or lines[0] != ENGINE_TSV_HEADER:
        raise TimingsFormatError(f"{path}:1: not a timings file (bad header)")
    timings = []
    for number, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        parts = line.split("\t")
        if len(parts) != 6 or parts[0] != str(len(timings)):
            raise TimingsFormatError(f"{path}:{number}: expected 6 columns with index {len(timings)}")
        try:
            timings.append(WordTiming(parts[1], float(parts[2]), float(parts[3]), parts[4] == "1", parts[5]))
        except ValueError as error:
            raise TimingsFormatError(f"{path}:{number}: {error}") from error
    return timings


# --- alignment table (Parquet) -------------------------------------------------------------------------


def write_alignment_table(timings: Sequence[WordTiming], talk: str, path: str | os.PathLike, *,
                          sources: Sequence[str] | None = None) -> Path:
    """Parquet with columns talk, token_index (0-based position in the transcript), word, start, end
    (seconds, float64; NaN for a word with no time) and aligned (bool); with ``sources`` (one string per
    word: where its time comes from) a further string column ``source``. Written atomically."""
    import pandas as pd  # deferred: pandas costs ~0.5 s to import and most readers of this module need none

    frame = pd.DataFrame(
        {
            "talk": pd.Series([str(talk)] * len(timings), dtype="string"),
            "token_index": pd.Series(range(len(timings)), dtype="int64"),
            "word": pd.Series([timing.word for timing in timings], dtype="string"),
            "start": pd.Series([timing.start for timing in timings], dtype="float64"),
            "end": pd.Series([timing.end for timing in timings], dtype="float64"),
            "aligned": pd.Series([bool(timing.aligned) for timing in timings], dtype="bool"),
        },
        columns=list(TABLE_COLUMNS),
    )
    if sources is not None:
        if len(sources) != len(timings):
            raise ValueError(f"{len(sources)} sources for {len(timings)} timings")
        frame["source"] = pd.Series([str(source) for source in sources], dtype="string")
    with atomic_path(path, suffix=".parquet") as temporary:
        frame.to_parquet(temporary, index=False)
    return Path(path)


def read_alignment_table(path: str | os.PathLike):
    """The Parquet alignment table as a pandas DataFrame."""
    import pandas as pd

    return pd.read_parquet(path)
