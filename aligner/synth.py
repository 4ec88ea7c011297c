"""Synthetic speech with known word timings, from flite (for tests and ``benchmarks/alignment.py``).

Reference word timings
----------------------
``flite -psdur`` prints every phone of the utterance with its end time (``pau`` for pauses); the waveform is
generated from exactly these durations, so phone boundaries are exact. The text is spoken one sentence per
flite call and the waveforms concatenated (see :func:`synthesize`). flite does not print which word a
phone belongs to, so the words are recovered like this: each alignment unit (benchmark token, contractions
merged, :func:`aligner.pronounce.make_units`) is run through flite alone (``flite -t UNIT -ps``), the
concatenation of these phone strings is aligned with the utterance's phone string (pauses removed) by
difflib, and a unit spans its phones (phones of a mismatching stretch are shared out in order; a context
rule such as ``the`` -> DH IY before a vowel keeps the phone count). A merged unit is split at the phone
boundary given by :func:`aligner.pronounce.clitic_phone_count` on flite's phones. A word boundary is "at a
pause" when a ``pau`` phone lies next to it.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aligner.pronounce import ascii_fold, clitic_phone_count, flite_available, flite_phones, make_units
from aligner.types import WordTiming

__all__ = ["Reference", "synthesize", "split_sentences", "flite_available"]


@dataclass
class Reference:
    """A synthesised utterance: benchmark tokens, their flite timings, pause flags, duration (s)."""

    words: list[str]
    timings: list[WordTiming]
    pause_before: list[bool]
    pause_after: list[bool]
    duration: float


def _psdur(stdout: str) -> list[tuple[str, float, float]]:
    """``(phone, start, end)`` from ``-psdur`` output; flite restarts the clock at every utterance
    (sentence) and the waveform concatenates them, so each restart adds the previous utterance's length."""
    phones: list[tuple[str, float, float]] = []
    offset, previous = 0.0, 0.0
    for item in stdout.split():
        name, _, end = item.rpartition(":")
        try:
            end_time = float(end)
        except ValueError:
            continue
        if offset + end_time < previous - 1e-9:  # a new utterance
            offset = previous
        phones.append((name, previous, offset + end_time))
        previous = offset + end_time
    return phones


_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_ABBREVIATION = re.compile(r"(?:^|\s)(?:mr|mrs|ms|dr|st|prof|vs|etc|no)\.$", re.IGNORECASE)


def split_sentences(text: str) -> list[str]:
    """Split at ``.``/``!``/``?`` followed by white space (not after Mr., Dr., ...); empty pieces dropped."""
    pieces: list[str] = []
    for piece in (piece.strip() for piece in _SENTENCE_END.split(text)):
        if not piece:
            continue
        if pieces and _ABBREVIATION.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {piece}"
        else:
            pieces.append(piece)
    return pieces


def _speak(sentence: str, voice: str, command: str, scratch: Path) -> tuple[np.ndarray, int, list]:
    import soundfile

    wav = scratch / "piece.wav"
    done = subprocess.run([command, "-voice", voice, "-t", ascii_fold(sentence), "-psdur", "-o", str(wav)],
                          capture_output=True, text=True, check=True)
    samples, rate = soundfile.read(str(wav), dtype="float32")
    return samples, rate, _psdur(done.stdout)


def synthesize(text: str, wav_path: str | os.PathLike, *, voice: str = "slt", command: str = "flite") -> Reference:
    """Speak ``text`` with flite into ``wav_path``; the reference timings of its benchmark tokens.

    The tokens are ``punctuation.text.tokenize_for_inference`` of each sentence, concatenated. Each sentence
    is synthesised by its own flite call and the waveforms are concatenated, so every sentence's phone times
    are offset by the real length of the audio before it (flite's own multi-sentence output drifts: each
    sentence's waveform is a few ms shorter than its last phone end). The WAV has flite's rate (16 kHz for
    ``slt``/``awb``/``rms``/``kal16``, 8 kHz for ``kal``).
    """
    from punctuation.text import tokenize_for_inference

    if not flite_available(command):
        raise FileNotFoundError(f"{command} is not installed (apt-get install flite)")
    wav_path = Path(wav_path)
    wav_path.parent.mkdir(parents=True, exist_ok=True)
    pieces, words, phones, offset, rate = [], [], [], 0.0, None
    with tempfile.TemporaryDirectory(prefix="synth-") as scratch:
        for sentence in split_sentences(text):
            sentence_words = tokenize_for_inference(sentence)
            samples, rate, sentence_phones = _speak(sentence, voice, command, Path(scratch))
            pieces.append(samples)
            words += sentence_words
            phones += [(name, offset + start, offset + end) for name, start, end in sentence_phones]
            offset += len(samples) / rate
    if not pieces:
        raise ValueError("nothing to synthesise: the text has no sentence")
    import soundfile

    soundfile.write(str(wav_path), np.concatenate(pieces), rate, subtype="PCM_16")
    return _reference(words, phones, offset, command)


def _reference(words: list[str], phones: list[tuple[str, float, float]], duration: float,
               command: str) -> Reference:
    spoken = [index for index, phone in enumerate(phones) if phone[0] != "pau"]
    units = make_units(words)
    unit_phones = [list(flite_phones(unit.text, command)) for unit in units]
    expected, owner = [], []
    for index, unit_list in enumerate(unit_phones):
        expected += unit_list
        owner += [index] * len(unit_list)
    matcher = difflib.SequenceMatcher(None, expected, [phones[k][0] for k in spoken], autojunk=False)
    phone_owner: dict[int, int] = {}  # utterance phone index -> unit index
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(i2 - i1):
                phone_owner[spoken[j1 + offset]] = owner[i1 + offset]
        elif tag in ("replace", "insert"):
            for offset in range(j2 - j1):
                if tag == "replace":
                    source = i1 + offset * (i2 - i1) // (j2 - j1)
                else:
                    source = i1 - 1 if i1 > 0 else 0
                if 0 <= source < len(owner):
                    phone_owner[spoken[j1 + offset]] = owner[source]
    by_unit: dict[int, list[int]] = {}
    for phone_index, unit_index in sorted(phone_owner.items()):
        by_unit.setdefault(unit_index, []).append(phone_index)

    nan = float("nan")
    timings = [WordTiming(word, nan, nan, False) for word in words]
    pause_before, pause_after = [False] * len(words), [False] * len(words)
    for unit_index, unit in enumerate(units):
        indices = by_unit.get(unit_index)
        if not indices:
            continue
        first, last = indices[0], indices[-1]
        start, end = phones[first][1], phones[last][2]
        before = first > 0 and phones[first - 1][0] == "pau"
        after = last + 1 < len(phones) and phones[last + 1][0] == "pau"
        if len(unit.tokens) == 1:
            token = unit.tokens[0]
            timings[token] = WordTiming(words[token], start, end, True)
            pause_before[token], pause_after[token] = before, after
            continue
        host, clitic = unit.tokens
        names = [phones[k][0] for k in indices]
        count = clitic_phone_count(names, [list(flite_phones(unit.host or "", command))], unit.clitic or "")
        split = phones[indices[-count]][1] if 0 < count < len(indices) else (start + end) / 2
        timings[host] = WordTiming(words[host], start, split, True)
        timings[clitic] = WordTiming(words[clitic], split, end, True)
        pause_before[host], pause_after[clitic] = before, after
    return Reference(list(words), timings, pause_before, pause_after, duration)
