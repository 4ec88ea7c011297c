"""Pronunciations: benchmark tokens -> alignment units -> ARPAbet phone strings.

Alignment units
---------------
The benchmark tokeniser (:func:`corpus.text.tokenize_for_inference`) splits the contractions ``n't``,
``'s``, ``'re``, ``'m`` and ``'ll`` off their word (``don't`` -> ``do n't``, ``it's`` -> ``it 's``). Spoken,
``don't`` is one syllable and ``do`` alone (D UW) is not in it, so a clitic token is **merged with the token
before it** into one unit that is aligned as the written contraction (``do`` + ``n't`` -> ``don't``, D OW N T).
The unit's time span is then split between the two tokens at a phone boundary (:func:`clitic_phone_count`):
the clitic gets the phones that follow the host word's own pronunciation when that is a prefix of the
contraction's (``is`` IH Z + ``n't`` AH N T, ``he`` HH IY + ``'s`` Z); otherwise ``n't`` gets the phones from
the contraction's last N on (``do``|``n't`` = D OW | N T, and D OW | N for the variant without T) and
``'s``, ``'m``, ``'re``, ``'ll`` the last phone (``they``|``'re`` = DH EH | R). A clitic with no token
before it (start of the transcript) is its own unit, pronounced as in :data:`CLITIC_PRONUNCIATIONS`.

Grapheme to phoneme
-------------------
A unit's pronunciations are looked up in the pocketsphinx dictionary (CMUdict, all variants), then with
diacritics removed (``schrödinger`` -> ``schrodinger``), without dots (``mr.``), and as the concatenation of
its ``-``/``/``-separated parts when each part is known (``high-functioning``). Anything else -- names, numbers
(``6,400``, ``$100``, ``20%``, ``9/11``) -- goes to flite (``flite -t TEXT -ps``), which normalises numbers and
symbols to words and has CMU's letter-to-sound rules; its phones are mapped to the 39-phone ARPAbet set of
the pocketsphinx en-us model with :data:`FLITE_TO_ARPABET`. A four-digit number gets two variants, the year
reading (``1950``: nineteen fifty) and the cardinal one (one thousand nine hundred fifty), since speakers
(and flite itself, depending on context) use both; the aligner picks the one that fits.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "ARPABET",
    "FLITE_TO_ARPABET",
    "CLITICS",
    "CLITIC_PRONUNCIATIONS",
    "Unit",
    "make_units",
    "flite_available",
    "flite_phones",
    "to_arpabet",
    "clitic_phone_count",
    "Lexicon",
]

#: The phones of the pocketsphinx en-us acoustic model (besides SIL and the noise phones).
ARPABET = frozenset(
    "AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH UH UW V W Y Z ZH".split()
)

#: flite's phone set (``cmu_us_*`` voices: lower-case ARPAbet plus a few allophones) -> the model's ARPAbet.
#: Phones that exist in both map to themselves (upper-cased); the rest:
#: ``ax`` (schwa) -> AH, ``axr`` -> ER, ``ix`` -> IH, ``ux`` -> UW, syllabic ``el``/``em``/``en`` -> AH L/M/N,
#: ``nx`` (flap n) -> N, ``dx`` (flap) -> D, ``hv`` -> HH; pauses/breaths (``pau``, ``h#``, ``brth``,
#: ``ssil``) are dropped.
FLITE_TO_ARPABET: dict[str, tuple[str, ...]] = {
    **{phone.lower(): (phone,) for phone in ARPABET},
    "ax": ("AH",),
    "axr": ("ER",),
    "ix": ("IH",),
    "ux": ("UW",),
    "el": ("AH", "L"),
    "em": ("AH", "M"),
    "en": ("AH", "N"),
    "nx": ("N",),
    "dx": ("D",),
    "hv": ("HH",),
    "pau": (),
    "h#": (),
    "brth": (),
    "ssil": (),
}

#: The clitic tokens of the benchmark tokeniser.
CLITICS = frozenset({"n't", "'s", "'re", "'m", "'ll"})
#: Pronunciation of a clitic that has no word before it.
CLITIC_PRONUNCIATIONS: dict[str, str] = {"n't": "AH N T", "'s": "Z", "'re": "ER", "'m": "AH M", "'ll": "AH L"}


@dataclass(frozen=True)
class Unit:
    """What the aligner places: one token, or a token and the clitic after it (``tokens`` = their indices)."""

    text: str
    tokens: tuple[int, ...]
    host: str | None = None  # the first token's text when this unit merges a clitic
    clitic: str | None = None


def make_units(words: Sequence[str]) -> list[Unit]:
    """Group tokens into alignment units: a clitic token joins the token before it (see module doc)."""
    units: list[Unit] = []
    for index, word in enumerate(words):
        lowered = word.lower()
        previous = units[-1] if units else None
        if lowered in CLITICS and previous is not None and previous.clitic is None:
            units[-1] = Unit(previous.text + lowered, previous.tokens + (index,), previous.text, lowered)
        else:
            units.append(Unit(lowered, (index,)))
    return units


def flite_available(command: str | None = "flite") -> bool:
    return command is not None and shutil.which(command) is not None


def ascii_fold(text: str) -> str:
    """Drop diacritics (``schrödinger`` -> ``schrodinger``) and any other non-ASCII character."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if ord(char) < 128)


@functools.lru_cache(maxsize=65536)
def flite_phones(text: str, command: str = "flite") -> tuple[str, ...]:
    """flite's phones for ``text`` (its own text normalisation and letter-to-sound rules), pauses dropped.

    Returns ``()`` when flite gives nothing (text of symbols only) or fails.
    """
    text = ascii_fold(text).strip()
    if not text:
        return ()
    try:
        done = subprocess.run([command, "-t", text, "-ps", "-o", "none"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if done.returncode != 0:
        return ()
    return tuple(phone for phone in done.stdout.split() if phone not in ("pau", "h#", "brth", "ssil"))


def to_arpabet(phones: Sequence[str]) -> list[str]:
    """Map flite phones to the model's ARPAbet (:data:`FLITE_TO_ARPABET`); unknown phones are dropped."""
    mapped: list[str] = []
    for phone in phones:
        mapped.extend(FLITE_TO_ARPABET.get(phone.lower().rstrip("012"), ()))
    return mapped


def clitic_phone_count(merged: Sequence[str], host_pronunciations: Sequence[Sequence[str]], clitic: str) -> int:
    """How many trailing phones of a contraction's pronunciation belong to the clitic (see module doc).

    Always leaves the host at least one phone and the clitic at least one (0 when ``merged`` has < 2 phones).
    """
    merged = [phone.upper() for phone in merged]
    if len(merged) < 2:
        return 0
    for host in sorted(host_pronunciations, key=len, reverse=True):
        host = [phone.upper() for phone in host]
        if 0 < len(host) < len(merged) and merged[: len(host)] == host:
            return len(merged) - len(host)
    if clitic == "n't" and "N" in merged[1:]:
        return len(merged) - max(index for index, phone in enumerate(merged) if phone == "N" and index > 0)
    return 1


class Lexicon:
    """Pronunciations of unit texts: dictionary variants, then the fallbacks of the module doc, cached.

    ``lookup(word)`` returns the dictionary's space-separated phones for an exact entry (variants are
    spelled ``word(2)``, ``word(3)``...) or None.
    """

    def __init__(self, lookup: Callable[[str], str | None], *, flite: str | None = "flite"):
        self._lookup = lookup
        self._flite = flite if flite_available(flite) else None
        self._cache: dict[str, list[list[str]]] = {}
        self.g2p_words: list[str] = []  # the texts whose pronunciation came from flite

    def _variants(self, word: str) -> list[list[str]]:
        pronunciations: list[list[str]] = []
        first = self._lookup(word) if word else None
        if first is None:
            return pronunciations
        pronunciations.append(first.split())
        number = 2
        while (variant := self._lookup(f"{word}({number})")) is not None:
            pronunciations.append(variant.split())
            number += 1
        return pronunciations

    def dictionary_pronunciations(self, text: str) -> list[list[str]]:
        """Pronunciations from the dictionary alone (exact, folded, undotted, or part by part)."""
        candidates = [text, ascii_fold(text)]
        candidates += [candidate.replace(".", "") for candidate in candidates]
        for candidate in dict.fromkeys(candidates):
            found = self._variants(candidate)
            if found:
                return found
        parts = [part for part in ascii_fold(text).replace("/", "-").split("-") if part]
        if len(parts) > 1:
            joined: list[str] = []
            for part in parts:
                found = self._variants(part)
                if not found:
                    return []
                joined += found[0]
            return [joined]
        return []

    def pronunciations(self, unit: Unit | str) -> list[list[str]]:
        """All pronunciations of a unit ([] when none can be found: the unit will be unaligned)."""
        if isinstance(unit, str):
            unit = Unit(unit, (0,))
        if unit.text in self._cache:
            return self._cache[unit.text]
        found = self.dictionary_pronunciations(unit.text)
        if not found and unit.text in CLITIC_PRONUNCIATIONS:
            found = [CLITIC_PRONUNCIATIONS[unit.text].split()]
        if not found and self._flite is not None:
            spellings = [unit.text]
            if re.fullmatch(r"\d{4}", unit.text):  # 1950: "nineteen fifty" or "one thousand nine hundred fifty"
                spellings.append(f"{unit.text[0]},{unit.text[1:]}")
            for spelling in spellings:
                phones = to_arpabet(flite_phones(spelling, self._flite))
                if phones and phones not in found:
                    found.append(phones)
            if found:
                self.g2p_words.append(unit.text)
        if not found and unit.clitic is not None and unit.host is not None:
            hosts = self.pronunciations(unit.host)
            if hosts:
                found = [hosts[0] + CLITIC_PRONUNCIATIONS[unit.clitic].split()]
        self._cache[unit.text] = found
        return found

    def split_count(self, unit: Unit, merged: Sequence[str]) -> int:
        """Trailing phones of ``merged`` (the unit's pronunciation) that belong to its clitic token."""
        if unit.clitic is None or unit.host is None:
            return 0
        return clitic_phone_count(merged, self.pronunciations(unit.host), unit.clitic)
