"""DRNN-LWMA (Kim, ICASSP 2019): shapes, layer-wise attention maps, padding, learning a context rule."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import context_rule_batch, overfit_accuracy, padded_batch, scramble_padding

from models import MODEL_REGISTRY, build_model


SMALL = {"name": "drnn_lwma", "hidden": 8, "layers": 2, "heads": 2, "layerwise": True, "dropout": 0.0}


def test_registered_and_refuses_missing_params():
    assert "drnn_lwma" in MODEL_REGISTRY
    with pytest.raises(ValueError, match="needs"):
        build_model({k: v for k, v in SMALL.items() if k != "layerwise"}, num_labels=4, vector_dim=50,
                    vocab_size=20)


@pytest.mark.parametrize("vector_dim", [50, 0])
def test_shapes_loss_backward(vector_dim):
    torch.manual_seed(0)
    model = build_model({**SMALL, "dropout": 0.5}, num_labels=4, vector_dim=vector_dim, vocab_size=20)
    batch = padded_batch(dim=vector_dim)
    assert model(batch).shape == (3, 9, 4)
    loss = model.loss(batch, label_smoothing=0.1)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in model.parameters())
    assert model.predict(batch).shape == (3, 9)


@pytest.mark.parametrize("layers", [1, 2, 3, 4])
@pytest.mark.parametrize("heads", [1, 2, 3, 4, 5])
def test_layers_by_heads_grid(layers, heads):
    model = build_model({**SMALL, "layers": layers, "heads": heads}, num_labels=4, vector_dim=6,
                        vocab_size=20).eval()
    width = 16  # 2 * hidden
    assert model.attention_dim % heads == 0 and width <= model.attention_dim < width + heads
    batch = padded_batch(batch_size=2, length=5, dim=6, short=3)
    assert model(batch).shape == (2, 5, 4)
    maps = model.attention_maps(batch)
    assert list(maps) == [f"layer{i}" for i in range(1, layers + 1)]
    assert all(w.shape == (2, heads, 5, 5) for w in maps.values())


def test_heads_not_dividing_width_get_a_projection_others_none():
    divisible = build_model({**SMALL, "heads": 4}, num_labels=4, vector_dim=6, vocab_size=20)
    odd = build_model({**SMALL, "heads": 3}, num_labels=4, vector_dim=6, vocab_size=20)
    assert divisible.attention_dim == 16 and all(isinstance(p, torch.nn.Identity) for p in divisible.key_projections)
    assert odd.attention_dim == 18 and all(isinstance(p, torch.nn.Linear) for p in odd.key_projections)


def test_layerwise_versus_top_layer_only():
    torch.manual_seed(0)
    layerwise = build_model({**SMALL, "layers": 3}, num_labels=4, vector_dim=6, vocab_size=20).eval()
    top = build_model({**SMALL, "layers": 3, "layerwise": False}, num_labels=4, vector_dim=6,
                      vocab_size=20).eval()
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(layerwise) > count(top)
    assert len(layerwise.attentions) == 3 and len(top.attentions) == 1
    # classifier reads [query; one context per attended layer]
    assert layerwise.classifier.linear.in_features == 4 * layerwise.attention_dim
    assert top.classifier.linear.in_features == 2 * top.attention_dim
    batch = padded_batch(dim=6)
    assert list(layerwise.attention_maps(batch)) == ["layer1", "layer2", "layer3"]
    assert list(top.attention_maps(batch)) == ["layer3"]


def test_attention_rows_sum_to_one_over_real_keys():
    torch.manual_seed(0)
    model = build_model({**SMALL, "layers": 3, "heads": 3}, num_labels=4, vector_dim=50, vocab_size=20).eval()
    batch = padded_batch()
    mask = batch["mask"]
    for weights in model.attention_maps(batch).values():
        assert (weights.masked_select(~mask[:, None, None, :].expand_as(weights)) == 0).all()
        row_sums = weights.sum(-1)  # (B, H, T)
        real_queries = mask[:, None, :].expand_as(row_sums)
        assert torch.allclose(row_sums[real_queries], torch.ones(int(real_queries.sum())), atol=1e-5)


@pytest.mark.parametrize("layerwise", [True, False])
def test_padding_does_not_leak(layerwise):
    torch.manual_seed(0)
    model = build_model({**SMALL, "heads": 5, "layerwise": layerwise, "dropout": 0.5}, num_labels=4,
                        vector_dim=50, vocab_size=20).eval()
    batch = padded_batch()
    mask = batch["mask"]
    logits = model(batch)
    assert torch.allclose(model(scramble_padding(batch))[mask], logits[mask], atol=1e-5)


def test_overfits_a_context_rule():
    """PERIOD before a word whose first feature is large: needs the next word, i.e. context."""
    torch.manual_seed(0)
    model = build_model({**SMALL, "hidden": 16}, num_labels=4, vector_dim=8, vocab_size=20)
    assert overfit_accuracy(model, context_rule_batch(), 150) > 0.9
