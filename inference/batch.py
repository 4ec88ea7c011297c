"""``punctuate`` over a corpus: many transcripts, the model loaded once per process, resumable, in parallel.

    punctuate corpus/ more/talk.txt -o punctuated/ [--timings-dir times/] [--workers N | --dask ADDRESS]

    from inference.batch import punctuate_batch
    report = punctuate_batch(["corpus/"], "punctuated/", model="artifacts/model", workers=2, ...)

Inputs and their word times: :mod:`inference.batch_inputs`. Each transcript ``NAME`` (its path relative to the
folder given) gives ``OUT_DIR/NAME`` in the format asked for (``.tsv`` for ``iwslt``, ``.json`` for ``json``
in place of its extension; :mod:`inference.outputs`), the very bytes the single-file ``punctuate`` writes for
it, and a completion record ``OUT_DIR/.punctuate/NAME.json`` (hidden: the output folder mirrors the inputs).

Work: the transcripts still to do are cut, in name order, into tasks of about ``task_words`` words; a task's
transcripts are read, checked and decoded (:meth:`inference.punctuator.Punctuator.punctuate_prepared`: each in
the batches it gets alone, or with ``share_batches`` all of them filling the model's batches together, faster
on a GPU but not always the same bytes, see there), then its outputs are written. The tasks run through the
project's executor (:func:`executor.run_tasks`: this process, ``workers`` local processes, or a Dask cluster);
each process loads the model once and keeps it for every task it is given.

Resuming: a transcript is *complete* when its record holds the fingerprint of what made it -- SHA-256 of the
transcript's bytes, of its word times' bytes (the utterance's lines, in a corpus's CTM) and of the model
directory's files, the format, the capitals setting, :data:`BATCH_VERSION` -- and the SHA-256 of its output as
it is on disk. A complete transcript is skipped; anything else is punctuated again (a changed transcript,
timings or model, another format, an output edited or cut short). Outputs and records are written atomically
(:mod:`corpus.io`), the output first, so a run stopped at any point resumes where it stopped. Nothing in either
depends on time, worker or engine (the device aside: a GPU's arithmetic is not the CPU's).

Errors: a transcript that cannot be read, is not UTF-8, has no word times or times that are not its words, or
whose output cannot be written, is reported with the reason (naming the file, and the line where there is one)
and the others are finished all the same (:meth:`BatchReport.exit_status`: 1). A model that cannot be loaded
stops the batch (:class:`ModelUnavailable`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from corpus.io import atomic_write_text, file_sha256
from corpus.timings import TimingsFormatError
from executor import available_cores, describe_engine, resolve_workers, run_tasks
from executor.records import ItemResult, StatusReport, read_record
from experiments.numerics import regime_facts
from inference.batch_inputs import TimingsFinder, Transcript, TranscriptError, decode_text, find_transcripts
from inference.outputs import FORMATS, format_punctuated
from inference.speech_input import TimingsMismatchError, TimingsSource, read_timings

__all__ = ["BATCH_VERSION", "STATE_DIR", "BatchReport", "FileResult", "ModelUnavailable", "model_fingerprint",
           "output_name", "punctuate_batch"]

#: Bumped whenever the output of the same inputs would change (part of the fingerprint).
BATCH_VERSION = 1
#: The folder of completion records inside the output folder.
STATE_DIR = ".punctuate"


class ModelUnavailable(RuntimeError):
    """The model directory cannot be loaded (a missing or damaged file, a device this machine lacks); the
    message says which file or device."""


@dataclass(frozen=True)
class _Job:
    name: str
    source: str
    output: str
    record: str
    timings: TimingsSource | None
    #: the timings' bytes as the plan read them for the resume fingerprint: the worker parses these, so that each
    #: timings file is read once per transcript (small: a talk's word times are kilobytes)
    timings_bytes: bytes | None = None


@dataclass(frozen=True)
class _Settings:
    """How every task punctuates: the model, where it runs, what is written."""

    model: str
    model_sha256: str
    device: str
    output_format: str
    capitalise: bool
    batch_size: int
    share_batches: bool
    threads: int | None  # torch threads of a worker process (None: as it is)
    run: str  # this batch's id: a model that failed to load is tried again by the next batch


@dataclass(frozen=True)
class _Task:
    settings: _Settings
    jobs: tuple[_Job, ...]


@dataclass
class FileResult(ItemResult):
    """One transcript of a batch: ``status`` is ``punctuated`` (this run), ``skipped`` (complete already) or
    ``failed`` (``error`` says why, naming the file)."""

    words: int = 0


@dataclass
class BatchReport(StatusReport):
    """What :func:`punctuate_batch` did, transcript by transcript (sorted by name)."""

    out_dir: str
    model: str
    engine: str
    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def results(self) -> list[FileResult]:
        return self.files

    def exit_status(self) -> int:
        """0 every transcript done; 1 some failed (the others are done)."""
        return 1 if self.failed else 0

    def summary(self) -> str:
        counts = self.counts(("punctuated", "skipped", "failed"))
        words = sum(result.words for result in self.with_status("punctuated"))
        rate = f" ({words / self.seconds:,.0f} words/s)" if self.seconds > 0 and words else ""
        return (f"{len(self.files)} transcripts ({self.engine}): {counts['punctuated']} punctuated, "
                f"{counts['skipped']} skipped, {counts['failed']} failed; {words:,} words in {self.seconds:.1f} s"
                f"{rate}")

    def to_dict(self) -> dict[str, Any]:
        words = sum(result.words for result in self.with_status("punctuated"))
        return {"out_dir": self.out_dir, "model": self.model, "engine": self.engine, "transcripts": len(self.files),
                "counts": self.counts(("punctuated", "skipped", "failed")),
                "words_punctuated_this_run": words, "seconds": round(self.seconds, 3),
                "words_per_second": round(words / self.seconds, 1) if self.seconds > 0 else None,
                "failed": [{"transcript": r.name, "error": r.error} for r in self.failed],
                "per_transcript": [result.to_dict() for result in self.files]}


def output_name(name: str, output_format: str) -> str:
    """The output's path inside the output folder: the transcript's name, with the format's extension for
    ``iwslt`` and ``json`` (:data:`inference.outputs.FORMATS`)."""
    if output_format == "text":
        return name
    return str(PurePosixPath(name).with_suffix(FORMATS[output_format]))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()



def model_fingerprint(model_dir: str | os.PathLike) -> str:
    """SHA-256 over every file of a model directory (relative paths and contents): what a resumed batch compares."""
    root = Path(model_dir)
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        digest.update(file_sha256(path).encode("ascii"))
    return digest.hexdigest()


def _fingerprint(settings: _Settings, text: bytes, timings: TimingsSource | None, timings_bytes: bytes | None) -> str:
    inputs = {"version": BATCH_VERSION, "transcript_sha256": _sha256(text), "model_sha256": settings.model_sha256,
              "format": settings.output_format, "capitalise": settings.capitalise,
              "timings": None if timings is None else {"format": timings.format, "sha256": _sha256(timings_bytes)}}
    return _sha256(json.dumps(inputs, sort_keys=True).encode("utf-8"))


def _complete(job: _Job, fingerprint: str) -> dict[str, Any] | None:
    """The record of a transcript complete already (same fingerprint, output as recorded), else None."""
    record = read_record(job.record)
    output = Path(job.output)
    if (record is not None and record.get("fingerprint") == fingerprint and output.is_file()
            and record.get("output_sha256") == file_sha256(output)):
        return record
    return None


def _named(name: str, error: BaseException | str) -> str:
    """An error message that names the transcript (most already name its file, or its timings file and it)."""
    message = str(error).replace("\n", " | ")
    return message if name in message else f"{name}: {message}"


# -- in the worker -----------------------------------------------------------------------------------------

_LOADED: dict[tuple, Any] = {}  # settings -> Punctuator: one model per process, kept for every task it runs
_FAILED: dict[tuple, str] = {}  # settings and batch -> why the model did not load
_LOADING = threading.Lock()  # a Dask worker may run several tasks at once, in threads: one loads the model


def _punctuator(settings: _Settings):  # noqa: ANN202 - a Punctuator
    key = (settings.model, settings.model_sha256, settings.device, settings.batch_size)
    with _LOADING:
        if key in _LOADED:
            return _LOADED[key]
        if (*key, settings.run) in _FAILED:
            raise ModelUnavailable(_FAILED[(*key, settings.run)])
        from inference.device import DeviceUnavailable  # torch and the model code: only where it punctuates
        from inference.punctuator import Punctuator

        if settings.threads:
            import torch

            torch.set_num_threads(settings.threads)
        _LOADED.clear()
        try:
            punctuator = Punctuator(settings.model, device=settings.device, batch_size=settings.batch_size)
        except (DeviceUnavailable, OSError, ValueError) as error:
            _FAILED[(*key, settings.run)] = str(error)
            raise ModelUnavailable(str(error)) from error
        _LOADED[key] = punctuator
        return punctuator


def _read_job(job: _Job, settings: _Settings, punctuator):  # noqa: ANN001, ANN202
    """``(prepared text, fingerprint, words)`` of a transcript, read and checked against its timings."""
    data = Path(job.source).read_bytes()
    text = decode_text(data, job.source)
    timings_bytes = job.timings_bytes
    if job.timings is not None and timings_bytes is None:
        timings_bytes = job.timings.read_bytes()
    rows = read_timings(job.timings, timings_bytes) if job.timings is not None else None
    prepared = punctuator.prepare_text(text, timings=rows, transcript=job.source)
    return prepared, _fingerprint(settings, data, job.timings, timings_bytes), len(text.split())


def _punctuate_task(task: _Task) -> dict[str, Any]:
    """One task (runs in a worker): its transcripts read and checked, punctuated (a transcript at fault named, the
    others done), and written with their records."""
    settings = task.settings
    try:
        punctuator = _punctuator(settings)
    except ModelUnavailable as error:
        return {"model_error": str(error)}
    results: dict[str, dict[str, Any]] = {}

    def failed(job: _Job, message: str) -> None:
        results[job.name] = {"status": "failed", "error": _named(job.name, message)}

    ready = []
    for job in task.jobs:
        try:
            ready.append((job, *_read_job(job, settings, punctuator)))
        except OSError as error:
            failed(job, f"{error.filename or job.source}: cannot read ({error.strerror or error})")
        except (TranscriptError, TimingsFormatError, TimingsMismatchError, ValueError) as error:
            failed(job, str(error))
    options = {"capitalise": settings.capitalise, "probabilities": settings.output_format == "json"}
    try:
        done = punctuator.punctuate_prepared([prepared for _, prepared, _, _ in ready],
                                             share_batches=settings.share_batches, **options)
    except Exception:  # noqa: BLE001 -- find the transcript at fault: each alone, the others still done
        done = []
        for job, prepared, _, _ in ready:
            try:
                done.append(punctuator.punctuate_prepared([prepared], **options)[0])
            except Exception as error:  # noqa: BLE001 -- recorded for this transcript
                done.append(None)
                failed(job, f"{type(error).__name__}: {error}")
    for (job, _, fingerprint, words), result in zip(ready, done):
        if result is None:
            continue
        content = format_punctuated(result, settings.output_format)
        record = {"transcript": job.name, "fingerprint": fingerprint, "words": words, "version": BATCH_VERSION,
                  "output_sha256": _sha256(content.encode("utf-8"))}  # the bytes atomic_write_text writes
        try:
            Path(job.record).unlink(missing_ok=True)  # the record goes first: no stale one passes for the output
            atomic_write_text(job.output, content)
            atomic_write_text(job.record, json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        except OSError as error:
            failed(job, f"cannot write {job.output}: {error.strerror or error}")
            continue
        results[job.name] = {"status": "punctuated", "words": words}
    return {"files": [{"name": job.name, **results[job.name]} for job in task.jobs]}


# -- in the driver -----------------------------------------------------------------------------------------


def _tasks(jobs: list[tuple[_Job, int]], settings: _Settings, task_words: int) -> list[_Task]:
    """The jobs in order, cut into tasks of about ``task_words`` words (at least one transcript each)."""
    tasks, current, words = [], [], 0
    for job, count in jobs:
        current.append(job)
        words += count
        if words >= task_words:
            tasks.append(_Task(settings, tuple(current)))
            current, words = [], 0
    if current:
        tasks.append(_Task(settings, tuple(current)))
    return tasks


class _Progress:
    """Two bars on standard error, over transcripts and over words, advanced as each task finishes."""

    def __init__(self, enabled: bool, transcripts: int, words: int, done: int):
        self.bars = []
        if enabled:
            import sys

            from tqdm import tqdm

            self.bars = [tqdm(total=transcripts, initial=done, desc="transcripts", unit="file", position=0,
                              file=sys.stderr),
                         tqdm(total=words, desc="words", unit="word", unit_scale=True, position=1, file=sys.stderr)]

    def advance(self, transcripts: int, words: int) -> None:
        if self.bars:
            self.bars[0].update(transcripts)
            self.bars[1].update(words)

    def close(self) -> None:
        for bar in self.bars:
            bar.close()


def punctuate_batch(
    inputs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    model: str | os.PathLike,
    output_format: str,
    capitalise: bool,
    timings_dir: str | os.PathLike | None,
    timings_format: str | None,
    device: str,
    workers: int | None,
    scheduler: str | None,
    task_words: int,
    batch_size: int,
    share_batches: bool,
    progress: bool,
) -> BatchReport:
    """Punctuate every transcript of ``inputs`` into ``out_dir`` (module docstring).

    ``timings_dir``/``timings_format``: word times (:class:`inference.batch_inputs.TimingsFinder`);
    ``workers``/``scheduler``: how to run (:func:`executor.run_tasks`); ``task_words``: words per task;
    ``batch_size``: windows per model batch; ``share_batches``: the windows of a task's transcripts fill batches
    together; ``progress``: bars over transcripts and words. Raises
    ``FileNotFoundError``/``ValueError`` for a missing timings folder, an output folder that holds an input folder
    or cannot be made, :class:`ModelUnavailable` for a model that cannot be loaded (what was finished before it
    was found is kept), :class:`executor.SchedulerUnavailable` for a Dask scheduler that cannot be reached.
    """
    started = time.perf_counter()
    if output_format not in FORMATS:
        raise ValueError(f"unknown output format {output_format!r}; known: {', '.join(FORMATS)}")
    if not (Path(model) / "config.json").is_file():  # named before any work (loading it is the workers' job)
        raise ModelUnavailable(f"{model}: not a trained model directory (no config.json)")
    out = Path(out_dir)
    for given in inputs:
        if Path(given).is_dir() and Path(given).resolve().is_relative_to(out.resolve()):
            raise ValueError(f"the output folder {out} holds the input folder {given}: outputs would mix with "
                             "the transcripts; write them to a folder of their own")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"cannot make the output folder {out}: {error.strerror or error}") from error
    transcripts, problems = find_transcripts(inputs, exclude=out)
    finder = TimingsFinder(timings_dir, {t.stem for t in transcripts}, timings_format) if timings_dir else None
    settings = _Settings(str(model), model_fingerprint(model), device, output_format, capitalise, batch_size,
                         share_batches, None, uuid.uuid4().hex)
    results: dict[str, FileResult] = {}

    def fail(name: str, error: str) -> None:
        results[name] = FileResult(name, "failed", error=error)

    for name, problem in problems.items():
        fail(name, problem)
    targets: dict[str, list[str]] = {}
    for transcript in transcripts:
        targets.setdefault(output_name(transcript.name, output_format), []).append(transcript.name)
    jobs: list[tuple[_Job, int]] = []
    for transcript in transcripts:
        shared = targets[output_name(transcript.name, output_format)]
        if len(shared) > 1:
            fail(transcript.name, f"{transcript.name}: its output would be the one of {', '.join(shared)}")
            continue
        try:
            job, words, complete = _plan(transcript, out, settings, finder)
        except _Refused as error:
            fail(transcript.name, str(error))
            continue
        if complete:
            results[transcript.name] = FileResult(transcript.name, "skipped", words=words, output=job.output)
        else:
            jobs.append((job, words))
    tasks = _tasks(jobs, settings, task_words)
    count = 1 if scheduler else min(resolve_workers(workers), max(1, len(tasks)))
    if count > 1:  # the cores shared between the local processes (a Dask worker has its own setting)
        shared = dataclasses.replace(settings, threads=max(1, available_cores() // count))
        tasks = [dataclasses.replace(task, settings=shared) for task in tasks]
    bars = _Progress(progress, len(transcripts) + len(problems), sum(words for _, words in jobs), len(results))
    model_errors: list[str] = []

    def finished(index: int, outcome) -> None:  # noqa: ANN001 - an executor Outcome
        task = tasks[index]
        if not outcome.ok or "model_error" in outcome.value:
            if outcome.ok:
                model_errors.append(outcome.value["model_error"])
            for job in task.jobs:
                fail(job.name, outcome.value["model_error"] if outcome.ok else _named(job.name, outcome.error))
            bars.advance(len(task.jobs), 0)
            return
        words = 0
        for entry in outcome.value["files"]:
            job = next(job for job in task.jobs if job.name == entry["name"])
            if entry["status"] == "failed":
                fail(job.name, entry["error"])
            else:
                results[job.name] = FileResult(job.name, "punctuated", words=entry["words"], output=job.output)
                words += entry["words"]
        bars.advance(len(task.jobs), words)

    try:
        # a worker decodes under the client's numerics, or refuses (its labels would be another machine's bytes)
        run_tasks(_punctuate_task, tasks, names=[task.jobs[0].name for task in tasks], workers=count,
                  scheduler=scheduler, desc="punctuate", unit="task", on_outcome=finished, regime=regime_facts)
    finally:
        bars.close()
    if model_errors:
        raise ModelUnavailable(model_errors[0])
    report = BatchReport(str(out), str(model), describe_engine(count, scheduler),
                         [results[name] for name in sorted(results)], time.perf_counter() - started)
    return report


class _Refused(Exception):
    """A transcript that cannot be punctuated; the message names it and says why."""


def _plan(transcript: Transcript, out: Path, settings: _Settings, finder: TimingsFinder | None
          ) -> tuple[_Job, int, bool]:
    """``(job, words, complete)`` of a transcript: what to do for it, its words, and whether it is complete
    already (then ``words`` are its record's); :class:`_Refused` when it cannot be done."""
    name = transcript.name
    target = output_name(name, settings.output_format)
    job = _Job(name, transcript.path, str(out / target), str(out / STATE_DIR / f"{target}.json"), None)
    if Path(job.output).resolve() == Path(transcript.path).resolve():
        raise _Refused(f"{transcript.path}: its output would overwrite it")
    try:
        data = Path(transcript.path).read_bytes()
        words = len(decode_text(data, transcript.path).split())
        if finder is not None:
            job = dataclasses.replace(job, timings=finder.source_for(transcript))
        timings_bytes = job.timings.read_bytes() if job.timings is not None else None
    except OSError as error:
        raise _Refused(_named(name, f"{error.filename or transcript.path}: cannot read "
                                    f"({error.strerror or error})")) from error
    except (TranscriptError, TimingsFormatError) as error:
        raise _Refused(_named(name, error)) from error
    record = _complete(job, _fingerprint(settings, data, job.timings, timings_bytes))
    if record is not None:
        return job, int(record.get("words", 0)), True
    return dataclasses.replace(job, timings_bytes=timings_bytes), words, False
