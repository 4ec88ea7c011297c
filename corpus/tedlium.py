"""TED-LIUM (release 3) as a source of real TED audio: its layout, its STM segments, and matching its talks to
the punctuated TED transcripts by name.

Layout (:func:`find_tedlium`)
    A folder holding ``sph/`` (``<talk>.sph``: NIST SPHERE, 16 kHz mono 16-bit, read with soundfile) and
    ``stm/`` (``<talk>.stm``), as TED-LIUM 3's ``data/`` or ``legacy/train`` folders do; the release's root is
    accepted too (its ``data/`` is used). A talk needs both files; one without the other is reported.

STM (:func:`read_stm`)
    One segment per line: ``talk channel speaker start end [<label>] word word ...`` (seconds); lines starting
    with ``;;`` are comments. Segments whose text is ``ignore_time_segment_in_scoring`` (TED-LIUM marks the
    stretches it did not transcribe -- music, applause, other speakers -- this way, and its ``inter_segment_gap``
    speaker) are skipped. The words are lower case and unpunctuated, contractions split as ``don 't``;
    non-speech tokens (``{NOISE}``, ``{SMACK}``, ``<unk>``, ``<sil>``, ``[laughter]``, ``(2)``) are dropped.

Matching (:func:`match_talks`)
    TED-LIUM names a talk ``<SpeakerName>_<year>[letter]`` (``AlGore_2006``, ``AshrafGhani_2005G``); the TED
    transcripts name it ``<Speaker_Title>`` or ``<Title_Speaker>`` (``Averting_the_climate_crisis_Al_Gore``,
    ``Ashraf_Ghani_How_to_fix_broken_states``). A recording's *speaker key* is its id before the last ``_``,
    ASCII-folded, lower case, letters and digits only (``algore``); a transcript is a *candidate* when its
    name's first or last few words, joined the same way, give that key (``al`` + ``gore``). Names alone cannot
    tell a speaker's talks apart (Al Gore gave several), nor catch a name that only looks right, so the text
    decides: the candidate whose tokens share the most of the recording's word 4-grams (:func:`text_overlap`,
    over :func:`corpus.anchors.word_keys`) is taken when that share reaches ``min_overlap``. Each transcript
    goes to one recording at most (the higher overlap wins). Every recording left without a transcript is
    reported with the reason: no name matches its speaker key, the named talks' text does not match, a tie,
    or another recording took the transcript.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus.anchors import TimedSegment, word_keys
from corpus.io import read_utf8

__all__ = ["IGNORE_SEGMENT", "StmSegment", "TalkMatching", "TedliumFormatError", "TedliumTalk", "find_tedlium",
           "match_talks", "name_keys", "read_stm", "speaker_key", "text_overlap"]

IGNORE_SEGMENT = "ignore_time_segment_in_scoring"
_NON_SPEECH = re.compile(r"^(\{.*\}|<.*>|\[.*\]|\(.*\))$")
_NOT_KEY = re.compile(r"[^0-9a-z]+")
#: How many words at either end of a transcript's name may spell the speaker.
NAME_WORDS = 6


class TedliumFormatError(ValueError):
    """A TED-LIUM file or folder that does not follow the release's layout (names the file and line)."""


@dataclass(frozen=True)
class StmSegment:
    """One STM line: a stretch of a talk's audio and the words said in it."""

    talk: str
    channel: str
    speaker: str
    start: float
    end: float
    label: str
    words: tuple[str, ...]

    def timed(self) -> TimedSegment:
        return TimedSegment(self.start, self.end, self.words)


@dataclass(frozen=True)
class TedliumTalk:
    """A TED-LIUM talk: its id and its two files."""

    talk_id: str
    sph: Path
    stm: Path


def read_stm(path: str | os.PathLike) -> list[StmSegment]:
    """The scored segments of an STM file, in file order (see the module docstring)."""
    path = Path(path)
    text = read_utf8(path, TedliumFormatError)
    segments = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith(";;"):
            continue
        fields = line.split()
        if len(fields) < 5:
            raise TedliumFormatError(f"{path}:{number}: expected 'talk channel speaker start end [<label>] words', "
                                     f"found {len(fields)} field(s)")
        talk, channel, speaker = fields[:3]
        try:
            start, end = float(fields[3]), float(fields[4])
        except ValueError:
            raise TedliumFormatError(f"{path}:{number}: start/end {fields[3]!r} {fields[4]!r} are not numbers") from None
        if not (0 <= start <= end):
            raise TedliumFormatError(f"{path}:{number}: the segment {start}..{end} is not a span of time")
        rest = fields[5:]
        label = ""
        if rest and rest[0].startswith("<") and rest[0].endswith(">") and rest[0] not in ("<unk>", "<sil>"):
            label, rest = rest[0], rest[1:]
        if IGNORE_SEGMENT in rest or speaker == "inter_segment_gap":
            continue
        words = tuple(word for word in rest if not _NON_SPEECH.match(word))
        segments.append(StmSegment(talk, channel, speaker, start, end, label, words))
    return segments


def find_tedlium(root: str | os.PathLike) -> tuple[list[TedliumTalk], list[str]]:
    """``(talks, problems)`` of a TED-LIUM folder (see the module docstring), talks sorted by id; ``problems``
    names each file without its pair. Raises :class:`TedliumFormatError` when there is no ``sph/`` and ``stm/``."""
    root = Path(root)
    for base in (root, root / "data"):
        if (base / "sph").is_dir() and (base / "stm").is_dir():
            break
    else:
        raise TedliumFormatError(f"{root}: not a TED-LIUM folder (expected sph/ and stm/ in it, or in its data/)")
    sph = {path.stem: path for path in (base / "sph").iterdir() if path.suffix.lower() == ".sph" and path.is_file()}
    stm = {path.stem: path for path in (base / "stm").iterdir() if path.suffix.lower() == ".stm" and path.is_file()}
    talks = [TedliumTalk(talk_id, sph[talk_id], stm[talk_id]) for talk_id in sorted(set(sph) & set(stm))]
    problems = ([f"{sph[name]}: no STM file {base / 'stm' / (name + '.stm')}" for name in sorted(set(sph) - set(stm))]
                + [f"{stm[name]}: no audio file {base / 'sph' / (name + '.sph')}" for name in sorted(set(stm) - set(sph))])
    return talks, problems


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()


def speaker_key(talk_id: str) -> str:
    """``AlGore_2006`` -> ``algore``: the id before its last ``_`` (the whole id without one), letters and digits."""
    speaker = talk_id.rsplit("_", 1)[0] if "_" in talk_id else talk_id
    return _NOT_KEY.sub("", _fold(speaker))


def name_keys(name: str, *, words: int = NAME_WORDS) -> set[str]:
    """The speaker keys a transcript name can give: its first and last 1..``words`` words, joined
    (``Averting_the_climate_crisis_Al_Gore`` -> ``gore``, ``algore``, ``crisisalgore``, ..., ``averting``, ...)."""
    parts = [part for part in _NOT_KEY.split(_fold(name)) if part]
    keys = set()
    for count in range(1, min(words, len(parts)) + 1):
        keys.add("".join(parts[:count]))
        keys.add("".join(parts[-count:]))
    return keys


def _grams(tokens: Sequence[str], n: int) -> set[tuple[str, ...]]:
    keys = word_keys(tokens)[0]
    return {tuple(keys[index : index + n]) for index in range(len(keys) - n + 1)}


def text_overlap(recording_words: Sequence[str], transcript_words: Sequence[str], *, n: int = 4) -> float:
    """Share of the recording's word ``n``-grams (of :func:`corpus.anchors.word_keys`) found in the transcript."""
    mine = _grams(recording_words, n)
    if not mine:
        return 0.0
    return len(mine & _grams(transcript_words, n)) / len(mine)


@dataclass
class TalkMatching:
    """Recordings matched to transcripts: ``matches`` recording -> (transcript, overlap); ``unmatched``
    recording -> why not; ``transcripts_unmatched``: transcripts no recording took."""

    matches: dict[str, tuple[str, float]] = field(default_factory=dict)
    unmatched: dict[str, str] = field(default_factory=dict)
    transcripts_unmatched: list[str] = field(default_factory=list)

    def by_transcript(self) -> dict[str, tuple[str, float]]:
        return {transcript: (recording, overlap) for recording, (transcript, overlap) in self.matches.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"matched": len(self.matches), "unmatched": len(self.unmatched),
                "transcripts_unmatched": len(self.transcripts_unmatched),
                "matches": [{"recording": r, "transcript": t, "overlap": round(o, 4)}
                            for r, (t, o) in sorted(self.matches.items())],
                "recordings_unmatched": [{"recording": r, "reason": why} for r, why in sorted(self.unmatched.items())]}


def match_talks(
    recordings: Mapping[str, Sequence[str]],
    transcripts: Mapping[str, Sequence[str]],
    *,
    names: Mapping[str, str] | None = None,
    min_overlap: float,
) -> TalkMatching:
    """Match TED-LIUM recordings (id -> STM words) to transcripts (id -> tokens) by speaker name, confirmed by
    text (see the module docstring). ``names``: the transcript id -> the name to read the speaker from (default:
    the id itself, as for the TED transcripts); a transcript without a name is never a candidate."""
    if not 0.0 < min_overlap <= 1.0:
        raise ValueError(f"min_overlap must be in (0, 1], not {min_overlap!r}")
    names = dict(names) if names is not None else {key: key for key in transcripts}
    by_key: dict[str, list[str]] = {}
    for transcript in sorted(transcripts):
        name = names.get(transcript)
        if name:
            for key in name_keys(name):
                by_key.setdefault(key, []).append(transcript)
    result = TalkMatching()
    proposals: dict[str, list[tuple[float, str]]] = {}  # transcript -> (overlap, recording)
    for recording in sorted(recordings):
        key = speaker_key(recording)
        candidates = by_key.get(key, [])
        if not _has_words(recordings[recording]):
            result.unmatched[recording] = "its STM has no words"
            continue
        if not candidates:
            result.unmatched[recording] = f"no transcript is named after the speaker {key!r}"
            continue
        scored = sorted(((text_overlap(recordings[recording], transcripts[c]), c) for c in candidates),
                        key=lambda item: (-item[0], item[1]))
        best, transcript = scored[0]
        shown = ", ".join(f"{c} ({o:.2f})" for o, c in scored[:3])
        if best < min_overlap:
            result.unmatched[recording] = (f"the text of no transcript named after {key!r} matches (best word 4-gram "
                                           f"overlap below {min_overlap}: {shown})")
        elif len(scored) > 1 and scored[1][0] == best:
            result.unmatched[recording] = f"two transcripts match equally well: {shown}"
        else:
            proposals.setdefault(transcript, []).append((best, recording))
    for transcript, offers in proposals.items():
        offers.sort(key=lambda item: (-item[0], item[1]))
        overlap, winner = offers[0]
        result.matches[winner] = (transcript, overlap)
        for other_overlap, other in offers[1:]:
            result.unmatched[other] = (f"its transcript {transcript} ({other_overlap:.2f}) went to {winner} "
                                       f"({overlap:.2f})")
    taken = {transcript for transcript, _ in result.matches.values()}
    result.transcripts_unmatched = sorted(set(transcripts) - taken)
    return result


def _has_words(words: Sequence[str]) -> bool:
    return bool(word_keys(words)[0])
