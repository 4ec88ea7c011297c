"""Report and analysis figures are written as non-empty PNG files (Agg backend, no display)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from figures.analysis import plot_attention_maps, plot_word_cancellation
from figures.plots import plot_confusion_matrix, plot_dev_f1_curves, plot_learning_curves, read_history
from models import build_model

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _is_png(path) -> bool:
    data = path.read_bytes()
    return len(data) > 1000 and data.startswith(PNG_MAGIC)


def test_confusion_matrix_png(tmp_path):
    matrix = np.array([[900, 20, 5, 1], [30, 60, 8, 0], [4, 6, 50, 3], [1, 0, 4, 7]])
    out = plot_confusion_matrix(matrix, tmp_path / "figs" / "cm.png", "Ref test set")
    assert out == tmp_path / "figs" / "cm.png"
    assert _is_png(out)


def test_confusion_matrix_with_empty_row(tmp_path):
    matrix = np.zeros((4, 4), dtype=np.int64)
    matrix[0, 0] = 3
    assert _is_png(plot_confusion_matrix(matrix, tmp_path / "cm.png", "empty rows"))


HISTORY = """step,epoch,train_loss,dev_loss,dev_f1,lr
10,0,1.20,,,0.001
20,0,0.90,,,0.001
30,1,0.70,0.80,0.41,0.001
40,1,0.60,,,0.0005
50,2,0.50,0.65,0.55,0.0005
"""


def test_learning_curves_png(tmp_path):
    csv_path = tmp_path / "history.csv"
    csv_path.write_text(HISTORY, encoding="utf-8")
    history = read_history(csv_path)
    assert np.isnan(history["dev_loss"]).sum() == 3
    assert history["dev_f1"][-1] == 0.55
    out = plot_learning_curves(csv_path, tmp_path / "curves.png")
    assert out == tmp_path / "curves.png"
    assert _is_png(out)


def test_learning_curves_without_dev_rows(tmp_path):
    csv_path = tmp_path / "history.csv"
    csv_path.write_text("step,epoch,train_loss,dev_loss,dev_f1,lr\n1,0,2.0,,,0.1\n", encoding="utf-8")
    assert _is_png(plot_learning_curves(csv_path, tmp_path / "curves.png"))


def test_dev_f1_curves_of_several_runs_in_one_png(tmp_path):
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text(HISTORY, encoding="utf-8")
    second.write_text(HISTORY.replace("0.55", "0.60"), encoding="utf-8")
    drawn = []
    original = plt.Axes.plot
    plt.Axes.plot = lambda self, x, y, **style: drawn.append((list(x), list(y), style["label"])) or original(
        self, x, y, **style)
    try:
        out = plot_dev_f1_curves({"word": first, "word+speech": second}, tmp_path / "f1.png")
    finally:
        plt.Axes.plot = original
    assert _is_png(out)
    # one line a run, only the rows with a dev evaluation, in percent
    assert drawn == [([30.0, 50.0], [41.0, 55.00000000000001], "word"), ([30.0, 50.0], [41.0, 60.0], "word+speech")]
    with pytest.raises(ValueError, match="no histories"):
        plot_dev_f1_curves({}, tmp_path / "none.png")


WORDS = ["so", "we", "went", "home", "and", "then", "what", "happened"]


def test_plot_word_cancellation_writes_png(tmp_path):
    deltas = np.array([0.01, -0.2, 0.05, -0.4, 0.0, 0.1, -0.05, 0.02])
    out = plot_word_cancellation(WORDS, deltas, 3, tmp_path / "figs" / "cancel.png")
    assert out == tmp_path / "figs" / "cancel.png" and _is_png(out)
    with pytest.raises(ValueError, match="scores"):
        plot_word_cancellation(WORDS, deltas[:3], 3, tmp_path / "bad.png")


def test_plot_attention_maps_from_drnn_lwma(tmp_path):
    torch.manual_seed(0)
    model = build_model({"name": "drnn_lwma", "hidden": 8, "layers": 3, "heads": 3, "layerwise": True,
                         "dropout": 0.0}, num_labels=4, vector_dim=6, vocab_size=20).eval()
    mask = torch.zeros(1, 10, dtype=torch.bool)
    mask[0, :8] = True
    batch = {"vectors": torch.randn(1, 10, 6), "ids": torch.randint(2, 20, (1, 10)), "mask": mask}
    maps = {name: weights[0] for name, weights in model.attention_maps(batch).items()}  # (H, T, T) each
    maps["single head (T, T)"] = np.eye(10)
    out = plot_attention_maps(WORDS, maps, tmp_path / "attention.png")
    assert _is_png(out)
    with pytest.raises(ValueError, match="no attention maps"):
        plot_attention_maps(WORDS, {}, tmp_path / "none.png")
