"""Filling in the times of unaligned words, and checking a backend's output."""

from __future__ import annotations

import math
from collections.abc import Sequence

from aligner.types import WordTiming

__all__ = ["interpolate", "check_timings", "NAN"]

NAN = float("nan")


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
