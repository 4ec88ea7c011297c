"""The speech engines, called through :mod:`ctypes`: text in, audio and the engine's own phone timings out.

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

:func:`get_engine` loads an engine once per process; its ``synthesize(texts, voice=, rate=, pitch=)`` speaks
whitespace-joined input tokens and returns an :class:`EngineOutput`: the audio at the engine's own sample
rate and, per input token, its engine words with their phone :class:`Segment` s (sample positions).
"""

from __future__ import annotations

import bisect
import ctypes
import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from audio.spoken import Segment, bare

__all__ = ["ENGINE_CLASSES", "EngineOutput", "EngineUnavailableError", "Segment", "engine_available", "get_engine"]


class EngineUnavailableError(RuntimeError):
    """The speech engine's shared library or voice is not installed."""


@dataclass
class EngineOutput:
    audio: np.ndarray  # float32, engine rate
    sample_rate: int
    #: Per input token: its engine words, each a list of phone segments (empty: nothing was said).
    tokens: list[list[tuple[str, list[Segment]]]]


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
        self.version = "flite-2.2 (libflite.so.1; rand seeded per utterance)"

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

    def synthesize(self, texts: Sequence[str], *, voice: str, rate: float, pitch: float) -> EngineOutput:
        pointer = self._voice(voice)
        features = ctypes.cast(pointer, ctypes.POINTER(_CstVoice)).contents.features
        lib = self.lib
        lib.feat_set_float(features, b"duration_stretch", 1.0 / rate)
        lib.feat_set_float(features, b"f0_shift", pitch)
        # flite's voices draw from libc's rand(): seeded here, an utterance's audio no longer depends on what this
        # process synthesised before it (a resumed stage makes the same bytes as an uninterrupted one)
        _LIBC.srand(FLITE_RAND_SEED)
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

            flite_tokens: list[tuple[str, list[tuple[str, list[Segment]]]]] = []
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
                            segments.append(Segment(name_of(segment), start, end))
                            segment = lib.item_next(segment)
                        syllable = lib.item_next(syllable)
                    words.append((name_of(word), segments))
                    word = lib.item_next(word)
                flite_tokens.append((name_of(token), words))
                token = lib.item_next(token)
        finally:
            lib.delete_utterance(utterance)
        return EngineOutput(audio, sample_rate, _match_tokens(texts, flite_tokens))


#: The seed of libc's rand() before every flite utterance (see FliteEngine.synthesize).
FLITE_RAND_SEED = 1
_LIBC = ctypes.CDLL(None)


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


def _match_tokens(texts: Sequence[str], engine_tokens: list[tuple[str, list]]) -> list[list]:
    """Engine token items -> input tokens: one to one when the counts agree, else by name (difflib)."""
    if len(engine_tokens) == len(texts):
        return [words for _, words in engine_tokens]
    out: list[list] = [[] for _ in texts]
    matcher = difflib.SequenceMatcher(
        None, [bare(t) for t in texts], [bare(name) for name, _ in engine_tokens], autojunk=False
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

    def synthesize(self, texts: Sequence[str], *, voice: str, rate: float, pitch: float) -> EngineOutput:
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
        tokens: list[list[tuple[str, list[Segment]]]] = [[] for _ in texts]
        for word in words:
            if not 0 <= word["token"] < len(texts):
                continue
            start, end = word["start"], max(word["start"], word["end"])
            inside = [(n, s) for n, s in word["phonemes"] if start < s < end]
            names = [next((n for n, s in word["phonemes"] if s <= start), "")] + [n for n, _ in inside]
            points = [start] + [s for _, s in inside] + [end]
            segments = [Segment(n, a, b) for n, a, b in zip(names, points, points[1:]) if b > a]
            if segments:
                tokens[word["token"]].append(("", segments))
        self._split_joined_words(texts, tokens)
        return EngineOutput(audio, self.sample_rate, tokens)

    def _phoneme_count(self, text: str) -> int:
        """Phonemes espeak-ng gives ``text`` said on its own (current voice), pauses not counted."""
        if text not in self._counts:
            pointer = ctypes.c_char_p(text.encode("utf-8"))
            # phonememode: ASCII phoneme names separated by "|" (bits 8-23 = separator character).
            out = self.lib.espeak_TextToPhonemes(ctypes.byref(pointer), 1, ord("|") << 8) or b""
            items = [item.strip("'," ) for item in re.split(r"[| ]", out.decode("latin-1"))]
            self._counts[text] = sum(1 for item in items if item and not item.startswith("_"))
        return self._counts[text]

    def _split_joined_words(self, texts: Sequence[str], tokens: list[list[tuple[str, list[Segment]]]]) -> None:
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
ENGINE_CLASSES: dict[str, Callable[[], Any]] = {"flite": _Flite, "espeak-ng": _Espeak}


def get_engine(name: str):  # noqa: ANN202
    """The engine called ``name``, loaded once per process (:class:`EngineUnavailableError` if not installed)."""
    if name not in ENGINE_CLASSES:
        raise ValueError(f"unknown engine {name!r}; expected one of {sorted(ENGINE_CLASSES)}")
    if name not in _ENGINES:
        _ENGINES[name] = ENGINE_CLASSES[name]()
    return _ENGINES[name]


def engine_available(name: str) -> bool:
    """Whether engine ``name`` (``flite`` or ``espeak-ng``) can be loaded here."""
    try:
        get_engine(name)
    except EngineUnavailableError:
        return False
    return True
