"""Mask-aware sequence encoders shared by the recurrent and convolutional models.

Every encoder takes ``x`` and ``mask`` (B, T) bool, True on real tokens (padding only at the end of a row),
and guarantees that padding never leaks into real positions:

* recurrent encoders run on packed sequences, so a row's recurrence stops at its last real token and the
  backward direction starts there; outputs at padded positions are zero. A batch without padding
  (``all_real``: the batch's :data:`ALL_REAL` entry, which the batch builder sets from what it knows on the host)
  runs unpacked, which computes the same: packing needs the rows' lengths on the host, and reading them from
  a mask on a GPU makes the host wait for the device at every step;
* 1-D convolutions zero the padded positions of their input before every convolution, and the
  'same' zero padding of the convolution then sees exactly what a shorter, unpadded batch would see;
* :class:`MaskedBatchNorm1d` computes its batch statistics over real positions only, so even in training
  mode the padding content (and the amount of padding) changes nothing at real positions.

The convolutional blocks take ``mask=None`` for a batch without padding (``all_real``): they then skip the
masking, and BatchNorm is the library's fused kernel. That computes the same (every position is real), and on a
GPU it is one kernel where the masked statistics take some twenty (and as many again backward) per layer.

Recurrent encoders work on (B, T, D) tensors; convolutional blocks on (B, C, T) tensors, as ``nn.Conv1d``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

__all__ = [
    "ALL_REAL",
    "ConvBlock1d",
    "MaskedBatchNorm1d",
    "MaskedConv1d",
    "RecurrentEncoder",
    "StackedBiGRU",
    "WideResidualBlock1d",
    "conv_mask",
    "run_packed",
]

RNN_CELLS = {"lstm": nn.LSTM, "gru": nn.GRU}

#: Batch entry (a Python bool, not a tensor): True when every position of the batch is a real token, i.e. its mask
#: is all True. Set by whoever cuts the batch from what it knows on the host (training.dev_eval.cut_batch); absent
#: means "not known", never "has padding".
ALL_REAL = "all_real"


def run_packed(rnn: nn.RNNBase, x: torch.Tensor, mask: torch.Tensor, all_real: bool = False) -> torch.Tensor:
    """Run a batch-first ``rnn`` over the real tokens of each row only; padded outputs are zero.

    Rows without any real token are given length 1 (packing refuses 0); their output is masked to zero.
    ``all_real`` (known on the host: no row has padding) runs the rnn unpacked, which gives the same outputs
    without reading the lengths off ``mask`` (a wait for the device on a GPU); only the dropout a multi-layer
    ``rnn`` applies between its own layers draws another mask (over another layout) than the packed run.
    """
    if all_real:  # contiguous like the packed path's output, so that a dropout after it draws the same mask
        return rnn(x)[0].contiguous()
    lengths = mask.sum(dim=1).clamp(min=1).cpu()
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    output, _ = rnn(packed)
    output, _ = pad_packed_sequence(output, batch_first=True, total_length=x.size(1))
    return output * mask.unsqueeze(-1).to(output.dtype)


class RecurrentEncoder(nn.Module):
    """A (bi)directional LSTM (or GRU) stack over packed sequences: (B, T, input_dim) -> (B, T, output_dim).

    ``hidden`` is the size of each direction, so ``output_dim`` is ``hidden`` or ``2 * hidden``.
    ``dropout`` acts between stacked layers (as ``nn.LSTM``'s own argument).
    """

    def __init__(self, input_dim: int, hidden: int, layers: int = 1, *, bidirectional: bool = True,
                 dropout: float = 0.0, cell: str = "lstm"):
        super().__init__()
        if cell not in RNN_CELLS:
            raise ValueError(f"unknown recurrent cell {cell!r}; choose from {sorted(RNN_CELLS)}")
        if layers < 1:
            raise ValueError("a recurrent encoder needs at least one layer")
        self.rnn = RNN_CELLS[cell](input_dim, hidden, num_layers=layers, batch_first=True,
                                   bidirectional=bidirectional, dropout=dropout if layers > 1 else 0.0)
        self.output_dim = hidden * (2 if bidirectional else 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, all_real: bool = False) -> torch.Tensor:
        return run_packed(self.rnn, x, mask, all_real)


class StackedBiGRU(nn.Module):
    """``layers`` bidirectional GRU layers that return EVERY layer's outputs (for layer-wise attention).

    Each layer has ``hidden`` units per direction, so each output is (B, T, 2 * hidden). ``dropout`` is
    applied to the input of layers 2..n (not to the returned outputs).
    """

    def __init__(self, input_dim: int, hidden: int, layers: int, dropout: float = 0.0):
        super().__init__()
        if layers < 1:
            raise ValueError("StackedBiGRU needs at least one layer")
        self.layers = nn.ModuleList(
            nn.GRU(input_dim if i == 0 else 2 * hidden, hidden, batch_first=True, bidirectional=True)
            for i in range(layers)
        )
        self.dropout = nn.Dropout(dropout)
        self.output_dim = 2 * hidden

    def forward(self, x: torch.Tensor, mask: torch.Tensor, all_real: bool = False) -> list[torch.Tensor]:
        outputs = []
        for i, layer in enumerate(self.layers):
            x = run_packed(layer, x if i == 0 else self.dropout(x), mask, all_real)
            outputs.append(x)
        return outputs


def _channel_mask(mask: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """(B, T) bool -> (B, 1, T) in ``like``'s dtype, to multiply a (B, C, T) tensor."""
    return mask.unsqueeze(1).to(like.dtype)


def _masked(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``x`` (B, C, T) with padded positions zeroed; ``mask=None`` (no padding) leaves it as it is."""
    return x if mask is None else x * _channel_mask(mask, x)


def conv_mask(batch: dict) -> torch.Tensor | None:
    """The mask the convolutional blocks take for ``batch``: None when the host knows it has no padding
    (:data:`ALL_REAL`), so they run without masking and with fused BatchNorm (which refuses a training batch of
    one position, where the masked statistics leave the running ones as they are)."""
    mask = batch["mask"]
    return None if batch.get(ALL_REAL, False) and mask.numel() > 1 else mask


class MaskedBatchNorm1d(nn.BatchNorm1d):
    """BatchNorm over (B, C, T) whose training statistics use real positions only.

    Standard BatchNorm would count padded positions in the batch mean/variance, so in training the
    padding would shift every real position. Here mean and (biased) variance are taken over the real
    positions; the running statistics are updated as ``nn.BatchNorm1d`` does (unbiased variance,
    ``momentum``, or a cumulative average when ``momentum is None``). Evaluation uses the running
    statistics, position-wise. Outputs at padded positions are zero. Parameters and buffers are those of
    ``nn.BatchNorm1d``, so its state dicts are interchangeable.
    """

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:  # type: ignore[override]
        if mask is None:
            return super().forward(x)
        keep = _channel_mask(mask, x)
        if not self.training and self.track_running_stats:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0,
                                self.eps) * keep
        count = keep.sum() * 1.0
        denominator = count.clamp(min=1.0)
        mean = (x * keep).sum(dim=(0, 2)) / denominator
        centred = (x - mean[None, :, None]) * keep
        variance = (centred ** 2).sum(dim=(0, 2)) / denominator
        if self.training and self.track_running_stats:
            self._update_running_stats(count, mean, variance)
        y = centred * torch.rsqrt(variance + self.eps)[None, :, None]
        if self.affine:
            y = y * self.weight[None, :, None] + self.bias[None, :, None]
        return y * keep

    @torch.no_grad()
    def _update_running_stats(self, count: torch.Tensor, mean: torch.Tensor, variance: torch.Tensor) -> None:
        """The running statistics after this batch; unchanged when it has fewer than two real positions.

        Decided on the device (``torch.where``), not by reading ``count`` on the host, which on a GPU would wait
        for the device in every training step; the update itself is the same float operations as before."""
        update = count > 1
        self.num_batches_tracked.add_(update.to(self.num_batches_tracked.dtype))
        if self.momentum is None:  # cumulative average: 1 / batches so far
            factor: float | torch.Tensor = 1.0 / self.num_batches_tracked.clamp(min=1).to(mean.dtype)
        else:
            factor = self.momentum
        unbiased = variance * (count / (count - 1))  # inf/NaN where count <= 1: not used then
        self.running_mean.copy_(torch.where(update, self.running_mean * (1 - factor) + factor * mean,
                                            self.running_mean))
        self.running_var.copy_(torch.where(update, self.running_var * (1 - factor) + factor * unbiased,
                                           self.running_var))


class MaskedConv1d(nn.Conv1d):
    """'Same'-padded 1-D convolution over time (odd kernel) that zeroes padded positions of its input
    (``mask=None``: a batch without padding)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, *, bias: bool = True):
        if kernel_size % 2 == 0:
            raise ValueError(f"'same' padding needs an odd kernel, got {kernel_size}")
        super().__init__(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:  # type: ignore[override]
        return super().forward(_masked(x, mask))


class ConvBlock1d(nn.Module):
    """Conv (kernel ``kernel``) -> masked BatchNorm -> ReLU -> dropout, on (B, C, T); padding stays zero."""

    def __init__(self, in_channels: int, out_channels: int, kernel: int, dropout: float = 0.0):
        super().__init__()
        self.conv = MaskedConv1d(in_channels, out_channels, kernel, bias=False)  # BN supplies the bias
        self.norm = MaskedBatchNorm1d(out_channels)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = torch.relu(self.norm(self.conv(x, mask), mask))
        return _masked(self.dropout(x), mask)


class WideResidualBlock1d(nn.Module):
    """Pre-activation wide residual block (Zagoruyko & Komodakis, 2016) over time, on (B, C, T).

    ``BN -> ReLU -> conv k -> BN -> ReLU -> dropout -> conv k``, plus the shortcut. As in WRN, where the
    channel count changes the shortcut is a 1x1 convolution of the pre-activated input; otherwise it is
    the identity (``self.shortcut is None``). Padded positions are zero in the output.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel: int = 3, dropout: float = 0.0):
        super().__init__()
        self.norm1 = MaskedBatchNorm1d(in_channels)
        self.conv1 = MaskedConv1d(in_channels, out_channels, kernel, bias=False)
        self.norm2 = MaskedBatchNorm1d(out_channels)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = MaskedConv1d(out_channels, out_channels, kernel, bias=False)
        self.shortcut: MaskedConv1d | None = None
        if in_channels != out_channels:
            self.shortcut = MaskedConv1d(in_channels, out_channels, 1, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        activated = torch.relu(self.norm1(x, mask))
        residual = x if self.shortcut is None else self.shortcut(activated, mask)
        h = self.conv1(activated, mask)
        h = self.dropout(torch.relu(self.norm2(h, mask)))
        h = self.conv2(h, mask)
        return _masked(h + residual, mask)
