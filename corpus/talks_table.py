"""The talks table (``<audio_dir>/talks.tsv``): which talk of which split has which audio.

Written by the ``synthesize`` stage (:func:`audio.synthesize_stage.make_talk_audio`), read by the alignment
and feature stages and by Speech2Vec (to keep a word's neighbours inside its talk). Tab-separated, the header
:data:`TALK_COLUMNS`, one row per talk; an empty cell is None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from corpus.io import atomic_write_text

__all__ = ["TALKS_TABLE", "TALK_COLUMNS", "read_talks_table", "write_talks_table"]

#: The table's file name in the audio folder.
TALKS_TABLE = "talks.tsv"
TALK_COLUMNS: tuple[str, ...] = (
    "talk", "split", "first_token", "tokens", "wav", "duration_s", "voice", "rate", "pitch", "status", "action",
    "error",
)


def write_talks_table(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write the talks table (:data:`TALK_COLUMNS`, tab-separated, empty cell for None) atomically."""
    lines = ["\t".join(TALK_COLUMNS)]
    for row in rows:
        cells = []
        for column in TALK_COLUMNS:
            value = row.get(column)
            if value is None:
                cells.append("")
            elif isinstance(value, float):
                cells.append(f"{value:.6f}" if column == "duration_s" else f"{value:g}")
            else:
                cells.append(str(value).replace("\t", " ").replace("\n", " "))
        lines.append("\t".join(cells))
    return atomic_write_text(path, "\n".join(lines) + "\n")


def read_talks_table(path: str | Path) -> list[dict[str, Any]]:
    """Read a talks table written by :func:`write_talks_table` (numbers parsed, empty cells None)."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or tuple(lines[0].split("\t")) != TALK_COLUMNS:
        raise ValueError(f"{path}: not a talks table (expected the header {' '.join(TALK_COLUMNS)})")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        cells = line.split("\t")
        if len(cells) != len(TALK_COLUMNS):
            raise ValueError(f"{path}:{number}: {len(cells)} cells, expected {len(TALK_COLUMNS)}")
        row: dict[str, Any] = {column: (cell if cell != "" else None) for column, cell in zip(TALK_COLUMNS, cells)}
        for column in ("first_token", "tokens"):
            row[column] = int(row[column])
        for column in ("duration_s", "rate", "pitch"):
            row[column] = float(row[column]) if row[column] is not None else None
        rows.append(row)
    return rows
