"""Word cancellation scores and attention matrices (their figures: tests/test_figures_plots.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models import build_model
from models.analysis import attention_matrix, word_cancellation_scores
from models.registry import PunctuationModel

WORDS = ["so", "we", "went", "home", "and", "then", "what", "happened"]


class PositionWise(PunctuationModel):
    """Reads only each word's own vector: every other word is ignored."""

    def __init__(self, vector_dim=6):
        super().__init__()
        self.linear = torch.nn.Linear(vector_dim, 4)

    def forward(self, batch):
        return self.linear(batch["vectors"])


def make_row(length=8, padded_to=10, dim=6, seed=0):
    torch.manual_seed(seed)
    mask = torch.zeros(padded_to, dtype=torch.bool)
    mask[:length] = True
    return {"vectors": torch.randn(padded_to, dim), "ids": torch.randint(2, 20, (padded_to,)), "mask": mask,
            "words": WORDS[:length]}


def test_ignored_words_give_zero_change():
    torch.manual_seed(0)
    model = PositionWise()
    row = make_row()
    deltas = word_cancellation_scores(model, row, target_position=3, label="PERIOD")
    assert deltas.shape == (8,)
    assert np.allclose(np.delete(deltas, 3), 0.0, atol=1e-7)
    assert abs(deltas[3]) > 1e-4  # the target word itself matters


@pytest.mark.parametrize("vector_dim", [6, 0])
def test_causal_model_ignores_later_words_and_ids_are_cancelled(vector_dim):
    torch.manual_seed(0)
    model = build_model({"name": "lstm", "hidden": 8, "layers": 1, "dropout": 0.5}, num_labels=4,
                        vector_dim=vector_dim, vocab_size=20)
    row = make_row(dim=vector_dim)
    deltas = word_cancellation_scores(model, row, target_position=4, label=2)
    assert np.allclose(deltas[5:], 0.0, atol=1e-7)  # an LSTM never sees words after the target
    assert np.abs(deltas[:5]).max() > 1e-5          # earlier words (vectors or ids) do matter
    assert model.training  # the caller's mode is restored


def test_batched_and_unbatched_rows_agree_and_bad_targets_are_refused():
    torch.manual_seed(0)
    model = build_model({"name": "blstm", "hidden": 8, "layers": 1, "dropout": 0.0}, num_labels=4,
                        vector_dim=6, vocab_size=20)
    row = make_row()
    batched = {k: v.unsqueeze(0) if isinstance(v, torch.Tensor) else v for k, v in row.items()}
    a = word_cancellation_scores(model, row, 2, "COMMA")
    b = word_cancellation_scores(model, batched, 2, "COMMA")
    assert np.allclose(a, b, atol=1e-6) and np.abs(a).max() > 0
    with pytest.raises(ValueError, match="not a real token"):
        word_cancellation_scores(model, row, 8)


def test_attention_matrix_averages_heads_and_crops_to_the_sentence():
    heads = torch.stack([torch.eye(10), torch.ones(10, 10) / 10])  # (H, T, T)
    matrix = attention_matrix(heads, 8)
    assert matrix.shape == (8, 8) and matrix.dtype == np.float64
    assert np.allclose(matrix, (np.eye(10) + 0.1)[:8, :8] / 2)
    assert np.array_equal(attention_matrix(heads.unsqueeze(0), 8), matrix)  # (1, H, T, T): one row's maps
    assert np.array_equal(attention_matrix(np.eye(10), 3), np.eye(3))
    with pytest.raises(ValueError, match="one row"):
        attention_matrix(torch.zeros(2, 3, 10, 10), 8)
    with pytest.raises(ValueError, match="must be"):
        attention_matrix(np.zeros(10), 8)


def test_drnn_lwma_attention_maps_give_one_matrix_per_layer():
    torch.manual_seed(0)
    model = build_model({"name": "drnn_lwma", "hidden": 8, "layers": 3, "heads": 3, "layerwise": True,
                         "dropout": 0.0}, num_labels=4, vector_dim=6, vocab_size=20).eval()
    batch = {k: v.unsqueeze(0) for k, v in make_row().items() if isinstance(v, torch.Tensor)}
    maps = {name: attention_matrix(weights[0], len(WORDS)) for name, weights in model.attention_maps(batch).items()}
    assert len(maps) == 3 and all(m.shape == (8, 8) for m in maps.values())
    assert all(np.allclose(m.sum(axis=1), 1.0, atol=1e-5) for m in maps.values())  # real keys hold all weight
