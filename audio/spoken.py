"""What the speech engine is given for the benchmark's tokens, and how its phones are dealt back to them.

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

Long talks are cut into chunks by :func:`make_chunks` (see :mod:`audio.synthesis`, "Long talks: chunks").
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CLITICS",
    "MARKS",
    "SILENT_TOKENS",
    "SPOKEN_SPELLINGS",
    "Segment",
    "Unit",
    "bare",
    "make_chunks",
    "make_units",
    "split_clitics",
    "spoken_form",
    "written_form",
]


@dataclass(frozen=True)
class Segment:
    """A phone the speech engine said: its name and where it ends and starts, in samples at the engine's rate
    (``audio.engines`` makes them; :func:`split_clitics` reads them)."""

    name: str
    start: int
    end: int

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


@dataclass
class Unit:
    tokens: list[int]  # benchmark token indices: host first, then its clitics
    text: str  # what the engine is given, without the mark
    label: str  # strongest label of the unit and of silent tokens after it


def bare(text: str) -> str:
    """``text`` without its edge punctuation, lower-case: what engine token names are matched on."""
    return text.strip(_EDGE_PUNCTUATION).lower()


def spoken_form(word: str) -> str:
    """What the engine is given for one benchmark token (empty: a silent token)."""
    word = _MANGLED.sub("", word).replace("\ufffd", "").strip()
    if word.lower() in SPOKEN_SPELLINGS:
        return SPOKEN_SPELLINGS[word.lower()]
    if word in SILENT_TOKENS:
        return ""
    if word in CLITICS:
        return word
    return word.strip(_EDGE_PUNCTUATION)


def make_units(words: Sequence[str], labels: Sequence[str]) -> tuple[list[Unit], list[int]]:
    """The spoken units of a talk (a token with its clitics) and the indices of its silent tokens."""
    units: list[Unit] = []
    silent: list[int] = []
    for index, (word, label) in enumerate(zip(words, labels)):
        spoken = spoken_form(word)
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
        units.append(Unit([index], spoken, label))
    return units, silent


def make_chunks(units: Sequence[Unit], *, punctuated: bool, max_tokens: int, seed: int) -> list[tuple[int, int]]:
    """``(first_unit, end_unit)`` chunks (see :mod:`audio.synthesis`, "Long talks: chunks")."""
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


def split_clitics(
    unit: Unit, words: Sequence[str], engine_words: list[tuple[str, list[Segment]]]
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


def written_form(units: Sequence[Unit], index: int, punctuated: bool) -> str:
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
