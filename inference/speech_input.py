"""Word timings of a transcript, checked against its words and turned into the timing cues a model reads.

``punctuate --alignment FILE`` (or ``--timings-dir`` over a folder) brings the times of the transcript's words
in one of the formats of :data:`TIMINGS_FORMATS`, told by the file's extension or ``--timings-format``: the
aligner's word TSV (:func:`corpus.timings.read_word_tsv`: ``word<TAB>start<TAB>end``, empty cells for a word
without a time; any other extension reads as TSV), a NIST/Kaldi CTM (``utterance channel start duration word
[confidence]``; of several utterances, the one named as the transcript, :func:`ctm_source`) or a recogniser's
JSON word list (:func:`corpus.timings.read_word_json`); :class:`TimingsSource` says which, and
:func:`read_timings` reads it. ``punctuate --audio talk.wav`` makes them with the aligner. Either way the rows
must be the transcript's words in order. A row's word is read as the transcript's text would be (the same
benchmark tokens: ``It's,`` and ``it's`` both read ``it 's``), and :func:`match_timings` pairs rows with words
in these shapes, which may mix:

=====================================================  ===================================================
rows                                                   the word's time
=====================================================  ===================================================
one row per **user word** (the transcript split at     the row's (an ASR system's timings, the real-speech
whitespace, :mod:`corpus.user_text`)                   talks')
one row per **benchmark token** (``do`` / ``n't`` for  from its first row's start to its last row's end
``don't``, as ``python -m aligner`` writes them)
a word's rows and the bare clitics after it (``we`` /  from its first row's start to its last row's end
``'ve`` for ``we've``: read together, the word)
one row for a word and the **bare clitics** after it   the row's, for each of them
(the transcript's ``it 's``, the row ``it's``)
a row with empty times, a JSON entry without times     none: the word's cues are missing
=====================================================  ===================================================

A **bare clitic** (:data:`BARE_CLITICS`: ``'s 're 'm 'll 've 'd n't``, a word of its own, as a recogniser or
text in the benchmark's tokenisation writes it) belongs to the word before it: for the cues the two are one
spoken word, as ``cannibalization's`` would be (:func:`user_text_cues`).

Rows that are not the transcript's words:

* a word the model does not read (a stage note such as ``(Laughter)``, a symbol) may have a row or not;
* a recogniser's **markup** (:func:`is_markup`: ``[noise]``, ``<sil>``, ``{breath}``, ``%hesitation``, ``sil``,
  ``sp``) and a **filler** (:data:`FILLERS`: ``uh``, ``um``, ...) that the transcript does not have at that
  point are skipped: their time counts as a pause, as in a forced alignment of a transcript that leaves
  fillers out (the real TED talks the cues were fitted on);
* anything else -- a recogniser's unknown word (``<unk>``) where the transcript has a word, another word, rows
  left over, rows missing -- is a :class:`TimingsMismatchError` naming the timings file and line, the row's
  word, the transcript's word and line, and what to do.

Times that are not numbers, negative, or out of order (a word starting before the word before it started; an
overlap is data) are :class:`corpus.timings.TimingsFormatError` (file and line).

The cues (:mod:`embeddings.timing_features`): per spoken word the pause before the next spoken word and its
relative duration, spread over the word's tokens; a word without a time, and the word before it, have their
cues missing (never a made-up 0 s pause); a long pause is clipped when the cues are encoded.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

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
from corpus.user_text import UserText, UserWord, model_tokens, split_user_text
from embeddings.timing_features import token_raw, word_cues

__all__ = ["BARE_CLITICS", "FILLERS", "TIMINGS_FORMATS", "TimingRows", "TimingsFormatError", "TimingsMismatchError",
           "TimingsSource", "ctm_source", "is_bare_clitic", "is_markup", "match_timings", "read_timing_rows",
           "read_timings", "text_tokens", "timing_raw", "timings_format", "user_text_cues"]

#: The formats of word timings ``punctuate`` reads, and the file extension that tells each.
TIMINGS_FORMATS = {"tsv": ".tsv", "ctm": ".ctm", "json": ".json"}
#: Clitics that recognisers and text in the benchmark's tokenisation write as words of their own (``it 's``,
#: ``do n't``); any apostrophe, any case. They belong to the word before them (module docstring).
BARE_CLITICS = frozenset({"'s", "'re", "'m", "'ll", "'ve", "'d", "n't"})
#: Hesitations a recogniser writes as words and a transcript may leave out (module docstring).
FILLERS = frozenset({"uh", "um", "uhm", "er", "erm", "ah", "eh", "hm", "hmm", "mm", "mhm"})
#: Recognisers' words for something that is not speech: Kaldi's and CMU Sphinx's silences (``sil``, ``sp``,
#: ``!sil``); anything in angle, square or curly brackets or after ``%`` is markup too (:func:`is_markup`).
_SILENCES = frozenset({"sil", "sp", "!sil"})
_MARKUP = re.compile(r"<[^<>]*>|\[[^\[\]]*\]|\{[^{}]*\}|%\w[\w'-]*")
#: Recognisers' marks of a word they heard but cannot spell: it stands for a word, never skipped.
_UNKNOWN_WORDS = frozenset({"<unk>", "[unk]", "<unknown>", "[unknown]", "<oov>"})
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'", "\u2018": "'"})


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


@lru_cache(maxsize=65536)
def text_tokens(text: str) -> tuple[str, ...]:
    """The benchmark tokens ``text`` reads as in a transcript (:mod:`corpus.user_text`: a bare ``'s`` is the
    token ``'s``, ``It's,`` is ``it 's``): what a timing row's word is compared by, so that a row and a
    transcript word of the same text always match."""
    return tuple(model_tokens(split_user_text(text)))


def is_bare_clitic(word: str) -> bool:
    """Whether ``word`` is a clitic written as a word of its own (:data:`BARE_CLITICS`)."""
    return word.strip().translate(_APOSTROPHES).lower() in BARE_CLITICS


def is_markup(word: str) -> bool:
    """Whether a timing row's ``word`` is a recogniser's mark of something that is not speech (``[noise]``,
    ``<sil>``, ``{breath}``, ``%hesitation``, ``sil``): a word in brackets or after ``%``, other than an unknown
    word's mark (``<unk>``), which stands for a word."""
    word = word.strip()
    lowered = word.lower()
    return lowered not in _UNKNOWN_WORDS and (lowered in _SILENCES or bool(_MARKUP.fullmatch(word)))


def _skippable(word: str) -> bool:
    """A row that may stand where the transcript has no word: no model tokens, markup or a filler."""
    return not text_tokens(word) or is_markup(word) or word.strip().lower() in FILLERS


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


def _span(pieces: Sequence[WordTiming]) -> tuple[float, float]:
    """From the first row's start to the last row's end; no time when either has none."""
    start, end = _times(pieces[0])[0], _times(pieces[-1])[1]
    return (math.nan, math.nan) if math.isnan(start) or math.isnan(end) else (start, end)


def _same(row_tokens: Sequence[str], word_tokens: Sequence[str]) -> bool:
    """Whether a row's tokens are a word's; the period of ``mr.`` and ``dr.`` (the benchmark's only tokens with
    one) may be missing on either side, as recognisers write ``Mr`` and transcripts ``Mr.``."""
    return tuple(row_tokens) == tuple(word_tokens) or \
        [token.replace(".", "") for token in row_tokens] == [token.replace(".", "") for token in word_tokens]


def _holds_markup(text: str) -> bool:
    return text.strip().lower() in _SILENCES or bool(_MARKUP.search(text))


def _row_matches(row: WordTiming, word: UserWord) -> bool:
    """Whether one row is the time of one transcript word: the same tokens and, for a row of markup, markup in
    the transcript too (a transcript that kept the recogniser's ``[noise]``; a row ``[noise]`` is not the word
    ``noise``)."""
    return _same(text_tokens(row.word), word.tokens) and (not is_markup(row.word) or _holds_markup(word.text))


def _rows_for_word(timings: Sequence[WordTiming], j: int, word: UserWord) -> int:
    """How many rows from ``j`` make the transcript word ``word`` (0: none do): one row, one row per benchmark
    token, or a row and the bare clitics after it written together (``we`` / ``'ve`` for ``we've``)."""
    if _row_matches(timings[j], word):
        return 1
    count = len(word.tokens)
    piece = timings[j:j + count]
    if count > 1 and len(piece) == count and all(row.word.lower() == token or _same(text_tokens(row.word), (token,))
                                                 for row, token in zip(piece, word.tokens)):
        return count
    if is_markup(timings[j].word):
        return 0
    end = j + 1
    while end < len(timings) and is_bare_clitic(timings[end].word):
        end += 1
        if _same(text_tokens("".join(row.word.strip() for row in timings[j:end])), word.tokens):
            return end - j
    return 0


def _words_for_row(words: Sequence[UserWord], i: int, row: WordTiming) -> int:
    """How many transcript words from ``i`` one row is the time of, when it holds a word and the bare clitics
    after it (the row ``it's`` for the transcript's ``it 's``); 0: it is not."""
    end = i + 1
    while end < len(words) and is_bare_clitic(words[end].text):
        end += 1
        if _same(text_tokens(row.word), text_tokens("".join(word.text for word in words[i:end]))):
            return end - i
    return 0


def match_timings(user_text: UserText, rows: TimingRows, *, transcript: str = "the transcript"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)``: the time span of every user word (NaN for a word without a time), from timing rows
    in the shapes of the module docstring; :class:`TimingsMismatchError` when the words differ, naming the
    row's file and line and the transcript's word and line, and saying what to do."""
    words = user_text.words
    starts = np.full(len(words), np.nan)
    ends = np.full(len(words), np.nan)
    timings = rows.timings
    word_lines = _word_lines(user_text)

    def describe(i: int) -> str:
        return f"the transcript's word {i + 1}, {words[i].text!r} ({transcript}:{word_lines[i]})"

    i = j = 0
    while i < len(words):
        word = words[i]
        if not word.tokens:  # not read by the model: a row for it is optional
            if j < len(timings) and (timings[j].word == word.text or not text_tokens(timings[j].word)):
                j += 1
            i += 1
            continue
        if j >= len(timings):
            raise TimingsMismatchError(
                f"{rows.source}: the timings end after {len(timings)} rows, but the transcript goes on with its "
                f"word {i + 1}, {word.text!r} ({transcript}:{word_lines[i]}): add its rows (with empty times if "
                "it has none)")
        count = _rows_for_word(timings, j, word)
        if count:
            starts[i], ends[i] = _span(timings[j:j + count])
            i, j = i + 1, j + count
            continue
        count = _words_for_row(words, i, timings[j])
        if count:
            starts[i:i + count], ends[i:i + count] = _times(timings[j])
            i, j = i + count, j + 1
            continue
        if _skippable(timings[j].word):
            j += 1
            continue
        raise TimingsMismatchError(_mismatch(rows, j, words, i, describe(i)))
    while j < len(timings) and _skippable(timings[j].word):  # rows left over: markup and the like may trail
        j += 1
    if j < len(timings):
        raise TimingsMismatchError(
            f"{rows.where(j)}: the word {timings[j].word!r} is beyond the transcript's last word "
            f"({len(words)} words); the timings must list the transcript's words in order: remove the rows from "
            "here on, or give the transcript that goes with them")
    return starts, ends


def _mismatch(rows: TimingRows, j: int, words: Sequence[UserWord], i: int, described: str) -> str:
    """The message for row ``j`` that is not transcript word ``i``: what the row is, and what to do."""
    row = rows.timings[j]
    head = f"{rows.where(j)}: the word {row.word!r} does not match {described}"
    if j + 1 < len(rows.timings) and _rows_for_word(rows.timings, j + 1, words[i]):
        return (f"{head}; the next row is that word: the row's word is not in the transcript (remove the row, or "
                "add the word to the transcript)")
    if row.word.strip().lower() in _UNKNOWN_WORDS:
        return (f"{head}; {row.word.strip()!r} is the recogniser's mark of a word it could not spell: write the "
                f"transcript's word {words[i].text!r} in its place")
    if i + 1 < len(words) and words[i + 1].tokens and _rows_for_word(rows.timings, j, words[i + 1]):
        return (f"{head}; the row is the transcript's next word: the transcript's word has no row (add a row "
                "for it, with empty times if it has none)")
    return f"{head}; the timings must list the transcript's words in order"


def _spoken_groups(user_text: UserText) -> list[list[int]]:
    """The spoken user words (those with tokens) in groups: a word and the bare clitics after it (module
    docstring) are one spoken word."""
    groups: list[list[int]] = []
    for index, word in enumerate(user_text.words):
        if not word.tokens:
            continue
        if groups and is_bare_clitic(word.text):
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


def user_text_cues(user_text: UserText, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Raw cues ``(W, 3)`` of the W user words the model reads (those with tokens), in order.

    A word and the bare clitics after it (``cannibalization 's``) are one spoken word, as ``cannibalization's``
    would be: its cues (from the first word's start to the last word's end, the letters of all its tokens) go
    to its last word, the words before it get pause 0, duration 0 and its missing flag, as the tokens of a word
    before its last do (:func:`embeddings.timing_features.token_raw`)."""
    words = user_text.words
    groups = _spoken_groups(user_text)
    starts, ends = np.asarray(starts, dtype=np.float64), np.asarray(ends, dtype=np.float64)
    letters = [len("".join(text_tokens("".join(words[i].text for i in group)) if len(group) > 1
                           else words[group[0]].tokens)) for group in groups]
    cues = word_cues(starts[[group[0] for group in groups]], ends[[group[-1] for group in groups]], letters)
    out = np.zeros((sum(len(group) for group in groups), 3), dtype=np.float64)
    row = 0
    for group, cue in zip(groups, cues):
        out[row:row + len(group) - 1, 2] = cue[2]
        out[row + len(group) - 1] = cue
        row += len(group)
    return out


def timing_raw(user_text: UserText, starts: Sequence[float], ends: Sequence[float]) -> np.ndarray:
    """Raw per-token cues ``(N, 3)`` of the model tokens of ``user_text`` (:mod:`embeddings.timing_features`)."""
    is_last = [position == len(word.tokens) - 1 for word in user_text.words for position in range(len(word.tokens))]
    return token_raw(np.asarray(is_last, dtype=bool), user_text_cues(user_text, np.asarray(starts), np.asarray(ends)))
