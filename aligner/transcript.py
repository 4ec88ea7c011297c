"""Reading a transcript file for the aligner's commands: UTF-8 text, named in every error."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["InputError", "read_transcript"]


class InputError(Exception):
    """Bad command-line input; the message names it."""


def read_transcript(path: str | os.PathLike) -> str:
    """The text of a transcript file (UTF-8, a byte-order mark allowed); :class:`InputError` naming the file when
    it is missing, not a file or not UTF-8."""
    source = Path(path)
    if not source.exists():
        raise InputError(f"transcript not found: {source}")
    if not source.is_file():
        raise InputError(f"transcript is not a file: {source}")
    data = source.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"transcript {source} is not UTF-8 text (byte offset {error.start})") from error
