"""TED-LIUM as the talks' audio (``audio.source: tedlium``): real TED recordings for the pipeline's talks.

Used by :func:`audio.synthesize_stage.make_talk_audio`. TED-LIUM's layout, STM segments and the matching of its
talks to transcripts by speaker name (confirmed by text) are :mod:`corpus.tedlium`; here they meet the
pipeline's talks:

* The talks of the prepared splits are the transcripts to match. A ``train`` talk is named as in the TED
  transcripts (``Averting_the_climate_crisis_Al_Gore``); a ``ref`` talk by the ``<title>`` of its XML source
  (``Daniel Tammet: Different ways of knowing``; the ``asr`` talks share the ``ref`` audio); ``dev2012``'s
  pseudo-talks have no name and never match. :func:`match_recordings` matches them all at once, so a recording
  serves one talk at most.
* :func:`take_tedlium_talk` makes a matched talk's audio: the SPH is read with soundfile and written as a 16-bit
  WAV (``<split>/<stem>.wav``, its own sample rate, channels mixed to mono), and the STM segments are laid onto
  the talk's own tokens -- the *punctuated* transcript's, which is what the align stage aligns -- as anchors
  (``<stem>.anchors.tsv``, :func:`corpus.anchors.anchor_chunks`): chunks of at most
  :attr:`TedliumConfig.anchor_chunk_s` seconds cut only at segment boundaries both transcripts agree on, none
  when they agree on less than :attr:`TedliumConfig.min_anchor_share` of the words. The align stage aligns each
  chunk on its own span of the audio (:func:`aligner.anchors.align_anchored`).
* A talk is redone only when its inputs change: ``<stem>.tedlium.json`` records the SHA-256 of the SPH and
  STM files and of the talk's tokens, the settings and :data:`TEDLIUM_VERSION`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audio.real_audio import AudioInputError
from audio.stage_common import read_json, sha256_file, sha256_json, tokens_digest, write_json
from audio.synthesis import talk_stem, timings_path_for
from corpus.anchors import anchor_chunks, anchors_path_for, write_anchors
from corpus.io import atomic_path
from corpus.tedlium import StmSegment, TalkMatching, TedliumFormatError, TedliumTalk, find_tedlium, match_talks, read_stm

__all__ = ["TEDLIUM_VERSION", "TedliumConfig", "TedliumRecordings", "match_recordings", "read_recordings",
           "take_tedlium_talk", "xml_titles"]

#: Bumped whenever the audio or anchors made from the same inputs would change.
TEDLIUM_VERSION = 1
_TITLE = re.compile(r"<doc\b[^>]*?\bdocid=\"(?P<docid>[^\"]+)\"[^>]*>.*?<title>(?P<title>.*?)</title>", re.S)


@dataclass(frozen=True)
class TedliumConfig:
    """Settings of the TED-LIUM source (params ``audio.tedlium``).

    min_text_overlap: the share of a recording's word 4-grams its transcript must hold to be matched
        (:func:`corpus.tedlium.match_talks`; the right transcript holds most, another talk of the same speaker
        a few percent).
    anchor_chunk_s: the longest chunk the anchors leave where the STM offers a cut (keep it at most
        ``align.config.max_single_pass_s``, so each chunk is aligned in one pass).
    min_anchor_share: below this share of the talk's words found in the STM, no anchors (the whole talk in one).
    """

    min_text_overlap: float = 0.3
    anchor_chunk_s: float = 60.0
    min_anchor_share: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 < self.min_text_overlap <= 1.0:
            raise ValueError(f"tedlium.min_text_overlap must be in (0, 1], not {self.min_text_overlap!r}")
        if self.anchor_chunk_s <= 0:
            raise ValueError(f"tedlium.anchor_chunk_s must be positive, not {self.anchor_chunk_s!r}")
        if not 0.0 <= self.min_anchor_share <= 1.0:
            raise ValueError(f"tedlium.min_anchor_share must be between 0 and 1, not {self.min_anchor_share!r}")


@dataclass
class TedliumRecordings:
    """The readable talks of a TED-LIUM folder with their scored segments, and what could not be read."""

    root: Path
    talks: dict[str, TedliumTalk]
    segments: dict[str, list[StmSegment]]
    problems: list[str]

    def words(self, talk_id: str) -> list[str]:
        return [word for segment in self.segments[talk_id] for word in segment.words]


def read_recordings(tedlium_dir: str | Path) -> TedliumRecordings:
    """Every talk of ``tedlium_dir`` (:func:`corpus.tedlium.find_tedlium`) with its STM segments; a talk whose STM
    cannot be read is left out and named in ``problems``. Raises :class:`AudioInputError` when the folder is not
    a TED-LIUM folder."""
    root = Path(tedlium_dir)
    try:
        talks, problems = find_tedlium(root)
    except TedliumFormatError as error:
        raise AudioInputError(str(error)) from error
    found: dict[str, TedliumTalk] = {}
    segments: dict[str, list[StmSegment]] = {}
    for talk in talks:
        try:
            segments[talk.talk_id] = read_stm(talk.stm)
        except (TedliumFormatError, OSError) as error:
            problems.append(f"{talk.stm}: {error}")
            continue
        found[talk.talk_id] = talk
    return TedliumRecordings(root, found, segments, problems)


def xml_titles(xml_path: str | Path) -> dict[str, str]:
    """docid -> ``<title>`` of each ``<doc>`` of an IWSLT XML source that has one."""
    text = Path(xml_path).read_text(encoding="utf-8", errors="replace")
    return {match.group("docid"): re.sub(r"\s+", " ", match.group("title")).strip() for match in _TITLE.finditer(text)}


def transcript_key(split: str, talk_id: str) -> str:
    return f"{split}/{talk_id}"


def match_recordings(recordings: TedliumRecordings, talks_by_split: Mapping[str, Sequence[Any]],
                     names_by_split: Mapping[str, Mapping[str, str]], config: TedliumConfig) -> TalkMatching:
    """Match the recordings to the talks of every split at once (transcripts keyed ``split/talk``; a talk is
    named by ``names_by_split[split][talk_id]``, the talk id itself for ``train``)."""
    transcripts: dict[str, Sequence[str]] = {}
    names: dict[str, str] = {}
    for split, talks in talks_by_split.items():
        for talk in talks:
            key = transcript_key(split, talk.talk_id)
            transcripts[key] = talk.words
            name = talk.talk_id if split == "train" else names_by_split.get(split, {}).get(talk.talk_id)
            if name:
                names[key] = name
    return match_talks({talk_id: recordings.words(talk_id) for talk_id in recordings.talks}, transcripts,
                       names=names, min_overlap=config.min_text_overlap)


def _to_wav(sph: Path, target: Path) -> float:
    """Write ``sph`` as a 16-bit PCM WAV at ``target`` (atomically); its duration in seconds."""
    import numpy as np
    import soundfile

    try:
        samples, rate = soundfile.read(str(sph), dtype="int16", always_2d=True)
    except Exception as error:  # noqa: BLE001 -- soundfile raises LibsndfileError (a RuntimeError) and others
        raise AudioInputError(f"{sph}: unreadable ({error}); TED-LIUM's SPH files are uncompressed NIST SPHERE, "
                              "which soundfile reads (a shorten-compressed SPH needs sph2pipe first)") from error
    if len(samples) == 0:
        raise AudioInputError(f"{sph}: no samples")
    mono = samples[:, 0] if samples.shape[1] == 1 else samples.astype(np.int32).mean(axis=1).round().astype(np.int16)
    with atomic_path(target, suffix=".wav") as temporary:
        soundfile.write(str(temporary), mono, rate, subtype="PCM_16", format="WAV")
    return len(mono) / rate


def take_tedlium_talk(talk: Any, recording: TedliumTalk, segments: Sequence[StmSegment], split_dir: Path,
                      config: TedliumConfig) -> tuple[Path, float, str, dict[str, Any]]:
    """Make the audio and anchors of one matched talk (see the module docstring).

    Returns ``(wav, duration, action, anchors)``: ``action`` is ``converted`` or ``reused``, ``anchors`` the
    statistics of :func:`corpus.anchors.anchor_chunks`. Raises :class:`AudioInputError` naming the file when the
    SPH cannot be read.
    """
    stem = talk_stem(talk.talk_id)
    wav = split_dir / f"{stem}.wav"
    anchors = anchors_path_for(wav)
    marker = split_dir / f"{stem}.tedlium.json"
    # Synthesis and real-recording outputs of this talk would pass for its own: they go.
    for stale in (timings_path_for(wav), split_dir / f"{stem}.json", split_dir / f"{stem}.real.json"):
        stale.unlink(missing_ok=True)
    origin = {"recording": recording.talk_id, "sph_sha256": sha256_file(recording.sph),
              "stm_sha256": sha256_file(recording.stm), "tokens": tokens_digest(talk.words),
              "config": dataclasses.asdict(config), "version": TEDLIUM_VERSION}
    fingerprint = sha256_json(origin)
    previous = read_json(marker)
    if (previous is not None and previous.get("fingerprint") == fingerprint and wav.is_file() and anchors.is_file()
            and wav.stat().st_size == previous.get("wav_size")):
        return wav, float(previous["duration_s"]), "reused", previous["anchors"]
    marker.unlink(missing_ok=True)  # the completion marker goes first
    duration = _to_wav(recording.sph, wav)
    chunks, stats = anchor_chunks(talk.words, [segment.timed() for segment in segments], duration=duration,
                                  max_chunk_s=config.anchor_chunk_s, min_matched_share=config.min_anchor_share)
    write_anchors(anchors, chunks)
    duration = round(duration, 6)
    write_json(marker, {**origin, "fingerprint": fingerprint, "duration_s": duration,
                        "wav_size": wav.stat().st_size, "anchors": stats})
    return wav, duration, "converted", stats
