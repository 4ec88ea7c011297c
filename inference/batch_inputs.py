"""The transcripts of a ``punctuate`` batch and the word times of each: what a folder holds, and what pairs with what.

Transcripts (:func:`find_transcripts`): an input that is a file is one transcript, named by its file name; an
input that is a folder gives every ``*.txt`` below it (recursively; hidden files and folders, and the output
folder, left out), each named by its path relative to that folder. The name is what the output mirrors and
what reports and errors say. Two transcripts of one name (``a/x.txt`` of two folders given) are both refused,
as is an input that does not exist.

Word times (:class:`TimingsFinder`, ``--timings-dir DIR``): a transcript named ``sub/talk.txt`` takes

1. ``DIR/sub/talk.tsv``, ``DIR/sub/talk.ctm`` or ``DIR/sub/talk.json`` (only the extension of
   ``--timings-format`` when it is given; two of them are refused: say which with ``--timings-format``); in a
   CTM of several utterances, the one named ``talk`` (:func:`inference.speech_input.ctm_source`); else
2. the utterance ``talk`` of the other CTM files of ``DIR`` (a corpus's CTM, as Kaldi writes one per data set,
   its utterance names the transcripts' file names); else
3. none: the transcript is refused (asked for timings, ``punctuate`` does not fall back on the text alone).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from corpus.timings import CtmUtterance, TimingsFormatError, index_ctm
from inference.speech_input import TIMINGS_FORMATS, TimingsSource, ctm_source

__all__ = ["Transcript", "TimingsFinder", "TranscriptError", "decode_text", "find_transcripts"]

TRANSCRIPT_SUFFIX = ".txt"


class TranscriptError(ValueError):
    """A transcript that cannot be read as text; the message names it (and the line)."""


def decode_text(data: bytes, name: str) -> str:
    """A transcript's bytes as text (UTF-8, a byte-order mark dropped); :class:`TranscriptError` naming ``name``
    and the line of the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise TranscriptError(f"{name}:{line}: not UTF-8 text (byte offset {error.start})") from error


@dataclass(frozen=True)
class Transcript:
    """One transcript of a batch: ``name`` is its path relative to the folder given (or its file name), with
    ``/`` between folders; ``path`` the file."""

    name: str
    path: str

    @property
    def stem(self) -> str:
        """The name without its extension (``sub/talk``): what its timings and outputs are named after."""
        return str(PurePosixPath(self.name).with_suffix(""))


def _hidden(relative: PurePosixPath) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def _inside(path: Path, folder: Path | None) -> bool:
    if folder is None:
        return False
    try:
        path.resolve().relative_to(folder)
    except ValueError:
        return False
    return True


def find_transcripts(inputs: Sequence[str | os.PathLike], *, exclude: str | os.PathLike | None = None
                     ) -> tuple[list[Transcript], dict[str, str]]:
    """``(transcripts, problems)``: the transcripts of ``inputs`` sorted by name, and name -> why one cannot be
    taken (no such input, two of one name). ``exclude``: a folder whose files are never inputs (the output)."""
    excluded = Path(exclude).resolve() if exclude is not None else None
    found: dict[str, list[Path]] = {}
    problems: dict[str, str] = {}
    for given in inputs:
        path = Path(given)
        if path.is_dir():
            for file in sorted(path.rglob(f"*{TRANSCRIPT_SUFFIX}")):
                relative = PurePosixPath(file.relative_to(path).as_posix())
                if not _hidden(relative) and file.is_file() and not _inside(file, excluded):
                    found.setdefault(str(relative), []).append(file)
        elif path.is_file():
            found.setdefault(path.name, []).append(path)
        elif path.exists():
            problems[str(given)] = f"{given}: not a regular file or a folder"
        else:
            problems[str(given)] = f"{given}: no such file or folder"
    transcripts = []
    for name, paths in sorted(found.items()):
        if len({p.resolve() for p in paths}) > 1:
            problems[name] = f"{name}: several inputs of this name ({', '.join(str(p) for p in paths)}); their " \
                             "outputs would be one file"
        else:
            transcripts.append(Transcript(name, str(paths[0])))
    return transcripts, problems


class TimingsFinder:
    """The word times of each transcript in a folder (module docstring); ``timings_format`` (a key of
    :data:`inference.speech_input.TIMINGS_FORMATS`) restricts which files are looked at.

    Built once per batch: the folder is listed once, and the CTM files that are not one transcript's are
    indexed (:func:`corpus.timings.index_ctm`, their first fields only). ``stems``: the stems of the batch's
    transcripts, which tell a transcript's own file from a corpus's."""

    def __init__(self, directory: str | os.PathLike, stems: set[str], timings_format: str | None = None):
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise FileNotFoundError(f"timings folder not found: {self.directory}")
        if timings_format is not None and timings_format not in TIMINGS_FORMATS:
            raise ValueError(f"unknown timings format {timings_format!r}; known: {', '.join(TIMINGS_FORMATS)}")
        formats = [timings_format] if timings_format else list(TIMINGS_FORMATS)
        self.extensions = {TIMINGS_FORMATS[name]: name for name in formats}
        self.own: dict[str, list[Path]] = {}  # transcript stem -> its timings files
        corpus_ctms = []
        for file in sorted(self.directory.rglob("*")):
            relative = PurePosixPath(file.relative_to(self.directory).as_posix())
            if _hidden(relative) or file.suffix.lower() not in self.extensions or not file.is_file():
                continue
            stem = str(relative.with_suffix(""))
            if stem in stems:
                self.own.setdefault(stem, []).append(file)
            elif self.extensions[file.suffix.lower()] == "ctm":
                corpus_ctms.append(file)
        #: utterance -> [(CTM file, where its lines are)] over the corpus's CTM files; and the problems found
        self.utterances: dict[str, list[tuple[Path, CtmUtterance]]] = {}
        self.problems: dict[str, str] = {}
        for file in corpus_ctms:
            spans, problems = index_ctm(file)
            for name, span in spans.items():
                self.utterances.setdefault(name, []).append((file, span))
            self.problems.update(problems)

    def source_for(self, transcript: Transcript) -> TimingsSource:
        """Where ``transcript``'s word times are; :class:`corpus.timings.TimingsFormatError` saying why when it
        has none, or several."""
        name = PurePosixPath(transcript.stem).name
        files = self.own.get(transcript.stem, [])
        if len(files) > 1:
            raise TimingsFormatError(f"several timings files for {transcript.name}: "
                                     f"{', '.join(str(file) for file in files)} (choose one with --timings-format)")
        if files:
            file = files[0]
            timings_format = self.extensions[file.suffix.lower()]
            return ctm_source(file, name) if timings_format == "ctm" else TimingsSource(str(file), timings_format)
        if name in self.problems:
            raise TimingsFormatError(self.problems[name])
        held = self.utterances.get(name, [])
        if len(held) > 1:
            raise TimingsFormatError(f"utterance {name!r} (for {transcript.name}) is in several CTM files: "
                                     f"{', '.join(str(file) for file, _ in held)}")
        if held:
            file, span = held[0]
            return TimingsSource(str(file), "ctm", span)
        looked = ", ".join(f"{transcript.stem}{extension}" for extension in self.extensions)
        corpus = " or utterance {!r} of its other CTM files".format(name) if "ctm" in self.extensions.values() else ""
        raise TimingsFormatError(f"no word timings for {transcript.name} in {self.directory}: no {looked}{corpus}")
