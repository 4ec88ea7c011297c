"""Anchors: a talk's tokens cut into chunks, each with the span of audio it was spoken in.

A long recording aligns more safely in pieces whose ends are known: the aligner then never has to find its
way through a whole talk on its own (:func:`aligner.anchors.align_anchored` aligns each chunk on its own span).
Where the times come from is a corpus matter: TED-LIUM's STM segments give the times of utterances and their
(unpunctuated) words (:mod:`corpus.tedlium`); :func:`anchor_chunks` lays those segments onto the talk's own
tokens -- the punctuated transcript's -- and cuts only where the two agree.

* ``ANCHORS TSV`` (:func:`write_anchors` / :func:`read_anchors`), ``<stem>.anchors.tsv`` beside a talk's WAV
  (:func:`anchors_path_for`): header ``first_token<TAB>tokens<TAB>start<TAB>end``, one chunk per row, seconds
  with 3 decimals. The chunks tile the tokens in order (:func:`check_chunks`) and their spans follow each
  other in time.
* :func:`word_keys`: tokens as comparable keys, so that differently tokenised transcripts of the same speech
  line up: apostrophe pieces rejoin their word (``do n't`` and TED-LIUM's ``don 't`` are both ``dont``; ``it
  's`` is ``its``), everything but letters and digits goes (ASCII-folded, lower case), a token left empty is
  dropped. Also used to match talks by their text (:func:`corpus.tedlium.match_talks`).
"""

from __future__ import annotations

import difflib
import math
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus.io import atomic_write_text

__all__ = ["ANCHORS_HEADER", "AnchorChunk", "AnchorFormatError", "TimedSegment", "anchor_chunks", "anchors_path_for",
           "check_chunks", "read_anchors", "word_keys", "write_anchors"]

ANCHORS_HEADER = "first_token\ttokens\tstart\tend"
_NOT_KEY = re.compile(r"[^0-9a-z]+")


class AnchorFormatError(ValueError):
    """An anchors file or chunk list that does not follow its format; the message names the file or chunk."""


@dataclass(frozen=True)
class TimedSegment:
    """A stretch of audio ``[start, end]`` (seconds) and the words said in it (any tokenisation)."""

    start: float
    end: float
    words: tuple[str, ...]


@dataclass(frozen=True)
class AnchorChunk:
    """Tokens ``[first, first + count)`` of a talk, spoken within ``[start, end]`` seconds of its audio."""

    first: int
    count: int
    start: float
    end: float

    @property
    def stop(self) -> int:
        return self.first + self.count


def word_keys(tokens: Sequence[str]) -> tuple[list[str], list[int]]:
    """``(keys, owners)``: comparable keys of ``tokens`` (see the module docstring) and, per key, the index of
    the token it starts at."""
    keys: list[str] = []
    owners: list[int] = []
    for index, token in enumerate(tokens):
        folded = unicodedata.normalize("NFKD", str(token)).encode("ascii", "ignore").decode("ascii").lower()
        key = _NOT_KEY.sub("", folded)
        if (folded.startswith("'") or folded == "n't") and keys:
            keys[-1] += key
            continue
        if key:
            keys.append(key)
            owners.append(index)
    return keys, owners


def anchor_chunks(
    words: Sequence[str],
    segments: Sequence[TimedSegment],
    *,
    duration: float,
    max_chunk_s: float,
    min_matched_share: float,
    min_block: int = 2,
) -> tuple[list[AnchorChunk], dict[str, Any]]:
    """Cut ``words`` (a talk's tokens) into chunks at segment boundaries both transcripts agree on.

    The keys of ``words`` and of the segments' words are aligned (:class:`difflib.SequenceMatcher`); a key
    counts as matched inside a matching run of at least ``min_block`` keys. A *cut* may go between two
    neighbouring keys of ``words`` that are matched to neighbouring keys of two different segments -- the end
    of one utterance and the start of the next, in both transcripts -- at the middle of the gap between the two
    segments (the next segment's start when they overlap). Of those, as few are kept as leave every chunk at
    most ``max_chunk_s`` long (greedily, each chunk as long as it may be; a stretch with no cut within reach
    makes a longer chunk, which the aligner cuts into windows itself). When fewer than ``min_matched_share`` of
    the keys match, the transcript and the segments disagree too much to trust any cut: one chunk, the whole
    talk. Returns ``(chunks, stats)``; the chunks tile the tokens and ``[0, duration]``.
    """
    if max_chunk_s <= 0:
        raise ValueError(f"max_chunk_s must be positive, not {max_chunk_s!r}")
    if not 0.0 <= min_matched_share <= 1.0:
        raise ValueError(f"min_matched_share must be between 0 and 1, not {min_matched_share!r}")
    if not words:
        raise ValueError("no words to anchor")
    if not math.isfinite(duration) or duration <= 0:
        raise ValueError(f"duration must be a positive number of seconds, not {duration!r}")
    ordered = sorted(segments, key=lambda segment: (segment.start, segment.end))
    keys, owners = word_keys(words)
    segment_keys: list[str] = []
    key_segment: list[int] = []
    for index, segment in enumerate(ordered):
        found = word_keys(segment.words)[0]
        segment_keys += found
        key_segment += [index] * len(found)
    matched_at: list[int | None] = [None] * len(keys)
    if keys and segment_keys:
        matcher = difflib.SequenceMatcher(None, keys, segment_keys, autojunk=False)
        for block in matcher.get_matching_blocks():
            if block.size >= min_block:
                for offset in range(block.size):
                    matched_at[block.a + offset] = block.b + offset
    matched = sum(position is not None for position in matched_at)
    stats: dict[str, Any] = {"keys": len(keys), "segment_keys": len(segment_keys), "segments": len(ordered),
                             "matched_keys": matched,
                             "matched_share": round(matched / len(keys), 4) if keys else 0.0}
    whole = [AnchorChunk(0, len(words), 0.0, round(duration, 3))]
    if not keys or matched < min_matched_share * len(keys):
        stats.update(anchored=False, cuts_available=0, chunks=1)
        return whole, stats

    cuts: list[tuple[int, float]] = []  # (first token of the next chunk, time)
    for index in range(len(keys) - 1):
        left, right = matched_at[index], matched_at[index + 1]
        if left is None or right is None or right != left + 1:
            continue
        before, after = ordered[key_segment[left]], ordered[key_segment[right]]
        if key_segment[left] == key_segment[right]:
            continue
        time = (before.end + after.start) / 2 if after.start >= before.end else after.start
        time = round(time, 3)
        last = cuts[-1][1] if cuts else 0.0
        if time - last < 0.05 or duration - time < 0.05:
            continue
        cuts.append((owners[index + 1], time))

    chosen: list[tuple[int, float]] = []
    start, position = 0.0, 0
    while duration - start > max_chunk_s:
        best = None
        while position < len(cuts) and cuts[position][1] - start <= max_chunk_s:
            best = position
            position += 1
        if best is None:
            if position >= len(cuts):
                break
            best = position
            position += 1
        chosen.append(cuts[best])
        start = cuts[best][1]

    bounds = [(0, 0.0)] + chosen + [(len(words), round(duration, 3))]
    chunks = [AnchorChunk(first, stop - first, begin, end)
              for (first, begin), (stop, end) in zip(bounds, bounds[1:])]
    check_chunks(chunks, len(words))
    stats.update(anchored=len(chunks) > 1, cuts_available=len(cuts), chunks=len(chunks))
    return chunks, stats


def check_chunks(chunks: Sequence[AnchorChunk], words: int, *, where: str = "anchors") -> None:
    """Raise :class:`AnchorFormatError` unless ``chunks`` tile ``[0, words)`` in order, each with at least one
    token and a span of positive length, the spans following each other in time."""
    position, previous_end = 0, 0.0
    for number, chunk in enumerate(chunks, start=1):
        if chunk.first != position:
            raise AnchorFormatError(f"{where}: chunk {number} starts at token {chunk.first}, expected {position}")
        if chunk.count < 1:
            raise AnchorFormatError(f"{where}: chunk {number} has no tokens")
        if not (math.isfinite(chunk.start) and math.isfinite(chunk.end)) or chunk.start < 0 or chunk.end <= chunk.start:
            raise AnchorFormatError(f"{where}: chunk {number} has the span {chunk.start}..{chunk.end}")
        if chunk.start < previous_end - 1e-6:
            raise AnchorFormatError(f"{where}: chunk {number} starts at {chunk.start} s, before the previous one ends")
        position, previous_end = chunk.stop, chunk.end
    if position != words:
        raise AnchorFormatError(f"{where}: the chunks cover {position} tokens, the talk has {words}")


def anchors_path_for(wav: str | os.PathLike) -> Path:
    """``<stem>.anchors.tsv`` beside ``<stem>.wav``."""
    wav = Path(wav)
    return wav.with_name(f"{wav.stem}.anchors.tsv")


def write_anchors(path: str | os.PathLike, chunks: Sequence[AnchorChunk]) -> Path:
    """Write an anchors TSV (:data:`ANCHORS_HEADER`) atomically; returns its path."""
    lines = [ANCHORS_HEADER] + [f"{c.first}\t{c.count}\t{c.start:.3f}\t{c.end:.3f}" for c in chunks]
    return atomic_write_text(path, "\n".join(lines) + "\n")


def read_anchors(path: str | os.PathLike) -> list[AnchorChunk]:
    """Read an anchors TSV; :class:`AnchorFormatError` naming the file and line for anything else."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0] != ANCHORS_HEADER:
        raise AnchorFormatError(f"{path}:1: not an anchors file (expected the header {ANCHORS_HEADER!r})")
    chunks = []
    for number, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        cells = line.split("\t")
        if len(cells) != 4:
            raise AnchorFormatError(f"{path}:{number}: expected 4 cells, found {len(cells)}")
        try:
            chunks.append(AnchorChunk(int(cells[0]), int(cells[1]), float(cells[2]), float(cells[3])))
        except ValueError as error:
            raise AnchorFormatError(f"{path}:{number}: {error}") from None
    return chunks
