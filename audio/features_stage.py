"""The ``features`` stage as a library function: per-token acoustic features over whole splits.

Wrapped by ``pipeline/features.py`` (which reads the arguments from ``params.yaml`` and writes
``reports/audio_report.md`` with :func:`audio_report_markdown`, the audio half's report from the three
stages' reports); resumable talk by talk, a failing talk is recorded with its error and the others carry on (the stage then exits non-zero).

:func:`token_features` -> ``<features_dir>/<split>/``
    Per split, arrays aligned with the *whole* token sequence of ``<prepared_dir>/<split>.tsv``:
    ``features.npy`` (N, F) float32, ``missing.npy`` (N, F) bool, ``has_audio.npy`` (N,) bool,
    ``feature_names.json``, and the MFCC store (:mod:`corpus.frames`) ``mfcc.npy`` (T, 13) float32 +
    ``mfcc_offsets.npy`` (N + 1,) int64 (token i owns rows ``offsets[i]:offsets[i+1]``; empty for a token
    without audio or time). Features are :func:`audio.features.talk_features` of each aligned talk, on the
    aligner's timings (not the engine's: real recordings have only the aligner's). A token without audio or
    without a confident time is flagged in ``missing`` and holds the neutral value of
    :data:`audio.features.NEUTRAL_VALUES` (``duration`` 0 outside talks) -- never NaN. Per-talk results are
    cached under ``<split>/talks/`` (fingerprint: the alignment's fingerprint, the Parquet's bytes and the
    feature settings).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from audio.features import FEATURE_NAMES, NEUTRAL_VALUES, talk_features
from audio.report import audio_report_markdown
from audio.stage_common import (AUDIO_SPLITS, STAGE_VERSION, error_text, progress_bar, read_alignment, read_json,
                                read_split, sha256_file, sha256_json, write_json)
from audio.synthesis import talk_stem
from corpus.frames import FRAMES_FILE, OFFSETS_FILE, RaggedFrames
from corpus.io import atomic_path
from corpus.talks_table import TALKS_TABLE, read_talks_table

__all__ = ["audio_report_markdown", "token_features"]


def _save_npy(path: Path, array: np.ndarray) -> None:
    with atomic_path(path) as temporary, temporary.open("wb") as handle:
        np.save(handle, array)


def token_features(
    alignments_dir: str | Path,
    audio_dir: str | Path,
    prepared_dir: str | Path,
    out_dir: str | Path,
    *,
    splits: Sequence[str],
    config: Any,
    progress: bool = False,
) -> dict[str, Any]:
    """Per-token prosodic features and MFCC frames over each split's full token sequence; returns the report.

    ``config``: an :class:`audio.features.FeatureConfig`. See the module docstring for the files.
    """
    started = time.perf_counter()
    alignments_dir, audio_dir = Path(alignments_dir), Path(audio_dir)
    prepared_dir, out_dir = Path(prepared_dir), Path(out_dir)
    unknown = sorted(set(splits) - set(AUDIO_SPLITS))
    if unknown:
        raise ValueError(f"splits: unknown {unknown}; expected some of {AUDIO_SPLITS}")
    rows = read_talks_table(audio_dir / TALKS_TABLE)
    settings = {"config": dataclasses.asdict(config), "version": STAGE_VERSION, "features": list(FEATURE_NAMES)}
    neutral = np.array([NEUTRAL_VALUES[name] for name in FEATURE_NAMES], np.float32)
    width = len(FEATURE_NAMES)
    report_splits: dict[str, Any] = {}
    for split in splits:
        split_started = time.perf_counter()
        words = read_split(prepared_dir, split).words
        n = len(words)
        values = np.tile(neutral, (n, 1))
        missing = np.ones((n, width), bool)
        has_audio = np.zeros(n, bool)
        counts = np.zeros(n, np.int64)
        pieces: list[np.ndarray] = []
        target = out_dir / split
        cache_dir = target / "talks"
        cache_dir.mkdir(parents=True, exist_ok=True)
        mine = sorted((row for row in rows if row["split"] == split), key=lambda row: row["first_token"])
        outcome = {"computed": 0, "cached": 0, "failed": 0, "no_audio": 0, "not_aligned": 0}
        failures: list[dict[str, str]] = []
        compute = seconds = 0.0
        for row in progress_bar(mine, progress, f"features {split}"):
            first, count = row["first_token"], row["tokens"]
            if first + count > n:
                failures.append({"talk": row["talk"], "error": f"talk range {first}+{count} outside {split}.tsv ({n})"})
                outcome["failed"] += 1
                continue
            if row["status"] != "ok":
                outcome["no_audio"] += 1
                continue
            stem = talk_stem(row["talk"])
            alignment_meta = read_json(alignments_dir / split / f"{stem}.json")
            parquet = alignments_dir / split / f"{stem}.parquet"
            if alignment_meta is None or not parquet.is_file():
                outcome["not_aligned"] += 1
                continue
            try:
                fingerprint = sha256_json({**settings, "alignment": alignment_meta.get("fingerprint"),
                                            "parquet": sha256_file(parquet)})
                cached_meta = read_json(cache_dir / f"{stem}.json")
                arrays = None
                if cached_meta is not None and cached_meta.get("fingerprint") == fingerprint:
                    try:
                        with np.load(cache_dir / f"{stem}.npz") as data:
                            arrays = {key: data[key] for key in ("values", "missing", "mfcc", "offsets")}
                        outcome["cached"] += 1
                    except (OSError, ValueError, KeyError):
                        arrays = None
                if arrays is None:
                    (cache_dir / f"{stem}.json").unlink(missing_ok=True)
                    timings, _ = read_alignment(parquet)
                    if len(timings) != count or [t.word for t in timings] != list(words[first : first + count]):
                        raise ValueError("the alignment's tokens are not the split's tokens of this talk (stale?)")
                    result = talk_features(audio_dir / row["wav"], timings, config=config)
                    arrays = {"values": result.values, "missing": result.missing, "mfcc": result.mfcc.values,
                              "offsets": result.mfcc.offsets}
                    with atomic_path(cache_dir / f"{stem}.npz", suffix=".npz") as temporary:
                        np.savez(temporary, **arrays)
                    cached_meta = {"talk": row["talk"], "fingerprint": fingerprint, "stats": result.stats}
                    write_json(cache_dir / f"{stem}.json", cached_meta)
                    outcome["computed"] += 1
                if arrays["values"].shape != (count, width) or len(arrays["offsets"]) != count + 1:
                    raise ValueError(f"cached arrays have the wrong shape {arrays['values'].shape}")
            except Exception as error:  # noqa: BLE001 -- recorded per talk, the others carry on
                failures.append({"talk": row["talk"], "error": error_text(error)})
                outcome["failed"] += 1
                continue
            values[first : first + count] = arrays["values"]
            missing[first : first + count] = arrays["missing"]
            has_audio[first : first + count] = True
            counts[first : first + count] = np.diff(arrays["offsets"])
            pieces.append(np.asarray(arrays["mfcc"], np.float32))
            compute += float((cached_meta or {}).get("stats", {}).get("compute_seconds") or 0.0)
            seconds += row["duration_s"] or 0.0
        # Never NaN: anything non-finite becomes neutral and missing.
        bad = ~np.isfinite(values)
        if bad.any():
            values[bad] = np.broadcast_to(neutral, values.shape)[bad]
            missing |= bad
        store = RaggedFrames(
            np.concatenate(pieces) if pieces else np.zeros((0, config.n_mfcc), np.float32),
            np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        )
        _save_npy(target / "features.npy", values.astype(np.float32))
        _save_npy(target / "missing.npy", missing)
        _save_npy(target / "has_audio.npy", has_audio)
        _save_npy(target / FRAMES_FILE, store.values)
        _save_npy(target / OFFSETS_FILE, store.offsets)
        write_json(target / "feature_names.json", list(FEATURE_NAMES))
        timed = ~missing[:, FEATURE_NAMES.index("duration")]
        info = {
            "tokens": n,
            "tokens_with_audio": int(has_audio.sum()),
            "tokens_timed": int(timed.sum()),
            "coverage_audio": round(float(has_audio.mean()), 4) if n else None,
            "coverage_timed": round(float(timed.mean()), 4) if n else None,
            "timed_share_of_tokens_with_audio": (
                round(float(timed.sum() / has_audio.sum()), 4) if has_audio.any() else None
            ),
            "missing_fraction": {name: round(float(missing[:, c].mean()), 4) if n else None
                                 for c, name in enumerate(FEATURE_NAMES)},
            "missing_fraction_within_audio": {
                name: round(float(missing[has_audio, c].mean()), 4) if has_audio.any() else None
                for c, name in enumerate(FEATURE_NAMES)
            },
            "mfcc_frames": int(len(store.values)),
            "audio_minutes": round(seconds / 60, 2),
            "talks": outcome,
            "failed": failures,
            "compute_seconds": round(compute, 1),
            "compute_seconds_per_audio_minute": round(compute / (seconds / 60), 3) if seconds else None,
            "seconds": round(time.perf_counter() - split_started, 1),
        }
        write_json(target / "report.json", info)
        report_splits[split] = info
    report = {
        "features": list(FEATURE_NAMES),
        "neutral_values": dict(NEUTRAL_VALUES),
        "config": settings["config"],
        "splits": report_splits,
        "out_dir": str(out_dir),
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_json(out_dir / "features_report.json", report)
    return report
