"""What comes back from the GPU machine: one ``.tar.gz``. :func:`write_tarball` puts the records, learning
curves, log tails and the status table in it within its size limit; :func:`import_tarball` puts its records into
``metrics/paper`` here, never over a complete one."""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path
from typing import Any

from corpus.io import atomic_write_bytes
from paper_runs.processes import RunsError, clean_tail
from paper_runs.records import PAPER_RUNS, complete, record_path, record_problems

#: where a record and its learning curve go in the tarball (and, imported, in the repository)
RECORDS_ARCNAME = "metrics/paper"
STATUS_ARCNAME = "gpu_kit_status"


def write_tarball(path: Path, *, records: dict[str, Path], status_files: dict[str, bytes], logs: dict[str, Path],
                  limit_bytes: int, tail_bytes: int) -> int:
    """``path`` (.tar.gz): records and curves under ``metrics/paper/``, status files and log tails under
    ``gpu_kit_status/``. Log tails shrink until it fits ``limit_bytes``; returns its size (a :class:`RunsError`
    if even without logs it would not)."""
    while True:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            def add(name: str, data: bytes) -> None:
                member = tarfile.TarInfo(name)
                member.size, member.mtime, member.mode = len(data), int(time.time()), 0o644
                archive.addfile(member, io.BytesIO(data))
            for name, record in sorted(records.items()):
                add(f"{RECORDS_ARCNAME}/{name}.json", record.read_bytes())
                curve = record.with_suffix(".history.csv")
                if curve.is_file():
                    add(f"{RECORDS_ARCNAME}/{name}.history.csv", curve.read_bytes())
            for name, data in sorted(status_files.items()):
                add(f"{STATUS_ARCNAME}/{name}", data)
            for name, log in sorted(logs.items()):
                if tail_bytes and log.is_file():
                    add(f"{STATUS_ARCNAME}/logs/{name}.log", clean_tail(log, tail_bytes).encode())
        if len(buffer.getvalue()) <= limit_bytes:
            atomic_write_bytes(path, buffer.getvalue())
            return len(buffer.getvalue())
        if not tail_bytes:
            raise RunsError(f"{path}: {len(buffer.getvalue()) / 2**20:.1f} MiB even without logs, over the limit of "
                            f"{limit_bytes / 2**20:.1f} MiB (params gpu_kit.tarball_limit_mib)")
        tail_bytes = tail_bytes // 4 if tail_bytes > 1024 else 0


def tarball_records(path: str | Path) -> dict[str, dict[str, Any]]:
    """The well-formed records in a tarball by name (a :class:`RunsError` naming any bad member or record)."""
    return {name: json.loads(data) for name, (data, _) in _read_tarball(path)[0].items()}


def _read_tarball(path: str | Path) -> tuple[dict[str, tuple[bytes, bytes | None]], dict[str, bytes]]:
    """({name: (record bytes, curve bytes or None)}, {status file: bytes}), every member checked."""
    records, curves, status = {}, {}, {}
    try:
        with tarfile.open(path, mode="r:*") as archive:
            for member in archive.getmembers():
                name = member.name
                parts = Path(name).parts
                if member.isdir():
                    continue
                if not member.isfile() or name.startswith("/") or ".." in parts:
                    raise RunsError(f"{path}: member {name!r} is not a plain file inside the archive")
                data = archive.extractfile(member).read()
                if name.startswith(f"{STATUS_ARCNAME}/"):
                    status[name[len(STATUS_ARCNAME) + 1:]] = data
                elif len(parts) == 3 and name.startswith(f"{RECORDS_ARCNAME}/") and parts[-1].endswith(".history.csv"):
                    curves[parts[-1][:-len(".history.csv")]] = data
                elif len(parts) == 3 and name.startswith(f"{RECORDS_ARCNAME}/") and parts[-1].endswith(".json"):
                    records[parts[-1][:-len(".json")]] = data
                else:
                    raise RunsError(f"{path}: unexpected member {name!r}")
    except (OSError, tarfile.TarError) as error:
        raise RunsError(f"{path}: not a readable tarball ({error})") from error
    for name, data in records.items():
        if name not in PAPER_RUNS:
            raise RunsError(f"{path}: {RECORDS_ARCNAME}/{name}.json is not a paper run ({', '.join(PAPER_RUNS)})")
        try:
            problems = record_problems(name, json.loads(data))
        except ValueError as error:
            problems = [f"not valid JSON ({error})"]
        if problems:
            raise RunsError(f"{path}: {RECORDS_ARCNAME}/{name}.json: {'; '.join(problems)}")
    return {name: (data, curves.get(name)) for name, data in records.items()}, status


def import_tarball(path: str | Path, records_dir: str | Path, status_dir: str | Path, *,
                   replace: bool = False) -> dict[str, list[str]]:
    """Put the records of a tarball (and their curves) into ``records_dir``, its status and logs into
    ``status_dir`` (``done["status"]``: their names). A complete record (``full_schedule``) there is never
    overwritten, not even with ``replace`` (remove it by hand to redo it); a partial one is replaced by a complete
    one, and by another partial one only with ``replace``."""
    records, status = _read_tarball(path)
    done: dict[str, list[str]] = {"imported": [], "unchanged": [], "kept": [], "status": sorted(status)}
    for name, (data, curve) in sorted(records.items()):
        target = record_path(records_dir, name)
        if target.is_file() and target.read_bytes() == data:
            done["unchanged"].append(name)
            continue
        if target.is_file():
            if complete(json.loads(target.read_bytes())):
                done["kept"].append(f"{name} (the complete record there is never overwritten)")
                continue
            if not complete(json.loads(data)) and not replace:
                done["kept"].append(f"{name} (a different partial record is there; --replace takes the new one)")
                continue
        atomic_write_bytes(target, data)
        curve_path = Path(records_dir) / f"{name}.history.csv"
        if curve is not None:
            atomic_write_bytes(curve_path, curve)
        else:
            curve_path.unlink(missing_ok=True)
        done["imported"].append(name)
    for name, data in status.items():
        atomic_write_bytes(Path(status_dir) / name, data)
    return done
