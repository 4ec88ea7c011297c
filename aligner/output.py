"""Writing alignments: a Parquet table, a TextGrid, a TSV."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from aligner.types import WordTiming

__all__ = ["TABLE_COLUMNS", "write_alignment_table", "read_alignment_table", "write_textgrid", "write_tsv"]

TABLE_COLUMNS = ("talk", "token_index", "word", "start", "end", "aligned")


def write_alignment_table(timings: Sequence[WordTiming], talk: str, path: str | os.PathLike, *,
                          sources: Sequence[str] | None = None) -> Path:
    """Parquet with columns talk, token_index (0-based position in the transcript), word, start, end
    (seconds, float64; NaN for a word with no time) and aligned (bool); with ``sources`` (one string per
    word: where its time comes from) a further string column ``source``. Written atomically."""
    import pandas as pd

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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
    temporary = path.with_name(path.name + ".part")
    frame.to_parquet(temporary, index=False)
    os.replace(temporary, path)
    return path


def read_alignment_table(path: str | os.PathLike):
    import pandas as pd

    return pd.read_parquet(path)


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


def _cell(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) else ""


def write_tsv(timings: Sequence[WordTiming], path: str | os.PathLike, *, unaligned_times: bool = False) -> Path:
    """TSV with header ``word<TAB>start<TAB>end`` (seconds, 3 decimals), one row per word in order.

    An unaligned word's row has empty start/end cells (unless ``unaligned_times``, which writes its estimate
    when it has one).
    """
    path = Path(path)
    if path.parent != Path(""):
        path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["word\tstart\tend"]
    for timing in timings:
        if timing.aligned or unaligned_times:
            lines.append(f"{timing.word}\t{_cell(timing.start)}\t{_cell(timing.end)}")
        else:
            lines.append(f"{timing.word}\t\t")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
