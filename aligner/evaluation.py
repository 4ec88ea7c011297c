"""Scoring an alignment against reference word times (e.g. a speech engine's own timings).

The boundary error of a word is ``|aligned - reference|`` at each of its two boundaries (start, end); only
words the aligner placed confidently (``aligned``) and that have a reference time are scored. A boundary is
*at a pause* when the reference has a gap before (start) or after (end) the word: with a synthesiser's
timings, the spans of words inside one phrase touch exactly (a word spans its first phone's start to its
last phone's end), so any gap longer than ``min_pause_s`` is a pause phone (flite's ``pau``, espeak-ng's
``_``). The first word's start and the last word's end count as at a pause when they are not at the very
edge of the audio. Other boundaries are *junctions* (word to word, no silence between: the hard case for
an aligner, since there is no energy dip to anchor the boundary).

Used by ``benchmarks/alignment.py`` and by :func:`audio.align_stage.align_talks`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["MIN_PAUSE_S", "boundary_errors", "pause_flags", "summarise_errors"]

#: A reference gap longer than this (seconds) between consecutive timed words is a pause.
MIN_PAUSE_S = 0.001


def _timed(timing: Any) -> bool:
    start, end = getattr(timing, "start", math.nan), getattr(timing, "end", math.nan)
    return bool(getattr(timing, "aligned", False)) and math.isfinite(start) and math.isfinite(end)


def pause_flags(
    reference: Sequence[Any], duration: float, *, min_pause_s: float = MIN_PAUSE_S
) -> tuple[list[bool], list[bool]]:
    """``(pause_before, pause_after)`` per word from reference timings (objects with start, end, aligned).

    Words without a reference time get False; the gap is measured to the nearest timed word on each side.
    """
    count = len(reference)
    before, after = [False] * count, [False] * count
    timed = [index for index, timing in enumerate(reference) if _timed(timing)]
    for position, index in enumerate(timed):
        timing = reference[index]
        previous_end = reference[timed[position - 1]].end if position > 0 else 0.0
        next_start = reference[timed[position + 1]].start if position + 1 < len(timed) else duration
        before[index] = timing.start - previous_end > min_pause_s
        after[index] = next_start - timing.end > min_pause_s
    return before, after


def boundary_errors(
    reference: Sequence[Any],
    hypothesis: Sequence[Any],
    pause_before: Sequence[bool],
    pause_after: Sequence[bool],
) -> dict[str, list[float]]:
    """Boundary errors in seconds, grouped ``all`` / ``pause`` / ``junction`` (see the module docstring).

    ``reference`` and ``hypothesis`` hold one timing per word, in the same order.
    """
    if len(reference) != len(hypothesis):
        raise ValueError(f"{len(reference)} reference timings but {len(hypothesis)} hypothesis timings")
    groups: dict[str, list[float]] = {"all": [], "pause": [], "junction": []}
    for index, (ref, hyp) in enumerate(zip(reference, hypothesis)):
        if not (_timed(ref) and _timed(hyp)):
            continue
        for error, at_pause in ((abs(hyp.start - ref.start), pause_before[index]),
                                (abs(hyp.end - ref.end), pause_after[index])):
            groups["all"].append(error)
            groups["pause" if at_pause else "junction"].append(error)
    return groups


def summarise_errors(errors: Iterable[float]) -> dict[str, float | int | None]:
    """``n``, ``median_ms``, ``mean_ms``, ``p90_ms``, ``within_20ms``, ``within_50ms`` (shares) of errors in s."""
    values = np.asarray(list(errors), dtype=np.float64) * 1000.0
    if values.size == 0:
        return {"n": 0, "median_ms": None, "mean_ms": None, "p90_ms": None, "within_20ms": None, "within_50ms": None}
    return {
        "n": int(values.size),
        "median_ms": round(float(np.median(values)), 2),
        "mean_ms": round(float(values.mean()), 2),
        "p90_ms": round(float(np.percentile(values, 90)), 2),
        "within_20ms": round(float(np.mean(values <= 20.0)), 4),
        "within_50ms": round(float(np.mean(values <= 50.0)), 4),
    }
