"""Aligning a whole folder of talks: resumable, in parallel, the same bytes whatever the engine.

    python -m aligner batch AUDIO_DIR TRANSCRIPT_DIR -o OUT_DIR [--workers N] [--dask ADDRESS] [--backend B]

    from aligner.batch import align_batch
    report = align_batch("audio/", "transcripts/", "alignments/", workers=4)

Every ``NAME.wav``, ``NAME.flac`` or ``NAME.sph`` of ``audio_dir`` (any letter case of the suffix; hidden files
are ignored) with its ``NAME.txt`` in ``transcript_dir`` gives ``out_dir/NAME.tsv``, in the format of the
single-file command (:mod:`aligner.cli`: header ``word<TAB>start<TAB>end``, one row per benchmark token of the
transcript, empty cells for a word not placed confidently, or its estimate with ``estimates``), and beside it
``out_dir/NAME.align.json``, the talk's completion record.

Resuming: a talk is *complete* when its record holds the fingerprint of its inputs -- SHA-256 of the audio file's
bytes, the transcript's tokens, the backend and all its settings, ``estimates``, :data:`BATCH_VERSION` -- and the
SHA-256 of the TSV as it is on disk. A complete talk is skipped; anything else is aligned again (a changed
transcript or recording, other settings, a TSV that was edited or cut short). Both files are written atomically
(:mod:`corpus.io`), the TSV first, so a run stopped at any point resumes where it stopped. Nothing in either file
depends on time, worker or engine: the same inputs give the same bytes with 1 or 16 workers, local processes or
a Dask cluster (:mod:`executor.tasks`).

Errors: a talk that fails (unreadable or silent audio, a transcript that is missing, not UTF-8 or empty, two
recordings with one name, a backend error) is recorded with its error, naming the talk, and the others are
aligned all the same; the command then exits 1. A talk where no more than ``min_placed`` of the words were
placed is written and reported (:func:`aligner.types.too_few_placed`); the command exits 3 when no talk failed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from executor.records import ItemResult, StatusReport, read_record
from executor.tasks import describe_engine, run_tasks
from aligner.registry import DEFAULT_BACKEND, align, backend_names
from aligner.transcript import InputError, read_transcript
from aligner.types import MOSTLY_UNPLACED, AlignConfig, too_few_placed
from corpus.io import atomic_write_text, file_sha256
from corpus.text import tokenize_for_inference
from corpus.timings import write_word_tsv

__all__ = ["AUDIO_SUFFIXES", "BATCH_VERSION", "RECORD_SUFFIX", "BatchReport", "TalkResult", "align_batch",
           "find_talks"]

#: Audio files the batch reads (soundfile reads each; SPH must be uncompressed NIST SPHERE, as TED-LIUM's is).
AUDIO_SUFFIXES: tuple[str, ...] = (".wav", ".flac", ".sph")
#: The completion record beside each ``NAME.tsv``.
RECORD_SUFFIX = ".align.json"
#: Bumped whenever the output of the same inputs would change (part of the fingerprint).
BATCH_VERSION = 1


@dataclass(frozen=True)
class _Task:
    name: str
    audio: str
    transcript: str
    output: str
    record: str
    backend: str
    config: AlignConfig
    estimates: bool


@dataclass
class TalkResult(ItemResult):
    """One talk of a batch: ``status`` is ``aligned`` (this run), ``skipped`` (complete already) or ``failed``."""

    words: int = 0
    placed: int = 0
    audio_seconds: float = 0.0
    compute_seconds: float = 0.0


@dataclass
class BatchReport(StatusReport):
    """What :func:`align_batch` did, talk by talk (sorted by name)."""

    out_dir: str
    backend: str
    engine: str
    min_placed: float | None
    talks: list[TalkResult] = field(default_factory=list)
    transcripts_without_audio: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def results(self) -> list[TalkResult]:
        return self.talks

    @property
    def below_threshold(self) -> list[TalkResult]:
        """Talks written but with too few words placed (``min_placed``)."""
        return [talk for talk in self.talks if talk.status != "failed"
                and too_few_placed(talk.placed, talk.words, self.min_placed)]

    @property
    def mostly_unplaced(self) -> list[TalkResult]:
        return [talk for talk in self.talks if talk.status != "failed"
                and too_few_placed(talk.placed, talk.words, MOSTLY_UNPLACED)]

    def exit_status(self) -> int:
        """0 all done; 1 a talk failed; 3 none failed but some placed too few words."""
        if self.failed:
            return 1
        return 3 if self.below_threshold else 0

    def to_dict(self) -> dict[str, Any]:
        audio = sum(t.audio_seconds for t in self.talks if t.status == "aligned")
        compute = sum(t.compute_seconds for t in self.talks if t.status == "aligned")
        return {
            "out_dir": self.out_dir, "backend": self.backend, "engine": self.engine, "min_placed": self.min_placed,
            "talks": len(self.talks),
            "counts": self.counts(("aligned", "skipped", "failed")),
            "words": sum(t.words for t in self.talks), "placed": sum(t.placed for t in self.talks),
            "audio_minutes_aligned_this_run": round(audio / 60, 3),
            "compute_seconds_this_run": round(compute, 3),
            "compute_seconds_per_audio_minute": round(compute / (audio / 60), 3) if audio else None,
            "seconds": round(self.seconds, 3),
            "failed": [{"talk": t.name, "error": t.error} for t in self.failed],
            "below_min_placed": [t.name for t in self.below_threshold],
            "transcripts_without_audio": list(self.transcripts_without_audio),
            "per_talk": [t.to_dict() for t in self.talks],
        }


def find_talks(audio_dir: str | os.PathLike, transcript_dir: str | os.PathLike
               ) -> tuple[dict[str, tuple[Path, Path]], dict[str, str], list[str]]:
    """The talks of a batch: ``(talks, problems, orphans)``.

    ``talks``: name -> (audio file, transcript file) for every name with exactly one audio file and its
    transcript; ``problems``: name -> why it cannot be aligned (no transcript, several audio files);
    ``orphans``: transcripts without audio (reported, not an error). Raises :class:`InputError` when a folder is
    missing.
    """
    audio_dir, transcript_dir = Path(audio_dir), Path(transcript_dir)
    for folder, what in ((audio_dir, "audio"), (transcript_dir, "transcript")):
        if not folder.is_dir():
            raise InputError(f"{what} folder not found: {folder}")
    recordings: dict[str, list[Path]] = {}
    for path in sorted(audio_dir.iterdir()):
        if path.name.startswith(".") or path.suffix.lower() not in AUDIO_SUFFIXES or not path.is_file():
            continue
        recordings.setdefault(path.stem, []).append(path)
    transcripts = {path.stem: path for path in sorted(transcript_dir.iterdir())
                   if path.suffix == ".txt" and not path.name.startswith(".") and path.is_file()}
    talks: dict[str, tuple[Path, Path]] = {}
    problems: dict[str, str] = {}
    for name, paths in sorted(recordings.items()):
        if len(paths) > 1:
            problems[name] = f"talk {name}: several audio files: {', '.join(p.name for p in paths)}"
        elif name not in transcripts:
            problems[name] = f"talk {name}: no transcript {transcript_dir / (name + '.txt')}"
        else:
            talks[name] = (paths[0], transcripts[name])
    orphans = sorted(set(transcripts) - set(recordings))
    return talks, problems, orphans


def _align_talk(task: _Task) -> dict[str, Any]:
    """One talk (runs in a worker): skip it when complete, else align it and write its TSV and record."""
    audio, output, record_path = Path(task.audio), Path(task.output), Path(task.record)
    words = tokenize_for_inference(read_transcript(task.transcript))
    if not words:
        raise InputError(f"transcript {task.transcript} has no words")
    if not audio.is_file():
        raise InputError(f"audio file not found: {audio}")
    inputs = {"version": BATCH_VERSION, "backend": task.backend, "config": dataclasses.asdict(task.config),
              "estimates": task.estimates, "audio_sha256": file_sha256(audio),
              "tokens_sha256": hashlib.sha256("\n".join(words).encode("utf-8")).hexdigest()}
    fingerprint = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode("utf-8")).hexdigest()
    record = read_record(record_path)
    if (record is not None and record.get("fingerprint") == fingerprint and output.is_file()
            and record.get("tsv_sha256") == file_sha256(output)):
        return {"status": "skipped", "words": record["words"], "placed": record["placed"],
                "audio_seconds": record["audio_seconds"], "compute_seconds": 0.0}
    record_path.unlink(missing_ok=True)  # the completion record goes first
    began = time.perf_counter()
    timings = align(audio, words, config=task.config, backend=task.backend)
    compute = time.perf_counter() - began
    write_word_tsv(timings, output, unaligned_times=task.estimates)
    import soundfile

    info = soundfile.info(str(audio))
    record = {"talk": task.name, "audio": audio.name, "backend": task.backend, "fingerprint": fingerprint,
              "tsv_sha256": file_sha256(output), "words": len(words),
              "placed": sum(bool(t.aligned) for t in timings),
              "audio_seconds": round(info.frames / info.samplerate, 3), "version": BATCH_VERSION}
    atomic_write_text(record_path, json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return {"status": "aligned", "words": record["words"], "placed": record["placed"],
            "audio_seconds": record["audio_seconds"], "compute_seconds": round(compute, 3)}


def align_batch(
    audio_dir: str | os.PathLike,
    transcript_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    workers: int | None = 1,
    scheduler: str | None = None,
    backend: str = DEFAULT_BACKEND,
    config: AlignConfig | Mapping[str, Any] | None = None,
    estimates: bool = False,
    min_placed: float | None = MOSTLY_UNPLACED,
    progress: bool = False,
) -> BatchReport:
    """Align every talk of ``audio_dir`` with its transcript into ``out_dir`` (see the module docstring).

    ``workers``/``scheduler``: how to run (:func:`executor.tasks.run_tasks`: 1 = this process, N local
    processes, None = every core; a Dask scheduler address instead); ``backend`` and ``config`` (an
    :class:`AlignConfig` or its fields): the aligner; ``min_placed``: the share of placed words below which a
    talk is reported (:meth:`BatchReport.exit_status`). Raises :class:`InputError` for a missing folder or an
    unknown backend, :class:`executor.tasks.SchedulerUnavailable` for a Dask scheduler that cannot be reached; a
    talk's own problem is recorded in the report instead.
    """
    started = time.perf_counter()
    if backend not in backend_names():
        raise InputError(f"unknown backend {backend!r}; known: {', '.join(backend_names())}")
    if config is None:
        config = AlignConfig()
    elif not isinstance(config, AlignConfig):
        values = dict(config)
        if values.get("mfa_args") is not None:
            values["mfa_args"] = tuple(values["mfa_args"])
        config = AlignConfig(**values)
    out = Path(out_dir)
    talks, problems, orphans = find_talks(audio_dir, transcript_dir)
    out.mkdir(parents=True, exist_ok=True)
    tasks = [_Task(name, str(audio), str(transcript), str(out / f"{name}.tsv"), str(out / f"{name}{RECORD_SUFFIX}"),
                   backend, config, estimates)
             for name, (audio, transcript) in talks.items()]
    outcomes = run_tasks(_align_talk, tasks, names=[task.name for task in tasks], workers=workers,
                         scheduler=scheduler, progress=progress, desc="align")
    results = [TalkResult(name, "failed", error=message) for name, message in problems.items()]
    for task, outcome in zip(tasks, outcomes):
        if outcome.ok:
            results.append(TalkResult(task.name, output=task.output, **outcome.value))
        else:
            Path(task.record).unlink(missing_ok=True)  # no stale record passes for this talk's
            results.append(TalkResult(task.name, "failed", error=f"talk {task.name}: {outcome.error}"))
    results.sort(key=lambda result: result.name)
    return BatchReport(str(out), backend, describe_engine(workers, scheduler), min_placed, results, orphans,
                       time.perf_counter() - started)
