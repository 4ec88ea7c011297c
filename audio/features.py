"""Per-token prosodic features and MFCC frames from a talk's audio and its word timings.

Input: one audio file per talk and one timing per benchmark token of the talk (objects with ``start``,
``end`` in seconds and ``aligned``, such as :class:`corpus.timings.WordTiming`). Output, aligned with the talk's
token sequence:

* ``values``: ``(N, F)`` float32, the features of :data:`FEATURE_NAMES`, never NaN or infinite;
* ``missing``: ``(N, F)`` bool, True where a value could not be measured. The value there is the neutral
  fill of :data:`NEUTRAL_VALUES` (what "no information" looks like: no pause, average duration, the talk's
  typical pitch and loudness), so a model that ignores the mask sees nothing extreme; a model that uses it
  knows. Values are never silently zero where they are unknown.
* ``mfcc``: a :class:`corpus.frames.RaggedFrames` store, 13 MFCCs every 10 ms for each token's span (for a
  later speech-embedding stage): one ``(T, 13)`` float32 array plus ``offsets`` ``(N + 1,)`` int64, token ``i``
  owning rows ``offsets[i]:offsets[i+1]``.

Features (``F = 9``)
--------------------
=====================  ==================================================================  ===========
name                   definition                                                          neutral
=====================  ==================================================================  ===========
``pause_before``       ``start[i] - end[i-1]`` in s, clipped at 0; missing for the first   0.0
                       token or when token i or i-1 has no timing
``pause_after``        ``start[i+1] - end[i]`` in s, clipped at 0; missing for the last    0.0
                       token or when token i or i+1 has no timing
``duration``           ``end - start`` in s                                                mean of talk
``duration_norm``      duration / mean duration of the talk's aligned words (duration>0):  1.0
                       a speaking-rate normalisation (the timings carry no phone counts,
                       so per-phone normalisation is not available in general)
``f0_mean``            mean f0 of the word's voiced frames, in semitones relative to the   0.0
                       talk's median f0 (speaker/voice normalised)
``f0_range``           max - min of those semitone values                                  0.0
``f0_slope``           least-squares slope of those values against time, semitones/s       0.0
``energy_db``          RMS level of the word's samples in dB relative to the talk's        0.0
                       median word level
``voiced_fraction``    voiced frames / frames whose centre lies in the word                0.0
=====================  ==================================================================  ===========

Every feature is missing for a token without a timing (``aligned`` false, or an invalid span: start >
end, negative, not finite, or ending more than ``max_timing_overshoot_s`` after the audio; invalid spans
are counted in ``stats["invalid_timings"]``). The f0 features are also missing when the word has fewer than
``min_voiced_frames`` (3) voiced frames (unvoiced or very short words); ``energy_db`` when the span is
shorter than one sample; ``voiced_fraction`` when no frame centre lies in the span.

f0 and voicing
--------------
``librosa.yin`` (``fmin`` 60 Hz, ``fmax`` 400 Hz, 1024-sample frames, 10 ms hop, centred) gives an f0 for
*every* frame, speech or not, so frames are kept as voiced only when all three hold:

1. energy: the frame's RMS (512-sample window) is within ``voicing_energy_db`` (30 dB) of the talk's loud
   frames (95th percentile of frame RMS) and above -60 dBFS;
2. periodicity: the normalised autocorrelation of the frame at the YIN period (``sr / f0``) is at least
   ``voicing_periodicity`` (0.6): 1.0 for a periodic signal, ~0 for noise and silence;
3. range: YIN's f0 is not at its search limits (within 2 % of ``fmin``/``fmax``, where YIN lands when
   it finds no period).

(``librosa.pyin`` gives voicing probabilities but runs ~25x slower than ``yin``; this rule is its cheap
substitute.) A frame belongs to a word when its centre time lies in ``[start, end]``.

MFCC
----
``librosa.feature.mfcc`` over the whole talk: 13 coefficients, 25 ms window (``n_fft`` 400), 10 ms hop, 40
mel bands, centred frames, the same frame grid as f0. A token gets the frames whose centre lies in its span;
an aligned token whose span holds no frame centre (shorter than 10 ms, or zero-length) gets the one frame
nearest its midpoint, so every aligned token has at least one frame; a token without timing gets none.

Bad input
---------
:func:`load_audio` raises :class:`AudioFeatureError` (a ``ValueError`` whose message starts with the file
path) for a missing, unreadable/corrupt, empty, non-finite or silent (peak below -60 dBFS) file. Any other
sample rate is resampled to 16 kHz (``soxr_hq``) and several channels are averaged to mono; both are
recorded in ``stats``. :func:`extract_features` runs many talks, records each failure with its message and
gives that talk's tokens all-missing rows and no MFCC frames, and carries on.

Speed: 0.25-0.35 s of compute per minute of audio (one core, ``nice -n 19`` beside a training run; 14-minute
synthetic talks), after a one-off ~3 s warm-up of librosa's imports on the first talk of a process.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from corpus.frames import RaggedFrames
from corpus.timings import read_engine_timings

__all__ = [
    "FEATURE_NAMES",
    "NEUTRAL_VALUES",
    "AudioFeatureError",
    "FeatureConfig",
    "FeatureJob",
    "TalkFeatures",
    "extract_features",
    "load_audio",
    "talk_features",
]

FEATURE_NAMES: tuple[str, ...] = (
    "pause_before",
    "pause_after",
    "duration",
    "duration_norm",
    "f0_mean",
    "f0_range",
    "f0_slope",
    "energy_db",
    "voiced_fraction",
)
#: Fill values where ``missing`` is True (``duration`` is filled with the talk's mean word duration).
NEUTRAL_VALUES: dict[str, float] = {
    "pause_before": 0.0,
    "pause_after": 0.0,
    "duration": 0.0,
    "duration_norm": 1.0,
    "f0_mean": 0.0,
    "f0_range": 0.0,
    "f0_slope": 0.0,
    "energy_db": 0.0,
    "voiced_fraction": 0.0,
}
_COLUMN = {name: index for index, name in enumerate(FEATURE_NAMES)}


class AudioFeatureError(ValueError):
    """Audio a talk's features cannot be computed from; the message names the file."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


@dataclass(frozen=True)
class FeatureConfig:
    sample_rate: int = 16000
    hop_length: int = 160  # 10 ms
    f0_frame_length: int = 1024
    fmin: float = 60.0
    fmax: float = 400.0
    energy_window: int = 512
    voicing_energy_db: float = 30.0
    voicing_floor_dbfs: float = -60.0
    voicing_periodicity: float = 0.6
    min_voiced_frames: int = 3
    n_mfcc: int = 13
    mfcc_n_fft: int = 400
    mfcc_n_mels: int = 40
    silence_dbfs: float = -60.0
    max_timing_overshoot_s: float = 0.05


@dataclass
class TalkFeatures:
    values: np.ndarray  # (N, F) float32
    missing: np.ndarray  # (N, F) bool
    mfcc: RaggedFrames
    names: tuple[str, ...] = FEATURE_NAMES
    stats: dict[str, Any] = field(default_factory=dict)


def load_audio(path: str | Path, *, sample_rate: int = 16000, silence_dbfs: float = -60.0) -> tuple[np.ndarray, dict]:
    """Mono float32 samples at ``sample_rate``, and what was done to them; see "Bad input" above."""
    import soundfile

    path = Path(path)
    if not path.is_file():
        raise AudioFeatureError(path, "file not found")
    try:
        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except Exception as error:  # noqa: BLE001 -- libsndfile's errors are RuntimeError subclasses, or worse
        raise AudioFeatureError(path, f"unreadable or corrupt audio ({type(error).__name__}: {error})") from error
    info: dict[str, Any] = {"file_sample_rate": int(rate), "channels": int(data.shape[1])}
    if data.shape[0] == 0:
        raise AudioFeatureError(path, "empty (0 samples)")
    if not np.all(np.isfinite(data)):
        raise AudioFeatureError(path, "contains NaN or infinite samples")
    audio = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    peak = float(np.max(np.abs(audio)))
    if peak <= 10 ** (silence_dbfs / 20):
        level = "-inf" if peak == 0 else f"{20 * math.log10(peak):.1f}"
        raise AudioFeatureError(path, f"silent (peak {level} dBFS < {silence_dbfs:g} dBFS)")
    if rate != sample_rate:
        import librosa

        audio = librosa.resample(audio, orig_sr=rate, target_sr=sample_rate, res_type="soxr_hq")
        info["resampled_from"] = int(rate)
    info["duration"] = len(audio) / sample_rate
    return np.ascontiguousarray(audio, dtype=np.float32), info


def _frame_voicing(audio: np.ndarray, config: FeatureConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per 10 ms frame: f0 (Hz), voiced flag, RMS (linear)."""
    import librosa

    sr, hop = config.sample_rate, config.hop_length
    f0 = librosa.yin(
        audio, fmin=config.fmin, fmax=config.fmax, sr=sr, frame_length=config.f0_frame_length, hop_length=hop,
        center=True,
    )
    rms = librosa.feature.rms(y=audio, frame_length=config.energy_window, hop_length=hop, center=True)[0]
    frames = min(len(f0), len(rms))
    f0, rms = f0[:frames], rms[:frames]
    rms_db = 20 * np.log10(np.maximum(rms, 1e-10))
    loud = np.percentile(rms_db, 95)
    candidate = (rms_db >= loud - config.voicing_energy_db) & (rms_db >= config.voicing_floor_dbfs)
    candidate &= (f0 > config.fmin * 1.02) & (f0 < config.fmax * 0.98)
    # Normalised autocorrelation at the YIN period, over a window centred on the frame.
    window = config.energy_window
    max_lag = int(math.ceil(sr / config.fmin)) + 1
    padded = np.pad(audio, (window // 2, window // 2 + max_lag))
    periodicity = np.zeros(frames, np.float32)
    indices = np.flatnonzero(candidate)
    ramp = np.arange(window)
    for block in range(0, len(indices), 2048):
        rows = indices[block : block + 2048]
        lags = np.clip(np.rint(sr / f0[rows]).astype(np.int64), 1, max_lag)
        base = rows * hop  # frame centre t*hop sits at padded index t*hop + window//2
        a = padded[base[:, None] + ramp[None, :]]
        b = padded[base[:, None] + lags[:, None] + ramp[None, :]]
        denominator = np.sqrt(np.sum(a * a, axis=1) * np.sum(b * b, axis=1)) + 1e-12
        periodicity[rows] = np.sum(a * b, axis=1) / denominator
    voiced = candidate & (periodicity >= config.voicing_periodicity)
    return f0, voiced, rms


def _spans(timings: Sequence[Any], duration: float, config: FeatureConfig) -> tuple[np.ndarray, np.ndarray, list[int]]:
    starts = np.zeros(len(timings))
    ends = np.zeros(len(timings))
    ok = np.zeros(len(timings), bool)
    invalid: list[int] = []
    for index, timing in enumerate(timings):
        if not getattr(timing, "aligned", False):
            continue
        try:
            start, end = float(timing.start), float(timing.end)
        except (TypeError, ValueError):
            invalid.append(index)
            continue
        finite = math.isfinite(start) and math.isfinite(end)
        if not finite or start < 0 or end < start or end > duration + config.max_timing_overshoot_s:
            invalid.append(index)
            continue
        starts[index], ends[index], ok[index] = start, min(end, duration), True
    return np.stack([starts, ends], axis=1), ok, invalid


def talk_features(
    audio_path: str | Path, timings: Sequence[Any], *, config: FeatureConfig = FeatureConfig()
) -> TalkFeatures:
    """Features of one talk (see the module docstring); raises :class:`AudioFeatureError` for bad audio.

    Numerical libraries run on one thread here: a BLAS product (the mel filterbank of the MFCCs) splits its sums
    by thread count, so a process with 2 OpenBLAS threads and a Dask worker with 1 (Dask sets
    ``OPENBLAS_NUM_THREADS=1``) wrote MFCCs that differed in the last bits. One thread gives the same bytes in
    every engine; the stage runs talks in parallel, not one talk's arithmetic."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return _talk_features(audio_path, timings, config)


def _talk_features(audio_path: str | Path, timings: Sequence[Any], config: FeatureConfig) -> TalkFeatures:
    import librosa

    began = time.perf_counter()
    audio, info = load_audio(audio_path, sample_rate=config.sample_rate, silence_dbfs=config.silence_dbfs)
    sr, hop = config.sample_rate, config.hop_length
    duration = len(audio) / sr
    n = len(timings)
    spans, ok, invalid = _spans(timings, duration, config)
    values = np.zeros((n, len(FEATURE_NAMES)), np.float64)
    missing = np.ones((n, len(FEATURE_NAMES)), bool)

    # Timing features.
    starts, ends = spans[:, 0], spans[:, 1]
    durations = ends - starts
    if n > 1:
        both = ok[1:] & ok[:-1]
        gaps = np.maximum(starts[1:] - ends[:-1], 0.0)
        values[1:, _COLUMN["pause_before"]] = np.where(both, gaps, 0.0)
        missing[1:, _COLUMN["pause_before"]] = ~both
        values[:-1, _COLUMN["pause_after"]] = np.where(both, gaps, 0.0)
        missing[:-1, _COLUMN["pause_after"]] = ~both
    positive = ok & (durations > 0)
    mean_duration = float(durations[positive].mean()) if positive.any() else 0.0
    values[:, _COLUMN["duration"]] = np.where(ok, durations, mean_duration)
    missing[:, _COLUMN["duration"]] = ~ok
    if mean_duration > 0:
        values[:, _COLUMN["duration_norm"]] = np.where(ok, durations / mean_duration, 1.0)
        missing[:, _COLUMN["duration_norm"]] = ~ok

    # Frame-level analysis on the 10 ms grid (frame t centred at t * hop samples).
    f0, voiced, _ = _frame_voicing(audio, config)
    frames = len(f0)
    first = np.clip(np.ceil(starts * sr / hop).astype(np.int64), 0, frames)
    last = np.clip(np.floor(ends * sr / hop).astype(np.int64) + 1, 0, frames)  # exclusive
    last = np.maximum(last, first)
    in_words = np.zeros(frames, bool)
    for index in np.flatnonzero(ok):
        in_words[first[index] : last[index]] = True
    reference_frames = voiced & in_words if (voiced & in_words).any() else voiced
    reference_f0 = float(np.median(f0[reference_frames])) if reference_frames.any() else None
    semitones = 12 * np.log2(np.maximum(f0, 1e-6) / reference_f0) if reference_f0 else None
    times = np.arange(frames) * hop / sr

    word_db = np.full(n, np.nan)
    for index in np.flatnonzero(ok):
        a, b = first[index], last[index]
        if b > a:
            flags = voiced[a:b]
            values[index, _COLUMN["voiced_fraction"]] = flags.mean()
            missing[index, _COLUMN["voiced_fraction"]] = False
            if semitones is not None and flags.sum() >= config.min_voiced_frames:
                st = semitones[a:b][flags]
                t = times[a:b][flags]
                values[index, _COLUMN["f0_mean"]] = st.mean()
                values[index, _COLUMN["f0_range"]] = st.max() - st.min()
                values[index, _COLUMN["f0_slope"]] = np.polyfit(t - t.mean(), st, 1)[0] if np.ptp(t) > 0 else 0.0
                missing[index, [_COLUMN["f0_mean"], _COLUMN["f0_range"], _COLUMN["f0_slope"]]] = False
        sample_a, sample_b = int(round(starts[index] * sr)), int(round(ends[index] * sr))
        if sample_b > sample_a:
            segment = audio[sample_a:sample_b]
            word_db[index] = 20 * math.log10(max(float(np.sqrt(np.mean(segment.astype(np.float64) ** 2))), 1e-10))
    measured = np.isfinite(word_db)
    if measured.any():
        median_db = float(np.median(word_db[measured]))
        values[measured, _COLUMN["energy_db"]] = word_db[measured] - median_db
        missing[:, _COLUMN["energy_db"]] = ~measured
    else:
        median_db = None

    # Neutral fill wherever missing (duration: the talk mean, set above), then a last guard.
    for name, column in _COLUMN.items():
        if name != "duration":
            values[missing[:, column], column] = NEUTRAL_VALUES[name]
    if not np.all(np.isfinite(values)):
        bad = ~np.isfinite(values)
        values[bad] = 0.0
        missing |= bad

    # MFCC frames per token.
    mfcc = librosa.feature.mfcc(
        y=audio, sr=sr, n_mfcc=config.n_mfcc, n_fft=config.mfcc_n_fft, hop_length=hop, n_mels=config.mfcc_n_mels,
        center=True,
    ).T.astype(np.float32)
    mfcc_frames = len(mfcc)
    pieces, counts = [], np.zeros(n, np.int64)
    for index in range(n):
        if not ok[index]:
            continue
        a, b = min(first[index], mfcc_frames), min(last[index], mfcc_frames)
        if b <= a:
            a = min(int(round((starts[index] + ends[index]) / 2 * sr / hop)), mfcc_frames - 1)
            b = a + 1
        pieces.append(mfcc[a:b])
        counts[index] = b - a
    store_values = np.concatenate(pieces) if pieces else np.zeros((0, config.n_mfcc), np.float32)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    stats = {
        **info,
        "tokens": n,
        "aligned_tokens": int(ok.sum()),
        "invalid_timings": len(invalid),
        "invalid_timing_indices": invalid[:20],
        "frames": frames,
        "voiced_frames": int(voiced.sum()),
        "reference_f0_hz": round(reference_f0, 2) if reference_f0 else None,
        "median_word_dbfs": round(median_db, 2) if median_db is not None else None,
        "mean_word_duration": round(mean_duration, 4),
        "missing_fraction": {name: round(float(missing[:, c].mean()), 4) if n else 0.0 for name, c in _COLUMN.items()},
        "compute_seconds": round(time.perf_counter() - began, 3),
    }
    return TalkFeatures(values.astype(np.float32), missing, RaggedFrames(store_values, offsets), FEATURE_NAMES, stats)


@dataclass(frozen=True)
class FeatureJob:
    """One talk for :func:`extract_features`: its token count, audio file and timings (or timings TSV path)."""

    talk_id: str
    tokens: int
    audio: str | Path
    timings: Sequence[Any] | str | Path


def extract_features(
    jobs: Sequence[FeatureJob], out_prefix: str | Path, *, config: FeatureConfig = FeatureConfig()
) -> dict[str, Any]:
    """Features of many talks, concatenated in job order (e.g. a whole split), written under ``out_prefix``.

    Files: ``<prefix>.features.npy`` (N, F) float32, ``<prefix>.missing.npy`` (N, F) bool,
    ``<prefix>.mfcc.npy`` / ``<prefix>.mfcc_offsets.npy`` (:class:`corpus.frames.RaggedFrames`) and
    ``<prefix>.features.json`` (feature names, neutral values, per-talk stats or error). A talk that fails --
    bad audio, unreadable timings, a timing count that differs from its token count -- gets all-missing rows
    (the values of :data:`NEUTRAL_VALUES`, ``duration`` 0 as there is no talk mean) and no MFCC frames; its
    error is recorded and the others carry on. Returns the JSON report.
    """
    out_prefix = Path(out_prefix)
    out_prefix.parent.mkdir(parents=True, exist_ok=True)
    blocks_values, blocks_missing, stores, rows = [], [], [], []
    neutral = np.array([NEUTRAL_VALUES[name] for name in FEATURE_NAMES], np.float32)
    for job in jobs:
        row: dict[str, Any] = {"talk": job.talk_id, "tokens": job.tokens, "audio": str(job.audio)}
        try:
            timings = read_engine_timings(job.timings) if isinstance(job.timings, (str, Path)) else job.timings
            if len(timings) != job.tokens:
                raise ValueError(f"{len(timings)} timings for {job.tokens} tokens")
            result = talk_features(job.audio, timings, config=config)
            blocks_values.append(result.values)
            blocks_missing.append(result.missing)
            stores.append(result.mfcc)
            row.update(status="ok", **result.stats)
        except Exception as error:  # noqa: BLE001 -- recorded per talk, the others carry on
            blocks_values.append(np.tile(neutral, (job.tokens, 1)))
            blocks_missing.append(np.ones((job.tokens, len(FEATURE_NAMES)), bool))
            stores.append(RaggedFrames(np.zeros((0, config.n_mfcc), np.float32), np.zeros(job.tokens + 1, np.int64)))
            row.update(status="failed", error=f"{type(error).__name__}: {error}")
        rows.append(row)
    width = len(FEATURE_NAMES)
    values = np.concatenate(blocks_values) if blocks_values else np.zeros((0, width), np.float32)
    missing = np.concatenate(blocks_missing) if blocks_missing else np.zeros((0, width), bool)
    np.save(f"{out_prefix}.features.npy", values.astype(np.float32))
    np.save(f"{out_prefix}.missing.npy", missing)
    RaggedFrames.concatenate(stores, dim=config.n_mfcc).save(out_prefix)
    report = {
        "features": list(FEATURE_NAMES),
        "neutral_values": dict(NEUTRAL_VALUES),
        "tokens": int(len(values)),
        "talks": len(rows),
        "failed": [{"talk": r["talk"], "error": r["error"]} for r in rows if r["status"] == "failed"],
        "missing_fraction": {
            name: round(float(missing[:, c].mean()), 4) if len(values) else 0.0 for name, c in _COLUMN.items()
        },
        "config": config.__dict__,
        "per_talk": rows,
    }
    Path(f"{out_prefix}.features.json").write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    return report
