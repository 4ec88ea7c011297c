"""The trainer's files and process hygiene: atomic checkpoints that keep the previous good one, a lock on the
training folder, and ending with the parent process.

A checkpoint is written to a temporary file, flushed to disk and renamed over the old one, after the old one
has been hard-linked to ``NAME.prev.pt``: at every moment ``NAME`` is a complete file, and the previous good
one is kept. :func:`load_checkpoint` reads ``NAME``, and when it is unreadable (truncated by a full disk, a
copy cut short, ...) warns naming the file and falls back to ``NAME.prev.pt``, then to nothing (``None``:
start afresh), never a traceback.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any, Callable

import torch

from embeddings.sources import file_sha256
from training.config import TrainConfig

log = logging.getLogger(__name__)

LOCK_FILE = "trainer.lock"
PREVIOUS_SUFFIX = ".prev.pt"


class TrainingFolderLocked(RuntimeError):
    """Another live trainer holds the training folder."""


def previous_path(path: Path) -> Path:
    """Where the previous good version of ``path`` is kept (``checkpoint.pt`` -> ``checkpoint.prev.pt``)."""
    return path.with_name(path.name[: -len(path.suffix)] + PREVIOUS_SUFFIX if path.suffix else path.name + ".prev")


def atomic_torch_save(obj: Any, path: Path, *, keep_previous: bool = True) -> None:
    """``torch.save`` to a temporary file renamed over ``path``; the replaced file is kept as its previous.

    Not :func:`corpus.io.atomic_path`: torch names the folder inside its zip after the file it writes
    (``best_model.pt.tmp`` -> ``best_model.pt/data.pkl``), so a randomly named temporary would make every
    ``model.pt`` (a copy of ``best_model.pt``) differ in bytes from run to run; the fixed name keeps them identical.
    """
    path = Path(path)
    temporary = path.with_suffix(path.suffix + ".tmp")
    torch.save(obj, temporary)
    with open(temporary, "rb") as handle:  # on disk before the rename makes it the current one
        os.fsync(handle.fileno())
    if keep_previous and path.exists():
        _replace_with_link(path, previous_path(path))
    os.replace(temporary, path)
    _fsync_folder(path.parent)


def _replace_with_link(source: Path, target: Path) -> None:
    """Make ``target`` the same file as ``source`` (hard link, atomically replacing ``target``; a copy where
    the file system has no hard links)."""
    staging = target.with_name(target.name + ".tmp")
    staging.unlink(missing_ok=True)
    try:
        os.link(source, staging)
    except OSError:
        import shutil

        shutil.copyfile(source, staging)
    os.replace(staging, target)


def _fsync_folder(folder: Path) -> None:
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(descriptor)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(descriptor)


def load_checkpoint(path: Path, *, map_location: Any = "cpu", weights_only: bool = False,
                    check: Callable[[Any], None] | None = None) -> tuple[Any, Path] | None:
    """``(content, file read)`` of the checkpoint ``path`` or, when it is unreadable, of its previous good
    version; ``None`` when neither exists or can be read. Each unreadable file is a warning naming it.

    ``check`` may raise on content that loads but is not what the caller expects (a missing key): that counts
    as unreadable too.
    """
    for candidate in (Path(path), previous_path(Path(path))):
        if not candidate.exists():
            continue
        try:
            content = torch.load(candidate, map_location=map_location, weights_only=weights_only)
            if check is not None:
                check(content)
        except Exception as error:  # a truncated zip, a bad pickle, a wrong structure: all mean "unusable"
            first_line = str(error).splitlines()[0] if str(error) else ""
            message = f"{candidate}: unreadable ({type(error).__name__}: {first_line})"
            log.warning("%s; %s", message, "trying the previous good one" if candidate == Path(path)
                        else "starting without it")
            continue
        if candidate != Path(path):
            log.warning("using %s, the previous good version of %s", candidate, path)
        return content, candidate
    return None


class TrainingLock:
    """An exclusive lock on a training folder while a trainer uses it (``with TrainingLock(folder): ...``).

    The lock is an ``flock`` on ``folder/trainer.lock``, which also holds the holder's pid: a second trainer
    gets :class:`TrainingFolderLocked` naming the folder and that pid. The kernel drops the lock when its
    process ends, however it ends, so the lock of a dead process is simply taken over (and said so).
    """

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self._handle = None

    def acquire(self) -> TrainingLock:
        self.folder.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = _read_pid(handle)
            handle.close()
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise TrainingFolderLocked(
                f"{self.folder}: in use by another trainer (pid {holder if holder is not None else 'unknown'}); "
                "wait for it to finish or stop it, or train into another folder") from None
        previous = _read_pid(handle)
        if previous is not None and previous != os.getpid():
            log.info("%s: taking over the lock of pid %d, which no longer holds it", self.folder, previous)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is not None:
            try:
                self._handle.seek(0)
                self._handle.truncate()
                fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            finally:
                self._handle.close()
                self._handle = None

    def __enter__(self) -> TrainingLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _read_pid(handle) -> int | None:
    try:
        handle.seek(0)
        text = handle.read().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


PR_SET_PDEATHSIG = 1


def exit_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``),
    so a trainer does not outlive a killed ``dvc repro``; exits at once if the parent is already gone.

    Best effort: ``False`` where the call is unavailable (not Linux) or ``PUNCTUATION_KEEP_TRAINER=1`` turns it
    off. The signal comes when the *thread* that started this process ends; for a process started by a shell
    or by ``dvc repro`` that is the parent itself (a launcher that starts processes from short-lived threads
    would need the variable).
    """
    if not sys.platform.startswith("linux") or os.environ.get("PUNCTUATION_KEEP_TRAINER") == "1":
        return False
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:  # the parent died before the request was in place
        os.kill(os.getpid(), sig)
    return True


def training_fingerprint(model_config: dict, train_config: dict | TrainConfig, features_dir: Path,
                         initial_weights: str | None = None) -> str:
    """Identifies a training run: its configuration, the content of the features it reads and, for a warm
    start, of the weights it starts from (``initial_weights``: their sha256; absent otherwise, so that the
    fingerprints of runs from scratch stay what they were). Not which weights the run keeps
    (:data:`training.config.SELECTION_FIELDS`): a finished run's checkpoint serves any of them."""
    train_config = TrainConfig.from_mapping(train_config).fingerprinted()
    content = {"model": model_config, "train": train_config,
               "features": file_sha256(Path(features_dir) / "manifest.json")}
    if initial_weights is not None:
        content["initial_weights"] = initial_weights
    payload = json.dumps(content, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()
