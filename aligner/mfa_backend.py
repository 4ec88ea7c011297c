"""Montreal Forced Aligner backend: runs the ``mfa`` command (conda install only, see environment.yml).

``align`` writes a one-file corpus -- the audio as 16 kHz mono WAV and a ``.lab`` with the units (tokens,
contractions merged as for pocketsphinx: ``do n't`` -> ``don't``) -- runs
``mfa align CORPUS DICTIONARY ACOUSTIC_MODEL OUTPUT [mfa_args]`` (names from :class:`AlignConfig`), and
reads the TextGrid with :func:`read_mfa_textgrid`:

* the ``words`` tier's intervals (silence labels ``""``, ``sil``, ``sp``, ``<eps>`` dropped) are matched to
  the units with difflib on lower-cased text; a differing run of equal length is matched position by
  position (MFA may relabel an out-of-vocabulary word), and a run whose letters concatenate to the same
  string is matched by consuming letters (MFA may split ``high-functioning`` or ``john's``);
* a merged unit is split between its tokens at the end of MFA's interval for the host when MFA split it
  the same way, otherwise in proportion to their letters;
* a word whose phones (``phones`` tier) are only ``spn`` (MFA's garbage phone for out-of-vocabulary words)
  keeps its interval but is flagged ``aligned=False``; unmatched units get times from
  :func:`aligner.timing.interpolate`.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from aligner.audio import SAMPLE_RATE, load_audio
from aligner.pronounce import Unit, make_units
from aligner.timing import NAN, interpolate
from aligner.types import AlignConfig, AlignmentError, BackendUnavailable, WordTiming

__all__ = ["MfaBackend", "read_mfa_textgrid", "SILENCE_LABELS"]

SILENCE_LABELS = frozenset({"", "sil", "sp", "<eps>", "<sil>", "silence"})
_LETTERS = re.compile(r"[^\w']+")


def _norm(text: str) -> str:
    return _LETTERS.sub("", text.lower())


def _find_tier(textgrid, suffix: str):
    for name in textgrid.tierNames:
        if name.lower() == suffix or name.lower().endswith(f"- {suffix}") or name.lower().endswith(suffix):
            return textgrid.getTier(name)
    return None


def _match(units: Sequence[Unit], labels: Sequence[str]) -> dict[int, list[int]]:
    """Unit index -> indices of the TextGrid word intervals it covers."""
    unit_texts = [_norm(unit.text).replace("-", "") for unit in units]
    label_texts = [_norm(label).replace("-", "") for label in labels]
    matched: dict[int, list[int]] = {}
    matcher = difflib.SequenceMatcher(None, unit_texts, label_texts, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(i2 - i1):
                matched[i1 + offset] = [j1 + offset]
        elif tag == "replace":
            i, j = i1, j1
            while i < i2 and j < j2:
                spelled, k = "", j
                while k < j2 and len(spelled) < len(unit_texts[i]) and unit_texts[i].startswith(
                    spelled + label_texts[k]
                ):
                    spelled += label_texts[k]
                    k += 1
                if k > j and spelled == unit_texts[i]:  # MFA split the unit: high-functioning, john 's
                    matched[i] = list(range(j, k))
                    i, j = i + 1, k
                elif i2 - i == j2 - j:  # as many intervals as units left: relabelled words
                    matched[i] = [j]
                    i, j = i + 1, j + 1
                else:
                    break
    return matched


def read_mfa_textgrid(path: str | os.PathLike, words: Sequence[str], *, duration: float | None = None,
                      unaligned: str = "interpolate") -> list[WordTiming]:
    """Word timings for ``words`` (benchmark tokens) from an MFA TextGrid (see the module doc)."""
    from praatio import textgrid as praat_textgrid

    try:
        grid = praat_textgrid.openTextgrid(str(path), includeEmptyIntervals=False)
    except Exception as error:
        raise AlignmentError(f"cannot read TextGrid {path}: {error}") from error
    word_tier = _find_tier(grid, "words")
    if word_tier is None:
        raise AlignmentError(f"TextGrid {path} has no words tier (tiers: {', '.join(grid.tierNames)})")
    phone_tier = _find_tier(grid, "phones")
    intervals = [entry for entry in word_tier.entries if entry.label.strip().lower() not in SILENCE_LABELS]
    units = make_units(list(words))
    matched = _match(units, [entry.label for entry in intervals])
    timings = [WordTiming(word, NAN, NAN, False) for word in words]
    for unit_index, covered in matched.items():
        unit = units[unit_index]
        first, last = intervals[covered[0]], intervals[covered[-1]]
        start, end = float(first.start), float(last.end)
        aligned = True
        if phone_tier is not None:
            phones = [p.label.strip().lower() for p in phone_tier.entries if p.start >= start - 1e-6
                      and p.end <= end + 1e-6 and p.label.strip()]
            aligned = not phones or any(phone != "spn" for phone in phones)
        if len(unit.tokens) == 1:
            timings[unit.tokens[0]] = WordTiming(words[unit.tokens[0]], start, end, aligned)
            continue
        host, clitic = unit.tokens
        if len(covered) == 2 and _norm(first.label) == _norm(unit.host or ""):
            split = float(first.end)
        else:
            host_letters = len(_norm(unit.host or ""))
            split = start + (end - start) * host_letters / max(1, len(_norm(unit.text)))
        timings[host] = WordTiming(words[host], start, split, aligned)
        timings[clitic] = WordTiming(words[clitic], split, end, aligned)
    total = float(grid.maxTimestamp) if duration is None else duration
    return interpolate(timings, total, mode=unaligned)


class MfaBackend:
    """Runs ``mfa align`` (only where the ``mfa`` command is on PATH)."""

    name = "mfa"

    def __init__(self, command: str | None = None):
        self._command = command

    def command(self, config: AlignConfig | None = None) -> str:
        return self._command or (config.mfa_command if config else "mfa")

    def is_available(self, config: AlignConfig | None = None) -> bool:
        return shutil.which(self.command(config)) is not None

    def build_command(self, corpus: Path, output: Path, config: AlignConfig) -> list[str]:
        return [self.command(config), "align", str(corpus), config.mfa_dictionary, config.mfa_acoustic_model,
                str(output), *config.mfa_args]

    def align(self, audio_path: str | os.PathLike, words: Sequence[str], *,
              config: AlignConfig | None = None) -> list[WordTiming]:
        import soundfile

        config = config or AlignConfig()
        if not self.is_available(config):
            raise BackendUnavailable(
                f"the mfa backend needs the '{self.command(config)}' command (Montreal Forced Aligner, conda)"
            )
        words = [str(word) for word in words]
        samples = load_audio(audio_path)
        if not words:
            return []
        with tempfile.TemporaryDirectory(prefix="mfa-align-") as scratch:
            corpus, output = Path(scratch) / "corpus", Path(scratch) / "aligned"
            corpus.mkdir()
            stem = "utterance"
            soundfile.write(str(corpus / f"{stem}.wav"), samples, SAMPLE_RATE, subtype="PCM_16")
            (corpus / f"{stem}.lab").write_text(" ".join(unit.text for unit in make_units(words)) + "\n",
                                                encoding="utf-8")
            command = self.build_command(corpus, output, config)
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=config.mfa_timeout_s,
                                      check=False)
            except subprocess.TimeoutExpired as error:
                raise AlignmentError(f"mfa align timed out after {config.mfa_timeout_s:.0f} s") from error
            grids = sorted(output.rglob(f"{stem}.TextGrid"))
            if done.returncode != 0 or not grids:
                tail = (done.stderr or done.stdout)[-2000:]
                raise AlignmentError(f"mfa align failed (exit {done.returncode}): {' '.join(command)}\n{tail}")
            return read_mfa_textgrid(grids[0], words, duration=len(samples) / SAMPLE_RATE,
                                     unaligned=config.unaligned)
