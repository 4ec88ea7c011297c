"""Filling in the times of unaligned words, checking a backend's output, and ASR tokens inheriting reference times."""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from typing import Any

from aligner.types import WordTiming

__all__ = ["INHERIT_TOLERANCE_S", "NAN", "asr_mapping", "check_timings", "inherit_timings", "interpolate"]

NAN = float("nan")
#: An inherited ASR time may overlap its timed neighbours by at most this much (s), else it is refused.
INHERIT_TOLERANCE_S = 0.1


def _weight(word: str) -> float:
    return float(max(1, sum(char.isalnum() for char in word)))


def interpolate(timings: Sequence[WordTiming], duration: float, *, mode: str = "interpolate") -> list[WordTiming]:
    """Give every word without a time (NaN start or end) an estimate, keeping it ``aligned=False``.

    A run of such words is spread over the gap between the end of the previous timed word (or 0, the audio
    start) and the start of the next timed word (or ``duration``), each word getting a share proportional to
    its number of letters/digits. When no word has a time, or ``mode == "nan"``, they stay NaN: an
    estimate with no anchor at all would be invented.
    """
    result = list(timings)
    if mode == "nan" or not any(timing.has_time for timing in result):
        return [t if t.has_time else WordTiming(t.word, NAN, NAN, False) for t in result]
    index = 0
    while index < len(result):
        if result[index].has_time:
            index += 1
            continue
        run_end = index
        while run_end < len(result) and not result[run_end].has_time:
            run_end += 1
        left = result[index - 1].end if index > 0 else 0.0
        right = result[run_end].start if run_end < len(result) else max(duration, left)
        right = max(right, left)
        weights = [_weight(result[k].word) for k in range(index, run_end)]
        total = sum(weights)
        position = left
        for offset, k in enumerate(range(index, run_end)):
            step = (right - left) * weights[offset] / total
            result[k] = WordTiming(result[k].word, position, position + step, False)
            position += step
        index = run_end
    return result


def check_timings(words: Sequence[str], timings: Sequence[WordTiming]) -> None:
    """Raise ``RuntimeError`` unless ``timings`` has one entry per word, in order, with sane times."""
    if len(timings) != len(words):
        raise RuntimeError(f"backend returned {len(timings)} timings for {len(words)} words")
    previous_start = -math.inf
    for index, (word, timing) in enumerate(zip(words, timings)):
        if timing.word != word:
            raise RuntimeError(f"timing {index} is for {timing.word!r}, expected {word!r}")
        if math.isnan(timing.start) != math.isnan(timing.end):
            raise RuntimeError(f"timing {index} ({word!r}) has only one of start/end")
        if timing.has_time:
            if timing.end < timing.start:
                raise RuntimeError(f"timing {index} ({word!r}) ends before it starts")
            if timing.start < previous_start - 1e-6:
                raise RuntimeError(f"timing {index} ({word!r}) starts before the word before it")
            previous_start = timing.start
        elif timing.aligned:
            raise RuntimeError(f"timing {index} ({word!r}) is marked aligned but has no time")


def asr_mapping(asr_words: Sequence[str], ref_words: Sequence[str]) -> list[tuple[int, str] | None]:
    """Per ASR token: ``(ref index, "match" | "substitution")`` from a difflib word alignment, or None.

    Equal blocks map one to one; a replaced run of the same length on both sides maps position by position
    (an ASR substitution takes the time of the word it replaced); insertions and runs of unequal length map
    to nothing.
    """
    mapping: list[tuple[int, str] | None] = [None] * len(asr_words)
    matcher = difflib.SequenceMatcher(None, [w.lower() for w in asr_words], [w.lower() for w in ref_words],
                                      autojunk=False)
    for tag, a1, a2, b1, b2 in matcher.get_opcodes():
        if tag == "equal":
            for k in range(a2 - a1):
                mapping[a1 + k] = (b1 + k, "match")
        elif tag == "replace" and a2 - a1 == b2 - b1:
            for k in range(a2 - a1):
                mapping[a1 + k] = (b1 + k, "substitution")
    return mapping


def _has_time(timing: Any) -> bool:
    return math.isfinite(timing.start) and math.isfinite(timing.end)


def inherit_timings(
    asr_words: Sequence[str],
    own: Sequence[Any],
    ref_words: Sequence[str],
    ref_timings: Sequence[Any] | None,
) -> tuple[list[WordTiming], list[str]]:
    """Timings of ASR tokens: their own alignment where confident, else the reference token's.

    ``own``: one aligner timing per ASR token (on the talk's audio); ``ref_timings``: the reference
    transcript's alignment on the same audio (None when there is none). A token the aligner placed
    confidently keeps its time (``own``). Otherwise, when the word alignment (:func:`asr_mapping`) gives it a
    reference token with a confident time, and that span does not overlap its timed neighbours by more than
    :data:`INHERIT_TOLERANCE_S`, it takes that span (``inherited``, ``aligned=True``). Else it keeps the
    aligner's estimate (or NaN) with ``aligned=False`` (``none``). Returns ``(timings, sources)``.
    """
    if len(own) != len(asr_words):
        raise ValueError(f"{len(own)} timings for {len(asr_words)} ASR tokens")
    if ref_timings is not None and len(ref_timings) != len(ref_words):
        raise ValueError(f"{len(ref_timings)} reference timings for {len(ref_words)} reference tokens")
    timings: list[WordTiming] = [WordTiming(w, t.start, t.end, bool(t.aligned)) for w, t in zip(asr_words, own)]
    sources = ["own" if t.aligned and _has_time(t) else "none" for t in timings]
    if ref_timings is not None:
        mapping = asr_mapping(asr_words, ref_words)
        for index, target in enumerate(mapping):
            if sources[index] == "own" or target is None:
                continue
            ref = ref_timings[target[0]]
            if ref.aligned and _has_time(ref):
                timings[index] = WordTiming(asr_words[index], ref.start, ref.end, True)
                sources[index] = "inherited"
        # An inherited span must fit between the timed tokens around it.
        for index, source in enumerate(sources):
            if source != "inherited":
                continue
            before = next((timings[k] for k in range(index - 1, -1, -1) if sources[k] != "none"), None)
            after = next((timings[k] for k in range(index + 1, len(timings)) if sources[k] == "own"), None)
            span = timings[index]
            if (before is not None and span.start < before.end - INHERIT_TOLERANCE_S) or (
                after is not None and span.end > after.start + INHERIT_TOLERANCE_S
            ):
                estimate = own[index]
                timings[index] = WordTiming(asr_words[index], estimate.start, estimate.end, False)
                sources[index] = "none"
    return timings, sources
