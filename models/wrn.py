"""Convolutional punctuators: plain 1-D CNN, wide residual network (WRN-1D) and WRN + BLSTM.

After Llombart et al. (Interspeech 2019), who restore punctuation with 1-D wide residual networks over
the word sequence (and a WRN followed by a BLSTM), and Zagoruyko & Komodakis (2016) for the WRN block.
Convolutions run over the time (token) axis with 'same' padding, so each position gets one prediction.

* ``conv``: input layer -> conv k5 + BN + ReLU -> ``blocks`` x (conv k3 + BN + ReLU + dropout) ->
  position-wise classifier. All convs have ``channels`` channels.
* ``wrn``: input layer -> conv k5 (``channels``) -> ``blocks`` pre-activation wide residual blocks
  (``models.encoders.WideResidualBlock1d``: BN-ReLU-conv k3-BN-ReLU-dropout-conv k3) of width
  ``channels * widen`` -> BN + ReLU -> position-wise classifier. All blocks share one width (no
  down-sampling over time, which a per-token tagger cannot use), so only the first block changes the
  channel count and only it has a 1x1 convolution on its shortcut; the others use the identity.
* ``wrn_blstm``: the ``wrn`` trunk, then one BLSTM layer (``lstm_hidden`` units per direction), then the
  classifier.

The input layer (``models.blocks.InputLayer``) projects the cached vectors (or embeds the ids when
vector_dim == 0) to ``channels``.

Padding: every convolution zeroes padded positions of its input first, so with 'same' zero padding a
real position sees exactly what it would see in an unpadded batch. BatchNorm uses statistics over real
positions only (``models.encoders.MaskedBatchNorm1d``), so padding does not leak even in training mode;
in eval mode it uses the running statistics as usual. A batch the host knows to be without padding (every
training batch but an epoch's last) runs unmasked, with fused BatchNorm (``models.encoders.conv_mask``).
"""

from __future__ import annotations

import torch
from torch import nn

from models.blocks import InputLayer, TokenClassifier
from models.encoders import (
    ALL_REAL,
    ConvBlock1d,
    MaskedBatchNorm1d,
    MaskedConv1d,
    RecurrentEncoder,
    WideResidualBlock1d,
    conv_mask,
)
from models.registry import PunctuationModel, register_model


def _check(channels: int, blocks: int, widen: int = 1) -> None:
    if channels < 1 or blocks < 1 or widen < 1:
        raise ValueError(f"channels, blocks and widen must be >= 1, got {channels}, {blocks}, {widen}")


class WideResNet1d(nn.Module):
    """The WRN trunk on (B, T, input_dim) -> (B, T, channels * widen); padded positions are zero."""

    def __init__(self, input_dim: int, channels: int, widen: int, blocks: int, dropout: float):
        super().__init__()
        _check(channels, blocks, widen)
        width = channels * widen
        self.first = MaskedConv1d(input_dim, channels, 5)
        self.blocks = nn.ModuleList(
            WideResidualBlock1d(channels if i == 0 else width, width, 3, dropout) for i in range(blocks)
        )
        self.final_norm = MaskedBatchNorm1d(width)
        self.output_dim = width

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.first(x.transpose(1, 2), mask)
        for block in self.blocks:
            x = block(x, mask)
        return torch.relu(self.final_norm(x, mask)).transpose(1, 2)


@register_model("conv")
class ConvPunctuator(PunctuationModel):
    def __init__(self, *, num_labels: int, vector_dim: int, vocab_size: int, channels: int, blocks: int,
                 dropout: float):
        super().__init__()
        _check(channels, blocks)
        self.input = InputLayer(vector_dim, vocab_size, channels)
        self.convs = nn.ModuleList(
            [ConvBlock1d(channels, channels, 5, dropout)]
            + [ConvBlock1d(channels, channels, 3, dropout) for _ in range(blocks)]
        )
        self.classifier = TokenClassifier(channels, num_labels, dropout=0.0)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        mask = conv_mask(batch)
        x = self.input(batch).transpose(1, 2)
        for conv in self.convs:
            x = conv(x, mask)
        return self.classifier(x.transpose(1, 2))


@register_model("wrn")
class WRNPunctuator(PunctuationModel):
    def __init__(self, *, num_labels: int, vector_dim: int, vocab_size: int, channels: int, widen: int,
                 blocks: int, dropout: float):
        super().__init__()
        self.input = InputLayer(vector_dim, vocab_size, channels)
        self.trunk = WideResNet1d(channels, channels, widen, blocks, dropout)
        self.classifier = TokenClassifier(self.trunk.output_dim, num_labels, dropout)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.classifier(self.trunk(self.input(batch), conv_mask(batch)))


@register_model("wrn_blstm")
class WRNBLSTMPunctuator(PunctuationModel):
    def __init__(self, *, num_labels: int, vector_dim: int, vocab_size: int, channels: int, widen: int,
                 blocks: int, lstm_hidden: int, dropout: float):
        super().__init__()
        self.input = InputLayer(vector_dim, vocab_size, channels)
        self.trunk = WideResNet1d(channels, channels, widen, blocks, dropout)
        self.dropout = nn.Dropout(dropout)
        self.blstm = RecurrentEncoder(self.trunk.output_dim, lstm_hidden, 1, bidirectional=True)
        self.classifier = TokenClassifier(self.blstm.output_dim, num_labels, dropout)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        trunk = self.trunk(self.input(batch), conv_mask(batch))
        return self.classifier(self.blstm(self.dropout(trunk), batch["mask"], batch.get(ALL_REAL, False)))
