"""The model-analysis figures of the papers, drawn from the numbers of :mod:`models.analysis`.

* :func:`plot_word_cancellation`: the change of a label's probability when each word is cancelled
  (:func:`models.analysis.word_cancellation_scores`), as a bar chart over the words;
* :func:`plot_attention_maps`: one heat map per layer from ``DRNNLWMA.attention_maps``.

Figures are written by :func:`figures.plots.save_figure`, with the Agg backend that module selects (no
display needed; selecting it after pyplot's import is fine while no figure exists).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from figures.plots import save_figure
from models.analysis import attention_matrix

__all__ = ["plot_attention_maps", "plot_word_cancellation"]


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
    return save_figure(fig, path)


def plot_attention_maps(words: Sequence[str], maps: Mapping[str, object], path: str | Path) -> Path:
    """One heat map per layer (rows = query word, columns = attended word), heads AVERAGED.

    ``maps``: layer name -> (H, T, T) or (T, T) weights of one sentence, e.g.
    ``{k: v[i] for k, v in model.attention_maps(batch).items()}``; maps are cropped to ``len(words)``.
    All panels share one colour scale starting at 0.
    """
    if not maps:
        raise ValueError("no attention maps to plot")
    arrays = {name: attention_matrix(weights, len(words)) for name, weights in maps.items()}
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
    return save_figure(fig, path)
