"""LSTM / BLSTM baselines: shapes, padding, direction, learning a context rule."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import context_rule_batch, overfit_accuracy, padded_batch, scramble_padding

from models import build_model


def config(name, **changes):
    return {"name": name, "hidden": 8, "layers": 2, "dropout": 0.0, **changes}


@pytest.mark.parametrize("name", ["lstm", "blstm"])
@pytest.mark.parametrize("vector_dim", [50, 0])
def test_shapes_loss_backward(name, vector_dim):
    torch.manual_seed(0)
    model = build_model(config(name, dropout=0.3), num_labels=4, vector_dim=vector_dim, vocab_size=20)
    batch = padded_batch(dim=vector_dim)
    assert model(batch).shape == (3, 9, 4)
    loss = model.loss(batch)
    loss.backward()
    assert torch.isfinite(loss)
    assert model.encoder.output_dim == (16 if name == "blstm" else 8)


@pytest.mark.parametrize("name", ["lstm", "blstm"])
def test_padding_does_not_leak(name):
    torch.manual_seed(0)
    model = build_model(config(name, dropout=0.5), num_labels=4, vector_dim=50, vocab_size=20).eval()
    batch = padded_batch()
    mask = batch["mask"]
    logits = model(batch)
    assert torch.allclose(model(scramble_padding(batch))[mask], logits[mask], atol=1e-5)


@pytest.mark.parametrize("name", ["lstm", "blstm"])
def test_only_the_bidirectional_model_sees_later_words(name):
    torch.manual_seed(0)
    model = build_model(config(name), num_labels=4, vector_dim=50, vocab_size=20).eval()
    batch = padded_batch()
    later = dict(batch, vectors=batch["vectors"].clone())
    later["vectors"][:, 5:] += 1.0
    unchanged = torch.allclose(model(later)[:, :5], model(batch)[:, :5], atol=1e-6)
    assert unchanged == (name == "lstm")


def test_blstm_overfits_a_context_rule():
    """PERIOD before a word whose first feature is large (needs the next word); COMMA on feature 2."""
    torch.manual_seed(0)
    model = build_model(config("blstm", hidden=16, layers=1), num_labels=4, vector_dim=8, vocab_size=20)
    assert overfit_accuracy(model, context_rule_batch(), 150) > 0.9
