"""A tiny Earnings-22 folder in the layout of ``../shared/data/earnings22`` (``aligned/CALL.aligned.nlp``,
``splits.tsv``), written by the tests: made-up calls with what the real ones have -- two speakers, contractions, an
annotation with a mark, an untimed stretch, an overlap of the alignment, CRLF lines, one call with an extra column."""

from __future__ import annotations

from pathlib import Path

HEADER = "token|speaker|ts|endTs|punctuation|prepunctuation|case|tags|oldTs|oldEndTs|ali_comment"
#: (token, speaker, start, end, mark, case, tags, comment); None times: the aligner placed no time
Row = tuple[str, int, float | None, float | None, str, str, str, str]

#: A call: a greeting, a question across a speaker turn, an untimed stretch, an annotation carrying a period.
CALL_ROWS: list[Row] = [
    ("Good", 0, 0.08, 0.40, "", "UC", "[]", ""),
    ("morning", 0, 0.40, 0.90, ",", "LC", "[]", ""),
    ("it's", 0, 1.30, 1.50, "", "LC", "['0:CONTRACTION']", ""),
    ("LATAM's", 0, 1.50, 2.10, "", "CA", "['1:ABBREVIATION']", ""),
    ("call", 0, 2.10, 2.50, ".", "LC", "[]", ""),
    ("Any", 0, 3.20, 3.40, "", "UC", "[]", ""),
    ("questions", 0, 3.40, 4.00, "?", "LC", "[]", ""),
    ("Yes", 1, 5.00, 5.30, ",", "UC", "[]", ",push_last"),
    ("we", 1, None, None, "", "LC", "[]", "del"),
    ("don't", 1, None, None, "", "LC", "['2:CONTRACTION']", "del"),
    ("know", 1, None, None, "", "LC", "[]", "del"),
    ("the", 1, 6.00, 6.10, "", "LC", "[]", ""),
    ("margin", 1, 6.05, 6.50, "", "LC", "[]", "sub(margins)"),  # starts before "the" ended: an overlap, data
    ("<inaudible>", 1, 6.50, 7.00, ".", "N/A", "[]", ""),
    ("Thanks", 0, 7.90, 8.30, "…", "UC", "[]", ""),
]


def nlp_line(row: Row) -> str:
    token, speaker, start, end, mark, case, tags, comment = row
    times = ("", "") if start is None else (f"{start:.4f}", f"{end:.4f}")
    return "|".join([token, str(speaker), *times, mark, "", case, tags, "", "", comment])


def write_call(directory: Path, name: str, rows: list[Row], *, crlf: bool = True, header: str = HEADER,
               lines: list[str] | None = None) -> Path:
    """``directory/aligned/NAME.aligned.nlp`` of ``rows`` (or of ``lines`` as given, after the header)."""
    path = directory / "aligned" / f"{name}.aligned.nlp"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = lines if lines is not None else [nlp_line(row) for row in rows]
    path.write_bytes(("\r\n" if crlf else "\n").join([header, *body]).encode("utf-8") + b"\r\n")
    return path


def shifted(rows: list[Row], seconds: float, speaker_offset: int = 0) -> list[Row]:
    return [(t, s + speaker_offset, None if a is None else a + seconds, None if b is None else b + seconds, m, c, g, x)
            for t, s, a, b, m, c, g, x in rows]


def write_earnings22(directory: Path, splits: dict[str, str] | None = None) -> Path:
    """A tiny data folder: calls ``c1`` and ``c2`` (train), ``c3`` (dev), ``c4`` (test) by default, each a variant
    of :data:`CALL_ROWS`; ``c2`` has the extra ``wer_tags`` column one call of the real data has."""
    splits = splits or {"c1": "train", "c2": "train", "c3": "dev", "c4": "test"}
    for index, name in enumerate(splits):
        rows = shifted(CALL_ROWS, 10.0 * index)
        if name == "c2":
            header = HEADER.replace("|tags|", "|tags|wer_tags|")
            lines = [line.replace("|[]|", "|[]|[]|", 1) if "|[]|" in line else line.replace("']|", "']|[]|", 1)
                     for line in map(nlp_line, rows)]
            write_call(directory, name, rows, header=header, lines=lines)
        else:
            write_call(directory, name, rows, crlf=index % 2 == 0)
    (directory / "splits.tsv").write_text("file_id\tsplit\n" + "".join(f"{c}\t{s}\n" for c, s in splits.items()),
                                          encoding="utf-8")
    return directory
