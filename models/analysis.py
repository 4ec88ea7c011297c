"""Model analysis: word cancellation (Llombart et al., Interspeech 2019) and attention maps, as numbers.

* :func:`word_cancellation_scores`: cancel one input word at a time (its vector set to zero and its id
  set to the padding id 0, so it works for vector- and id-based models alike; the word stays a real
  position of the mask) and measure how the softmax probability of a label at a target position
  changes. All cancellations of a row run as one batch.
* :func:`attention_matrix`: one sentence's attention weights (e.g. from ``DRNNLWMA.attention_maps``) as one
  (T, T) matrix, heads averaged.

The figures drawn from them live with the other report figures, in :mod:`figures.plots`.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import torch

from corpus.labels import LABEL_TO_ID

__all__ = ["attention_matrix", "word_cancellation_scores"]

PAD_ID = 0


def _as_single_row(batch_row: Mapping[str, object]) -> dict[str, torch.Tensor]:
    """Tensors of one row with a leading batch dimension of 1 (accepts (T, ...) or (1, T, ...))."""
    mask = torch.as_tensor(batch_row["mask"])
    unbatched = mask.dim() == 1
    row = {}
    for key, value in batch_row.items():
        if not isinstance(value, torch.Tensor):
            continue  # e.g. "words": lists of strings are not model input
        if unbatched:
            value = value.unsqueeze(0)
        elif value.size(0) != 1:
            raise ValueError(f"batch_row must hold one row, {key!r} has {value.size(0)}")
        row[key] = value
    return row


@torch.no_grad()
def word_cancellation_scores(model: torch.nn.Module, batch_row: Mapping[str, object], target_position: int,
                             label: str | int = "PERIOD") -> np.ndarray:
    """Change of P(``label`` at ``target_position``) when each real word of the row is cancelled.

    ``batch_row`` is a batch dict holding one row, either unbatched ((T,) mask, (T, V) vectors, ...) or
    with batch size 1. Returns an array of length = number of real tokens, entry i = P(label | word i
    cancelled) - P(label | nothing cancelled): negative where the word supports the label, ~0 where the
    model ignores it. Cancelling a word zeroes its vector and sets its id to the padding id. The model
    is run in eval mode (its previous mode is restored). Models whose ``forward`` needs ``labels``
    (teacher-forced decoders) need them in the row.
    """
    row = _as_single_row(batch_row)
    length = int(row["mask"][0].sum())
    if not 0 <= target_position < length:
        raise ValueError(f"target_position {target_position} is not a real token (row length {length})")
    label_id = LABEL_TO_ID[label] if isinstance(label, str) else int(label)
    device = next(model.parameters()).device
    copies = length + 1  # copy 0 is the untouched row, copy i + 1 cancels word i
    batch = {key: value.to(device).repeat(copies, *([1] * (value.dim() - 1))) for key, value in row.items()}
    positions = torch.arange(length, device=device)
    if "vectors" in batch:
        batch["vectors"] = batch["vectors"].clone()
        batch["vectors"][positions + 1, positions] = 0.0
    if "ids" in batch:
        batch["ids"] = batch["ids"].clone()
        batch["ids"][positions + 1, positions] = PAD_ID
    was_training = model.training
    model.eval()
    try:
        probabilities = torch.softmax(model(batch)[:, target_position].float(), dim=-1)[:, label_id]
    finally:
        model.train(was_training)
    return (probabilities[1:] - probabilities[0]).cpu().numpy()


def attention_matrix(attention: object, length: int) -> np.ndarray:
    """One sentence's attention weights as a (T, T) float64 array: (T, T), (H, T, T) or (1, H, T, T) -> heads
    averaged, cropped to the first ``length`` tokens."""
    if isinstance(attention, torch.Tensor):
        attention = attention.detach().cpu().float().numpy()
    array = np.asarray(attention, dtype=np.float64)
    if array.ndim == 4:
        if array.shape[0] != 1:
            raise ValueError("pass one row's maps: (H, T, T) or (T, T)")
        array = array[0]
    if array.ndim == 3:
        array = array.mean(axis=0)
    if array.ndim != 2:
        raise ValueError(f"an attention map must be (T, T) or (H, T, T), got shape {array.shape}")
    return array[:length, :length]
