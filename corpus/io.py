"""Writing files so that a reader never sees half of one: the one atomic-write helper of the project.

Every writer goes through :func:`atomic_path`: the content is written to a uniquely named temporary file in
the target's folder and renamed over the target only once it is complete, so a killed process leaves either
the old file or the new one, never a truncated one, and two processes writing the same target do not
collide on one temporary name.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text"]


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
