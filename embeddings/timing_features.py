"""Timing cues of speech -- the pause after each word and how long the word was held -- as per-token features,
from real word timings or simulated for text that has none.

Real speech carries few marks of its own, but where a speaker pauses is one of them: in real TED recordings
(``../shared/data/ted_real``) a pause of 0.2 s or more follows about three periods in four, one comma in three
and one unmarked word in twenty. A word before a mark is also held longer. Both exist for any recording
with word times (a forced alignment, or an ASR system's word timings), and neither gives away a mark the way
speech *synthesised from punctuated text* does.

The cues of a word (:func:`word_cues`)
--------------------------------------
Of the words that were spoken (a word with benchmark tokens), in order:

* ``pause``: the next spoken word's start minus this word's end, in seconds (an overlap counts as 0);
* ``log_duration``: ``log(end - start)`` minus the log duration expected of a word of its length,
  :data:`LOG_DURATION_INTERCEPT` + :data:`LOG_DURATION_SLOPE` ``* log(letters)`` (a fit to the unmarked words of
  the two development talks, fixed here as part of the feature definition: > 0 = held longer than usual);
* ``missing``: the word or the next spoken word has no time (an aligner's unplaced word, the last word).

Per token (:func:`token_raw`, :data:`RAW_COLUMNS`)
--------------------------------------------------
The model reads benchmark tokens: ``don't`` is ``do n't``. The cues of a word go to its **last** token (its
label is the mark after the word); the tokens before it get ``pause`` 0 and ``log_duration`` 0 (inside a
word nobody pauses) and the word's missing flag. :func:`encode` turns the raw columns into the model's
input: ``log1p(pause / 0.1 s)`` (clipped at 5 s), the clipped ``log_duration`` and the missing flag (the
values are 0 where it is set), for the cues named in ``features`` (:data:`FEATURES`).

Against the speaker's own rate (``local_pause``, ``local_duration``): the same encoded value minus its mean over
the timed tokens within :data:`LOCAL_WINDOW` tokens on either side. A fast speaker's short pause and a slow
speaker's long one then read alike; no call boundary is needed (``punctuate`` reads one transcript; a training
set's few windows across two calls blur a handful of tokens). Measured for the speech model on Earnings-22:
``reports/comparisons/speech_model_local_rate.md``.

Simulated cues for training text (:class:`PauseModel`)
------------------------------------------------------
The training talks have no recordings. Each of their words gets the cues of a *real* word with the same
label, drawn from the empirical ``(pause, log_duration)`` pairs of the real talks the model is fitted on
(:meth:`PauseModel.simulate`, ``conditional=True``); a label with few timed examples (QUESTION) draws from
all sentence ends. The **control** draws every word's cues from all real words regardless of label
(``conditional=False``): the same inputs, with no punctuation cue in them. Missing cues are simulated too: each
word at the real talks' rate of untimed words, and whole stretches of text (``dropout_fraction`` of the
tokens in runs of about ``dropout_span`` tokens) as if no speech were given, so the model keeps its text-only
skill for input without timings. Draws are seeded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from corpus.labels import LABELS

__all__ = [
    "CLITIC_TOKENS",
    "FEATURES",
    "PauseModel",
    "RAW_COLUMNS",
    "encode",
    "expected_log_duration",
    "feature_dim",
    "local_mean",
    "token_raw",
    "word_cues",
    "word_groups",
]

#: Benchmark tokens that are the end of the word before them (corpus/text.py splits these off).
CLITIC_TOKENS = frozenset({"n't", "'s", "'re", "'m", "'ll"})
#: The cues :func:`encode` can give the model, in this order.
FEATURES: tuple[str, ...] = ("pause", "duration", "local_pause", "local_duration")
#: Tokens on either side of a token whose timed cues make the local mean of ``local_pause`` / ``local_duration``.
LOCAL_WINDOW = 50
#: Columns of the raw per-token array: pause (s), log relative duration, missing (0/1).
RAW_COLUMNS: tuple[str, ...] = ("pause", "log_duration", "missing")
PAUSE_UNIT_S = 0.1
PAUSE_CLIP_S = 5.0
DURATION_CLIP = 2.0
#: Expected log duration of a word of ``n`` letters: intercept + slope * log(n) (seconds).
LOG_DURATION_INTERCEPT = -2.586
LOG_DURATION_SLOPE = 0.816
MIN_DURATION_S = 0.01
MODEL_FORMAT = 1


def check_features(features: Sequence[str]) -> list[str]:
    features = list(features)
    unknown = [f for f in features if f not in FEATURES]
    if unknown or not features or len(set(features)) != len(features):
        raise ValueError(f"timing features must be distinct names of {list(FEATURES)}, got {features}")
    return [f for f in FEATURES if f in features]


def feature_dim(features: Sequence[str]) -> int:
    """Width of :func:`encode`'s output: one column per cue and the missing flag."""
    return len(check_features(features)) + 1


def word_groups(tokens: Sequence[str]) -> np.ndarray:
    """For each benchmark token, whether it is the **last** token of a spoken word (``do`` of ``do n't`` is not)."""
    last = np.ones(len(tokens), dtype=bool)
    for index in range(len(tokens) - 1):
        if tokens[index + 1] in CLITIC_TOKENS:
            last[index] = False
    return last


def expected_log_duration(letters: np.ndarray | Sequence[int]) -> np.ndarray:
    letters = np.maximum(np.asarray(letters, dtype=np.float64), 1.0)
    return LOG_DURATION_INTERCEPT + LOG_DURATION_SLOPE * np.log(letters)


def word_cues(starts: Sequence[float], ends: Sequence[float], letters: Sequence[int]) -> np.ndarray:
    """``(W, 3)`` raw cues (:data:`RAW_COLUMNS`) of W spoken words in order, from their start/end times (NaN
    for a word without a time) and their lengths in letters (see the module docstring)."""
    starts, ends = np.asarray(starts, dtype=np.float64), np.asarray(ends, dtype=np.float64)
    if starts.shape != ends.shape or starts.shape != (len(letters),):
        raise ValueError(f"{len(starts)} starts, {len(ends)} ends and {len(letters)} word lengths")
    out = np.zeros((len(starts), 3), dtype=np.float64)
    timed = np.isfinite(starts) & np.isfinite(ends)
    next_start = np.append(starts[1:], np.nan)
    known = timed & np.append(timed[1:], False)
    with np.errstate(invalid="ignore"):
        pause = np.maximum(next_start - ends, 0.0)
        duration = np.log(np.maximum(ends - starts, MIN_DURATION_S)) - expected_log_duration(letters)
    out[known, 0] = pause[known]
    out[known, 1] = duration[known]
    out[~known, 2] = 1.0
    return out


def token_raw(is_last: np.ndarray, cues: np.ndarray) -> np.ndarray:
    """Spread the cues of W words (``cues`` ``(W, 3)``) over their tokens: ``is_last`` marks each word's last
    token (:func:`word_groups`); tokens before it get zeros and the word's missing flag."""
    is_last = np.asarray(is_last, dtype=bool)
    if len(is_last) and not is_last[-1]:
        raise ValueError("the last token must end a word")
    if int(is_last.sum()) != len(cues):
        raise ValueError(f"{int(is_last.sum())} words in the tokens, {len(cues)} words of cues")
    word_of_token = np.cumsum(is_last[::-1])[::-1]  # words from the end: the last word is 1
    word_of_token = len(cues) - word_of_token
    raw = np.zeros((len(is_last), 3), dtype=np.float32)
    raw[:, 2] = cues[word_of_token, 2] if len(cues) else 1.0
    raw[is_last, :2] = cues[:, :2]
    raw[raw[:, 2] > 0, :2] = 0.0
    return raw


def missing_raw(n: int) -> np.ndarray:
    """The raw cues of ``n`` tokens without speech."""
    raw = np.zeros((n, 3), dtype=np.float32)
    raw[:, 2] = 1.0
    return raw


def encode(raw: np.ndarray, features: Sequence[str]) -> np.ndarray:
    """The model's input ``(N, feature_dim)`` from raw per-token cues ``(N, 3)`` (module docstring)."""
    features = check_features(features)
    raw = np.asarray(raw, dtype=np.float64)
    missing = raw[:, 2] > 0
    values = {"pause": np.log1p(np.clip(raw[:, 0], 0.0, PAUSE_CLIP_S) / PAUSE_UNIT_S),
              "duration": np.clip(raw[:, 1], -DURATION_CLIP, DURATION_CLIP)}
    for cue in ("pause", "duration"):
        if f"local_{cue}" in features:
            values[f"local_{cue}"] = values[cue] - local_mean(values[cue], ~missing, LOCAL_WINDOW)
    out = np.stack([values[name] for name in features] + [missing.astype(np.float64)], axis=1)
    out[missing, :-1] = 0.0
    return out.astype(np.float32)


def local_mean(values: np.ndarray, timed: np.ndarray, window: int) -> np.ndarray:
    """Each token's mean of ``values`` over the ``timed`` tokens within ``window`` tokens on either side (itself
    included; 0 where there is none)."""
    weights = np.asarray(timed, dtype=np.float64)
    sums = np.concatenate([[0.0], np.cumsum(np.asarray(values, dtype=np.float64) * weights)])
    counts = np.concatenate([[0.0], np.cumsum(weights)])
    index = np.arange(len(weights))
    low, high = np.maximum(index - window, 0), np.minimum(index + window + 1, len(weights))
    total, count = sums[high] - sums[low], counts[high] - counts[low]
    return np.divide(total, count, out=np.zeros(len(weights)), where=count > 0)


class PauseModel:
    """The empirical cues of real speech per label, and how to simulate them (module docstring).

    ``pools[label]`` is an ``(n, 2)`` array of ``(pause, log_duration)`` of the timed words with that label;
    ``missing_rate`` the share of words without cues.
    """

    def __init__(self, pools: dict[str, np.ndarray], missing_rate: float, *, talks: Sequence[str] = (),
                 min_pool: int = 30, words: int = 0):
        self.pools = {label: np.asarray(pools.get(label, np.zeros((0, 2))), dtype=np.float64).reshape(-1, 2)
                      for label in LABELS}
        if not 0.0 <= missing_rate < 1.0:
            raise ValueError(f"missing_rate must be in [0, 1), got {missing_rate}")
        self.missing_rate = float(missing_rate)
        self.talks = list(talks)
        self.min_pool = int(min_pool)
        self.words = int(words)
        if len(self.pools["O"]) == 0 or all(len(self.pools[label]) == 0 for label in LABELS[1:]):
            raise ValueError("a pause model needs timed words with and without a mark")

    @classmethod
    def fit(cls, talks: Sequence[tuple[str, np.ndarray, Sequence[str]]], *, min_pool: int = 30) -> "PauseModel":
        """Fit on ``(name, cues, labels)`` per talk: ``cues`` from :func:`word_cues`, one label per word."""
        pools: dict[str, list[np.ndarray]] = {label: [] for label in LABELS}
        words = missing = 0
        for name, cues, labels in talks:
            labels = np.asarray(labels)
            if len(labels) != len(cues):
                raise ValueError(f"talk {name}: {len(cues)} words of cues, {len(labels)} labels")
            timed = cues[:, 2] == 0
            for label in LABELS:
                pools[label].append(cues[timed & (labels == label), :2])
            words += len(cues)
            missing += int((~timed).sum())
        return cls({label: np.concatenate(parts) if parts else np.zeros((0, 2)) for label, parts in pools.items()},
                   missing / max(words, 1), talks=[name for name, _, _ in talks], min_pool=min_pool, words=words)

    def pool(self, label: str) -> np.ndarray:
        """The pairs a word with ``label`` draws from; a rare sentence end draws from all sentence ends, any
        other rare label from all marked words."""
        pool = self.pools[label]
        if len(pool) >= self.min_pool or label == "O":
            return pool
        group = ("PERIOD", "QUESTION") if label in ("PERIOD", "QUESTION") else LABELS[1:]
        return np.concatenate([self.pools[other] for other in group])

    def marginal(self) -> np.ndarray:
        return np.concatenate([self.pools[label] for label in LABELS])

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"talks": self.talks, "words": self.words, "missing_rate": round(self.missing_rate, 4)}
        for label in LABELS:
            pool = self.pools[label]
            out[label] = {
                "timed_words": len(pool),
                "median_pause_s": round(float(np.median(pool[:, 0])), 3) if len(pool) else None,
                "share_pause_0.2s": round(float(np.mean(pool[:, 0] >= 0.2)), 3) if len(pool) else None,
                "median_log_duration": round(float(np.median(pool[:, 1])), 3) if len(pool) else None,
            }
        return out

    def to_json(self) -> dict[str, Any]:
        return {"format": MODEL_FORMAT, "talks": self.talks, "words": self.words, "missing_rate": self.missing_rate,
                "min_pool": self.min_pool,
                "pools": {label: [[round(float(p), 4), round(float(d), 4)] for p, d in self.pools[label]]
                          for label in LABELS},
                "summary": self.summary()}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "PauseModel":
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("format") != MODEL_FORMAT:
            raise ValueError(f"{path}: pause model format {data.get('format')!r}, this code reads {MODEL_FORMAT}")
        return cls({label: np.asarray(pairs, dtype=np.float64) for label, pairs in data["pools"].items()},
                   data["missing_rate"], talks=data.get("talks", ()), min_pool=data.get("min_pool", 30),
                   words=data.get("words", 0))

    def simulate(self, tokens: Sequence[str], labels: Sequence[str], *, conditional: bool, seed: int | Sequence[int],
                 missing_rate: float | None = None, dropout_fraction: float = 0.25,
                 dropout_span: int = 100) -> np.ndarray:
        """Raw per-token cues ``(N, 3)`` for a labelled token stream (module docstring).

        ``conditional``: each word draws from the real words of its label (else from all real words: the
        control). ``missing_rate`` (default: the fitted one) of the words lose their cues at random, and
        ``dropout_fraction`` of the tokens in runs of ``dropout_span / 2`` to ``2 * dropout_span`` tokens.
        Which cues are missing depends on ``seed`` and the tokens only, so the timed cues and the control of the
        same text and seed lack the same ones.
        """
        if len(tokens) != len(labels):
            raise ValueError(f"{len(tokens)} tokens, {len(labels)} labels")
        if not 0.0 <= dropout_fraction < 1.0 or dropout_span < 1:
            raise ValueError("dropout_fraction must be in [0, 1) and dropout_span >= 1")
        seed = [int(seed)] if np.isscalar(seed) else [int(part) for part in seed]
        rng = np.random.default_rng([*seed, 0])  # the values
        holes = np.random.default_rng([*seed, 1])  # which cues are missing
        n = len(tokens)
        if n == 0:
            return missing_raw(0)
        is_last = word_groups(tokens)
        word_labels = np.asarray(labels, dtype=object)[is_last]
        cues = np.zeros((len(word_labels), 3), dtype=np.float64)
        if conditional:
            for label in LABELS:
                rows = np.flatnonzero(word_labels == label)
                pool = self.pool(label)
                if len(rows) and len(pool) == 0:
                    raise ValueError(f"the pause model has no timed word with label {label}")
                if len(rows):
                    cues[rows, :2] = pool[rng.integers(len(pool), size=len(rows))]
        else:
            pool = self.marginal()
            cues[:, :2] = pool[rng.integers(len(pool), size=len(cues))]
        rate = self.missing_rate if missing_rate is None else float(missing_rate)
        cues[holes.random(len(cues)) < rate, 2] = 1.0
        raw = token_raw(is_last, cues)
        if dropout_fraction > 0:
            mean_missing = 1.25 * dropout_span  # mean of uniform(span/2, 2 span)
            mean_present = mean_missing * (1.0 - dropout_fraction) / dropout_fraction
            position = int(holes.exponential(mean_present))
            while position < n:
                length = int(holes.integers(max(dropout_span // 2, 1), 2 * dropout_span + 1))
                raw[position:position + length] = missing_raw(min(length, n - position))
                position += length + int(holes.exponential(mean_present))
        return raw
