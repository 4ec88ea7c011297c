"""Scoring a trained model on the benchmark's test sets (the library behind the ``evaluate`` stage)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from corpus.iwslt import read_iwslt, write_iwslt
from corpus.labels import LABELS
from embeddings.store import load_split, load_split_words
from punctuation.plots import plot_confusion_matrix
from punctuation.scoring import confusion_matrix, score_labels
from punctuation.training import choose_device, load_trained_model, to_device
from punctuation.windows import predict_stream


def evaluate_model(
    model_dir: str | Path,
    features_dir: str | Path,
    prepared_dir: str | Path,
    out_dir: str | Path,
    *,
    splits: list[str],
    window: int,
    stride: int,
    batch_size: int = 64,
    device: str = "cpu",
) -> dict[str, Any]:
    """Predict every token of each split, write ``out_dir/<split>.tsv`` and a confusion-matrix plot.

    ``device``: "cpu", "cuda", or "auto" (CUDA when available).

    Returns ``{split: scores}`` with scores as :func:`punctuation.scoring.score_labels` gives them, plus
    ``tokens``.
    """
    device = str(choose_device(device))
    model, _ = load_trained_model(model_dir, device=device)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for split in splits:
        features = load_split(features_dir, split)
        reference = read_iwslt(Path(prepared_dir) / f"{split}.tsv")
        if len(reference) != len(features.ids):
            raise ValueError(f"{split}: {len(reference)} prepared tokens but {len(features.ids)} cached ones; "
                             "re-run the embed stage")
        predicted_ids = predict_stream(
            lambda batch: model.predict(to_device(batch, device)),
            features.vectors, features.ids.astype(np.int64), window=window, stride=stride,
            batch_size=batch_size, progress=lambda it: tqdm(it, desc=f"evaluate {split}", unit="batch"),
            words=load_split_words(features_dir, split) if model.reads_words else None,
        )
        predicted = [LABELS[i] for i in predicted_ids]
        write_iwslt(out_dir / f"{split}.tsv", reference.words, predicted)
        scores = score_labels(reference.labels, predicted)
        plot_confusion_matrix(confusion_matrix(reference.labels, predicted), out_dir / f"confusion_{split}.png",
                              title=f"{split}: reference (rows) vs prediction (columns)")
        results[split] = {**scores, "tokens": len(predicted)}
    return results
