"""Scoring a trained model on the benchmark's test sets (the library behind the ``evaluate`` stage).

The model decodes each split through :class:`inference.punctuator.Punctuator`, the path of ``punctuate``:
the split's words are given as a user would give them (one word a line) and labelled by the model directory's
own embedder, windows and text handling, so the recorded F1 is what ``punctuate --format iwslt`` gives on the
same words. Only a model that reads per-token audio features (which text cannot give, and ``punctuate``
refuses) reads the split's cached vectors instead (``features_dir``), through the same windows.

The metrics name the model directory they scored (``"model"``, as the caller wrote it) beside one entry of
scores per split; :func:`split_scores` gives the splits alone.

The benchmark's protocol is the unsegmented one: a split is one stream of words, cut into overlapping windows
that ignore where sentences end. Published IWSLT2011 figures differ in protocol, and some cut the input at the
gold sentence ends (one sequence per reference sentence), which tells the model where a PERIOD or QUESTION is due
at each sequence's last word. ``segmented_splits`` scores a split that way as well, as ``<split>_segmented``
(:data:`SEGMENTED_SUFFIX`), so the two protocols can be read side by side; the headline stays unsegmented.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import torch
from tqdm import tqdm

from corpus.iwslt import read_iwslt, write_iwslt
from corpus.labels import SENTENCE_END_LABELS
from embeddings.store import load_split, load_split_words
from evaluation.scoring import confusion_matrix, score_labels
from inference.punctuator import Punctuator, WordsChangedError

#: The key of an evaluation's metrics that names the model directory scored (the others are splits).
MODEL_KEY = "model"
#: A split scored with its input cut at the gold sentence ends is recorded as ``<split><SEGMENTED_SUFFIX>``.
SEGMENTED_SUFFIX = "_segmented"


def sentence_spans(labels: list[str]) -> list[tuple[int, int]]:
    """``(start, end)`` of each reference sentence: up to and including each word labelled PERIOD or QUESTION
    (the words after the last one, if any, are a last span of their own)."""
    spans, start = [], 0
    for index, label in enumerate(labels):
        if label in SENTENCE_END_LABELS:
            spans.append((start, index + 1))
            start = index + 1
    if start < len(labels):
        spans.append((start, len(labels)))
    return spans


def split_scores(metrics: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The per-split scores of an evaluation's metrics, without :data:`MODEL_KEY`."""
    return {split: scores for split, scores in metrics.items() if split != MODEL_KEY}


def find_evaluation(model_dir: str | Path, metrics_dirs: Iterable[str | Path]) -> tuple[Path, dict[str, Any]] | None:
    """The evaluate stage's metrics of ``model_dir`` -- the file under ``metrics_dirs`` (searched in order, each
    recursively, files in sorted order) whose ``"model"`` names it -- and that file; ``None`` when none does."""
    wanted = os.path.normpath(model_dir)
    for directory in metrics_dirs:
        for path in sorted(Path(directory).rglob("*.json")):
            try:
                metrics = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(metrics, dict) and os.path.normpath(str(metrics.get(MODEL_KEY, ""))) == wanted:
                return path, metrics
    return None


def evaluate_model(
    model_dir: str | Path,
    prepared_dir: str | Path,
    out_dir: str | Path,
    *,
    splits: list[str],
    batch_size: int = 64,
    device: str = "cpu",
    threads: int | None = None,
    features_dir: str | Path | None = None,
    segmented_splits: Iterable[str] = (),
) -> dict[str, Any]:
    """Label every word of each split, write ``out_dir/<split>.tsv`` and a confusion-matrix plot.

    ``segmented_splits``: splits (of ``splits``) also labelled one reference sentence at a time
    (:func:`sentence_spans`; each sentence's labels those it gets alone, the sentences' windows sharing the
    model's batches: :func:`label_segments`), recorded as ``<split>_segmented`` with their own predictions file.

    ``device``: "cpu", "cuda", or "auto" (CUDA when available). ``threads``: torch's CPU threads, set for this
    process (None: as they are); the labels are the same bytes whatever the count (tests/test_inference_threads.py),
    the count is fixed so that the stage's record says what ran. ``features_dir``: the feature cache the model
    was trained on, read only by a model that needs per-token audio features.

    Returns ``{"model": model_dir, split: scores, ...}`` with scores as
    :func:`evaluation.scoring.score_labels` gives them, plus ``tokens``.
    """
    from figures.plots import plot_confusion_matrix  # matplotlib: only where a figure is drawn

    if threads is not None:
        torch.set_num_threads(threads)
    punctuator = Punctuator(model_dir, device=device, batch_size=batch_size, audio_features=True)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {MODEL_KEY: str(model_dir)}
    for split in splits:
        path = Path(prepared_dir) / f"{split}.tsv"
        reference = read_iwslt(path)
        progress = lambda it, split=split: tqdm(it, desc=f"evaluate {split}", unit="batch")  # noqa: E731
        if punctuator.needs_audio:
            predicted = _label_cached(punctuator, features_dir, split, len(reference), progress)
        else:
            predicted = punctuator.punctuate_words(reference.words, source=str(path), progress=progress)
        write_iwslt(out_dir / f"{split}.tsv", reference.words, predicted)
        scores = score_labels(reference.labels, predicted)
        plot_confusion_matrix(confusion_matrix(reference.labels, predicted), out_dir / f"confusion_{split}.png",
                              title=f"{split}: reference (rows) vs prediction (columns)")
        results[split] = {**scores, "tokens": len(predicted)}
        if split in segmented_splits:
            spans = sentence_spans(reference.labels)
            progress = lambda it, split=split: tqdm(it, desc=f"evaluate {split} by sentence", unit="batch")  # noqa: E731
            if punctuator.needs_audio:
                whole = load_split(features_dir, split) if features_dir is not None else None
                if whole is None:
                    raise ValueError("this model reads per-token audio features: give features_dir")
                segmented = label_vector_segments(punctuator, whole.vectors, whole.ids,
                                                  load_split_words(features_dir, split), spans, progress=progress)
            else:
                segmented = label_segments(punctuator, reference.words, spans, source=str(path), progress=progress)
            name = f"{split}{SEGMENTED_SUFFIX}"
            write_iwslt(out_dir / f"{name}.tsv", reference.words, segmented)
            results[name] = {**score_labels(reference.labels, segmented), "tokens": len(segmented),
                             "sentences": len(spans)}
    return results


def label_segments(punctuator: Punctuator, words: Sequence[str], spans: Sequence[tuple[int, int]], *,
                   source: str = "the words", progress=None) -> list[str]:
    """One label per word of ``words``, each span ``(start, end)`` of them labelled as a text of its own: the labels
    of ``punctuator.punctuate_words(words[start:end])`` for each span, one after the other. The windows of every
    span fill the model's batches together (``share_batches``: a model call per batch of windows, not per span,
    and the labels come back from the device once), each span's windows still those it gets alone.

    A word that does not come back as one word is a :class:`WordsChangedError` naming ``source`` and the span."""
    texts = [punctuator.prepare_text("\n".join(words[start:end])) for start, end in spans]
    labels: list[str] = []
    for (start, end), result in zip(spans, punctuator.punctuate_prepared(texts, capitalise=False, share_batches=True,
                                                                         progress=progress)):
        if len(result.labels) != end - start:
            raise WordsChangedError(f"{source}, words {start + 1}-{end}: {end - start} words in, {len(result.labels)} "
                                    "out (a word with whitespace inside, or read as punctuation)")
        labels.extend(result.labels)
    return labels


def label_vector_segments(punctuator: Punctuator, vectors: np.ndarray, ids: np.ndarray, words: Sequence[str],
                          spans: Sequence[tuple[int, int]], *, progress=None) -> list[str]:
    """One label per token of a split's cached model inputs, each span ``(start, end)`` labelled as a stream of its
    own (``punctuator.label_vectors`` of its rows, one span after the other), the windows of every span filling
    the model's batches together, as :func:`label_segments`."""
    streams = [(vectors[start:end], ids[start:end], words[start:end]) for start, end in spans if end > start]
    return [label for labels in punctuator.label_vector_streams(streams, progress) for label in labels]


def _label_cached(punctuator: Punctuator, features_dir: str | Path | None, split: str, tokens: int,
                  progress) -> list[str]:
    if features_dir is None:
        raise ValueError("this model reads per-token audio features: give the feature cache it was trained on "
                         "(features_dir)")
    features = load_split(features_dir, split)
    if tokens != len(features.ids):
        raise ValueError(f"{split}: {tokens} prepared tokens but {len(features.ids)} cached ones in {features_dir}; "
                         "re-run the embed stage")
    return punctuator.label_vectors(features.vectors, features.ids, load_split_words(features_dir, split),
                                    progress=progress)
