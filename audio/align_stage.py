"""The ``align`` stage as a library function: forced alignment of every talk that has audio.

Wrapped by ``pipeline/align.py`` (which reads the arguments from ``params.yaml``); resumable talk by talk, a
failing talk is recorded with its error and the others carry on (the stage then exits non-zero, so that DVC
does not record it as done). A talk fails when its audio is unusable (missing, silent, a WAV cut short of
what its header states) and, with ``min_placed_share`` in the backend settings, when fewer of its words
were placed (a transcript that is not the audio's, a header stating the wrong sample rate); talks where most
words stayed unplaced are listed in the report whatever the threshold (``talks_mostly_unplaced``).

:func:`align_talks` -> ``<alignments_dir>/<split>/<stem>.parquet`` (+ ``.TextGrid``, ``.json``)
    Aligns every talk with audio: its prepared tokens on its WAV with :func:`aligner.align`. A talk is skipped
    when its ``.json`` holds the same fingerprint (SHA-256 of the WAV's bytes, the token list, the backend and
    its settings, :data:`STAGE_VERSION`; for ASR also the reference alignment it inherits from). ASR: the ASR
    tokens are aligned on the talk's (reference) audio themselves; a token the aligner could not place
    confidently inherits the time of the reference token it corresponds to in a word-level alignment of the
    two transcripts (:func:`aligner.inherit_timings`), and the Parquet's ``source`` column says ``own``,
    ``inherited`` or ``none`` (no time: ``aligned`` false). The report scores the aligned material against
    the engine's own word timings (:mod:`aligner.evaluation`): boundary error median/mean/within 20 and 50 ms,
    at pauses and at word-to-word junctions.

    Anchors: a talk with ``<stem>.anchors.tsv`` beside its WAV (the TED-LIUM source writes them from its STM
    segments, :mod:`audio.tedlium`) is aligned chunk by chunk, each chunk on its own span of the audio
    (:func:`aligner.anchors.align_anchored`); the file's SHA-256 joins the fingerprint. ASR talks share the
    ref audio but not its tokens, so they are aligned without anchors (and inherit from the ref alignment).

    In parallel: the talks go through :func:`executor.tasks.run_tasks` (``workers`` local processes, or a
    Dask scheduler), ref/dev/train first, then ASR. Each talk's outputs depend on its own inputs only, so they
    are the same, byte for byte, whatever the engine or worker count; the report is rebuilt from the outputs
    in split and token order, and its compute figures (``compute_seconds``, per audio minute) are this run's.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aligner import AlignConfig, align, asr_mapping, inherit_timings, write_alignment_table, write_textgrid
from aligner.anchors import align_anchored
from aligner.evaluation import boundary_errors, pause_flags, summarise_errors
from executor.tasks import describe_engine, run_tasks
from aligner.types import mostly_unplaced as mostly_unplaced_
from audio.stage_common import (ASR_SOURCES, AUDIO_SPLITS, STAGE_VERSION, error_text, read_alignment, read_json,
                                read_split, sha256_file, sha256_json, tokens_digest, write_json)
from audio.synthesis import talk_stem
from corpus.anchors import anchors_path_for, read_anchors
from corpus.io import split_run_facts
from corpus.talks_table import TALKS_TABLE, read_talks_table
from corpus.timings import read_engine_timings

__all__ = ["align_talks"]


def _align_config(backend_config: Mapping[str, Any]):
    known = {f.name for f in dataclasses.fields(AlignConfig)}
    unknown = sorted(set(backend_config) - known)
    if unknown:
        raise ValueError(f"backend_config: unknown settings {unknown}; known: {sorted(known)}")
    values = dict(backend_config)
    if "mfa_args" in values and values["mfa_args"] is not None:
        values["mfa_args"] = tuple(values["mfa_args"])
    return AlignConfig(**values)


def _alignment_done(json_path: Path, parquet: Path, fingerprint: str, tokens: int) -> bool:
    meta = read_json(json_path)
    if meta is None or meta.get("fingerprint") != fingerprint or meta.get("tokens") != tokens:
        return False
    if not parquet.is_file():
        return False
    try:
        import pyarrow.parquet as pq  # deferred like pandas: a heavy import most callers never need

        return pq.ParquetFile(parquet).metadata.num_rows == tokens
    except Exception:  # noqa: BLE001 -- a damaged file is simply redone
        return False


@dataclass(frozen=True)
class _Task:
    """One talk to align, everything a worker needs (plain, picklable values)."""

    split: str
    talk: str
    wav: str  # absolute, or relative to the working directory
    wav_name: str  # as the talks table gives it
    duration_s: float | None
    words: tuple[str, ...]
    out_dir: str
    backend: str
    config: AlignConfig
    settings: dict[str, Any]
    anchors: str | None = None
    reference_alignment: str | None = None  # asr: the fingerprint of the ref talk's alignment it inherits from
    ref_words: tuple[str, ...] | None = None
    ref_parquet: str | None = None


def _align_task(task: _Task) -> dict[str, Any]:
    """Align one talk (runs in a worker): skipped when its outputs hold the same fingerprint, else aligned and
    written (Parquet, TextGrid, then the ``.json`` completion marker). Returns ``status`` and ``compute_seconds``."""
    stem = talk_stem(task.talk)
    target = Path(task.out_dir) / task.split
    parquet, grid, meta_path = target / f"{stem}.parquet", target / f"{stem}.TextGrid", target / f"{stem}.json"
    words = list(task.words)
    wav = Path(task.wav)
    try:
        inputs: dict[str, Any] = {**task.settings, "wav_sha256": sha256_file(wav), "tokens": tokens_digest(words)}
        if task.split == "asr":
            inputs["reference_alignment"] = task.reference_alignment
        anchors = Path(task.anchors) if task.anchors else None
        if anchors is not None:
            inputs["anchors_sha256"] = sha256_file(anchors)
        fingerprint = sha256_json(inputs)
        if _alignment_done(meta_path, parquet, fingerprint, len(words)):
            return {"status": "skipped", "compute_seconds": 0.0}
        meta_path.unlink(missing_ok=True)  # the completion marker goes first
        began = time.perf_counter()
        if anchors is not None:
            timings = align_anchored(wav, words, read_anchors(anchors), config=task.config, backend=task.backend)
        else:
            timings = align(wav, words, config=task.config, backend=task.backend)
        sources = ["own" if t.aligned else "none" for t in timings]
        if task.split == "asr":
            ref_timings = read_alignment(Path(task.ref_parquet))[0] if task.ref_parquet else None
            timings, sources = inherit_timings(words, timings, list(task.ref_words or ()), ref_timings)
        elapsed = time.perf_counter() - began
        write_alignment_table(timings, task.talk, parquet, sources=sources)
        write_textgrid(timings, grid, task.duration_s or 0.0)
        meta = {
            "talk": task.talk, "split": task.split, "fingerprint": fingerprint, "tokens": len(words),
            "aligned_tokens": sum(bool(t.aligned) for t in timings), "duration_s": task.duration_s,
            "wav": task.wav_name, "backend": task.backend,
            "sources": {name: sources.count(name) for name in ASR_SOURCES},
            "reference_alignment": inputs.get("reference_alignment"),
            "anchor_chunks": len(read_anchors(anchors)) if anchors is not None else None,
        }
        write_json(meta_path, meta)
        return {"status": "aligned", "compute_seconds": round(elapsed, 3)}
    except Exception:
        meta_path.unlink(missing_ok=True)  # no stale alignment passes for this talk's
        raise


def align_talks(
    audio_dir: str | Path,
    prepared_dir: str | Path,
    out_dir: str | Path,
    *,
    backend: str,
    backend_config: Mapping[str, Any],
    workers: int | None = 1,
    scheduler: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Align every talk with audio in ``<audio_dir>/talks.tsv`` (see the module docstring); returns the report.

    ``backend``: an :func:`aligner.backend_names` name; ``backend_config``: fields of
    :class:`aligner.AlignConfig` (the rest keep its defaults). ``workers``/``scheduler``: how the talks are run
    (:func:`executor.tasks.run_tasks`: 1 = here, N local processes, None = every core, or the address of a
    Dask scheduler); the outputs are the same, byte for byte, whichever. The ``ref`` talks (and ``dev``,
    ``train``) go first, then the ``asr`` talks, which inherit from the ``ref`` alignments.
    """
    started = time.perf_counter()
    audio_dir, prepared_dir, out_dir = Path(audio_dir), Path(prepared_dir), Path(out_dir)
    config = _align_config(backend_config)
    settings = {"backend": backend, "config": dataclasses.asdict(config), "version": STAGE_VERSION}
    rows = read_talks_table(audio_dir / TALKS_TABLE)
    order = {split: position for position, split in enumerate(AUDIO_SPLITS)}
    rows = sorted(rows, key=lambda row: (order.get(row["split"], len(order)), row["first_token"]))
    words_of: dict[str, list[str]] = {}
    status: dict[tuple[str, str], dict[str, Any]] = {}
    todo = [row for row in rows if row["status"] == "ok"]
    engine = {"workers": workers, "scheduler": scheduler, "progress": progress}

    def words_for(row: Mapping[str, Any]) -> list[str]:
        split = row["split"]
        if split not in words_of:
            words_of[split] = read_split(prepared_dir, split).words
        words = words_of[split][row["first_token"] : row["first_token"] + row["tokens"]]
        if len(words) != row["tokens"]:
            raise ValueError(f"talk range {row['first_token']}+{row['tokens']} lies outside {split}.tsv")
        return words

    def task_for(row: Mapping[str, Any], **extra: Any) -> _Task:
        wav = audio_dir / row["wav"]
        anchors = anchors_path_for(wav)
        return _Task(row["split"], row["talk"], str(wav), row["wav"], row["duration_s"], tuple(words_for(row)),
                     str(out_dir), backend, config, settings,
                     anchors=str(anchors) if row["split"] != "asr" and anchors.is_file() else None, **extra)

    def run(phase: list[Mapping[str, Any]], make: Any, desc: str) -> None:
        tasks, named = [], []
        for row in phase:
            record: dict[str, Any] = {"split": row["split"], "talk": row["talk"]}
            status[(row["split"], row["talk"])] = record
            try:
                tasks.append(make(row))
                named.append(record)
            except Exception as error:  # noqa: BLE001 -- recorded per talk, the others carry on
                record.update(status="failed", error=error_text(error))
                (out_dir / row["split"] / f"{talk_stem(row['talk'])}.json").unlink(missing_ok=True)
        outcomes = run_tasks(_align_task, tasks, names=[f"{r['split']}/{r['talk']}" for r in named], desc=desc,
                             **engine)
        for record, outcome in zip(named, outcomes):
            if outcome.ok:
                record.update(outcome.value)
            else:
                record.update(status="failed", error=outcome.error)

    # ref, dev and train first; then asr, which inherits from the ref alignments
    run([row for row in todo if row["split"] != "asr"], task_for, "alignment")

    def asr_task(row: Mapping[str, Any]) -> _Task:
        stem = talk_stem(row["talk"])
        ref_row = next((r for r in rows if r["split"] == "ref" and r["talk"] == row["talk"]), None)
        ref_meta = read_json(out_dir / "ref" / f"{stem}.json") if ref_row else None
        ref_done = ref_meta is not None and status.get(("ref", row["talk"]), {}).get("status") in ("aligned", "skipped")
        if not ref_done:
            return task_for(row)
        return task_for(row, reference_alignment=ref_meta["fingerprint"], ref_words=tuple(words_for(ref_row)),
                        ref_parquet=str(out_dir / "ref" / f"{stem}.parquet"))

    run([row for row in todo if row["split"] == "asr"], asr_task, "alignment asr")
    report = _alignment_report(rows, status, audio_dir, prepared_dir, out_dir, words_of)
    report.update(backend=backend, config=settings["config"], out_dir=str(out_dir),
                  engine=describe_engine(workers, scheduler), seconds=round(time.perf_counter() - started, 1))
    write_json(out_dir / "alignment_report.json", split_run_facts(report)[0])  # the output: no run times
    return report


def _alignment_report(
    rows: Sequence[Mapping[str, Any]],
    status: Mapping[tuple[str, str], Mapping[str, Any]],
    audio_dir: Path,
    prepared_dir: Path,
    out_dir: Path,
    words_of: dict[str, list[str]],
) -> dict[str, Any]:
    splits: dict[str, Any] = {}
    overall: dict[str, list[float]] = {"all": [], "pause": [], "junction": []}
    engine_cache: dict[tuple[str, str], tuple[list[Any], list[bool], list[bool]] | None] = {}

    def engine_reference(split: str, row: Mapping[str, Any]):
        key = (split, row["talk"])
        if key not in engine_cache:
            reference = None
            tsv = audio_dir / split / f"{talk_stem(row['talk'])}.timings.tsv"
            if row.get("voice") not in ("real", "tedlium") and tsv.is_file():
                timings = read_engine_timings(tsv)
                before, after = pause_flags(timings, row["duration_s"] or 0.0)
                reference = (timings, before, after)
            engine_cache[key] = reference
        return engine_cache[key]

    for split in AUDIO_SPLITS:
        mine = [row for row in rows if row["split"] == split]
        if not mine:
            continue
        with_audio = [row for row in mine if row["status"] == "ok"]
        done = [row for row in with_audio
                if status.get((split, row["talk"]), {}).get("status") in ("aligned", "skipped")]
        errors: dict[str, list[float]] = {"all": [], "pause": [], "junction": []}
        asr_counts = {name: 0 for name in ASR_SOURCES}
        asr_errors: dict[str, list[float]] = {"own": [], "inherited": []}
        tokens = aligned = compute = seconds = seconds_this_run = 0.0
        scored_talks = 0
        mostly_unplaced = []
        for row in done:
            stem = talk_stem(row["talk"])
            timings, sources = read_alignment(out_dir / split / f"{stem}.parquet")
            tokens += len(timings)
            placed = sum(t.aligned for t in timings)
            aligned += placed
            if mostly_unplaced_(int(placed), len(timings)):
                mostly_unplaced.append({"talk": row["talk"], "placed": int(placed), "tokens": len(timings)})
            record = status.get((split, row["talk"]), {})
            if record.get("status") == "aligned":
                compute += float(record.get("compute_seconds") or 0.0)
                seconds_this_run += row["duration_s"] or 0.0
            seconds += row["duration_s"] or 0.0
            if split == "asr":
                for name in sources:
                    asr_counts[name] = asr_counts.get(name, 0) + 1
                ref_row = next((r for r in rows if r["split"] == "ref" and r["talk"] == row["talk"]), None)
                reference = engine_reference("ref", ref_row) if ref_row else None
                if reference is not None:
                    if "ref" not in words_of:
                        words_of["ref"] = read_split(prepared_dir, "ref").words
                    ref_words = words_of["ref"][ref_row["first_token"] : ref_row["first_token"] + ref_row["tokens"]]
                    mapping = asr_mapping([t.word for t in timings], ref_words)
                    ref_timings = reference[0]
                    for index, target in enumerate(mapping):
                        if target is None or target[1] != "match" or sources[index] not in asr_errors:
                            continue
                        ref, hyp = ref_timings[target[0]], timings[index]
                        if ref.aligned and hyp.aligned and hyp.has_time:
                            asr_errors[sources[index]] += [abs(hyp.start - ref.start), abs(hyp.end - ref.end)]
                continue
            reference = engine_reference(split, row)
            if reference is None:
                continue
            scored_talks += 1
            grouped = boundary_errors(reference[0], timings, reference[1], reference[2])
            for name, values in grouped.items():
                errors[name] += values
                overall[name] += values
        info: dict[str, Any] = {
            "talks_with_audio": len(with_audio),
            "talks_aligned": len(done),
            "talks_aligned_this_run": sum(status.get((split, r["talk"]), {}).get("status") == "aligned" for r in done),
            "talks_failed": [
                {"talk": row["talk"], "error": status[(split, row["talk"])].get("error")}
                for row in with_audio if status.get((split, row["talk"]), {}).get("status") == "failed"
            ],
            "talks_mostly_unplaced": mostly_unplaced,
            "hours_aligned": round(seconds / 3600, 4),
            "tokens_in_aligned_talks": int(tokens),
            "tokens_aligned": int(aligned),
            "share_aligned": round(aligned / tokens, 4) if tokens else None,
            # this run's talks only (the talks skipped as done cost nothing)
            "audio_minutes_aligned_this_run": round(seconds_this_run / 60, 2),
            "compute_seconds": round(compute, 1),
            "compute_seconds_per_audio_minute": (round(compute / (seconds_this_run / 60), 3) if seconds_this_run
                                                 else None),
        }
        if split == "asr":
            info["timing_sources"] = asr_counts
            info["timing_shares"] = {k: round(v / tokens, 4) if tokens else None for k, v in asr_counts.items()}
            info["boundary_error_vs_engine_of_matched_ref_token"] = {
                name: summarise_errors(values) for name, values in asr_errors.items()
            }
        else:
            info["talks_with_engine_timings"] = scored_talks
            info["boundary_error"] = {name: summarise_errors(values) for name, values in errors.items()}
        splits[split] = info
    return {
        "hours_aligned_total": round(sum(info["hours_aligned"] for s, info in splits.items() if s != "asr"), 4),
        "boundary_error": {name: summarise_errors(values) for name, values in overall.items()},
        "splits": splits,
        "failed": [dict(record) for record in status.values() if record.get("status") == "failed"],
    }
