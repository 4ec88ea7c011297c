"""Replacing a whole directory so that readers only ever see a complete one.

A directory is built in a temporary sibling (:func:`sibling`) and swapped in with renames
(:func:`replace_dir`): the target is always the old complete directory, absent, or the new complete one.
Leftovers of a killed build carry its pid in their name and are removed by the next build
(:func:`clean_leftovers`). :func:`replacing_dir` does all three around the code that fills the directory.
(Single files go through :func:`corpus.io.atomic_path`.)
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_path(path: Path) -> None:
    """Remove a file, link or directory tree; a missing one is fine."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def clean_leftovers(out_dir: Path) -> None:
    """Remove temp/old directories that a killed build of ``out_dir`` left behind."""
    for path in out_dir.parent.glob(f".{glob.escape(out_dir.name)}.*-*-*"):
        match = re.fullmatch(rf"\.{re.escape(out_dir.name)}\.(?:tmp|old)-(\d+)-[0-9a-f]+", path.name)
        if match and not pid_alive(int(match.group(1))):
            log.info("removing leftover of an interrupted build: %s", path)
            remove_path(path)


def sibling(out_dir: Path, kind: str) -> Path:
    """``.<name>.<kind>-<pid>-<hex>`` beside ``out_dir`` (``kind``: ``tmp`` or ``old``)."""
    return out_dir.parent / f".{out_dir.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}"


def replace_dir(tmp: Path, out_dir: Path) -> None:
    """Put ``tmp`` in place of ``out_dir`` with renames: ``out_dir`` is always either the old complete cache,
    absent, or the new complete one."""
    old = None
    if out_dir.exists() or out_dir.is_symlink():
        old = sibling(out_dir, "old")
        os.rename(out_dir, old)
    os.rename(tmp, out_dir)
    if old is not None:
        remove_path(old)


@contextlib.contextmanager
def replacing_dir(out_dir: Path) -> Iterator[Path]:
    """Yield a new empty temporary sibling of ``out_dir``; on a clean exit it replaces ``out_dir``
    (:func:`replace_dir`), on any error (an interrupt too) it is removed and ``out_dir`` is left as it was."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(out_dir)
    tmp = sibling(out_dir, "tmp")
    tmp.mkdir()
    try:
        yield tmp
        replace_dir(tmp, out_dir)
    except BaseException:
        remove_path(tmp)
        raise
