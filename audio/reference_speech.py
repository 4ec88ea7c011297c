"""Synthetic speech with known word timings, for the aligner's tests and ``benchmarks/alignment.py``.

A thin adapter over :func:`audio.synthesis.synthesize_talk`, the project's one implementation of speech
synthesis with engine word timings (the pipeline's synthesis stage uses it too):

* the text is cut into benchmark tokens and labels by :func:`corpus.text.normalize_transcript` (the
  tokens are exactly :func:`corpus.text.tokenize_for_inference`'s, so they are what an aligner is given);
* the tokens are spoken punctuated (marks and sentence capitals reach the engine, so it makes its own pauses)
  by the flite library (voice ``slt`` unless told otherwise) into a 16 kHz mono WAV, sentence-sized chunks
  joined at exact sample offsets (see :mod:`audio.synthesis`); a ``<stem>.timings.tsv`` is written beside it;
* the reference time of a token is the engine's own span of its phones (phone-exact; a clitic such as
  ``n't`` gets the phones that spell it); a token the engine did not say gets NaN with ``aligned=False``;
* a boundary is at a pause when the engine put silence there (:func:`aligner.evaluation.pause_flags`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from aligner.evaluation import pause_flags
from aligner.pronounce import flite_available as _flite_command_available
from audio.engines import engine_available
from audio.synthesis import synthesize_talk
from corpus.text import normalize_transcript
from corpus.timings import WordTiming

__all__ = ["Reference", "flite_available", "synthesize"]


@dataclass
class Reference:
    """A synthesised utterance: benchmark tokens, their engine timings, pause flags, duration (s)."""

    words: list[str]
    timings: list[WordTiming]
    pause_before: list[bool]
    pause_after: list[bool]
    duration: float


def flite_available(command: str | None = "flite") -> bool:
    """Whether flite can synthesise here (its library) and the aligner can use its command for pronunciations."""
    return _flite_command_available(command) and engine_available("flite")


def synthesize(text: str, wav_path: str | os.PathLike, *, voice: str = "slt", engine: str = "flite",
               rate: float = 1.0, pitch: float = 1.0) -> Reference:
    """Speak ``text`` into ``wav_path`` (16 kHz mono); the reference timings of its benchmark tokens."""
    words, labels = normalize_transcript(text)
    if not words:
        raise ValueError("nothing to synthesise: the text has no words")
    result = synthesize_talk(words, labels, Path(wav_path), engine=engine, voice=voice, rate=rate, pitch=pitch,
                             punctuated=True)
    nan = math.nan
    timings = [
        WordTiming(t.word, t.start, t.end, True) if t.aligned else WordTiming(t.word, nan, nan, False)
        for t in result.word_timings
    ]
    before, after = pause_flags(timings, result.duration)
    return Reference(list(words), timings, before, after, result.duration)
