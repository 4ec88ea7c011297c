"""Model selection during training: dev loss and greedy-decoded dev scores of the model being trained.

The windows and the stitching are those of ``punctuate`` (:func:`inference.windows.predict_windows`, with the
window combination ``punctuate`` uses for the model: :func:`inference.punctuator.combine_rule`); the
tokens are cut from a :class:`training.batches.TokenStore` (resident on the device on CUDA), and losses and
predictions stay on the device until the end. :func:`cut_batch` is how the trainer cuts every batch, its training
steps' included: it tells the model on the host which batches have no padding.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np
import torch

from corpus.labels import LABELS
from evaluation.scoring import score_labels
from inference.punctuator import combine_rule, window_logits
from inference.windows import predict_windows
from models.encoders import ALL_REAL
from training.batches import TokenStore, real_tokens


def cut_batch(store: TokenStore, starts, window: int, **options) -> dict:
    """``store.batch(starts, window, **options)`` with :data:`models.encoders.ALL_REAL`: whether every window is
    whole (no padding), which the window starts tell on the host. A recurrent encoder then runs unpacked instead
    of reading the rows' lengths off the mask, which on a GPU would wait for the device (once per batch)."""
    batch = store.batch(starts, window, **options)
    batch[ALL_REAL] = len(starts) > 0 and real_tokens(starts, window, store.num_tokens) == len(starts) * window
    return batch


def evaluate_on_tokens(model, features, *, window: int, stride: int, label_smoothing: float,
                       device: torch.device, batch_size: int, store: TokenStore | None = None,
                       autocast: Callable = contextlib.nullcontext, combine: str = "centre") -> dict[str, float]:
    """Dev loss (teacher forced, non-overlapping windows) and greedy-decoded scores (overlapping windows, combined
    by ``combine``: ``train.decode_combine``, :data:`inference.windows.COMBINE_RULES`).

    ``store``: the tokens as a :class:`TokenStore` (resident on the device: batches cut there); by default
    one is made from ``features`` (``vectors``, ``ids``, ``labels``, ``words``). Losses and predictions stay
    on the device until the end: on a GPU the host waits for the device twice (losses, predictions), and once
    more for a recurrent model's batch with the split's last, short window (the only one that needs packing).
    """
    labels = np.asarray(features.labels).astype(np.int64)
    if store is None:
        store = TokenStore(features.vectors, features.ids, labels, words=features.words, device=device,
                           resident=False)
    model.eval()
    losses, weights = [], []
    with torch.no_grad(), autocast():
        starts = np.arange(0, store.num_tokens, window)
        for first in range(0, len(starts), batch_size):
            chunk = starts[first:first + batch_size]
            losses.append(model.loss(cut_batch(store, chunk, window), label_smoothing).detach().float())
            weights.append(real_tokens(chunk, window, store.num_tokens))
        combine = combine_rule(model, combine)
        predict = model.predict if combine == "centre" else lambda batch: window_logits(model, batch)
        predicted = predict_windows(predict, lambda s: cut_batch(store, np.asarray(s), window, with_labels=False),
                                    store.num_tokens, window=window, stride=stride, batch_size=batch_size,
                                    combine=combine)
    scores = score_labels([LABELS[i] for i in labels], [LABELS[i] for i in predicted])
    model.train()
    loss = float(np.average(torch.stack(losses).double().cpu().numpy(), weights=weights)) if losses else float("nan")
    return {"loss": loss, "scores": scores}


class TokenSlice:
    """The first ``n`` tokens of a split's cached features (the dev subset used for model selection)."""

    def __init__(self, features, n: int | None, words: list[str] | None):
        n = len(features.ids) if n is None else min(n, len(features.ids))
        self.vectors, self.ids, self.labels = features.vectors[:n], features.ids[:n], features.labels[:n]
        self.words = None if words is None else words[:n]

