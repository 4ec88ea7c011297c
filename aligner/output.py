"""Writing alignments: a TextGrid here; the Parquet table and the word TSV are :mod:`corpus.timings`' formats."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from corpus.timings import (TABLE_COLUMNS, WordTiming, read_alignment_table, write_alignment_table,
                            write_word_tsv as write_tsv)

__all__ = ["TABLE_COLUMNS", "write_alignment_table", "read_alignment_table", "write_textgrid", "write_tsv"]


def write_textgrid(timings: Sequence[WordTiming], path: str | os.PathLike, duration: float) -> Path:
    """A Praat TextGrid (long format) with two interval tiers over ``[0, duration]``:

    ``words`` holds the aligned words; ``unaligned`` holds the estimated spans of unaligned words that have
    one (NaN-timed words are left out, and so is any interval of zero length, which Praat cannot hold).
    """
    from praatio import textgrid as praat_textgrid

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    end_of_audio = max([duration] + [t.end for t in timings if t.has_time])

    def entries(aligned: bool) -> list[tuple[float, float, str]]:
        chosen: list[tuple[float, float, str]] = []
        last_end = 0.0
        for timing in timings:
            if timing.aligned != aligned or not timing.has_time:
                continue
            start = max(timing.start, last_end)
            if timing.end - start <= 1e-6:
                continue
            chosen.append((round(start, 6), round(timing.end, 6), timing.word))
            last_end = timing.end
        return chosen

    grid = praat_textgrid.Textgrid()
    for name, aligned in (("words", True), ("unaligned", False)):
        grid.addTier(praat_textgrid.IntervalTier(name, entries(aligned), 0.0, end_of_audio))
    grid.save(str(path), format="long_textgrid", includeBlankSpaces=True)
    return path
