"""Real speech: the real TED talks with word timings (``../shared/data/ted_real``), the pause model fitted on
them and the simulated timing cues of the training text.

A real-speech talk ``TALK`` is three files in one folder: ``TALK.txt`` (the spoken words, lower case, no
marks), ``TALK.ref.tsv`` (``word<TAB>LABEL``, the mark after each word) and ``TALK.timings.tsv`` (the word TSV
of :mod:`corpus.timings`: every word's time in the talk's real recording, empty where the alignment has none).

* :func:`fit_pause_model` -- the cues of the real talks' words per label
  (:class:`embeddings.timing_features.PauseModel`), computed exactly as ``punctuate --alignment`` computes them;
* :func:`simulate_split_cues` -- simulated cues for every token of the prepared splits: label-conditioned
  (``timed``) and label-independent (``control``) for the splits with labels to train on, missing for the
  test splits (IWSLT2011 has no real recordings; the synthetic audio of the audio stages gives marks away);

Scoring models on the talks is :mod:`realspeech.evaluate`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from corpus.iwslt import read_iwslt
from corpus.labels import LABELS
from corpus.user_text import UserText, split_user_text
from embeddings.timing_features import PauseModel, missing_raw

__all__ = ["RealTalk", "fit_pause_model", "read_real_talk", "simulate_split_cues"]

TIMED, CONTROL = "timed", "control"


@dataclass(frozen=True)
class RealTalk:
    name: str
    text: str
    words: tuple[str, ...]
    labels: tuple[str, ...]
    timings_path: Path
    text_path: Path


def read_real_talk(directory: str | Path, name: str) -> RealTalk:
    """Read ``TALK.txt`` and ``TALK.ref.tsv`` (the timings are read where they are used, with their line numbers)
    and check that the reference's words are the transcript's."""
    directory = Path(directory)
    text_path, ref_path, timings_path = (directory / f"{name}{suffix}" for suffix in (".txt", ".ref.tsv",
                                                                                         ".timings.tsv"))
    return read_talk_files(name, text_path, ref_path, timings_path)


def read_talk_files(name: str, text_path: Path, ref_path: Path, timings_path: Path) -> RealTalk:
    """A real talk from its three files: the transcript, its reference labels and its word timings (the layout of
    ``ted_real``, ``TALK{.txt,.ref.tsv,.timings.tsv}``, or of a prepared Earnings-22 split,
    ``{text,ref,timings}/CALL``)."""
    for path in (text_path, ref_path, timings_path):
        if not path.is_file():
            raise FileNotFoundError(f"real-speech talk {name!r}: {path} not found")
    text = text_path.read_text(encoding="utf-8")
    reference = read_iwslt(ref_path)
    words = [word.text for word in split_user_text(text).words]
    if words != list(reference.words):
        first = next((i for i, (a, b) in enumerate(zip(words, reference.words)) if a != b), min(len(words),
                                                                                             len(reference.words)))
        raise ValueError(f"{ref_path}:{first + 1}: the reference's words differ from {text_path}'s "
                         f"({len(reference.words)} and {len(words)} words; first difference at word {first + 1})")
    return RealTalk(name, text, tuple(words), tuple(reference.labels), timings_path, text_path)


def talk_cues(talk: RealTalk) -> tuple[UserText, np.ndarray, list[str]]:
    """The talk's user words, the raw cues of its spoken words (as ``punctuate --alignment`` makes them) and
    their labels."""
    from inference.speech_input import match_timings, read_timing_rows, user_text_cues

    user_text = split_user_text(talk.text)
    starts, ends = match_timings(user_text, read_timing_rows(talk.timings_path), transcript=str(talk.text_path))
    cues = user_text_cues(user_text, starts, ends)
    labels = [label for word, label in zip(user_text.words, talk.labels) if word.tokens]
    return user_text, cues, labels


def fit_pause_model(directory: str | Path, talks: Sequence[str], *, min_pool: int = 30) -> PauseModel:
    """The pause model of the real-speech talks ``talks`` in ``directory``."""
    if not talks:
        raise ValueError("a pause model needs at least one real-speech talk")
    fitted = []
    for name in talks:
        _, cues, labels = talk_cues(read_real_talk(directory, name))
        fitted.append((name, cues, labels))
    return PauseModel.fit(fitted, min_pool=min_pool)


def simulate_split_cues(model: PauseModel, prepared: str | Path, out_dir: str | Path, *, splits: Sequence[str],
                        simulate: Sequence[str], seed: int, dropout_fraction: float, dropout_span: int,
                        missing_rate: float | None = None) -> dict[str, Any]:
    """Write ``out_dir/{timed,control}/<split>/timing.npy`` (raw cues, :data:`embeddings.timing_features.RAW_COLUMNS`)
    for every split of ``prepared``: simulated for the splits in ``simulate``, missing for the others.

    The timed and control cues of a split share their seed, hence which words have cues: they differ only in
    where the values are drawn from. Returns per-split figures (tokens, share with cues)."""
    from embeddings.speech_sources import PAUSES_FILE

    prepared, out_dir = Path(prepared), Path(out_dir)
    stats: dict[str, Any] = {}
    for index, split in enumerate(splits):
        data = read_iwslt(prepared / f"{split}.tsv")
        row: dict[str, Any] = {"tokens": len(data), "simulated": split in simulate}
        for variant in (TIMED, CONTROL):
            if split in simulate:
                raw = model.simulate(data.words, data.labels, conditional=variant == TIMED, seed=(seed, index),
                                     missing_rate=missing_rate, dropout_fraction=dropout_fraction,
                                     dropout_span=dropout_span)
            else:
                raw = missing_raw(len(data))
            target = out_dir / variant / split / PAUSES_FILE
            target.parent.mkdir(parents=True, exist_ok=True)
            np.save(target, raw)
            row[f"{variant}_share_with_cues"] = round(float(np.mean(raw[:, 2] == 0)), 4) if len(raw) else 0.0
            if variant == TIMED and split in simulate:
                labels = np.asarray(data.labels)
                with_cues = raw[:, 2] == 0
                row["timed_share_pause_0.2s"] = {
                    label: round(float(np.mean(raw[with_cues & (labels == label), 0] >= 0.2)), 3)
                    for label in LABELS if np.any(with_cues & (labels == label))}
        stats[split] = row
    return stats
