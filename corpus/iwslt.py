"""Reading and writing the IWSLT2011 benchmark format: one ``word<TAB>LABEL`` per line.

``LABEL`` is one of :data:`corpus.labels.LABELS` and names the mark that follows the word. The files as
distributed have CRLF line ends and a few bytes that are not valid UTF-8 (music notes mangled into
``b'\\xe2\\x99?'``); :func:`read_iwslt` survives both and records which lines had bytes replaced. Files this
project writes (:func:`write_iwslt`) are UTF-8 with LF line ends.

``dev2012`` as distributed also has ten lines whose word is empty (``\\tCOMMA``: a mark the preparer split off
a speaker label). They are errors by default; ``read_iwslt(path, skip_empty_words=True)`` drops them instead
and lists their line numbers in :attr:`LabelledTokens.skipped_lines`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from corpus.labels import LABEL_TO_ID

__all__ = ["IwsltFormatError", "LabelledTokens", "read_iwslt", "write_iwslt"]

_REPLACEMENT = "\ufffd"


class IwsltFormatError(ValueError):
    """A line of an IWSLT file that does not follow ``word<TAB>LABEL``."""

    def __init__(self, path: str | Path, line: int, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        super().__init__(f"{self.path}:{line}: {reason}")

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass(frozen=True)
class LabelledTokens:
    """Tokens and their labels as read from one file."""

    words: list[str]
    labels: list[str]
    path: str
    #: 1-based line numbers where bytes that are not valid UTF-8 were replaced with U+FFFD.
    replaced_lines: tuple[int, ...]
    #: 1-based line numbers of empty-word lines dropped with ``skip_empty_words=True``.
    skipped_lines: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.words)


def read_iwslt(path: str | Path, *, skip_empty_words: bool = False) -> LabelledTokens:
    """Read a benchmark file (CRLF or LF, possibly with invalid UTF-8 bytes).

    Blank lines are skipped. Raises :class:`IwsltFormatError` naming the file and 1-based line for a line
    without a tab or with more than one, an empty (or whitespace-only) word -- unless ``skip_empty_words``
    -- and an unknown label.
    """
    path = Path(path)
    raw = path.read_bytes()
    words: list[str] = []
    labels: list[str] = []
    replaced: list[int] = []
    skipped: list[int] = []
    for number, raw_line in enumerate(raw.split(b"\n"), start=1):
        if raw_line.endswith(b"\r"):
            raw_line = raw_line[:-1]
        try:
            line = raw_line.decode("utf-8")
        except UnicodeDecodeError:
            line = raw_line.decode("utf-8", errors="replace")
            replaced.append(number)
        if not line.strip():
            continue
        tabs = line.count("\t")
        if tabs == 0:
            raise IwsltFormatError(path, number, f"no tab between word and label in {line!r}")
        if tabs > 1:
            raise IwsltFormatError(path, number, f"{tabs} tabs, expected exactly one, in {line!r}")
        word, label = line.split("\t")
        label = label.strip()
        if not word.strip():
            if skip_empty_words:
                skipped.append(number)
                continue
            raise IwsltFormatError(path, number, f"empty word (label {label!r})")
        if label not in LABEL_TO_ID:
            raise IwsltFormatError(
                path, number, f"unknown label {label!r} (expected one of {', '.join(LABEL_TO_ID)})"
            )
        words.append(word)
        labels.append(label)
    return LabelledTokens(words, labels, str(path), tuple(replaced), tuple(skipped))


def write_iwslt(path: str | Path, words: Sequence[str], labels: Sequence[str]) -> Path:
    """Write ``word<TAB>LABEL`` lines (UTF-8, LF), creating parent folders; returns the path."""
    path = Path(path)
    if len(words) != len(labels):
        raise ValueError(f"{path}: {len(words)} words but {len(labels)} labels")
    for index, (word, label) in enumerate(zip(words, labels)):
        if label not in LABEL_TO_ID:
            raise ValueError(f"{path}: token {index} ({word!r}) has unknown label {label!r}")
        if not word.strip() or "\t" in word or "\n" in word or "\r" in word:
            raise ValueError(f"{path}: token {index} ({word!r}) is empty or contains a tab or line break")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(f"{word}\t{label}\n" for word, label in zip(words, labels))
    return path
