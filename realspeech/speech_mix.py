"""The speech models' training text: TED's training set with simulated timing cues and Earnings-22's calls with their
real ones, as one prepared set with its cue folders (``data/pauses/mix``).

The timing-aware tagger learns what a pause means from its training cues. TED's training talks have no recordings,
so their cues are simulated (:meth:`embeddings.timing_features.PauseModel.simulate`: each word draws the cues of a
real word with its label). Earnings-22's calls have real word times: real cues, with their real context (a speaker's
rate, untimed stretches, speaker turns). :func:`write_speech_mix` puts them together:

=====================================  ===========================================================================
file                                   what
=====================================  ===========================================================================
``prepared/train.tsv``                 TED's training tokens (``ted``), then each Earnings-22 split of
                                       ``earnings22_splits`` (its calls in order)
``prepared/{dev,ref,asr}.tsv``         IWSLT2011's, as ``data/prepared`` (the tunings' dev curve, the test sets)
``timed/SPLIT/timing.npy``             the raw cues of those tokens: TED's simulated ones (``data/pauses/timed``),
                                       Earnings-22's real ones (``data/earnings22/timing``)
``control/SPLIT/timing.npy``           the label-free control: TED's control cues (``data/pauses/control``), and
                                       Earnings-22's real cues **shuffled across its timed words** (seeded): the
                                       same values, where a word has one, but no longer after the word they belong
                                       to, so they tell nothing of its mark
=====================================  ===========================================================================

``ted_cues``: ``simulated`` (the default) gives TED's tokens the cues above; ``missing`` gives them none (every
token flagged missing, in both folders), so what a pause means is learned from Earnings-22's real cues alone while
TED's text still keeps the text-only reading.

Missing cues stay where they are in both (an untimed word is a cue of its own: the flag, never a zero pause), so
the speech model and its control differ only in where the timed values sit.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from corpus.iwslt import read_iwslt, write_iwslt
from embeddings.speech_sources import PAUSES_FILE
from embeddings.timing_features import missing_raw, word_groups

#: the IWSLT2011 splits copied as they are: the tunings' dev evaluations and the evaluate stage's test sets
COPIED_SPLITS = ("dev", "ref", "asr")
TIMED, CONTROL = "timed", "control"
PREPARED = "prepared"
#: what TED's tokens carry: their simulated cues, or none (every token missing)
TED_CUES = ("simulated", "missing")


def shuffled_cues(tokens: Sequence[str], raw: np.ndarray, *, seed: int) -> np.ndarray:
    """``raw`` cues (N, 3) with the (pause, log_duration) of the timed words permuted among them (seeded): the
    label-free control of real cues. Tokens inside a word (zeros) and missing flags stay as they are."""
    raw = np.asarray(raw, dtype=np.float32)
    if raw.shape != (len(tokens), 3):
        raise ValueError(f"{len(tokens)} tokens but cues of shape {raw.shape}")
    carriers = np.flatnonzero(word_groups(tokens) & (raw[:, 2] == 0))
    out = raw.copy()
    order = np.random.default_rng(seed).permutation(len(carriers))
    out[carriers, :2] = raw[carriers[order], :2]
    return out


def _cues(folder: Path, split: str, n: int) -> np.ndarray:
    path = folder / split / PAUSES_FILE
    raw = np.load(path)
    if raw.shape != (n, 3):
        raise ValueError(f"{path}: cues of shape {raw.shape}, its split has {n} tokens; re-run the stage that "
                         "writes it")
    return raw.astype(np.float32)


def write_speech_mix(prepared: str | Path, pauses: str | Path, earnings22: str | Path | None, out_dir: str | Path,
                     *, ted: bool = True, earnings22_splits: Sequence[str] = ("train",), seed: int = 22,
                     ted_cues: str = "simulated") -> dict[str, Any]:
    """Write the speech models' training set under ``out_dir`` (module docstring) from the prepared IWSLT2011/TED
    splits (``prepared``), their cues (``pauses``: ``timed/`` and ``control/`` of the fit_pauses stage) and the
    prepared Earnings-22 (``earnings22``: ``SPLIT.tsv``, ``timing/SPLIT/timing.npy``); returns its figures."""
    prepared, pauses, out_dir = Path(prepared), Path(pauses), Path(out_dir)
    if not ted and not earnings22_splits:
        raise ValueError("a speech training set needs TED's text, Earnings-22's, or both")
    if earnings22_splits and earnings22 is None:
        raise ValueError(f"Earnings-22 splits {list(earnings22_splits)} asked for, but no prepared Earnings-22 given")
    if ted_cues not in TED_CUES:
        raise ValueError(f"ted_cues must be one of {list(TED_CUES)}, got {ted_cues!r}")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    words: list[str] = []
    labels: list[str] = []
    timed: list[np.ndarray] = []
    control: list[np.ndarray] = []
    parts: list[dict[str, Any]] = []
    if ted:
        data = read_iwslt(prepared / "train.tsv")
        words += data.words
        labels += data.labels
        if ted_cues == "simulated":
            timed.append(_cues(pauses / TIMED, "train", len(data)))
            control.append(_cues(pauses / CONTROL, "train", len(data)))
        else:
            timed.append(missing_raw(len(data)))
            control.append(missing_raw(len(data)))
        parts.append({"source": f"ted train ({ted_cues} cues)", "tokens": len(data)})
    for index, split in enumerate(earnings22_splits):
        data = read_iwslt(Path(earnings22) / f"{split}.tsv")
        real = _cues(Path(earnings22) / "timing", split, len(data))
        words += data.words
        labels += data.labels
        timed.append(real)
        control.append(shuffled_cues(data.words, real, seed=seed + index))
        parts.append({"source": f"earnings22 {split} (real cues)", "tokens": len(data),
                      "share_with_cues": round(float(np.mean(real[:, 2] == 0)), 4)})
    write_iwslt(out_dir / PREPARED / "train.tsv", words, labels)
    for variant, arrays in ((TIMED, timed), (CONTROL, control)):
        target = out_dir / variant / "train" / PAUSES_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        np.save(target, np.concatenate(arrays))
    for split in COPIED_SPLITS:
        shutil.copyfile(prepared / f"{split}.tsv", out_dir / PREPARED / f"{split}.tsv")
        for variant in (TIMED, CONTROL):
            target = out_dir / variant / split / PAUSES_FILE
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(pauses / variant / split / PAUSES_FILE, target)
    figures = {"train_tokens": len(words), "parts": parts, "seed": seed}
    (out_dir / "mix.json").write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return figures
