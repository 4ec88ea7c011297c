"""Mask-aware shared encoders: padding never leaks into real positions, shapes, BatchNorm statistics."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from models.encoders import (
    ConvBlock1d,
    MaskedBatchNorm1d,
    MaskedConv1d,
    RecurrentEncoder,
    StackedBiGRU,
    WideResidualBlock1d,
)



def make_mask(batch_size=3, length=9, short=5):
    mask = torch.ones(batch_size, length, dtype=torch.bool)
    mask[-1, short:] = False
    return mask


def scramble_padding(x, mask, time_dim=1):
    """A copy of x whose padded positions hold large random values."""
    x = x.clone()
    pad = ~mask if time_dim == 1 else ~mask.unsqueeze(1).expand_as(x)
    if time_dim == 1:
        x[pad] = torch.randn_like(x[pad]) * 50
    else:
        x[pad] = torch.randn(int(pad.sum())) * 50
    return x


def test_stacked_bigru_returns_every_layer_and_ignores_padding():
    torch.manual_seed(0)
    encoder = StackedBiGRU(6, 5, layers=3, dropout=0.0)
    mask = make_mask()
    x = torch.randn(3, 9, 6)
    outputs = encoder(x, mask)
    assert len(outputs) == 3 and all(o.shape == (3, 9, 10) for o in outputs)
    assert all((o[~mask] == 0).all() for o in outputs)
    changed = encoder(scramble_padding(x, mask), mask)
    for before, after in zip(outputs, changed):
        assert torch.allclose(before[mask], after[mask], atol=1e-6)
    # the short row gives the same result as running it alone without any padding
    alone = encoder(x[-1:, :5], torch.ones(1, 5, dtype=torch.bool))
    assert torch.allclose(alone[-1][0], outputs[-1][-1, :5], atol=1e-5)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_recurrent_encoder_dims_padding_and_direction(cell, bidirectional):
    torch.manual_seed(0)
    encoder = RecurrentEncoder(4, 6, 2, bidirectional=bidirectional, dropout=0.0, cell=cell)
    assert encoder.output_dim == (12 if bidirectional else 6)
    mask = make_mask()
    x = torch.randn(3, 9, 4)
    out = encoder(x, mask)
    assert out.shape == (3, 9, encoder.output_dim)
    assert torch.allclose(encoder(scramble_padding(x, mask), mask)[mask], out[mask], atol=1e-6)
    future = x.clone()
    future[:, 4:] += 1.0
    earlier_changed = not torch.allclose(encoder(future, mask)[:, :4], out[:, :4], atol=1e-6)
    assert earlier_changed == bidirectional  # a left-to-right encoder never sees later words


def test_recurrent_encoder_refuses_unknown_cell():
    with pytest.raises(ValueError, match="unknown recurrent cell"):
        RecurrentEncoder(4, 4, cell="rnn")


def test_masked_batchnorm_uses_real_positions_only():
    torch.manual_seed(0)
    norm, reference = MaskedBatchNorm1d(4), nn.BatchNorm1d(4)
    mask = make_mask()
    x = torch.randn(3, 4, 9) * 3 + 1
    out = norm(x, mask)
    real = x.transpose(1, 2)[mask]  # (N_real, C): exactly the real positions
    expected = reference(real)
    assert torch.allclose(out.transpose(1, 2)[mask], expected, atol=1e-5)
    assert torch.allclose(norm.running_mean, reference.running_mean, atol=1e-6)
    assert torch.allclose(norm.running_var, reference.running_var, atol=1e-5)
    assert (out.transpose(1, 2)[~mask] == 0).all()
    # training-mode output at real positions does not depend on padding content
    assert torch.allclose(norm(scramble_padding(x, mask, time_dim=2), mask)[mask.unsqueeze(1).expand_as(x)],
                          out[mask.unsqueeze(1).expand_as(x)], atol=1e-5)
    reference(real)  # the second training call updated the running statistics once more
    norm.eval(), reference.eval()
    assert torch.allclose(norm(x, mask).transpose(1, 2)[mask], reference(real), atol=1e-5)


def test_masked_conv_is_same_padded_and_padding_free():
    torch.manual_seed(0)
    conv = MaskedConv1d(3, 5, 5)
    mask = make_mask()
    x = torch.randn(3, 3, 9)
    out = conv(x, mask)
    assert out.shape == (3, 5, 9)
    keep = mask.unsqueeze(1).expand_as(out)
    assert torch.allclose(conv(scramble_padding(x, mask, time_dim=2), mask)[keep], out[keep], atol=1e-5)
    alone = conv(x[-1:, :, :5], torch.ones(1, 5, dtype=torch.bool))
    assert torch.allclose(alone[0], out[-1, :, :5], atol=1e-5)
    with pytest.raises(ValueError, match="odd kernel"):
        MaskedConv1d(3, 5, 4)


@pytest.mark.parametrize("block", [lambda: ConvBlock1d(4, 6, 3), lambda: WideResidualBlock1d(4, 6, 3),
                                   lambda: WideResidualBlock1d(6, 6, 3)])
def test_conv_blocks_do_not_leak_padding_in_train_or_eval(block):
    torch.manual_seed(0)
    module = block()
    channels = module.conv.in_channels if isinstance(module, ConvBlock1d) else module.conv1.in_channels
    mask = make_mask()
    x = torch.randn(3, channels, 9)
    for mode in (True, False):
        module.train(mode)
        out = module(x, mask)
        keep = mask.unsqueeze(1).expand_as(out)
        assert (out[~keep] == 0).all()
        assert torch.allclose(module(scramble_padding(x, mask, time_dim=2), mask)[keep], out[keep], atol=1e-5)


def test_wide_residual_shortcut_only_where_channels_change():
    changing, same = WideResidualBlock1d(4, 8), WideResidualBlock1d(8, 8)
    assert isinstance(changing.shortcut, MaskedConv1d) and changing.shortcut.kernel_size == (1,)
    assert same.shortcut is None
    x, mask = torch.randn(2, 8, 7), torch.ones(2, 7, dtype=torch.bool)
    same.eval()
    for p in same.conv2.parameters():  # with the residual branch silenced, the block is the identity
        nn.init.zeros_(p)
    assert torch.allclose(same(x, mask), x)
