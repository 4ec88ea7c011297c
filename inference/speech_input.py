"""Word timings of a transcript, checked against its words and turned into the timing cues a model reads.

``punctuate --alignment FILE`` (or ``--timings-dir`` over a folder) brings the times of the transcript's words
in one of the formats of :data:`TIMINGS_FORMATS`, told by the file's extension or ``--timings-format``: the
aligner's word TSV (:func:`corpus.timings.read_word_tsv`: ``word<TAB>start<TAB>end``, empty cells for a word
without a time; any other extension reads as TSV), a NIST/Kaldi CTM (``utterance channel start duration word
[confidence]``; of several utterances, the one named as the transcript, :func:`ctm_source`) or a recogniser's
JSON word list (:func:`corpus.timings.read_word_json`); :class:`TimingsSource` says which, and
:func:`read_timings` reads it. ``punctuate --audio talk.wav`` makes them with the aligner. Either way the rows
must be the transcript's words in order, in one of two granularities, which may mix:

* one row per **user word** (the transcript split at whitespace, as :mod:`corpus.user_text` splits it): the row
  matches when it reads as the same benchmark tokens (``It's,`` and ``it's`` both read ``it 's``), as an ASR
  system's or the real-speech talks' timings come;
* one row per **benchmark token** of the word (``do`` / ``n't`` for ``don't``), as ``python -m aligner`` writes
  them: the word spans from its first token's start to its last token's end.

A word the model does not read (a stage note such as ``(Laughter)``, a symbol) may have a row or not. Anything
else -- a row whose word is not the transcript's next word, rows left over, rows missing -- is a
:class:`TimingsMismatchError` naming the timings file and line and the transcript's word and line; times that
are not numbers, negative, or out of order are :class:`corpus.timings.TimingsFormatError` (file and line).

The cues (:mod:`embeddings.timing_features`): per spoken word the pause before the next spoken word and its
relative duration, spread over the word's tokens.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from corpus.text import tokenize_for_inference
from corpus.timings import (
    WORD_TSV_HEADER,
    CtmUtterance,
    TimingsFormatError,
    WordTiming,
    index_ctm,
    read_ctm_utterance,
    read_word_json,
    read_word_tsv,
)
from corpus.user_text import UserText
from embeddings.timing_features import token_raw, word_cues

__all__ = ["TIMINGS_FORMATS", "TimingRows", "TimingsFormatError", "TimingsMismatchError", "TimingsSource",
           "ctm_source", "match_timings", "read_timing_rows", "read_timings", "timing_raw", "timings_format",
           "user_text_cues"]

#: The formats of word timings ``punctuate`` reads, and the file extension that tells each.
TIMINGS_FORMATS = {"tsv": ".tsv", "ctm": ".ctm", "json": ".json"}


class TimingsMismatchError(ValueError):
    """Word timings whose words are not the transcript's; the message names the file, line and word."""


@dataclass(frozen=True)
class TimingRows:
    """Word timings in transcript order, where they come from (``source``: a file or an audio file) and the
    1-based line of each row in that file (None when they do not come from a file), or for a JSON file the
    entry of each (``segments[0].words[3]``)."""

    timings: tuple[WordTiming, ...]
    source: str
    lines: tuple[int, ...] | None = None
    entries: tuple[str, ...] | None = None

    def where(self, index: int) -> str:
        if self.entries is not None:
            return f"{self.source}: {self.entries[index]}"
        if self.lines is None:
            return f"{self.source} (word {index + 1} of its alignment)"
        return f"{self.source}:{self.lines[index]}"


@dataclass(frozen=True)
class TimingsSource:
    """Where one transcript's word timings are: a file, its format (:data:`TIMINGS_FORMATS`) and, in a CTM, the
    utterance (where its lines are)."""

    path: str
    format: str
    utterance: CtmUtterance | None = None

    def read_bytes(self) -> bytes:
        """The bytes the timings are read from (a CTM utterance's lines only): what a resumed run compares."""
        if self.utterance is None:
            return Path(self.path).read_bytes()
        with open(self.path, "rb") as handle:
            handle.seek(self.utterance.start)
            return handle.read(self.utterance.end - self.utterance.start)

    def describe(self) -> str:
        return self.path if self.utterance is None else f"{self.path} (utterance {self.utterance.utterance})"


def timings_format(path: str | os.PathLike, forced: str | None = None) -> str:
    """The format of a timings file: ``forced`` when given, else told by its extension (TSV for any other)."""
    if forced is not None:
        if forced not in TIMINGS_FORMATS:
            raise ValueError(f"unknown timings format {forced!r}; known: {', '.join(TIMINGS_FORMATS)}")
        return forced
    suffix = Path(path).suffix.lower()
    return next((name for name, extension in TIMINGS_FORMATS.items() if extension == suffix), "tsv")


def _check_file(path: Path) -> None:
    if not path.exists():
        raise TimingsFormatError(f"{path}: no such file")
    if not path.is_file():
        raise TimingsFormatError(f"{path}: not a regular file")


def ctm_source(path: str | os.PathLike, name: str | None) -> TimingsSource:
    """The utterance of a CTM file that holds a transcript's words: the one named ``name`` (the transcript's
    file name without its extension), else the file's only one; :class:`TimingsFormatError` otherwise."""
    path = Path(path)
    _check_file(path)
    utterances, problems = index_ctm(path)
    if name is not None and name in problems:
        raise TimingsFormatError(problems[name])
    if name is not None and name in utterances:
        return TimingsSource(str(path), "ctm", utterances[name])
    if len(utterances) == 1 and not problems:
        return TimingsSource(str(path), "ctm", next(iter(utterances.values())))
    held = sorted([*utterances, *problems])
    shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
    raise TimingsFormatError(f"{path}: holds {len(held)} utterances ({shown or 'none'}), none named "
                             f"{name!r} as the transcript is" if name else
                             f"{path}: holds {len(held)} utterances ({shown or 'none'}); which is the transcript's?")


def read_timings(source: TimingsSource, data: bytes | None = None) -> TimingRows:
    """The timing rows of ``source`` in any format (errors name the file and line or entry); ``data``: its bytes
    (:meth:`TimingsSource.read_bytes`) when the caller has read them already."""
    path = Path(source.path)
    if source.format == "ctm":
        if source.utterance is None:
            source, data = ctm_source(path, None), None  # ``data`` was the whole file, not the utterance's lines
        else:
            _check_file(path)
        timings, lines = read_ctm_utterance(path, source.utterance, data)
        return TimingRows(tuple(timings), str(path), tuple(lines))
    if source.format == "json":
        if data is None:
            _check_file(path)
        timings, entries = read_word_json(path, data)
        return TimingRows(tuple(timings), str(path), entries=tuple(entries))
    return read_timing_rows(path, data)


def read_timing_rows(path: str | os.PathLike, data: bytes | None = None) -> TimingRows:
    """Read a word TSV (:func:`corpus.timings.read_word_tsv`, whose errors name the file and line), keeping the
    line number of every row; ``data``: the file's bytes when the caller has read them already (the file is read
    once either way)."""
    path = Path(path)
    if data is None:
        _check_file(path)
        data = path.read_bytes()
    timings = read_word_tsv(path, data)
    lines = []
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if number == 1 and line.strip().lower() == WORD_TSV_HEADER:
            continue
        if line.strip():
            lines.append(number)
    if len(lines) != len(timings):  # read_word_tsv and this scan disagree: cannot happen for a file it accepts
        raise TimingsFormatError(f"{path}: {len(timings)} rows read but {len(lines)} non-empty lines")
    return TimingRows(tuple(timings), str(path), tuple(lines))


def _tokens(word: str) -> tuple[str, ...]:
    return tuple(tokenize_for_inference(word.replace("\u02bc", "'")))


def _times(timing: WordTiming) -> tuple[float, float]:
    if timing.aligned and timing.has_time:
        return timing.start, timing.end
    return math.nan, math.nan


def _word_lines(user_text: UserText) -> list[int]:
    """The 1-based line of the transcript on which each user word stands."""
    lines, line = [], 1
    for space in user_text.spaces[:-1]:
        line += space.count("\n")
        lines.append(line)
    return lines


def match_timings(user_text: UserText, rows: TimingRows, *, transcript: str = "the transcript"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)``: the time span of every user word (NaN for a word without a time), from timing rows
    of either granularity (module docstring); :class:`TimingsMismatchError` when the words differ."""
    words = user_text.words
    starts = np.full(len(words), np.nan)
    ends = np.full(len(words), np.nan)
    timings = rows.timings
    word_lines = _word_lines(user_text)
    j = 0

    def describe(i: int) -> str:
        return f"the transcript's word {i + 1}, {words[i].text!r} ({transcript}:{word_lines[i]})"

    for i, word in enumerate(words):
        if not word.tokens:  # not read by the model: a row for it is optional
            if j < len(timings) and (timings[j].word == word.text or not _tokens(timings[j].word)):
                j += 1
            continue
        if j >= len(timings):
            raise TimingsMismatchError(
                f"{rows.source}: the timings end after {len(timings)} rows, but the transcript goes on with its "
                f"word {i + 1}, {word.text!r} ({transcript}:{word_lines[i]})")
        if _tokens(timings[j].word) == word.tokens:
            starts[i], ends[i] = _times(timings[j])
            j += 1
            continue
        count = len(word.tokens)
        piece = timings[j:j + count]
        if count > 1 and len(piece) == count and all(
                row.word.lower() == token or _tokens(row.word) == (token,) for row, token in zip(piece, word.tokens)):
            first, last = _times(piece[0]), _times(piece[-1])
            starts[i], ends[i] = first[0], last[1]
            if math.isnan(first[0]) or math.isnan(last[1]):
                starts[i] = ends[i] = math.nan
            j += count
            continue
        raise TimingsMismatchError(
            f"{rows.where(j)}: the word {timings[j].word!r} does not match {describe(i)}; the timings must list "
            f"the transcript's words in order")
    # rows left over: words the model does not read may trail; anything else is a mismatch
    while j < len(timings) and not _tokens(timings[j].word):
        j += 1
    if j < len(timings):
        raise TimingsMismatchError(
            f"{rows.where(j)}: the word {timings[j].word!r} is beyond the transcript's last word "
            f"({len(words)} words); the timings must list the transcript's words in order")
    return starts, ends


def user_text_cues(user_text: UserText, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Raw cues ``(W, 3)`` of the W user words the model reads (those with tokens), in order."""
    spoken = [i for i, word in enumerate(user_text.words) if word.tokens]
    letters = [len("".join(user_text.words[i].tokens)) for i in spoken]
    return word_cues(np.asarray(starts)[spoken], np.asarray(ends)[spoken], letters)


def timing_raw(user_text: UserText, starts: Sequence[float], ends: Sequence[float]) -> np.ndarray:
    """Raw per-token cues ``(N, 3)`` of the model tokens of ``user_text`` (:mod:`embeddings.timing_features`)."""
    is_last = [position == len(word.tokens) - 1 for word in user_text.words for position in range(len(word.tokens))]
    return token_raw(np.asarray(is_last, dtype=bool), user_text_cues(user_text, np.asarray(starts), np.asarray(ends)))
