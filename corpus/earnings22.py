"""Earnings-22 (Rev.com; Del Rio et al. 2022, CC BY-SA 4.0): earnings calls with marks and real word times, read
and turned into the benchmark's tokens and labels.

The data (``../shared/data/earnings22``): ``aligned/CALL.aligned.nlp`` per call, ``splits.tsv`` (``file_id<TAB>split``,
train/dev/test by call; the test split is for reporting only) and ``metadata.csv``.

The ``.nlp`` format (:func:`read_call`)
---------------------------------------
Pipe-separated, one transcribed word a line, a header naming the columns. Cells are read by the header's names, so
the one call with an extra ``wer_tags`` column reads like the others.

==================  ==============================================================================================
column              read as
==================  ==============================================================================================
``token``           the word as transcribed, cased (``LATAM``, ``it's``, ``30%``, ``<inaudible>``); never empty
``speaker``         a whole number per speaker within the call
``ts``, ``endTs``   start and end in seconds; both empty for a word the aligner could not place: NaN, never 0
``punctuation``     the mark after the word, one of :data:`MARK_LABELS` or empty
``prepunctuation``  a mark before the word (opening quotes, brackets): kept, never a label
``case``            one of :data:`CASES` (``N/A`` for numbers and tags)
``tags``            ``[]`` or ``['0:YEAR', ...]``: the entity tags, kept as their names (``CONTRACTION``)
``ali_comment``     the aligner's note (``del``, ``sub(and)``, ``,push_last``): kept, never checked
==================  ==============================================================================================

What is an error and what is data. :class:`Earnings22FormatError` names the file and line for: a header without
one of :data:`REQUIRED_COLUMNS` (or naming one twice), a row whose cell count is not the header's, an empty token
or one holding whitespace, a speaker that is not a whole number, a time that is not a non-negative number, only one
of start and end, an end before its start, a timed word starting before the previous timed word started (times
going backwards), an unknown mark or case, tags that are not a list of ``'N:NAME'``, and a file with no rows. Two
things the real data has are *data*: a word starting before the previous word ended (51,676 overlaps of the forced
alignment; the pause reads 0) and long runs of words without a time (28 % of the words; the 125 calls have no other
irregularity of the list above).

Benchmark words (:func:`spoken_words`)
--------------------------------------
Each word becomes benchmark tokens as a user's word does (:func:`corpus.user_text.split_user_text` over the
lower-cased word, which is :func:`corpus.text.tokenize_for_inference`: ``it's`` -> ``it 's``, ``don't`` -> ``do
n't``, ``can't`` -> ``cannot``, ``U.S.`` -> ``us``, ``30%`` stays, ``listen-only`` stays one token). So a call's
words read through ``punctuate`` give the very tokens written here. The word's label (its mark, :data:`MARK_LABELS`,
the same map as the TED text's) goes on its last token; its other tokens get O.

A word is *spoken* when it has tokens. Not spoken: the annotators' tags in angle brackets (``<inaudible>``,
``<unk>``, ``<laugh>``, ``<crosstalk>``, ``<affirmative>``, ``<silence>``, ``<cough>``, ``<foreign>``, ...) and
the 19 rows of stray quotes (``'``, ``/'``). They are dropped as the TED text drops a stage note: a mark after one
goes to the spoken word before it (the strongest wins, QUESTION > PERIOD > COMMA), as ``word (Laughter).`` labels
``word``. A spoken word's times are kept to the millisecond, as a word TSV keeps them
(:func:`corpus.timings.write_word_tsv`), so cues computed from them agree with those ``punctuate`` computes from a
call's written files.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from corpus.io import read_utf8
from corpus.labels import NO_MARK
from corpus.text import LABEL_STRENGTH
from corpus.user_text import split_user_text

__all__ = [
    "CASES",
    "MARK_LABELS",
    "REQUIRED_COLUMNS",
    "SPLITS",
    "Call",
    "CallSplit",
    "CallWord",
    "Earnings22FormatError",
    "SpokenWord",
    "call_path",
    "read_call",
    "read_splits",
    "spoken_words",
    "token_labels",
    "word_tokens",
]

#: Each mark of the ``punctuation`` column and the label it gives the word (the data README's map).
MARK_LABELS: dict[str, str] = {
    ",": "COMMA", ":": "COMMA", "-": "COMMA", "\u2013": "COMMA",
    ".": "PERIOD", "!": "PERIOD", ";": "PERIOD", "\u2026": "PERIOD",
    "?": "QUESTION",
}
#: The values of the ``case`` column: first letter upper, lower, all upper, mixed, none (numbers, tags).
CASES: tuple[str, ...] = ("UC", "LC", "CA", "MC", "N/A")
#: The columns read; others (``oldTs``, ``oldEndTs``, ``wer_tags``) may be there too.
REQUIRED_COLUMNS: tuple[str, ...] = ("token", "speaker", "ts", "endTs", "punctuation", "prepunctuation", "case",
                                     "tags", "ali_comment")
#: The split names of ``splits.tsv``.
SPLITS: tuple[str, ...] = ("train", "dev", "test")
#: Where a call's words are, under the data folder.
ALIGNED_DIR, ALIGNED_SUFFIX = "aligned", ".aligned.nlp"

_TAGS = re.compile(r"\[(?:'\d+:[A-Za-z_]+'(?:, '\d+:[A-Za-z_]+')*)?\]")
_TAG = re.compile(r"'\d+:([A-Za-z_]+)'")
_ANNOTATION = re.compile(r"<[^<>]*>")


class Earnings22FormatError(ValueError):
    """A line of an Earnings-22 file that does not follow its format; the message names the file and line."""

    def __init__(self, path: str | os.PathLike, line: int, reason: str) -> None:
        self.path, self.line, self.reason = str(path), line, reason
        super().__init__(f"{self.path}:{line}: {reason}")


@dataclass(frozen=True)
class CallWord:
    """One row of a call: the word as transcribed and what the columns say of it (NaN times: no time)."""

    token: str
    speaker: int
    start: float
    end: float
    mark: str
    prepunctuation: str
    case: str
    tags: tuple[str, ...]
    ali_comment: str
    line: int

    @property
    def timed(self) -> bool:
        return not math.isnan(self.start)

    @property
    def label(self) -> str:
        return MARK_LABELS.get(self.mark, NO_MARK)


@dataclass(frozen=True)
class Call:
    """A call's rows in order; ``name`` is its file id (``splits.tsv``)."""

    name: str
    path: Path
    words: tuple[CallWord, ...]


@dataclass(frozen=True)
class SpokenWord:
    """A word that reads as benchmark tokens: ``text`` the lower-cased word (as a transcript gives it), its
    ``tokens``, its ``label`` (after the marks of dropped rows were merged in), its times (ms, NaN: none), its
    speaker and the line of its row."""

    text: str
    tokens: tuple[str, ...]
    label: str
    start: float
    end: float
    speaker: int
    line: int

    @property
    def timed(self) -> bool:
        return not math.isnan(self.start)


def call_path(data_dir: str | os.PathLike, name: str) -> Path:
    """The ``.nlp`` file of call ``name`` under the data folder."""
    return Path(data_dir) / ALIGNED_DIR / f"{name}{ALIGNED_SUFFIX}"


def _seconds(text: str, path: Path, line: int, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise Earnings22FormatError(path, line, f"{column} {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise Earnings22FormatError(path, line, f"{column} {text!r} is not a non-negative number of seconds")
    return value


def _header(line: str, path: Path) -> dict[str, int]:
    names = [name.strip() for name in line.split("|")]
    doubled = sorted({name for name in names if names.count(name) > 1})
    if doubled:
        raise Earnings22FormatError(path, 1, f"the header names {', '.join(doubled)} twice")
    missing = [name for name in REQUIRED_COLUMNS if name not in names]
    if missing:
        raise Earnings22FormatError(path, 1, f"the header has no column {', '.join(missing)} (expected "
                                             f"{'|'.join(REQUIRED_COLUMNS)}, other columns allowed)")
    return {name: names.index(name) for name in names}


def read_call(path: str | os.PathLike, name: str | None = None) -> Call:
    """Read one ``CALL.aligned.nlp`` (module docstring); ``name`` defaults to the file name without its suffix."""
    path = Path(path)
    if name is None:
        name = path.name.removesuffix(ALIGNED_SUFFIX)
    lines = read_utf8(path, Earnings22FormatError, encoding="utf-8-sig").splitlines()
    if not lines:
        raise Earnings22FormatError(path, 1, "empty file: expected a header and one row per word")
    columns = _header(lines[0], path)
    width = len(columns)
    words: list[CallWord] = []
    last_start, last_line = -math.inf, 0
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("|")
        if len(cells) != width:
            raise Earnings22FormatError(path, number, f"{len(cells)} cells, the header has {width} columns")
        cell = {column: cells[index] for column, index in columns.items()}
        token = cell["token"].strip()
        if not token:
            raise Earnings22FormatError(path, number, "empty token")
        if len(token.split()) > 1:
            raise Earnings22FormatError(path, number, f"token {token!r} holds whitespace: one word a row")
        if not cell["speaker"].strip().isdigit():
            raise Earnings22FormatError(path, number, f"speaker {cell['speaker']!r} is not a whole number")
        start_text, end_text = cell["ts"].strip(), cell["endTs"].strip()
        if bool(start_text) != bool(end_text):
            raise Earnings22FormatError(path, number, "only one of ts and endTs is given")
        start = end = math.nan
        if start_text:
            start, end = _seconds(start_text, path, number, "ts"), _seconds(end_text, path, number, "endTs")
            if end < start:
                raise Earnings22FormatError(path, number, f"endTs {end} is before ts {start}")
            if start < last_start:
                raise Earnings22FormatError(path, number, f"times go backwards: starts at {start} s, before the word "
                                                          f"of line {last_line} ({last_start} s)")
            last_start, last_line = start, number
        mark = cell["punctuation"].strip()
        if mark and mark not in MARK_LABELS:
            raise Earnings22FormatError(path, number, f"unknown mark {mark!r} (known: {' '.join(MARK_LABELS)})")
        case = cell["case"].strip()
        if case not in CASES:
            raise Earnings22FormatError(path, number, f"unknown case {case!r} (known: {' '.join(CASES)})")
        tags = cell["tags"].strip()
        if not _TAGS.fullmatch(tags):
            raise Earnings22FormatError(path, number, f"tags {tags!r} are not a list of 'N:NAME' ([] for none)")
        words.append(CallWord(token, int(cell["speaker"]), start, end, mark, cell["prepunctuation"].strip(), case,
                              tuple(_TAG.findall(tags)), cell["ali_comment"].strip(), number))
    if not words:
        raise Earnings22FormatError(path, 1, "no rows after the header")
    return Call(name, path, tuple(words))


@dataclass(frozen=True)
class CallSplit:
    """A row of ``splits.tsv``: the call, its split and the row's line."""

    call: str
    split: str
    line: int


def read_splits(path: str | os.PathLike) -> list[CallSplit]:
    """The rows of ``splits.tsv`` in order: a header ``file_id<TAB>split``, then one call a line.

    :class:`Earnings22FormatError` names the file and line for another header, a row without two cells, an empty
    call id, a split not in :data:`SPLITS` and a call named twice."""
    path = Path(path)
    lines = read_utf8(path, Earnings22FormatError, encoding="utf-8-sig").splitlines()
    if not lines or lines[0].strip().split("\t") != ["file_id", "split"]:
        raise Earnings22FormatError(path, 1, "expected the header file_id<TAB>split")
    rows: list[CallSplit] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split("\t")]
        if len(cells) != 2:
            raise Earnings22FormatError(path, number, f"expected file_id<TAB>split, found {len(cells)} cell(s)")
        call, split = cells
        if not call:
            raise Earnings22FormatError(path, number, "empty file_id")
        if split not in SPLITS:
            raise Earnings22FormatError(path, number, f"unknown split {split!r} (known: {', '.join(SPLITS)})")
        if call in first_line:
            raise Earnings22FormatError(path, number,
                                        f"call {call!r} is named again (first at line {first_line[call]})")
        first_line[call] = number
        rows.append(CallSplit(call, split, number))
    return rows


def _milliseconds(seconds: float) -> float:
    return float(f"{seconds:.3f}") if math.isfinite(seconds) else math.nan


def word_tokens(token: str) -> tuple[str, tuple[str, ...]]:
    """``(text, tokens)`` of a transcribed word: the lower-cased word as a transcript gives it to ``punctuate``
    (a mark at its end dropped: ``s.`` -> ``s``; an abbreviation's period kept: ``u.s.``) and its benchmark tokens
    (none for an annotation in angle brackets or a word that reads as no token)."""
    text = token.lower()
    if _ANNOTATION.fullmatch(text):
        return text, ()
    words = split_user_text(text).words
    if len(words) != 1 or not words[0].tokens:
        return text, ()
    return words[0].text, words[0].tokens


def spoken_words(call: Call) -> list[SpokenWord]:
    """The call's spoken words in order, each with its tokens and label (module docstring: a dropped row's mark
    goes to the spoken word before it)."""
    spoken: list[SpokenWord] = []
    for word in call.words:
        text, tokens = word_tokens(word.token)
        if not tokens:
            if spoken and LABEL_STRENGTH[word.label] > LABEL_STRENGTH[spoken[-1].label]:
                last = spoken[-1]
                spoken[-1] = SpokenWord(last.text, last.tokens, word.label, last.start, last.end, last.speaker,
                                        last.line)
            continue
        spoken.append(SpokenWord(text, tokens, word.label, _milliseconds(word.start),
                                 _milliseconds(word.end), word.speaker, word.line))
    return spoken


def token_labels(words: Sequence[SpokenWord]) -> tuple[list[str], list[str]]:
    """``(tokens, labels)`` of spoken words: each word's label on its last token, O on the others."""
    tokens: list[str] = []
    labels: list[str] = []
    for word in words:
        tokens.extend(word.tokens)
        labels.extend([NO_MARK] * (len(word.tokens) - 1) + [word.label])
    return tokens, labels
