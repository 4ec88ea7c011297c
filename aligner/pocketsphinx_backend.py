"""Forced alignment with pocketsphinx 5 (its en-us acoustic model and CMUdict ship inside the wheel).

How a file is aligned
---------------------
1. The audio is read as 16 kHz mono (:func:`aligner.audio.load_audio`); tokens are grouped into units
   (clitics merged, :mod:`aligner.pronounce`) and every unit gets its pronunciations (dictionary variants or
   flite's). Each unit is added to the decoder's dictionary under its own name (``u17``, ``u17(2)``...), so
   a grammar over them names every position unambiguously even when a word repeats.
2. The units are aligned with a finite-state grammar -- a straight line through the units, with optional
   silence between them -- searched with ``bestpath=False`` (the Viterbi path itself, not a lattice).
   When no path survives the pruning, the same grammar is retried with wide beams
   (:attr:`AlignConfig.wide_beam`), and then with a grammar where every unit may be skipped at a cost
   (:attr:`AlignConfig.skip_probability`; a leading or trailing run of units costs one skip, as a chain of
   skips would be pruned): units it skips are unaligned, the others stay placed.
3. Audio longer than :attr:`AlignConfig.max_single_pass_s` is aligned window by window. A window starts at
   the anchor (the end of the last committed unit, 0 at first) and ends at the quietest point of the
   smoothed energy within +-20 % of :attr:`AlignConfig.window_s` -- nearly always a pause. Its grammar is the
   next units (about 1.6 times as many as the remaining speaking rate predicts, plus 15; doubled when all
   of them were used) where the path may end after any unit, so it places the units spoken in the window
   and no more (one placing under 60 % of the predicted units is retried with wide beams: an open end hides
   a pruned search). All but the last :attr:`AlignConfig.tail_words` placed units are committed, the anchor
   moves to the end of the last committed one and the next window starts there. A window that places too few
   units is doubled; once a window would reach the end of the file (within a quarter window), the rest is
   aligned in one final pass that must place every remaining unit. Every unit is committed at most once and
   the units are walked in order, so no word is lost or duplicated.
4. A merged unit (``don't``) is split between its two tokens at the phone boundary of the second,
   phone-level alignment pass (``Decoder.set_alignment``) -- see :func:`aligner.pronounce.clitic_phone_count`;
   if that pass fails, in proportion to the phone counts.
5. Confidence: pocketsphinx scores each frame relative to the best-scoring senone of that frame, so a
   unit's acoustic score per frame measures how far the forced path is from what the acoustic model
   prefers. A unit above the limit (:attr:`AlignConfig.max_frame_score`, raised for noisy files) is flagged
   ``aligned=False`` (it keeps its forced times). Units never placed get times from
   :func:`aligner.timing.interpolate`.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aligner.audio import SAMPLE_RATE, energy_envelope, estimate_snr, load_audio, quietest_point, to_pcm16
from aligner.pronounce import Lexicon, Unit, make_units
from aligner.timing import NAN, interpolate
from aligner.types import AlignConfig, BackendUnavailable, WordTiming

__all__ = ["PocketsphinxBackend", "Placement"]

log = logging.getLogger(__name__)

_NAME = re.compile(r"^u(\d+)(?:\(\d+\))?$")
#: An open-ended window must place at least this share of the units its speaking rate predicts, or it is
#: retried with wider beams (see ``_Session.try_window``).
MIN_PLACED_SHARE = 0.6


@dataclass(frozen=True)
class Placement:
    """One unit as placed by a decoding pass (absolute seconds)."""

    unit: int
    start: float
    end: float
    score: float  # mean acoustic cost per frame (see the module doc), inf when unknown
    split: float | None = None  # boundary between host and clitic tokens, for merged units


@dataclass(frozen=True)
class Window:
    """One window tried: its span, units offered and placed, and the attempt that worked
    (0 normal beams, 1 wide beams, 2 skippable grammar, -1 none)."""

    start: float
    end: float
    offered: int
    placed: int
    attempt: int


class _Session:
    """State of one ``align`` call: decoders, unit names, placements."""

    def __init__(self, config: AlignConfig, samples: np.ndarray, units: list[Unit]):
        self.config = config
        self.samples = samples
        self.duration = len(samples) / SAMPLE_RATE
        self.units = units
        self._decoders: dict[bool, object] = {}
        self._prepared: set[int] = set()
        self._search_count = 0
        decoder = self._decoder(wide=False)
        self.lexicon = Lexicon(decoder.lookup_word, flite=config.flite)
        self.pronunciations = [self.lexicon.pronunciations(unit) for unit in units]
        self.alignable = [index for index, prons in enumerate(self.pronunciations) if prons]
        self.placed: dict[int, Placement] = {}
        self.windows: list[Window] = []  # every decoding window tried, for inspection
        self.frame_rate = float(decoder.config["frate"])
        self.envelope = energy_envelope(samples, SAMPLE_RATE)
        self.snr_db = estimate_snr(samples, SAMPLE_RATE)
        self.score_limit = (
            None if config.max_frame_score is None
            else config.max_frame_score + config.score_slope_per_db * max(0.0, config.clean_snr_db - self.snr_db)
        )

    # -- decoders ---------------------------------------------------------------------------------
    def decoder(self, *, wide: bool):
        """The decoder with normal or wide beams, the units' words added to its dictionary."""
        decoder = self._decoder(wide=wide)
        if id(decoder) not in self._prepared:
            self._add_unit_words(decoder)
            self._prepared.add(id(decoder))
        return decoder

    def _decoder(self, *, wide: bool):
        if wide not in self._decoders:
            from pocketsphinx import Decoder, get_model_path

            config = self.config
            beam, wbeam, pbeam = (
                (config.wide_beam,) * 3 if wide else (config.beam, config.wbeam, config.pbeam)
            )
            self._decoders[wide] = Decoder(
                hmm=config.hmm or get_model_path("en-us/en-us"),
                dict=config.dictionary or get_model_path("en-us/cmudict-en-us.dict"),
                lm=None,
                bestpath=False,
                beam=beam,
                wbeam=wbeam,
                pbeam=pbeam,
                loglevel=config.loglevel,
                **config.decoder_options,
            )
        return self._decoders[wide]

    def _add_unit_words(self, decoder) -> None:
        added = []
        for index in self.alignable:
            for variant, phones in enumerate(self.pronunciations[index]):
                name = f"u{index}" if variant == 0 else f"u{index}({variant + 1})"
                added.append((name, " ".join(phones)))
        for position, (name, phones) in enumerate(added):
            try:
                decoder.add_word(name, phones, update=position == len(added) - 1)
            except RuntimeError as error:  # e.g. a phone the acoustic model does not have
                log.warning("cannot add pronunciation %s = %s: %s", name, phones, error)

    # -- one decoding pass ------------------------------------------------------------------------
    def decode(self, start_s: float, end_s: float, units: Sequence[int], *, prefix: bool, wide: bool,
               skip: bool) -> list[Placement] | None:
        """Align ``units`` to ``samples[start_s:end_s]``; None when no path survives."""
        if not units:
            return None
        decoder = self.decoder(wide=wide)
        names = [f"u{index}" for index in units]
        n = len(names)
        transitions: list[tuple] = [(k, k + 1, 1.0, name) for k, name in enumerate(names)]
        if prefix:
            transitions += [(k, n, 1.0) for k in range(1, n)]
        if skip:  # any unit may be skipped; a leading or trailing run costs a single skip
            cost = self.config.skip_probability
            transitions += [(k, k + 1, cost) for k in range(n)]
            transitions += [(0, k, cost) for k in range(2, n)]
            if not prefix:
                transitions += [(k, n, cost) for k in range(1, n - 1)]
        self._search_count += 1
        search = f"align{self._search_count}"
        try:
            fsg = decoder.create_fsg(search, 0, n, transitions)
            decoder.add_fsg(search, fsg)
            decoder.activate_search(search)
        except (RuntimeError, ValueError) as error:
            log.warning("cannot build the alignment grammar: %s", error)
            return None
        first = int(round(start_s * SAMPLE_RATE))
        last = int(round(end_s * SAMPLE_RATE))
        pcm = to_pcm16(self.samples[first:last])
        try:
            decoder.start_utt()
            decoder.process_raw(pcm, full_utt=True)
            decoder.end_utt()
        except RuntimeError as error:
            log.debug("decoding failed: %s", error)
            return None
        if decoder.hyp() is None:
            return None
        segments = decoder.seg()
        if segments is None:
            return None
        frame = 1.0 / self.frame_rate
        found: list[Placement] = []
        for segment in segments:
            match = _NAME.match(segment.word)
            if match is None:
                continue  # <sil>, fillers, (NULL)
            n_frames = segment.end_frame - segment.start_frame + 1
            score = -math.log(segment.ascore) / n_frames * 1e4 if segment.ascore > 0 else math.inf
            found.append(Placement(int(match.group(1)), start_s + segment.start_frame * frame,
                                   start_s + (segment.end_frame + 1) * frame, score))
        expected = iter(units)
        if not found or not all(placement.unit in expected for placement in found):  # subsequence check
            return None
        if any(self.units[placement.unit].clitic is not None for placement in found):
            found = self._split_clitics(decoder, pcm, start_s, found)
        return found

    def _split_clitics(self, decoder, pcm: bytes, start_s: float, found: list[Placement]) -> list[Placement]:
        """Second, phone-level pass: the host/clitic boundary of every merged unit."""
        phones: dict[int, list[tuple[str, float]]] = {}
        try:
            decoder.set_alignment()
            decoder.start_utt()
            decoder.process_raw(pcm, full_utt=True)
            decoder.end_utt()
            alignment = decoder.get_alignment()
            frame = 1.0 / self.frame_rate
            for word in alignment.words():
                match = _NAME.match(word.name)
                if match is not None:
                    phones[int(match.group(1))] = [(p.name, start_s + p.start * frame) for p in word]
        except (RuntimeError, AttributeError, TypeError) as error:
            log.debug("phone-level pass failed, splitting contractions by phone count: %s", error)
        result = []
        for placement in found:
            unit = self.units[placement.unit]
            if unit.clitic is None:
                result.append(placement)
                continue
            unit_phones = phones.get(placement.unit)
            if unit_phones:
                count = self.lexicon.split_count(unit, [name for name, _ in unit_phones])
                split = unit_phones[-count][1] if 0 < count < len(unit_phones) else None
            else:
                split = None
            if split is None:
                merged = self.pronunciations[placement.unit][0]
                count = self.lexicon.split_count(unit, merged)
                share = (len(merged) - count) / len(merged) if count else 0.5
                split = placement.start + (placement.end - placement.start) * share
            split = min(max(split, placement.start), placement.end)
            result.append(Placement(placement.unit, placement.start, placement.end, placement.score, split))
        return result

    def try_window(self, start_s: float, end_s: float, units: Sequence[int], *, prefix: bool,
                   expected: float | None = None):
        """Normal beams, then wide beams, then the skippable grammar (wide beams).

        With ``expected`` (the number of units the speaking rate predicts for an open-ended window), a
        result placing fewer than :data:`MIN_PLACED_SHARE` of them counts as a failure too: with an open
        end, a search whose right path was pruned still ends somewhere, with too few words stretched over
        the window (seen with noisy audio). If every attempt is short, the one placing most units is taken.
        """
        best: tuple[int, list[Placement]] | None = None
        for attempt, (wide, skip) in enumerate(((False, False), (True, False), (True, True))):
            found = self.decode(start_s, end_s, units, prefix=prefix, wide=wide, skip=skip)
            if not found:
                continue
            if expected is None or len(found) >= MIN_PLACED_SHARE * expected:
                best = (attempt, found)
                break
            if best is None or len(found) > len(best[1]):
                best = (attempt, found)
        if best is None:
            self.windows.append(Window(start_s, end_s, len(units), 0, -1))
            return None
        self.windows.append(Window(start_s, end_s, len(units), len(best[1]), best[0]))
        return best[1]

    # -- the whole file ---------------------------------------------------------------------------
    def run(self) -> None:
        config = self.config
        alignable = self.alignable
        total = len(alignable)
        position, anchor = 0, 0.0
        while position < total:
            remaining_s = self.duration - anchor
            if remaining_s <= config.max_single_pass_s:
                self._commit(self.try_window(anchor, self.duration, alignable[position:], prefix=False))
                return
            window = config.window_s
            while True:
                low, high = anchor + 0.8 * window, anchor + 1.2 * window
                if high >= self.duration - 0.25 * config.window_s:
                    self._commit(self.try_window(anchor, self.duration, alignable[position:], prefix=False))
                    return
                cut = quietest_point(self.envelope, low, high)
                rate = (total - position) / remaining_s
                expected = rate * (cut - anchor)
                lookahead = min(total - position, int(expected * 1.6) + 15)
                while True:
                    units = alignable[position : position + lookahead]
                    found = self.try_window(anchor, cut, units, prefix=True, expected=expected)
                    if found and found[-1].unit == units[-1] and lookahead < total - position:
                        lookahead = min(total - position, lookahead * 2)  # the grammar ran out of words
                        continue
                    break
                if found and len(found) > config.tail_words:
                    kept = found[: len(found) - config.tail_words]
                    self._commit(kept)
                    anchor = max(anchor, kept[-1].end)
                    position = alignable.index(kept[-1].unit, position) + 1
                    break
                window *= 2

    def _commit(self, found: list[Placement] | None) -> None:
        for placement in found or ():
            if placement.unit in self.placed:
                raise RuntimeError(f"unit {placement.unit} placed twice")  # cannot happen: units advance
            self.placed[placement.unit] = placement

    def timings(self, words: Sequence[str]) -> list[WordTiming]:
        limit = self.score_limit
        timings: list[WordTiming] = [WordTiming(word, NAN, NAN, False) for word in words]
        for index, placement in self.placed.items():
            unit = self.units[index]
            confident = limit is None or placement.score <= limit
            if len(unit.tokens) == 1:
                token = unit.tokens[0]
                timings[token] = WordTiming(words[token], placement.start, placement.end, confident)
            else:
                host, clitic = unit.tokens
                split = placement.split if placement.split is not None else (placement.start + placement.end) / 2
                timings[host] = WordTiming(words[host], placement.start, split, confident)
                timings[clitic] = WordTiming(words[clitic], split, placement.end, confident)
        return interpolate(timings, self.duration, mode=self.config.unaligned)


class PocketsphinxBackend:
    """The default backend (see the module doc)."""

    name = "pocketsphinx"

    def is_available(self) -> bool:
        try:
            import pocketsphinx  # noqa: F401
        except ImportError:
            return False
        return True

    def align(self, audio_path: str | os.PathLike, words: Sequence[str], *,
              config: AlignConfig | None = None) -> list[WordTiming]:
        if not self.is_available():
            raise BackendUnavailable("the pocketsphinx backend needs the 'pocketsphinx' package (pip)")
        config = config or AlignConfig()
        words = [str(word) for word in words]
        samples = load_audio(audio_path)
        if not words:
            return []
        session = _Session(config, samples, make_units(words))
        session.run()
        return session.timings(words)

    def session(self, audio_path: str | os.PathLike, words: Sequence[str], *,
                config: AlignConfig | None = None) -> _Session:
        """An aligned session, for inspection (benchmarks, debugging): placements, scores, G2P words."""
        config = config or AlignConfig()
        session = _Session(config, load_audio(audio_path), make_units([str(word) for word in words]))
        session.run()
        return session
