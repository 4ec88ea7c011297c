import math

import pytest
import torch

from models.blocks import (
    MultiHeadAttention,
    RelativePositionBias,
    TransformerEncoder,
    causal_mask,
    sinusoidal_positions,
)


def test_sinusoidal_positions_match_the_formula():
    table = sinusoidal_positions(7, 8)
    pos, i = 5, 2
    assert table[pos, 2 * i].item() == pytest.approx(math.sin(pos / 10000 ** (2 * i / 8)), abs=1e-6)
    assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(pos / 10000 ** (2 * i / 8)), abs=1e-6)


def test_attention_matches_torch_reference():
    torch.manual_seed(0)
    attention = MultiHeadAttention(16, 4).eval()
    reference = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([attention.query.weight, attention.key.weight, attention.value.weight]))
        reference.in_proj_bias.copy_(torch.cat([attention.query.bias, attention.key.bias, attention.value.bias]))
        reference.out_proj.weight.copy_(attention.output.weight)
        reference.out_proj.bias.copy_(attention.output.bias)
    x = torch.randn(2, 5, 16)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    ours, _ = attention(x, x, key_mask=mask)
    theirs, _ = reference(x, x, x, key_padding_mask=~mask)
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_masked_self_attention_has_no_future_leak():
    torch.manual_seed(0)
    encoder = TransformerEncoder(2, 16, 4, 32, dropout=0.0, causal=True).eval()
    x = torch.randn(1, 6, 16)
    mask = torch.ones(1, 6, dtype=torch.bool)
    before, maps = encoder(x, mask)
    changed = x.clone()
    changed[0, 4:] = torch.randn(2, 16)  # change only the future of position 3
    after, _ = encoder(changed, mask)
    assert torch.allclose(before[0, :4], after[0, :4], atol=1e-6)
    assert not torch.allclose(before[0, 4:], after[0, 4:])
    assert torch.all(maps[0][0, :, 2, 3:] == 0)  # no weight on later positions


def test_padding_keys_get_no_weight():
    attention = MultiHeadAttention(8, 2).eval()
    x = torch.randn(1, 4, 8)
    _, weights = attention(x, x, key_mask=torch.tensor([[True, True, False, False]]))
    assert torch.all(weights[..., 2:] == 0)
    assert torch.allclose(weights.sum(-1), torch.ones(1, 2, 4))


def test_interaction_attention_with_zero_mixing_equals_standard_attention():
    torch.manual_seed(0)
    standard = MultiHeadAttention(16, 4).eval()
    interacting = MultiHeadAttention(16, 4, interaction=True).eval()
    interacting.load_state_dict({**standard.state_dict(), "head_mixing": torch.zeros(4, 4)})
    x = torch.randn(2, 5, 16)
    assert torch.allclose(standard(x, x)[0], interacting(x, x)[0], atol=1e-6)
    with torch.no_grad():
        interacting.head_mixing.fill_(0.5)
    assert not torch.allclose(standard(x, x)[0], interacting(x, x)[0], atol=1e-4)


def test_interaction_mixing_initialisation_scale():
    torch.manual_seed(0)
    attention = MultiHeadAttention(512, 8, interaction=True)  # head width 64 -> std 0.1 / 8
    assert attention.head_mixing.shape == (8, 8)
    assert attention.head_mixing.std().item() == pytest.approx(0.1 / 8, rel=0.5)


def test_causal_mask_shape():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]


def test_relative_position_bias_depends_on_clipped_distance_only():
    bias = RelativePositionBias(heads=2, window=2)
    with torch.no_grad():
        bias.table.copy_(torch.arange(10, dtype=torch.float32).view(5, 2))  # row = distance + window
    table = bias(6)
    assert table.shape == (2, 6, 6)
    for i in range(6):
        for j in range(6):
            row = max(-2, min(2, j - i)) + 2
            assert table[0, i, j] == 2 * row and table[1, i, j] == 2 * row + 1


def test_zero_relative_bias_is_standard_attention_and_a_learned_one_reaches_a_neighbour():
    torch.manual_seed(0)
    plain = TransformerEncoder(2, 16, 4, 32, 0.0).eval()
    biased = TransformerEncoder(2, 16, 4, 32, 0.0, relative_window=3).eval()
    biased.load_state_dict({**plain.state_dict(), "relative_bias.table": torch.zeros(7, 4)})
    x, mask = torch.randn(3, 9, 16), torch.ones(3, 9, dtype=torch.bool)
    torch.testing.assert_close(biased(x, mask)[0], plain(x, mask)[0])
    # the initial table: head 0 points at the next word, head 1 at the previous one, the others are local
    table = RelativePositionBias(4, 3).table
    assert torch.allclose(table[:, 0], -3.0 * torch.tensor([4., 3, 2, 1, 0, 1, 2]))
    assert torch.allclose(table[:, 1], -3.0 * torch.tensor([2., 1, 0, 1, 2, 3, 4]))
    assert torch.allclose(table[:, 2], -0.5 * torch.tensor([3., 2, 1, 0, 1, 2, 3]))
    assert torch.allclose(table[:, 3], -0.25 * torch.tensor([3., 2, 1, 0, 1, 2, 3]))
    assert torch.allclose(RelativePositionBias(2, 3).table[:, 1], -0.25 * torch.tensor([3., 2, 1, 0, 1, 2, 3]))
    pointed = torch.softmax(RelativePositionBias(4, 3)(9)[0], dim=-1)  # head 0 of every query but the last
    assert torch.all(pointed[torch.arange(8), torch.arange(1, 9)] > 0.85)
    with torch.no_grad():  # a large bias at distance +1: every head of every layer attends to the next token
        biased.relative_bias.table[3 + 1] = 50.0
    maps = biased(x, mask)[1]
    for weights in maps:
        assert torch.all(weights[:, :, torch.arange(8), torch.arange(1, 9)] > 0.99)
