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
    cached under ``<split>/talks/`` (fingerprint: the alignment's fingerprint, the Parquet's bytes, the
    feature settings and the numeric regime, :func:`experiments.numerics.numeric_regime`: a rerun in another
    regime computes every talk again rather than mixing talks of two regimes).

    In parallel: the talks of every split go through :func:`executor.tasks.run_tasks` (``workers`` local
    processes, or a Dask scheduler); each worker computes or finds its talk's arrays in the cache, and the
    split's arrays are then assembled here from the cache in token order, so every output is the same, byte for
    byte, whatever the engine or worker count (the per-talk ``.npz`` carry no time of writing; compute times go
    to the report only, and are this run's). A worker in another numeric regime than this process refuses its
    talks, naming itself and the switches that differ (:func:`executor.tasks.run_tasks`, ``regime``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from executor.tasks import describe_engine, run_tasks
from audio.features import FEATURE_NAMES, NEUTRAL_VALUES, talk_features
from audio.report import audio_report_markdown
from audio.stage_common import (AUDIO_SPLITS, STAGE_VERSION, read_alignment, read_json, read_split, sha256_file,
                                sha256_json, write_json)
from audio.synthesis import talk_stem
from corpus.frames import FRAMES_FILE, OFFSETS_FILE, RaggedFrames
from corpus.io import atomic_path, split_run_facts
from corpus.talks_table import TALKS_TABLE, read_talks_table
from experiments.numerics import numeric_regime, regime_facts

__all__ = ["audio_report_markdown", "token_features"]


def _save_npy(path: Path, array: np.ndarray) -> None:
    with atomic_path(path) as temporary, temporary.open("wb") as handle:
        np.save(handle, array)


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Like :func:`numpy.savez` (uncompressed), but the same arrays always give the same bytes: the zip entries
    carry a fixed date instead of the time of writing. Written atomically."""
    import zipfile

    with atomic_path(path, suffix=".npz") as temporary:
        with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
            for name in sorted(arrays):
                entry = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                entry.external_attr = 0o644 << 16
                with archive.open(entry, "w", force_zip64=True) as handle:
                    np.lib.format.write_array(handle, np.asanyarray(arrays[name]), allow_pickle=False)


@dataclass(frozen=True)
class _Task:
    """One talk's features to compute or find in the cache (plain, picklable values)."""

    split: str
    talk: str
    wav: str
    parquet: str
    alignment_fingerprint: str | None
    words: tuple[str, ...]
    cache_dir: str
    settings: dict[str, Any]
    config: Any
    width: int


def _cached_arrays(npz: Path, count: int, width: int) -> dict[str, np.ndarray] | None:
    try:
        with np.load(npz) as data:
            arrays = {key: data[key] for key in ("values", "missing", "mfcc", "offsets")}
    except (OSError, ValueError, KeyError):
        return None
    if arrays["values"].shape != (count, width) or len(arrays["offsets"]) != count + 1:
        return None
    return arrays


def _feature_task(task: _Task) -> dict[str, Any]:
    """One talk (runs in a worker): reuse its cached arrays when the fingerprint matches, else compute them with
    :func:`audio.features.talk_features` and cache them (``<cache_dir>/<stem>.npz`` and ``.json``)."""
    stem = talk_stem(task.talk)
    cache_dir = Path(task.cache_dir)
    npz, meta_path = cache_dir / f"{stem}.npz", cache_dir / f"{stem}.json"
    count = len(task.words)
    # The regime joins the key: the mel filterbank product (an OpenBLAS sgemm) and log10 give other bits under
    # other kernels (docs/method.md, "Same bytes on every machine"). Pinned, it is the floor alone ("x86-64-v3"),
    # the same key on every CPU of the floor; native, it names the CPU. The align stage's fingerprint leaves it
    # out: pocketsphinx is C built once, without BLAS or a kernel chosen at run time, and the numpy around it
    # (energy envelopes) gave the same alignments on CPUs of other generations, before the pin as after it.
    regime = numeric_regime()
    fingerprint = sha256_json({**task.settings, "alignment": task.alignment_fingerprint,
                               "parquet": sha256_file(Path(task.parquet)), "numerics": regime})
    cached = read_json(meta_path)
    if cached is not None and cached.get("fingerprint") == fingerprint:
        if _cached_arrays(npz, count, task.width) is not None:
            return {"status": "cached", "compute_seconds": 0.0}
    meta_path.unlink(missing_ok=True)
    timings, _ = read_alignment(Path(task.parquet))
    if len(timings) != count or [t.word for t in timings] != list(task.words):
        raise ValueError("the alignment's tokens are not the split's tokens of this talk (stale?)")
    result = talk_features(Path(task.wav), timings, config=task.config)
    arrays = {"values": result.values, "missing": result.missing, "mfcc": result.mfcc.values,
              "offsets": result.mfcc.offsets}
    if arrays["values"].shape != (count, task.width) or len(arrays["offsets"]) != count + 1:
        raise ValueError(f"the features have the wrong shape {arrays['values'].shape}")
    _save_npz(npz, arrays)
    stats = {key: value for key, value in result.stats.items() if key != "compute_seconds"}  # same bytes every run
    write_json(meta_path, {"talk": task.talk, "fingerprint": fingerprint, "numerics": regime, "stats": stats})
    return {"status": "computed", "compute_seconds": float(result.stats.get("compute_seconds") or 0.0)}


def token_features(
    alignments_dir: str | Path,
    audio_dir: str | Path,
    prepared_dir: str | Path,
    out_dir: str | Path,
    *,
    splits: Sequence[str],
    config: Any,
    workers: int | None = 1,
    scheduler: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Per-token prosodic features and MFCC frames over each split's full token sequence; returns the report.

    ``config``: an :class:`audio.features.FeatureConfig`. See the module docstring for the files.
    ``workers``/``scheduler``: how the talks are run (:func:`executor.tasks.run_tasks`: 1 = here, N local
    processes, None = every core, or the address of a Dask scheduler); the outputs are the same, byte for byte,
    whichever.
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

    # 1. What each split's talks need: a task per aligned talk, the rest counted here.
    plans: dict[str, dict[str, Any]] = {}
    tasks: list[_Task] = []
    for split in splits:
        words = read_split(prepared_dir, split).words
        cache_dir = out_dir / split / "talks"
        cache_dir.mkdir(parents=True, exist_ok=True)
        plan: dict[str, Any] = {"words": words, "talks": [], "failures": [],
                                "outcome": {"computed_this_run": 0, "cached_this_run": 0, "failed": 0, "no_audio": 0,
                                            "not_aligned": 0}}
        plans[split] = plan
        for row in sorted((row for row in rows if row["split"] == split), key=lambda row: row["first_token"]):
            first, count = row["first_token"], row["tokens"]
            if first + count > len(words):
                plan["failures"].append({"talk": row["talk"],
                                         "error": f"talk range {first}+{count} outside {split}.tsv ({len(words)})"})
                plan["outcome"]["failed"] += 1
                continue
            if row["status"] != "ok":
                plan["outcome"]["no_audio"] += 1
                continue
            stem = talk_stem(row["talk"])
            alignment_meta = read_json(alignments_dir / split / f"{stem}.json")
            parquet = alignments_dir / split / f"{stem}.parquet"
            if alignment_meta is None or not parquet.is_file():
                plan["outcome"]["not_aligned"] += 1
                continue
            plan["talks"].append((row, len(tasks)))
            tasks.append(_Task(split, row["talk"], str(audio_dir / row["wav"]), str(parquet),
                               alignment_meta.get("fingerprint"), tuple(words[first : first + count]), str(cache_dir),
                               settings, config, width))

    # 2. Compute what is not cached, in parallel.
    outcomes = run_tasks(_feature_task, tasks, names=[f"{task.split}/{task.talk}" for task in tasks],
                         workers=workers, scheduler=scheduler, progress=progress, desc="features", regime=regime_facts)

    # 3. Each split's arrays from the per-talk cache, in token order.
    report_splits: dict[str, Any] = {}
    for split in splits:
        split_started = time.perf_counter()
        plan = plans[split]
        n = len(plan["words"])
        values = np.tile(neutral, (n, 1))
        missing = np.ones((n, width), bool)
        has_audio = np.zeros(n, bool)
        counts = np.zeros(n, np.int64)
        pieces: list[np.ndarray] = []
        target = out_dir / split
        outcome, failures = plan["outcome"], plan["failures"]
        compute = seconds = seconds_this_run = 0.0
        for row, index in plan["talks"]:
            first, count = row["first_token"], row["tokens"]
            result = outcomes[index]
            arrays = None
            if result.ok:
                arrays = _cached_arrays(Path(tasks[index].cache_dir) / f"{talk_stem(row['talk'])}.npz", count, width)
                if arrays is None:
                    result = dataclasses.replace(result, error="ValueError: the cached arrays cannot be read back")
            if not result.ok or arrays is None:
                failures.append({"talk": row["talk"], "error": result.error})
                outcome["failed"] += 1
                continue
            outcome[f"{result.value['status']}_this_run"] += 1  # computed or cached: a fact of this run
            if result.value["status"] == "computed":
                compute += result.value["compute_seconds"]
                seconds_this_run += row["duration_s"] or 0.0
            values[first : first + count] = arrays["values"]
            missing[first : first + count] = arrays["missing"]
            has_audio[first : first + count] = True
            counts[first : first + count] = np.diff(arrays["offsets"])
            pieces.append(np.asarray(arrays["mfcc"], np.float32))
            seconds += row["duration_s"] or 0.0
        failures.sort(key=lambda failure: failure["talk"])
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
            # this run's talks only (cached talks cost nothing)
            "audio_minutes_computed_this_run": round(seconds_this_run / 60, 2),
            "compute_seconds": round(compute, 1),
            "compute_seconds_per_audio_minute": (round(compute / (seconds_this_run / 60), 3) if seconds_this_run
                                                 else None),
            "seconds_assembling": round(time.perf_counter() - split_started, 1),
        }
        write_json(target / "report.json", split_run_facts(info)[0])  # the output: no run times
        report_splits[split] = info
    report = {
        "features": list(FEATURE_NAMES),
        "neutral_values": dict(NEUTRAL_VALUES),
        "config": settings["config"],
        "splits": report_splits,
        "out_dir": str(out_dir),
        "engine": describe_engine(workers, scheduler),
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_json(out_dir / "features_report.json", split_run_facts(report)[0])
    return report
