"""Writing files so that a reader never sees half of one: the one atomic-write helper of the project.

Every writer goes through :func:`atomic_path`: the content is written to a uniquely named temporary file in
the target's folder and renamed over the target only once it is complete, so a killed process leaves either
the old file or the new one, never a truncated one, and two processes writing the same target do not
collide on one temporary name.

What goes into a stage's outputs is kept reproducible here too: :func:`split_run_facts` separates how a run
went (its times, rates, memory) from what it computed, so that outputs hold only the latter.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text", "file_sha256"]


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (os.umask would, briefly, for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on a clean exit it replaces ``path``, on an error it is removed.

    ``suffix`` is appended to the temporary name, for writers that pick a format by extension
    (``soundfile``, ``numpy.savez``). The parent folder is created when missing.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".part{suffix}", dir=path.parent)
    os.close(descriptor)
    temporary = Path(name)
    # mkstemp makes the file 0600; give it the mode a plain open() would (0666 less the umask)
    os.chmod(temporary, 0o666 & ~_umask())
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def atomic_write_text(path: str | os.PathLike, text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (LF line ends as given); returns the path."""
    with atomic_path(path) as temporary:
        with temporary.open("w", encoding=encoding, newline="") as handle:
            handle.write(text)
    return Path(path)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path."""
    with atomic_path(path) as temporary:
        temporary.write_bytes(data)
    return Path(path)


#: Keys whose values describe how a run went rather than what it computed: wall and compute seconds, rates, peak
#: memory, and what *this* run made as against what an earlier, interrupted run had left. A stage output that DVC
#: hashes holds none of them, so that rerunning the stage on the same inputs gives the same bytes.
RUN_FACT = re.compile(r"seconds|per_second|^peak_memory|_this_run$")


def read_utf8(path: str | os.PathLike, error: type[Exception] = ValueError, *, encoding: str = "utf-8",
              data: bytes | None = None) -> str:
    """The text of ``path``; bytes that are not UTF-8 raise ``error("<path>:<line>: not valid UTF-8")``, naming the
    line of the first bad byte (the readers of users' files all report it so). ``data``: the file's bytes when
    the caller has read them already (the file is then not read again)."""
    raw = Path(path).read_bytes() if data is None else data
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as failure:
        line = raw[: failure.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not valid UTF-8") from None


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes (hex), read in blocks: what resumable work compares a finished output by."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def split_run_facts(data: Any) -> tuple[Any, dict[str, Any]]:
    """``(result, facts)``: ``data`` without the entries whose key matches :data:`RUN_FACT` (at any depth of
    nested mappings), and those entries, nested as they were."""
    if not isinstance(data, dict):
        return data, {}
    result, facts = {}, {}
    for key, value in data.items():
        if RUN_FACT.search(str(key)):
            facts[key] = value
            continue
        kept, nested = split_run_facts(value)
        result[key] = kept
        if nested:
            facts[key] = nested
    return result, facts
