"""Real recordings instead of synthetic speech: checking that every talk has a usable WAV.

:func:`use_real_audio` checks that ``<audio_dir>/<stem>.wav`` exists and is readable for
every talk (any sample rate and channel count :mod:`soundfile` reads; features resample to 16 kHz and mix to
mono). Their word timings come from the forced aligner (``aligner.align``), not from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audio.synthesis import talk_stem

__all__ = ["AudioInputError", "RealAudio", "use_real_audio"]


class AudioInputError(ValueError):
    """Audio files that are missing or unreadable (the message names every file)."""


@dataclass(frozen=True)
class RealAudio:
    talk_id: str
    wav: Path
    duration: float
    sample_rate: int
    channels: int


def use_real_audio(audio_dir: str | Path, transcripts: Sequence[Any]) -> list[RealAudio]:
    """Check that ``<audio_dir>/<talk_stem(talk_id)>.wav`` exists and is readable for every talk.

    ``transcripts`` are objects with ``talk_id`` (e.g. :class:`corpus.talks.Talk`) or plain talk ids. Any
    sample rate and channel count :mod:`soundfile` reads is accepted (features mix to mono and resample to
    16 kHz). Raises :class:`AudioInputError` listing every missing, unreadable or empty file.
    """
    import soundfile

    audio_dir = Path(audio_dir)
    found: list[RealAudio] = []
    problems: list[str] = []
    for item in transcripts:
        talk_id = item if isinstance(item, str) else item.talk_id
        wav = audio_dir / f"{talk_stem(talk_id)}.wav"
        if not wav.is_file():
            problems.append(f"{wav}: missing (talk {talk_id!r})")
            continue
        try:
            info = soundfile.info(str(wav))
        except (RuntimeError, OSError) as error:  # soundfile raises LibsndfileError (a RuntimeError)
            problems.append(f"{wav}: unreadable ({error})")
            continue
        if info.frames == 0:
            problems.append(f"{wav}: no samples")
            continue
        found.append(RealAudio(talk_id, wav, info.frames / info.samplerate, info.samplerate, info.channels))
    if problems:
        listing = "\n  ".join(problems)
        raise AudioInputError(f"{len(problems)} of {len(transcripts)} talks lack usable audio:\n  {listing}")
    return found
