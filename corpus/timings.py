"""Word timings: where each transcript word was spoken, and the three file formats that hold them.

* ``WORD TSV`` (:func:`write_word_tsv` / :func:`read_word_tsv`): header ``word<TAB>start<TAB>end``, one row per
  word in transcript order, seconds; both time cells empty for a word without a time. The aligner writes it
  and ``punctuate --alignment`` reads it (as an ASR system's word timings would come).
* ``ENGINE TSV`` (:func:`write_engine_timings` / :func:`read_engine_timings`): header
  ``index<TAB>word<TAB>start<TAB>end<TAB>aligned<TAB>source``, the speech engine's own timings of a synthesised talk.
* ``ALIGNMENT TABLE`` (:func:`write_alignment_table` / :func:`read_alignment_table`): Parquet with columns
  :data:`TABLE_COLUMNS` (and optionally ``source``), the align stage's per-talk output.

Word times as ASR systems write them (``punctuate --alignment`` / ``--timings-dir``):

* ``CTM`` (NIST's and Kaldi's, :func:`index_ctm` / :func:`read_ctm_utterance`): one word a line,
  ``utterance channel start duration word [confidence ...]``, several utterances a file, each utterance's lines
  together and in time order; ``;;`` comment lines and blank lines are skipped, fields after the word ignored.
* ``WORD JSON`` (:func:`read_word_json`): a list of ``{"word" | "text", "start", "end"}`` objects (seconds;
  further keys such as ``probability`` or ``conf`` ignored; ``start``/``end`` both missing or null for a word
  without a time), at the top level or under ``words``, ``result`` (Vosk) or ``segments[].words`` (Whisper,
  WhisperX).

Every reader raises :class:`TimingsFormatError` naming the file and 1-based line (the entry, for JSON): times
that are not numbers, negative, an end before its start, or times out of order.

What is in order (every reader; the rows without a time are left out of the comparison):

=============================================================  ===============================================
the next timed word ...                                        read as
=============================================================  ===============================================
starts at or after the previous word's end                     a pause (0 s when the times touch)
starts before the previous word's end, not before its start    an overlap, as recognisers and forced aligners
                                                               write them: data, read as no pause
starts before the previous word's start                        an error naming both rows and their times: the
                                                               times go back by more than the previous word's
                                                               whole span (rows out of order, or the times of
                                                               another file)
=============================================================  ===============================================

A long gap (a speaker's turn cut out, hold music) is data, however long: the cues clip it
(:mod:`embeddings.timing_features`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from corpus.io import atomic_path, atomic_write_text, read_utf8

__all__ = [
    "TABLE_COLUMNS",
    "CtmUtterance",
    "TimingsFormatError",
    "WordTiming",
    "index_ctm",
    "read_alignment_table",
    "read_ctm_utterance",
    "read_engine_timings",
    "read_word_json",
    "read_word_tsv",
    "write_alignment_table",
    "write_engine_timings",
    "write_word_tsv",
]

NAN = float("nan")
OVERLAP_RULE = ("a word may start before the word before it ends (an overlap, read as no pause), not before it "
                "starts")
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


def _number(value: object, where: str, what: str) -> float:
    """``value`` (a JSON number or a text cell: word TSV, CTM, word JSON) as non-negative finite seconds; errors
    name ``where`` (the file and line, or the JSON entry)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TimingsFormatError(f"{where}: {what} {value!r} is not a number")
    try:
        number = float(value)
    except ValueError:
        raise TimingsFormatError(f"{where}: {what} {value!r} is not a number") from None
    if not math.isfinite(number):
        raise TimingsFormatError(f"{where}: {what} {value!r} is not a finite number")
    if number < 0:
        raise TimingsFormatError(f"{where}: {what} {number} is negative")
    return number


@dataclass(frozen=True)
class _Timed:
    """The last timed row a reader has read: where it stands (``line 4``, ``[0]``), its word and times."""

    where: str
    word: str
    start: float
    end: float


def _check_order(where: str, name: str, word: str, start: float, previous: _Timed | None) -> None:
    """:class:`TimingsFormatError` when a word starts before the previous timed word started (module docstring:
    an overlap is data, going back past the previous word's start is not); ``name`` is the row's own
    ``line 5`` or ``[1]``."""
    if previous is not None and start < previous.start:
        raise TimingsFormatError(
            f"{where}: times out of order: {name} ({word!r}) starts at {_seconds(start)} s, before {previous.where} "
            f"({previous.word!r}, {_seconds(previous.start)} s to {_seconds(previous.end)} s) starts; {OVERLAP_RULE}")


def _seconds(value: float) -> str:
    return repr(round(value, 6))  # a CTM's start + duration: 0.3, not 0.30000000000000004


def read_word_tsv(path: str | os.PathLike, data: bytes | None = None) -> list[WordTiming]:
    """Read a word TSV (see :func:`write_word_tsv`); CRLF or LF, the header optional. ``data``: the file's bytes
    when the caller has read them already.

    A row with both time cells filled is an aligned word; with both empty, a word without a time (NaN,
    ``aligned=False``). Raises :class:`TimingsFormatError` naming the file and line for a row without three
    cells, one time cell empty and the other not, a time that is not a non-negative number, an end before its
    start, or a word that starts before the previous timed word started (times out of order: module docstring).
    """
    path = Path(path)
    text = read_utf8(path, TimingsFormatError, data=data)
    timings: list[WordTiming] = []
    previous: _Timed | None = None
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
        start = _number(start_text, f"{path}:{number}", "start time")
        end = _number(end_text, f"{path}:{number}", "end time")
        if end < start:
            raise TimingsFormatError(f"{path}:{number}: end {end} is before start {start}")
        _check_order(f"{path}:{number}", f"line {number}", word, start, previous)
        previous = _Timed(f"line {number}", word, start, end)
        timings.append(WordTiming(word, start, end, True))
    return timings


# --- word times as ASR systems write them: CTM and word JSON -----------------------------------------------


@dataclass(frozen=True)
class CtmUtterance:
    """Where one utterance's lines stand in a CTM file: bytes ``start:end``, the 1-based line of its first line,
    and the SHA-256 of those bytes (what a resumed run compares)."""

    utterance: str
    start: int
    end: int
    first_line: int
    sha256: str


def _ctm_lines(data: bytes):  # noqa: ANN202 - every line, its LF kept (as iterating over a file gives them)
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        yield data[start:end]
        start = end


def _is_ctm_content(line: bytes) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith(b";;")


def index_ctm(path: str | os.PathLike) -> tuple[dict[str, CtmUtterance], dict[str, str]]:
    """``(utterances, problems)`` of a CTM file, reading only each line's first field: utterance -> where its
    lines are (in the order of the file), and utterance -> why it cannot be read (its lines not together).

    The file is read as a stream (a corpus's CTM may be larger than memory). A file that cannot be read raises
    :class:`TimingsFormatError`; the lines themselves are checked when an utterance is read
    (:func:`read_ctm_utterance`)."""
    path = Path(path)
    spans: dict[str, CtmUtterance] = {}
    problems: dict[str, str] = {}
    current: list = []  # the utterance being read: [name, start byte, end byte, first line, hasher]
    between = b""  # blank or comment lines since its last word: inside its span if another word follows

    def close() -> None:
        if current:
            name, start, end, first, digest = current
            spans[name] = CtmUtterance(name, start, end, first, digest.hexdigest())
            current.clear()

    offset = 0
    try:
        with path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                begins, offset = offset, offset + len(line)
                if not _is_ctm_content(line):
                    between += line if current else b""
                    continue
                name = line.split(None, 1)[0].decode("utf-8", errors="replace").lstrip("\ufeff")
                if current and current[0] == name:
                    current[2] = offset
                    current[4].update(between + line)
                    between = b""
                    continue
                close()
                between = b""
                if name in spans or name in problems:
                    first = spans[name].first_line if name in spans else None
                    problems.setdefault(name, f"{path}:{number}: utterance {name!r} goes on here after other "
                                              f"utterances (it starts at line {first}); a CTM keeps each "
                                              "utterance's lines together")
                    continue
                current.extend([name, begins, offset, number, hashlib.sha256(line)])
    except OSError as error:
        raise TimingsFormatError(f"{path}: cannot read ({error.strerror or error})") from error
    close()
    return {name: span for name, span in spans.items() if name not in problems}, problems


def read_ctm_utterance(path: str | os.PathLike, span: CtmUtterance, data: bytes | None = None
                       ) -> tuple[list[WordTiming], list[int]]:
    """The words of one utterance of a CTM file (``span`` from :func:`index_ctm`) and the 1-based line of each.

    ``data``: the span's bytes when the caller has read them already. Raises :class:`TimingsFormatError`
    naming the file and line for a line of fewer than five fields, another utterance or channel, times that
    are not non-negative numbers, or a word starting before the word before it started (module docstring)."""
    path = Path(path)
    if data is None:
        with path.open("rb") as handle:
            handle.seek(span.start)
            data = handle.read(span.end - span.start)
    timings: list[WordTiming] = []
    lines: list[int] = []
    channel = None
    previous: _Timed | None = None
    for number, raw in enumerate(_ctm_lines(data), start=span.first_line):
        if not _is_ctm_content(raw):
            continue
        where = f"{path}:{number}"
        try:
            fields = raw.decode("utf-8").split()
        except UnicodeDecodeError:
            raise TimingsFormatError(f"{where}: not valid UTF-8") from None
        if len(fields) < 5:
            raise TimingsFormatError(f"{where}: expected 'utterance channel start duration word [confidence]', "
                                     f"found {len(fields)} field(s)")
        fields[0] = fields[0].lstrip("\ufeff")
        if fields[0] != span.utterance:
            raise TimingsFormatError(f"{where}: utterance {fields[0]!r} inside utterance {span.utterance!r}")
        if channel is None:
            channel = fields[1]
        elif fields[1] != channel:
            raise TimingsFormatError(f"{where}: channel {fields[1]!r} after channel {channel!r} in utterance "
                                     f"{span.utterance!r}; give each channel its own utterance name")
        start = _number(fields[2], where, "start time")
        end = start + _number(fields[3], where, "duration")
        _check_order(where, f"line {number}", fields[4], start, previous)
        previous = _Timed(f"line {number}", fields[4], start, end)
        timings.append(WordTiming(fields[4], start, end, True))
        lines.append(number)
    return timings, lines


def _json_word_lists(data: object, path: Path) -> list[tuple[str, list]]:
    """``(entry path, list)`` of every word list in a recogniser's JSON (module docstring)."""
    if isinstance(data, list):
        return [("", data)]
    if isinstance(data, dict):
        for key in ("words", "result"):
            if isinstance(data.get(key), list):
                return [(key, data[key])]
        if isinstance(data.get("segments"), list):
            found = []
            for index, segment in enumerate(data["segments"]):
                if not isinstance(segment, dict) or not isinstance(segment.get("words"), list):
                    raise TimingsFormatError(f"{path}: segments[{index}] has no list 'words' (word times: ask the "
                                             "recogniser for word timestamps)")
                found.append((f"segments[{index}].words", segment["words"]))
            return found
    raise TimingsFormatError(f"{path}: no word list: expected a list of {{word, start, end}} objects, at the top "
                             "level or under 'words', 'result' or 'segments[].words'")


def read_word_json(path: str | os.PathLike, data: bytes | None = None) -> tuple[list[WordTiming], list[str]]:
    """The words of a recogniser's JSON (module docstring) and where each entry stands (``segments[2].words[0]``);
    ``data``: the file's bytes when the caller has read them already.

    Raises :class:`TimingsFormatError` naming the file and the entry (the line, for JSON that does not parse)."""
    path = Path(path)
    text = read_utf8(path, TimingsFormatError, encoding="utf-8-sig", data=data)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise TimingsFormatError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None
    timings: list[WordTiming] = []
    entries: list[str] = []
    previous: _Timed | None = None
    for prefix, words in _json_word_lists(data, path):
        for index, item in enumerate(words):
            entry = f"{prefix}[{index}]"
            where = f"{path}: {entry}"
            if not isinstance(item, dict):
                raise TimingsFormatError(f"{where}: not a {{word, start, end}} object")
            word = item.get("word", item.get("text"))
            if not isinstance(word, str) or not word.strip():
                raise TimingsFormatError(f"{where}: no word (a non-empty 'word' or 'text')")
            start, end = item.get("start"), item.get("end")
            if start is None and end is None:
                timings.append(WordTiming(word.strip(), NAN, NAN, False))
                entries.append(entry)
                continue
            if start is None or end is None:
                raise TimingsFormatError(f"{where}: only one of start and end is given")
            start = _number(start, where, "start time")
            end = _number(end, where, "end time")
            if end < start:
                raise TimingsFormatError(f"{where}: end {end} is before start {start}")
            _check_order(where, entry, word.strip(), start, previous)
            previous = _Timed(entry, word.strip(), start, end)
            timings.append(WordTiming(word.strip(), start, end, True))
            entries.append(entry)
    return timings, entries


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
