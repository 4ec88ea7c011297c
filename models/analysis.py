"""Model analysis: word cancellation (Llombart et al., Interspeech 2019) and DRNN-LWMA attention maps.

* :func:`word_cancellation_scores`: cancel one input word at a time (its vector set to zero and its id
  set to the padding id 0, so it works for vector- and id-based models alike; the word stays a real
  position of the mask) and measure how the softmax probability of a label at a target position
  changes. All cancellations of a row run as one batch.
* :func:`plot_word_cancellation`: those changes as a bar chart over the words.
* :func:`plot_attention_maps`: one heat map per layer from ``DRNNLWMA.attention_maps``.

Figures use matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # must precede the pyplot import

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from punctuation.labels import LABEL_TO_ID  # noqa: E402

__all__ = ["plot_attention_maps", "plot_word_cancellation", "word_cancellation_scores"]

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


def _save(fig: plt.Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_word_cancellation(words: Sequence[str], deltas: Sequence[float], target_position: int,
                           path: str | Path, label: str = "PERIOD") -> Path:
    """Bar chart of the probability changes (one bar per word, words on the x axis).

    Red bars lower the probability of ``label`` when the word is cancelled (the word supports it), blue
    ones raise it; the target word is marked in bold with a dashed line after it.
    """
    deltas = np.asarray(deltas, dtype=np.float64)
    if len(words) != len(deltas):
        raise ValueError(f"{len(words)} words but {len(deltas)} scores")
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(words) + 1.5), 3.6))
    positions = np.arange(len(words))
    ax.bar(positions, deltas, color=np.where(deltas < 0, "tab:red", "tab:blue"))
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.axvline(target_position + 0.5, color="gray", linestyle="--", linewidth=1.0)
    ax.set_xticks(positions)
    ax.set_xticklabels(words, rotation=60, ha="right")
    ax.get_xticklabels()[target_position].set_fontweight("bold")
    ax.set_xlim(-0.6, len(words) - 0.4)
    ax.set_ylabel(f"Δ P({label})")
    ax.set_title(f"Word cancellation: change of P({label}) after “{words[target_position]}”")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def _to_2d(attention: object, length: int) -> np.ndarray:
    """(T, T), (H, T, T) or (1, H, T, T) -> heads averaged, cropped to the first ``length`` tokens."""
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


def plot_attention_maps(words: Sequence[str], maps: Mapping[str, object], path: str | Path) -> Path:
    """One heat map per layer (rows = query word, columns = attended word), heads AVERAGED.

    ``maps``: layer name -> (H, T, T) or (T, T) weights of one sentence, e.g.
    ``{k: v[i] for k, v in model.attention_maps(batch).items()}``; maps are cropped to ``len(words)``.
    All panels share one colour scale starting at 0.
    """
    if not maps:
        raise ValueError("no attention maps to plot")
    arrays = {name: _to_2d(weights, len(words)) for name, weights in maps.items()}
    vmax = max(float(a.max()) for a in arrays.values()) or 1.0
    side = max(3.0, 0.28 * len(words) + 1.2)
    fig, axes = plt.subplots(1, len(arrays), figsize=(side * len(arrays) + 1.0, side + 0.6), squeeze=False)
    image = None
    for ax, (name, array) in zip(axes[0], arrays.items()):
        image = ax.imshow(array, cmap="viridis", vmin=0.0, vmax=vmax, aspect="equal")
        ax.set_title(name)
        ax.set_xticks(range(len(words)))
        ax.set_xticklabels(words, rotation=90, fontsize=8)
        ax.set_yticks(range(len(words)))
        ax.set_yticklabels(words, fontsize=8)
        ax.set_xlabel("attended word")
    axes[0][0].set_ylabel("query word")
    fig.colorbar(image, ax=list(axes[0]), shrink=0.8, label="attention weight (heads averaged)")
    return _save(fig, path)
