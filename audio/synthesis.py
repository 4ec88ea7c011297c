"""Synthetic speech for the benchmark's talks, with the engine's own word timings as ground truth.

The IWSLT2011 benchmark has text only. To study speech features under control, each talk is read aloud by a
speech synthesiser: 16 kHz mono WAV per talk plus the time span of every benchmark token, taken from the
engine itself (not from an aligner, so the aligner can be scored against it).

Engines (Debian packages ``flite`` and ``espeak-ng``; their shared libraries are called through
:mod:`ctypes`, so no compiler and no Python binding is needed)

``flite`` (voices ``slt``, ``awb``, ``rms``, ``kal16``, ``kal``; ``kal`` is 8 kHz and is resampled)
    ``flite -psdur`` prints the end time of every phone segment, but not which word a phone belongs to.
    The library call behind it (``flite_synth_text``) gives the whole utterance structure, so timings are
    read from there: each whitespace-separated input token is a ``Token`` item, its daughters are the
    ``Word`` items it expands to (``6,400`` -> *six thousand four hundred*), each word's syllables hold its
    phone segments, and a segment spans ``[previous segment's end, its end]`` of the ``Segment`` relation --
    the very numbers ``-psdur`` prints (``tests/test_audio_synthesis.py`` checks that they are equal).
    A token spans its first phone's start to its last phone's end; pauses (``pau``) belong to no word.
    Rate: ``duration_stretch = 1 / rate``. Pitch: ``f0_shift = pitch`` (flite multiplies its f0 contour by
    it); measured with YIN (median f0 at 0.8 / 1.0 / 1.2): ``slt`` 140 / 174 / 208 Hz, ``awb`` 97 / 123 /
    150 Hz, ``kal16`` 77 / 91 / 111 Hz; ``rms`` ignores it (98 Hz whatever the setting, as it ignores
    ``int_f0_target_mean``), so ``rms`` talks vary in rate only.
``espeak-ng`` (voices by name: ``en-us``, ``en``, ``en-gb-x-rp``, ``en-029``, variants such as ``en-us+f3``;
    22.05 kHz, resampled)
    Synthesised with phoneme events on (``espeakINITIALIZE_PHONEME_EVENTS``): a *word* event gives the
    character position of a word in the text and the output sample at which it starts, every *phoneme*
    event the sample at which that phoneme starts. A word spans from its word event to the next word event
    or the next pause phoneme (``_``, ``_:``, ``_!``), whichever comes first, and the phoneme events inside
    split it into phones; a token spans its words. These are the engine's own sample positions, not an
    estimate from the audio (espeak-ng's output is not bit-identical from call to call -- it keeps some
    state between utterances -- but timings and audio always come from the same call). Word events
    point at the first character of the word (or the blank before it, after a sentence end); they are mapped
    to the input token whose characters contain that position, or the next token. espeak-ng *joins*
    unstressed function words to a neighbour (``in the`` -> ``I n D @2``, ``many of`` -> ``m E n I ; @ v``)
    and reports one word for both; the joined word's phones are dealt out in order, each token taking as many
    as espeak-ng gives it said alone (``espeak_TextToPhonemes``), the last token the rest
    (``source=join_rule``; about 7 % of tokens). Rate: ``175 * rate`` words per minute (espeak's default
    is 175); pitch: espeak's 0-99 pitch parameter ``50 * pitch``.

What is spoken
--------------
Tokens are spoken lower-case, exactly as in the benchmark except for these documented spellings: a clitic
(``n't``, ``'s``, ``'re``, ``'m``, ``'ll``, ``'ve``, ``'d``) is written onto the word before it (``do n't``
-> ``don't``; the engines cannot say a lone ``n't``); ``mr.`` and ``dr.`` are written ``mister`` and
``doctor`` (a period there would make the engine pause); mangled music notes (``\\ufffd?``) are removed, and
tokens with nothing left to say (``--``, ``/seg``, ``/transcript``, empty) are *silent*: not sent to the
engine, their label's mark moves to the spoken token before them, and their timing is the zero-length span
at the end of the previous token with ``aligned=False``.

``punctuated=True`` appends each token's mark (``,`` ``.`` ``?`` from its label) and capitalises the first
letter of each sentence (espeak-ng takes a period before a lower-case word for an abbreviation and makes no
pause), so the engine renders its own pauses and intonation; ``punctuated=False`` is the control condition:
the same lower-case tokens, no mark at all, so no punctuation cue reaches the audio through the engine.

Clitics: a token and its clitics become one engine token, which is split back into benchmark tokens by
phone. When the engine gives the clitic its own word (flite does for ``'s``: *it* + *'s*), that word's
span is used (``source=engine``). Otherwise (``don't`` is one flite word, ``d ow n t``; espeak never splits)
the clitic takes the trailing phones that spell it -- ``n't``: final ``t``, ``n`` and a schwa before them
(``doesn't`` = ``d ah z | ax n t``); ``'s``: ``s``/``z`` (+ schwa); ``'m``: ``m``; ``'ll``: ``l`` (+ schwa);
``'re``: ``r``/``er``/espeak ``3``; ``'ve``: ``v``; ``'d``: ``d`` -- and the host keeps the rest
(``source=clitic_rule``; phone-exact but the phone attribution is a rule). If no phone matches, the clitic
takes the last phone; when the host would be left with nothing (espeak-ng renders the ``m`` of ``i'm``
inside the vowel, with zero length), the clitic gets a zero-length span at the token's end with
``aligned=False`` (``source=unaligned``).

Long talks: chunks
------------------
A talk is synthesised in chunks of at most ``max_chunk_tokens`` spoken tokens, concatenated in the
engine's own sample rate and resampled once at the end, so that each chunk's timings are shifted by the
exact number of samples before it (offsets are exact to the sample; the final resampling moves nothing by
more than one output sample, 62.5 us).

* ``punctuated=True``: chunks are whole sentences (a chunk ends at a PERIOD/QUESTION; a sentence longer
  than the limit is cut at its last COMMA within the limit, else at the limit). The leading silence of every
  chunk but the first is cut at its first phone; the silence after a chunk is the engine's own trailing
  pause, padded to ``join_pause_s / rate`` (default 0.25 s; espeak ends an utterance with almost none).
* ``punctuated=False``: chunk lengths are drawn from ``[max_chunk_tokens // 2, max_chunk_tokens]`` with
  ``random.Random(seed)`` *regardless of the labels*, and every join is cut phone to phone (leading and
  trailing silence removed), so a join carries no pause and its position says nothing about punctuation.

Batch synthesis and resuming
----------------------------
:func:`synthesize_talks` draws per talk, from ``random.Random(f"{seed}/{talk_id}")`` (independent of the
order and number of talks): a voice from ``voices`` (``"engine:voice"`` strings), a rate from
``rate_range`` and a pitch from ``pitch_range`` (uniform, rounded to 3 decimals). It writes
``<stem>.wav``, ``<stem>.timings.tsv`` and, last, ``<stem>.json`` (settings, fingerprint, sample count) per
talk, where ``stem = talk_stem(talk_id)``. A talk is skipped when its JSON has the same settings fingerprint
(engine, voice, rate, pitch, mode, chunking, seed, engine version, this module's ``SYNTHESIS_VERSION`` and
a hash of the talk's words and labels) and its WAV and TSV are complete; otherwise it is redone. A talk that
fails is recorded in the report with its error and the others carry on.

Timings TSV: header ``index word start end aligned source``; one row per benchmark token of the talk, times
in seconds (6 decimals), ``aligned`` 1/0, ``source`` in ``engine`` (the engine's own token/word span),
``clitic_rule``, ``join_rule`` (phone-exact spans attributed by the rules above), ``silent`` (not spoken)
or ``unaligned`` (spoken, but no phone of its own). Read it with :func:`read_timings`.

Speed (one core, ``nice -n 19`` beside a training run, talk 1178 of test2011, 617 tokens, punctuated):
flite ``slt`` 181 s of audio in 2.7 s (68x real time), ``kal16`` ~1,400x, espeak-ng ``en-us`` ~800x.
On that talk flite gives every token a span (585 engine, 32 clitic rule); espeak-ng 513 engine, 56 clitic
rule, 46 join rule, 2 unaligned (``'m``).

Real recordings: :func:`use_real_audio` checks that ``<audio_dir>/<stem>.wav`` exists and is readable for
every talk (any sample rate and channel count :mod:`soundfile` reads; features resample to 16 kHz and mix to
mono). Their word timings come from the forced aligner (``aligner.align``), not from here.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CLITICS",
    "OUTPUT_SAMPLE_RATE",
    "SYNTHESIS_VERSION",
    "AudioInputError",
    "EngineUnavailableError",
    "RealAudio",
    "SynthesisResult",
    "WordTiming",
    "engine_available",
    "read_timings",
    "synthesize_talk",
    "synthesize_talks",
    "talk_stem",
    "timings_path_for",
    "use_real_audio",
    "write_timings",
]

#: Sample rate of every WAV written here.
OUTPUT_SAMPLE_RATE = 16000
#: Bumped whenever the audio or timings this module writes would change; part of the settings fingerprint.
SYNTHESIS_VERSION = 1
#: Benchmark tokens that are written onto the word before them.
CLITICS: frozenset[str] = frozenset({"n't", "'s", "'re", "'m", "'ll", "'ve", "'d"})
#: Benchmark tokens the engines are not given (see the module docstring).
SILENT_TOKENS: frozenset[str] = frozenset({"--", "/seg", "/transcript"})
SPOKEN_SPELLINGS: dict[str, str] = {"mr.": "mister", "dr.": "doctor"}
MARKS: dict[str, str] = {"O": "", "COMMA": ",", "PERIOD": ".", "QUESTION": "?"}
_STRENGTH = {"O": 0, "COMMA": 1, "PERIOD": 2, "QUESTION": 3}
_SENTENCE_END = frozenset({"PERIOD", "QUESTION"})
_MANGLED = re.compile("\ufffd\\??")
_EDGE_PUNCTUATION = "\"'`.,:;!?(){}[]<>"

_SCHWAS = frozenset({"ax", "ah", "ih", "@", "i", "i2", "a#", "3"})
#: Clitic -> (phones it may end with, from the end, at most that many; schwas allowed before them).
_CLITIC_PHONES: dict[str, tuple[tuple[frozenset[str], ...], frozenset[str]]] = {
    "n't": ((frozenset({"t"}), frozenset({"n"})), _SCHWAS),
    "'s": ((frozenset({"s", "z"}),), _SCHWAS),
    "'m": ((frozenset({"m"}),), frozenset()),
    "'ll": ((frozenset({"l", "el", "@l"}),), _SCHWAS),
    "'re": ((frozenset({"r", "er", "3", "3:", "@", "r-"}),), frozenset()),
    "'ve": ((frozenset({"v"}),), _SCHWAS),
    "'d": ((frozenset({"d"}),), _SCHWAS),
}


class EngineUnavailableError(RuntimeError):
    """The speech engine's shared library or voice is not installed."""


class AudioInputError(ValueError):
    """Audio files that are missing or unreadable (the message names every file)."""


@dataclass(frozen=True)
class WordTiming:
    """Span of one benchmark token in its talk's audio (seconds); ``aligned=False`` when it has none.

    Same first fields as ``aligner.WordTiming``; ``source`` says where the span comes from.
    """

    word: str
    start: float
    end: float
    aligned: bool
    source: str = "engine"


@dataclass
class SynthesisResult:
    wav: Path
    duration: float
    word_timings: list[WordTiming]
    timings_path: Path
    sample_rate: int = OUTPUT_SAMPLE_RATE
    chunks: int = 0
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RealAudio:
    talk_id: str
    wav: Path
    duration: float
    sample_rate: int
    channels: int


# --- engines --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Segment:
    name: str
    start: int  # samples at the engine's rate
    end: int


@dataclass
class _EngineOutput:
    audio: np.ndarray  # float32, engine rate
    sample_rate: int
    #: Per input token: its engine words, each a list of phone segments (empty: nothing was said).
    tokens: list[list[tuple[str, list[_Segment]]]]


class _Flite:
    name = "flite"
    _LIBRARIES = ("libflite.so.1", "libflite_usenglish.so.1", "libflite_cmulex.so.1")

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libflite.so.1", mode=ctypes.RTLD_GLOBAL)
            for name in self._LIBRARIES[1:]:
                ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            raise EngineUnavailableError(
                f"flite library not found ({error}); install the Debian package 'flite'"
            ) from error
        P, S, F = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_float
        for fname, restype, argtypes in [
            ("flite_init", ctypes.c_int, []),
            ("flite_synth_text", P, [S, P]),
            ("utt_relation", P, [P, S]),
            ("relation_head", P, [P]),
            ("item_next", P, [P]),
            ("item_daughter", P, [P]),
            ("item_as", P, [P, S]),
            ("item_feat_string", S, [P, S]),
            ("item_feat_float", F, [P, S]),
            ("ffeature_float", F, [P, S]),
            ("utt_wave", ctypes.POINTER(_CstWave), [P]),
            ("delete_utterance", None, [P]),
            ("feat_set_float", None, [P, S, F]),
        ]:
            function = getattr(self.lib, fname)
            function.restype, function.argtypes = restype, argtypes
        self.lib.flite_init()
        self.voices: dict[str, int] = {}
        self.version = "flite-2.2 (libflite.so.1)"

    def _voice(self, voice: str) -> int:
        if voice not in self.voices:
            if not re.fullmatch(r"[a-z0-9_]+", voice):
                raise EngineUnavailableError(f"flite voice name {voice!r} is not valid")
            try:
                library = ctypes.CDLL(f"libflite_cmu_us_{voice}.so.1")
                register = getattr(library, f"register_cmu_us_{voice}")
            except (OSError, AttributeError) as error:
                raise EngineUnavailableError(
                    f"flite voice {voice!r} not found ({error}); built-in voices: slt awb rms kal16 kal"
                ) from error
            register.restype, register.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
            pointer = register(None)
            if not pointer:
                raise EngineUnavailableError(f"flite voice {voice!r} failed to register")
            self.voices[voice] = pointer
        return self.voices[voice]

    def synthesize(self, texts: Sequence[str], *, voice: str, rate: float, pitch: float) -> _EngineOutput:
        pointer = self._voice(voice)
        features = ctypes.cast(pointer, ctypes.POINTER(_CstVoice)).contents.features
        lib = self.lib
        lib.feat_set_float(features, b"duration_stretch", 1.0 / rate)
        lib.feat_set_float(features, b"f0_shift", pitch)
        utterance = lib.flite_synth_text(" ".join(texts).encode("utf-8"), pointer)
        if not utterance:
            raise RuntimeError("flite_synth_text returned no utterance")
        try:
            wave = lib.utt_wave(utterance).contents
            sample_rate = wave.sample_rate
            count = wave.num_samples * wave.num_channels
            if count <= 0 or not wave.samples:
                raise RuntimeError("flite produced no audio")
            audio = np.ctypeslib.as_array(wave.samples, shape=(count,)).astype(np.float32) / 32768.0
            if wave.num_channels > 1:
                audio = audio.reshape(-1, wave.num_channels).mean(axis=1)

            def seconds_to_samples(t: float) -> int:
                return min(len(audio), max(0, round(t * sample_rate)))

            def name_of(item: int) -> str:
                return (lib.item_feat_string(item, b"name") or b"").decode("utf-8", "replace")

            flite_tokens: list[tuple[str, list[tuple[str, list[_Segment]]]]] = []
            token = lib.relation_head(lib.utt_relation(utterance, b"Token"))
            while token:
                words = []
                word = lib.item_daughter(token)
                while word:
                    segments = []
                    structure = lib.item_as(word, b"SylStructure")
                    syllable = lib.item_daughter(structure) if structure else None
                    while syllable:
                        segment = lib.item_daughter(syllable)
                        while segment:
                            start = seconds_to_samples(lib.ffeature_float(segment, b"R:Segment.p.end"))
                            end = seconds_to_samples(lib.item_feat_float(segment, b"end"))
                            segments.append(_Segment(name_of(segment), start, end))
                            segment = lib.item_next(segment)
                        syllable = lib.item_next(syllable)
                    words.append((name_of(word), segments))
                    word = lib.item_next(word)
                flite_tokens.append((name_of(token), words))
                token = lib.item_next(token)
        finally:
            lib.delete_utterance(utterance)
        return _EngineOutput(audio, sample_rate, _match_tokens(texts, flite_tokens))


class _CstVoice(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("features", ctypes.c_void_p), ("ffunctions", ctypes.c_void_p)]


class _CstWave(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_char_p),
        ("sample_rate", ctypes.c_int),
        ("num_samples", ctypes.c_int),
        ("num_channels", ctypes.c_int),
        ("samples", ctypes.POINTER(ctypes.c_short)),
    ]


def _bare(text: str) -> str:
    return text.strip(_EDGE_PUNCTUATION).lower()


def _match_tokens(texts: Sequence[str], engine_tokens: list[tuple[str, list]]) -> list[list]:
    """Engine token items -> input tokens: one to one when the counts agree, else by name (difflib)."""
    if len(engine_tokens) == len(texts):
        return [words for _, words in engine_tokens]
    import difflib

    out: list[list] = [[] for _ in texts]
    matcher = difflib.SequenceMatcher(
        None, [_bare(t) for t in texts], [_bare(name) for name, _ in engine_tokens], autojunk=False
    )
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            out[block.a + k] = engine_tokens[block.b + k][1]
    return out


class _EspeakEvent(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", ctypes.c_char * 8),
    ]


_ESPEAK_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_EspeakEvent)
)
_EV_WORD, _EV_PHONEME = 1, 7


class _Espeak:
    name = "espeak-ng"

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libespeak-ng.so.1")
        except OSError as error:
            raise EngineUnavailableError(
                f"espeak-ng library not found ({error}); install the Debian package 'espeak-ng'"
            ) from error
        lib = self.lib
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Synth.argtypes = [
            ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
            ctypes.c_void_p, ctypes.c_void_p,
        ]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        # AUDIO_OUTPUT_SYNCHRONOUS = 2; espeakINITIALIZE_PHONEME_EVENTS | espeakINITIALIZE_DONT_EXIT.
        self.sample_rate = lib.espeak_Initialize(2, 0, None, 0x0001 | 0x8000)
        if self.sample_rate <= 0:
            raise EngineUnavailableError("espeak_Initialize failed (espeak-ng data not installed?)")
        self._chunks: list[np.ndarray] = []
        self._events: list[tuple[int, int, int, str]] = []
        lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int]
        self._counts: dict[str, int] = {}
        self._voice = None
        self._callback = _ESPEAK_CALLBACK(self._on_synth)  # kept referenced: espeak calls it later
        lib.espeak_SetSynthCallback(self._callback)
        self.version = "espeak-ng 1.51 (libespeak-ng.so.1)"

    def _on_synth(self, wav, count, events) -> int:  # noqa: ANN001 (ctypes callback)
        if wav and count > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(count,)).astype(np.float32) / 32768.0)
        index = 0
        while events[index].type != 0:
            event = events[index]
            if event.type in (_EV_WORD, _EV_PHONEME):
                name = bytes(event.id).split(b"\0")[0].decode("latin-1") if event.type == _EV_PHONEME else ""
                self._events.append((event.type, event.text_position, event.sample, name))
            index += 1
        return 0

    def synthesize(self, texts: Sequence[str], *, voice: str, rate: float, pitch: float) -> _EngineOutput:
        lib = self.lib
        if lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise EngineUnavailableError(f"espeak-ng voice {voice!r} not found (see `espeak-ng --voices=en`)")
        if voice != self._voice:
            self._voice, self._counts = voice, {}
        lib.espeak_SetParameter(1, max(80, min(450, round(175 * rate))), 0)  # espeakRATE
        lib.espeak_SetParameter(3, max(0, min(99, round(50 * pitch))), 0)  # espeakPITCH
        # Character offsets of the tokens in the text espeak is given.
        starts, position = [], 0
        for text in texts:
            starts.append(position)
            position += len(text) + 1
        data = " ".join(texts).encode("utf-8")
        self._chunks, self._events = [], []
        status = lib.espeak_Synth(data, len(data) + 1, 0, 1, 0, 1, None, None)  # POS_CHARACTER, CHARS_UTF8
        lib.espeak_Synchronize()
        if status != 0:
            raise RuntimeError(f"espeak_Synth failed with status {status}")
        audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.float32)
        total = len(audio)
        import bisect

        # Words: [word event, next word event or pause phoneme); phoneme events inside split them further.
        words: list[dict[str, Any]] = []
        current: dict[str, Any] | None = None
        for kind, text_position, sample, name in self._events:
            sample = min(sample, total)
            if kind == _EV_WORD:
                if current is not None:
                    current["end"] = sample
                offset = text_position - 1
                index = bisect.bisect_right(starts, offset) - 1
                if index < 0 or offset >= starts[index] + len(texts[index]):
                    index += 1  # the blank before a token
                current = {"token": index, "start": sample, "phonemes": []}
                words.append(current)
            elif name.startswith("_"):
                if current is not None:
                    current["end"] = sample
                current = None
            elif current is not None:
                current["phonemes"].append((name, sample))
        if current is not None:
            current["end"] = total
        tokens: list[list[tuple[str, list[_Segment]]]] = [[] for _ in texts]
        for word in words:
            if not 0 <= word["token"] < len(texts):
                continue
            start, end = word["start"], max(word["start"], word["end"])
            inside = [(n, s) for n, s in word["phonemes"] if start < s < end]
            names = [next((n for n, s in word["phonemes"] if s <= start), "")] + [n for n, _ in inside]
            points = [start] + [s for _, s in inside] + [end]
            segments = [_Segment(n, a, b) for n, a, b in zip(names, points, points[1:]) if b > a]
            if segments:
                tokens[word["token"]].append(("", segments))
        self._split_joined_words(texts, tokens)
        return _EngineOutput(audio, self.sample_rate, tokens)

    def _phoneme_count(self, text: str) -> int:
        """Phonemes espeak-ng gives ``text`` said on its own (current voice), pauses not counted."""
        if text not in self._counts:
            pointer = ctypes.c_char_p(text.encode("utf-8"))
            # phonememode: ASCII phoneme names separated by "|" (bits 8-23 = separator character).
            out = self.lib.espeak_TextToPhonemes(ctypes.byref(pointer), 1, ord("|") << 8) or b""
            items = [item.strip("'," ) for item in re.split(r"[| ]", out.decode("latin-1"))]
            self._counts[text] = sum(1 for item in items if item and not item.startswith("_"))
        return self._counts[text]

    def _split_joined_words(self, texts: Sequence[str], tokens: list[list[tuple[str, list[_Segment]]]]) -> None:
        """Share a word espeak-ng made of several tokens (``in the``, ``many of``) among them, in place.

        espeak-ng joins unstressed function words to a neighbour and reports one word event for both, so the
        tokens after the first get no event. The joined word's phones are dealt out in order: each token
        takes as many phones as espeak-ng gives it said alone (``in`` 2: ``I n`` | ``D @2`` for ``the``),
        leaving at least one for each token after it; the last takes the rest. The pieces are marked
        ``join_rule``. A token espeak-ng would not say alone (0 phonemes) stays silent.
        """
        index = 0
        while index < len(texts):
            if not tokens[index]:
                index += 1
                continue
            after = index + 1
            while after < len(texts) and not tokens[after] and self._phoneme_count(texts[after]) > 0:
                after += 1
            if after > index + 1:
                group = list(range(index, after))
                name, segments = tokens[index][-1]
                position = 0
                for n, token in enumerate(group):
                    left = len(group) - n - 1
                    if token == group[-1]:
                        take = len(segments) - position
                    else:
                        onset = 1 if n == 0 and segments and not segments[0].name else 0  # unnamed onset
                        wanted = self._phoneme_count(texts[token]) + onset
                        take = max(0, min(wanted, len(segments) - position - left))
                    piece = segments[position : position + take]
                    position += take
                    if token == index:
                        tokens[index][-1] = ("=join", piece)
                        if not piece:
                            tokens[index].pop()
                    elif piece:
                        tokens[token] = [("=join", piece)]
            index = after


_ENGINES: dict[str, Any] = {}
_ENGINE_CLASSES: dict[str, Callable[[], Any]] = {"flite": _Flite, "espeak-ng": _Espeak}


def _engine(name: str):  # noqa: ANN202
    if name not in _ENGINE_CLASSES:
        raise ValueError(f"unknown engine {name!r}; expected one of {sorted(_ENGINE_CLASSES)}")
    if name not in _ENGINES:
        _ENGINES[name] = _ENGINE_CLASSES[name]()
    return _ENGINES[name]


def engine_available(name: str) -> bool:
    """Whether engine ``name`` (``flite`` or ``espeak-ng``) can be loaded here."""
    try:
        _engine(name)
    except EngineUnavailableError:
        return False
    return True


# --- text -> spoken units -------------------------------------------------------------------------------


@dataclass
class _Unit:
    tokens: list[int]  # benchmark token indices: host first, then its clitics
    text: str  # what the engine is given, without the mark
    label: str  # strongest label of the unit and of silent tokens after it


def _spoken_form(word: str) -> str:
    word = _MANGLED.sub("", word).replace("\ufffd", "").strip()
    if word.lower() in SPOKEN_SPELLINGS:
        return SPOKEN_SPELLINGS[word.lower()]
    if word in SILENT_TOKENS:
        return ""
    if word in CLITICS:
        return word
    return word.strip(_EDGE_PUNCTUATION)


def _units(words: Sequence[str], labels: Sequence[str]) -> tuple[list[_Unit], list[int]]:
    units: list[_Unit] = []
    silent: list[int] = []
    for index, (word, label) in enumerate(zip(words, labels)):
        spoken = _spoken_form(word)
        if not spoken:
            silent.append(index)
            if units and _STRENGTH[label] > _STRENGTH[units[-1].label]:
                units[-1].label = label
            continue
        if spoken in CLITICS and units and units[-1].tokens[-1] == index - 1:
            units[-1].tokens.append(index)
            units[-1].text += spoken
            if _STRENGTH[label] > _STRENGTH[units[-1].label]:
                units[-1].label = label
            continue
        if spoken in CLITICS:
            spoken = spoken.strip("'")  # a clitic with no host: say it as a word
        units.append(_Unit([index], spoken, label))
    return units, silent


def _chunks(units: Sequence[_Unit], *, punctuated: bool, max_tokens: int, seed: int) -> list[tuple[int, int]]:
    """``(first_unit, end_unit)`` chunks (see the module docstring)."""
    chunks: list[tuple[int, int]] = []
    if not punctuated:
        rng = random.Random(seed)
        start = 0
        while start < len(units):
            size = rng.randint(max(1, max_tokens // 2), max_tokens)
            chunks.append((start, min(len(units), start + size)))
            start += size
        return chunks
    # Sentences, cut further when longer than max_tokens.
    sentences: list[tuple[int, int]] = []
    start = 0
    for index, unit in enumerate(units):
        if unit.label in _SENTENCE_END or index == len(units) - 1:
            position = start
            while index + 1 - position > max_tokens:
                commas = [k for k in range(position, position + max_tokens) if units[k].label == "COMMA"]
                cut = commas[-1] + 1 if commas else position + max_tokens
                sentences.append((position, cut))
                position = cut
            sentences.append((position, index + 1))
            start = index + 1
    for first, end in sentences:
        if chunks and end - chunks[-1][0] <= max_tokens:
            chunks[-1] = (chunks[-1][0], end)
        else:
            chunks.append((first, end))
    return chunks


def _split_clitics(
    unit: _Unit, words: Sequence[str], engine_words: list[tuple[str, list[_Segment]]]
) -> list[tuple[int, int, str] | None]:
    """Sample spans ``(start, end, source)`` for each benchmark token of a unit (None: nothing said)."""
    count = len(unit.tokens)
    if not any(segments for _, segments in engine_words):
        return [None] * count
    source = "join_rule" if any(name == "=join" for name, _ in engine_words) else "engine"
    if count == 1:
        segments = [s for _, ws in engine_words for s in ws]
        return [(segments[0].start, segments[-1].end, source)]
    clitics = [words[i] for i in unit.tokens[1:]]
    # The engine gave each clitic its own word (flite: it + 's).
    if len(engine_words) >= count and all(
        name.startswith("'") for name, _ in engine_words[len(engine_words) - (count - 1) :]
    ):
        host_words = engine_words[: len(engine_words) - (count - 1)]
        host = [s for _, ws in host_words for s in ws]
        spans: list[tuple[int, int, str] | None] = [(host[0].start, host[-1].end, "engine") if host else None]
        for _, ws in engine_words[len(engine_words) - (count - 1) :]:
            spans.append((ws[0].start, ws[-1].end, "engine") if ws else None)
        return spans
    # Phone rule, peeling clitics off the end.
    segments = [s for _, ws in engine_words for s in ws]
    clitic_spans: list[tuple[int, int, str] | None] = []
    for clitic in reversed(clitics):
        phones, schwas = _CLITIC_PHONES.get(clitic, ((), frozenset()))
        taken = 0
        for allowed in phones:
            if len(segments) - taken > 1 and _phone(segments[-1 - taken].name) in allowed:
                taken += 1
            else:
                break
        if taken and len(segments) - taken > 1 and _phone(segments[-1 - taken].name) in schwas:
            taken += 1
        if taken == 0 and len(segments) > 1:
            taken = 1
        if taken == 0:
            end = segments[-1].end
            clitic_spans.append((end, end, "unaligned"))
            continue
        clitic_spans.append((segments[-taken].start, segments[-1].end, "clitic_rule"))
        segments = segments[:-taken]
    host_span = (segments[0].start, segments[-1].end, "clitic_rule")
    return [host_span, *reversed(clitic_spans)]


def _written(units: Sequence[_Unit], index: int, punctuated: bool) -> str:
    """The text of a unit as the engine gets it: bare, or with its mark and a capital at a sentence start."""
    unit = units[index]
    if not punctuated:
        return unit.text
    text = unit.text
    if index == 0 or units[index - 1].label in _SENTENCE_END:
        capital = text[:1].upper()
        if len(capital) == 1:
            text = capital + text[1:]
    return text + MARKS[unit.label]


def _phone(name: str) -> str:
    return name.lower().rstrip("0123456789'")


# --- one talk -------------------------------------------------------------------------------------------


def talk_stem(talk_id: str) -> str:
    """File stem for a talk: the id when it is ``[A-Za-z0-9._-]+``, else a cleaned id plus a short hash."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", talk_id) and len(talk_id) <= 120:
        return talk_id
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", talk_id).strip("._-")[:100] or "talk"
    return f"{cleaned}-{hashlib.sha1(talk_id.encode('utf-8')).hexdigest()[:8]}"


def timings_path_for(wav: str | Path) -> Path:
    """``<stem>.timings.tsv`` beside ``<stem>.wav``."""
    wav = Path(wav)
    stem = wav.name[: -len(".wav")] if wav.name.endswith(".wav") else wav.name
    return wav.with_name(f"{stem}.timings.tsv")


def synthesize_talk(
    words: Sequence[str],
    labels: Sequence[str],
    out_wav: str | Path,
    *,
    engine: str,
    voice: str,
    rate: float = 1.0,
    pitch: float = 1.0,
    punctuated: bool,
    seed: int = 0,
    max_chunk_tokens: int = 80,
    join_pause_s: float = 0.25,
) -> SynthesisResult:
    """Speak one talk into ``out_wav`` (16 kHz mono PCM-16) and write ``<stem>.timings.tsv`` beside it.

    ``rate`` and ``pitch`` are factors (1.0 = the voice's default; see the module docstring per engine).
    Returns the WAV path, its duration in seconds and one :class:`WordTiming` per benchmark token.
    """
    import soundfile

    if len(words) != len(labels):
        raise ValueError(f"{len(words)} words but {len(labels)} labels")
    if not words:
        raise ValueError("a talk needs at least one token")
    if not (0.25 <= rate <= 4.0 and 0.25 <= pitch <= 4.0):
        raise ValueError(f"rate and pitch must be factors in [0.25, 4], got rate={rate}, pitch={pitch}")
    unknown = sorted(set(labels) - set(MARKS))
    if unknown:
        raise ValueError(f"unknown labels {unknown}")
    out_wav = Path(out_wav)
    speaker = _engine(engine)
    units, _ = _units(words, labels)
    if not units:
        raise ValueError("nothing to say: every token is silent")

    pieces: list[np.ndarray] = []
    spans: list[tuple[int, int, str] | None] = [None] * len(words)
    offset = 0
    sample_rate = None
    chunks = _chunks(units, punctuated=punctuated, max_tokens=max_chunk_tokens, seed=seed)
    for number, (first, end) in enumerate(chunks):
        chunk_units = units[first:end]
        texts = [_written(units, k, punctuated) for k in range(first, end)]
        output = speaker.synthesize(texts, voice=voice, rate=rate, pitch=pitch)
        if sample_rate is None:
            sample_rate = output.sample_rate
        elif output.sample_rate != sample_rate:
            raise RuntimeError(f"engine changed sample rate mid-talk ({sample_rate} -> {output.sample_rate})")
        audio = output.audio
        said = [s for words_ in output.tokens for _, segs in words_ for s in segs]
        cut_start, cut_end = 0, len(audio)
        if said:
            if number > 0:
                cut_start = min(s.start for s in said)
            if not punctuated and number < len(chunks) - 1:
                cut_end = max(s.end for s in said)
        piece = audio[cut_start:cut_end]
        if punctuated and number < len(chunks) - 1 and said:
            trailing = cut_end - max(s.end for s in said)
            wanted = round(join_pause_s / rate * sample_rate)
            if trailing < wanted:
                piece = np.concatenate([piece, np.zeros(wanted - trailing, np.float32)])
        for unit, engine_words in zip(chunk_units, output.tokens):
            for token, span in zip(unit.tokens, _split_clitics(unit, words, engine_words)):
                if span is not None:
                    spans[token] = (span[0] - cut_start + offset, span[1] - cut_start + offset, span[2])
        pieces.append(piece)
        offset += len(piece)

    audio = np.concatenate(pieces)
    assert sample_rate is not None
    if sample_rate != OUTPUT_SAMPLE_RATE:
        import librosa

        audio = librosa.resample(audio, orig_sr=sample_rate, target_sr=OUTPUT_SAMPLE_RATE, res_type="soxr_hq")
    audio = np.clip(audio, -1.0, 1.0).astype(np.float32)
    duration = len(audio) / OUTPUT_SAMPLE_RATE

    timings: list[WordTiming] = []
    previous_end = 0.0
    for index, word in enumerate(words):
        span = spans[index]
        if span is None or span[2] == "unaligned":
            at = previous_end if span is None else min(span[0] / sample_rate, duration)
            timings.append(WordTiming(word, at, at, False, "silent" if span is None else "unaligned"))
            continue
        start = min(span[0] / sample_rate, duration)
        end = min(max(span[1] / sample_rate, start), duration)
        timings.append(WordTiming(word, start, end, True, span[2]))
        previous_end = end

    out_wav.parent.mkdir(parents=True, exist_ok=True)
    temporary = out_wav.with_name(out_wav.name + ".part")
    soundfile.write(temporary, audio, OUTPUT_SAMPLE_RATE, subtype="PCM_16", format="WAV")
    os.replace(temporary, out_wav)
    timings_path = write_timings(timings_path_for(out_wav), timings)
    settings = {
        "engine": engine,
        "voice": voice,
        "rate": rate,
        "pitch": pitch,
        "punctuated": punctuated,
        "seed": seed,
        "max_chunk_tokens": max_chunk_tokens,
        "join_pause_s": join_pause_s,
        "engine_version": speaker.version,
        "engine_sample_rate": sample_rate,
    }
    return SynthesisResult(out_wav, duration, timings, timings_path, OUTPUT_SAMPLE_RATE, len(chunks), settings)


def write_timings(path: str | Path, timings: Sequence[WordTiming]) -> Path:
    """Write a timings TSV (see the module docstring) atomically; returns its path."""
    path = Path(path)
    temporary = path.with_name(path.name + ".part")
    with temporary.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write("index\tword\tstart\tend\taligned\tsource\n")
        for index, t in enumerate(timings):
            word = t.word.replace("\t", " ").replace("\n", " ")
            handle.write(f"{index}\t{word}\t{t.start:.6f}\t{t.end:.6f}\t{int(bool(t.aligned))}\t{t.source}\n")
    os.replace(temporary, path)
    return path


def read_timings(path: str | Path) -> list[WordTiming]:
    """Read a timings TSV written by :func:`write_timings` (raises ``ValueError`` naming file and line)."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    if not lines or lines[0] != "index\tword\tstart\tend\taligned\tsource":
        raise ValueError(f"{path}: not a timings file (bad header)")
    timings = []
    for number, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        parts = line.split("\t")
        if len(parts) != 6 or parts[0] != str(len(timings)):
            raise ValueError(f"{path}:{number}: expected 6 columns with index {len(timings)}")
        try:
            timings.append(WordTiming(parts[1], float(parts[2]), float(parts[3]), parts[4] == "1", parts[5]))
        except ValueError as error:
            raise ValueError(f"{path}:{number}: {error}") from error
    return timings


# --- many talks -----------------------------------------------------------------------------------------


def _draw_settings(
    talk_id: str, voices: Sequence[str], rate_range: tuple[float, float], pitch_range: tuple[float, float], seed: int
) -> dict[str, Any]:
    rng = random.Random(f"{seed}/{talk_id}")
    spec = voices[rng.randrange(len(voices))]
    engine, _, voice = spec.partition(":")
    rate = round(rng.uniform(*rate_range), 3)
    pitch = round(rng.uniform(*pitch_range), 3)
    return {"engine": engine, "voice": voice, "rate": rate, "pitch": pitch, "chunk_seed": rng.randrange(2**31)}


def _fingerprint(talk: Any, settings: Mapping[str, Any]) -> str:
    content = hashlib.sha256()
    for word, label in zip(talk.words, talk.labels):
        content.update(f"{word}\t{label}\n".encode("utf-8"))
    blob = json.dumps({**settings, "version": SYNTHESIS_VERSION, "content": content.hexdigest()}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _complete(out_dir: Path, stem: str, fingerprint: str, tokens: int) -> bool:
    """Whether a talk's outputs are all there, whole, and made with these settings."""
    import soundfile

    meta_path, wav, tsv = out_dir / f"{stem}.json", out_dir / f"{stem}.wav", out_dir / f"{stem}.timings.tsv"
    if not (meta_path.is_file() and wav.is_file() and tsv.is_file()):
        return False
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("fingerprint") != fingerprint:
            return False
        info = soundfile.info(str(wav))
        if info.frames != meta.get("frames") or info.samplerate != OUTPUT_SAMPLE_RATE or info.channels != 1:
            return False
        with tsv.open(encoding="utf-8") as handle:
            rows = sum(1 for line in handle if line.strip()) - 1
        return rows == tokens
    except (OSError, ValueError, RuntimeError):
        return False


def synthesize_talks(
    talks: Sequence[Any],
    out_dir: str | Path,
    *,
    voices: Sequence[str],
    rate_range: tuple[float, float] = (0.9, 1.1),
    pitch_range: tuple[float, float] = (0.9, 1.1),
    punctuated: bool,
    seed: int,
    max_chunk_tokens: int = 80,
    join_pause_s: float = 0.25,
    progress: bool = False,
) -> dict[str, Any]:
    """Synthesise every talk (objects with ``talk_id``, ``words``, ``labels``) into ``out_dir``; resumable.

    Returns (and writes to ``out_dir/synthesis_report.json``) a JSON-serialisable report: per talk its
    settings and status (``done``/``skipped``/``failed`` with the error), audio seconds made, compute seconds.
    """
    if not voices:
        raise ValueError("voices is empty")
    for spec in voices:
        engine, _, voice = spec.partition(":")
        if engine not in _ENGINE_CLASSES or not voice:
            raise ValueError(f"voice {spec!r} must be 'engine:voice' with engine in {sorted(_ENGINE_CLASSES)}")
    for low_high, name in ((rate_range, "rate_range"), (pitch_range, "pitch_range")):
        if len(low_high) != 2 or not 0 < low_high[0] <= low_high[1]:
            raise ValueError(f"{name} must be (low, high) with 0 < low <= high, got {low_high}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    made_seconds = compute_seconds = 0.0
    stems: dict[str, str] = {}
    iterator: Any = talks
    if progress:
        from tqdm import tqdm

        iterator = tqdm(talks, desc="synthesis", unit="talk")
    for talk in iterator:
        stem = talk_stem(talk.talk_id)
        if stem in stems:
            raise ValueError(f"talks {stems[stem]!r} and {talk.talk_id!r} map to the same file stem {stem!r}")
        stems[stem] = talk.talk_id
        row: dict[str, Any] = {"talk": talk.talk_id, "stem": stem, "tokens": len(talk.words)}
        try:
            drawn = _draw_settings(talk.talk_id, voices, rate_range, pitch_range, seed)
            settings = {
                "engine": drawn["engine"],
                "voice": drawn["voice"],
                "rate": drawn["rate"],
                "pitch": drawn["pitch"],
                "punctuated": punctuated,
                "seed": drawn["chunk_seed"],
                "max_chunk_tokens": max_chunk_tokens,
                "join_pause_s": join_pause_s,
            }
            row.update(settings)
            fingerprint = _fingerprint(talk, {**settings, "engine_version": _engine(settings["engine"]).version})
            row["fingerprint"] = fingerprint
            if _complete(out_dir, stem, fingerprint, len(talk.words)):
                row["status"] = "skipped"
                meta = json.loads((out_dir / f"{stem}.json").read_text(encoding="utf-8"))
                row["duration"] = meta.get("duration")
                rows.append(row)
                continue
            (out_dir / f"{stem}.json").unlink(missing_ok=True)  # the completion marker goes first
            began = time.perf_counter()
            result = synthesize_talk(talk.words, talk.labels, out_dir / f"{stem}.wav", **settings)
            elapsed = time.perf_counter() - began
            frames = round(result.duration * OUTPUT_SAMPLE_RATE)
            meta = {
                "talk": talk.talk_id,
                "fingerprint": fingerprint,
                "frames": frames,
                "duration": result.duration,
                "tokens": len(talk.words),
                "aligned_tokens": sum(t.aligned for t in result.word_timings),
                "chunks": result.chunks,
                "compute_seconds": round(elapsed, 3),
                "settings": result.settings,
            }
            temporary = out_dir / f"{stem}.json.part"
            temporary.write_text(json.dumps(meta, indent=1, ensure_ascii=False), encoding="utf-8")
            os.replace(temporary, out_dir / f"{stem}.json")
            row.update(status="done", duration=result.duration, compute_seconds=round(elapsed, 3))
            made_seconds += result.duration
            compute_seconds += elapsed
        except Exception as error:  # noqa: BLE001 -- recorded per talk, the others carry on
            row.update(status="failed", error=f"{type(error).__name__}: {error}")
        rows.append(row)
    report = {
        "out_dir": str(out_dir),
        "punctuated": punctuated,
        "seed": seed,
        "voices": list(voices),
        "rate_range": list(rate_range),
        "pitch_range": list(pitch_range),
        "talks": len(rows),
        "done": sum(r["status"] == "done" for r in rows),
        "skipped": sum(r["status"] == "skipped" for r in rows),
        "failed": [{"talk": r["talk"], "error": r["error"]} for r in rows if r["status"] == "failed"],
        "audio_seconds_made": round(made_seconds, 3),
        "compute_seconds": round(compute_seconds, 3),
        "realtime_factor": round(made_seconds / compute_seconds, 2) if compute_seconds else None,
        "per_talk": rows,
    }
    (out_dir / "synthesis_report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    return report


# --- real recordings ------------------------------------------------------------------------------------


def use_real_audio(audio_dir: str | Path, transcripts: Sequence[Any]) -> list[RealAudio]:
    """Check that ``<audio_dir>/<talk_stem(talk_id)>.wav`` exists and is readable for every talk.

    ``transcripts`` are objects with ``talk_id`` (e.g. :class:`audio.talks.Talk`) or plain talk ids. Any
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


