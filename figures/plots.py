"""Report figures: confusion matrix and learning curves (matplotlib, Agg backend: no display needed).

:func:`save_figure` writes every figure of the project, these and the model-analysis ones of
:mod:`figures.analysis`. Importing this module imports matplotlib: code on the way of ``punctuate``
or of ``import models`` imports it only where it draws (see ``training/__init__.py``).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")  # never needs a display; must precede the pyplot import

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from corpus.labels import LABELS  # noqa: E402

__all__ = ["plot_confusion_matrix", "plot_dev_f1_curves", "plot_learning_curves", "read_history", "save_figure"]


def save_figure(fig: plt.Figure, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` (folders created; 120 dpi, tight bounding box) and close it; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_confusion_matrix(
    matrix: np.ndarray,
    path: str | Path,
    title: str = "Confusion matrix",
    labels: Sequence[str] = LABELS,
) -> Path:
    """Counts annotated in every cell, colour = row-normalised share (recall per row)."""
    counts = np.asarray(matrix, dtype=np.int64)
    if counts.shape != (len(labels), len(labels)):
        raise ValueError(f"expected a {len(labels)}x{len(labels)} matrix, got {counts.shape}")
    row_sums = counts.sum(axis=1, keepdims=True)
    shares = np.divide(counts, row_sums, out=np.zeros(counts.shape), where=row_sums > 0)

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    image = ax.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    fig.colorbar(image, ax=ax, label="share of reference row")
    for (i, j), count in np.ndenumerate(counts):
        colour = "white" if shares[i, j] > 0.5 else "black"
        ax.text(j, i, f"{count}\n{shares[i, j]:.1%}", ha="center", va="center",
                color=colour, fontsize=8)
    ticks = range(len(labels))
    ax.set_xticks(ticks, labels)
    ax.set_yticks(ticks, labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("reference")
    ax.set_title(title)
    return save_figure(fig, path)


def _float_or_nan(value: str | None) -> float:
    value = (value or "").strip()
    return float(value) if value else math.nan


def read_history(history_csv: str | Path) -> dict[str, np.ndarray]:
    """The training history CSV as float columns (empty cells -> NaN)."""
    columns = ("step", "epoch", "train_loss", "dev_loss", "dev_f1", "lr")
    with open(history_csv, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return {c: np.array([_float_or_nan(r.get(c)) for r in rows], dtype=float) for c in columns}


def _plot_present(ax: plt.Axes, x: np.ndarray, y: np.ndarray, **style) -> None:
    keep = ~np.isnan(y)
    if keep.any():
        ax.plot(x[keep], y[keep], **style)


def plot_learning_curves(history_csv: str | Path, path: str | Path) -> Path:
    """Two panels: train/dev loss vs step, and dev F1 vs step."""
    h = read_history(history_csv)
    fig, (loss_ax, f1_ax) = plt.subplots(1, 2, figsize=(10, 4))
    _plot_present(loss_ax, h["step"], h["train_loss"], label="train loss", lw=1, alpha=0.8)
    _plot_present(loss_ax, h["step"], h["dev_loss"], label="dev loss", marker="o", lw=1.5)
    loss_ax.set_xlabel("step")
    loss_ax.set_ylabel("loss")
    loss_ax.set_title("Loss")
    _plot_present(f1_ax, h["step"], h["dev_f1"], label="dev F1", marker="o", color="C2")
    f1_ax.set_xlabel("step")
    f1_ax.set_ylabel("F1")
    f1_ax.set_title("Dev F1")
    for ax in (loss_ax, f1_ax):
        ax.grid(alpha=0.3)
        if ax.get_lines():
            ax.legend()
    return save_figure(fig, path)


def plot_dev_f1_curves(histories: dict[str, str | Path], path: str | Path, title: str = "Dev F1") -> Path:
    """Several runs' dev F1 against the training step in one panel (runs compared at equal steps), one line each."""
    if not histories:
        raise ValueError("no histories to plot")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for index, (name, history_csv) in enumerate(histories.items()):
        h = read_history(history_csv)
        _plot_present(ax, h["step"], 100 * h["dev_f1"], label=name, marker="o", ms=3, color=f"C{index % 10}")
    ax.set_xlabel("step")
    ax.set_ylabel("dev F1 (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)
