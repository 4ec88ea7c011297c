"""Report figures are written as non-empty PNG files (Agg backend, no display)."""

from __future__ import annotations

import numpy as np

from punctuation.plots import plot_confusion_matrix, plot_learning_curves, read_history

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
    import matplotlib.pyplot as plt
    import pytest

    from punctuation.plots import plot_dev_f1_curves

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
