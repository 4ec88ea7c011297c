"""What the three audio stages (:mod:`audio.synthesize_stage`, :mod:`audio.align_stage`,
:mod:`audio.features_stage`) share: split names, fingerprints, JSON markers, reading their inputs.

Every stage reads the previous one's output folder, is resumable talk by talk (a talk's ``.json`` marker holds
the fingerprint of its inputs: :func:`sha256_file`, :func:`sha256_json`, :data:`STAGE_VERSION`) and records
a talk that fails -- with :func:`error_text` -- without stopping the others; the stage's command then exits
non-zero after writing everything (:func:`failed_talks_exit`), so that DVC does not record the stage as done
and the next ``dvc repro`` runs it again (finished talks are kept and skipped).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from aligner import WordTiming, read_alignment_table
from corpus.io import atomic_write_text
from corpus.iwslt import read_iwslt
from executor.records import read_record as read_json  # a talk's marker: None when missing, unreadable or not an object

__all__ = [
    "ASR_SOURCES",
    "AUDIO_SPLITS",
    "STAGE_VERSION",
    "error_text",
    "failed_talks_exit",
    "progress_bar",
    "read_alignment",
    "read_json",
    "read_split",
    "sha256_file",
    "sha256_json",
    "tokens_digest",
    "write_json",
]

#: Splits that can have audio; ``asr`` shares the audio of ``ref``.
AUDIO_SPLITS: tuple[str, ...] = ("ref", "asr", "dev", "train")
#: Where an ASR token's time comes from.
ASR_SOURCES: tuple[str, ...] = ("own", "inherited", "none")
#: Bumped whenever alignment or feature outputs would change for the same inputs (part of the fingerprints).
STAGE_VERSION = 1


def sha256_file(path: Path, cache: dict[Path, str] | None = None) -> str:
    """SHA-256 of a file's bytes, remembered in ``cache`` (keyed by the resolved path) when one is given."""
    key = path.resolve()
    if cache is not None and key in cache:
        return cache[key]
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    if cache is not None:
        cache[key] = value
    return value


def sha256_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def tokens_digest(words: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(words).encode("utf-8")).hexdigest()


def write_json(path: Path, value: Any) -> None:
    """``value`` as indented UTF-8 JSON (plus a newline), written atomically."""
    atomic_write_text(path, json.dumps(value, indent=1, ensure_ascii=False, default=str) + "\n")


def error_text(error: BaseException) -> str:
    """An exception as one line (for a report or a talks-table cell)."""
    return f"{type(error).__name__}: {error}".replace("\t", " ").replace("\r", " ").replace("\n", " | ")


def failed_talks_exit(failures: Sequence[dict[str, Any]], stage: str) -> int:
    """The exit status of a stage command: 0, or 1 after listing every failed talk on stderr."""
    if not failures:
        return 0
    for failure in failures:
        print(f"FAILED {failure.get('split', '?')} {failure.get('talk', '?')}: {failure.get('error')}", file=sys.stderr)
    print(f"{stage}: {len(failures)} talk(s) failed (the others are done and kept); exit status 1, so that DVC does "
          f"not record the stage as done: fix the input and run it again", file=sys.stderr)
    return 1


def progress_bar(items: Sequence[Any], enabled: bool, desc: str) -> Iterable[Any]:
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit="talk")


def read_split(prepared_dir: Path, split: str):  # noqa: ANN201
    """The prepared split ``<prepared_dir>/<split>.tsv``."""
    return read_iwslt(prepared_dir / f"{split}.tsv")


def read_alignment(path: Path) -> tuple[list[WordTiming], list[str]]:
    """A talk's alignment table: its timings and, per token, where its time comes from (:data:`ASR_SOURCES`)."""
    table = read_alignment_table(path)
    timings = [WordTiming(str(w), float(s), float(e), bool(a))
               for w, s, e, a in zip(table["word"], table["start"], table["end"], table["aligned"])]
    if "source" in table:
        sources = [str(s) for s in table["source"]]
    else:
        sources = ["own" if t.aligned else "none" for t in timings]
    return timings, sources
