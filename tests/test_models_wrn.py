"""Convolutional punctuators (conv, wrn, wrn_blstm): shapes, padding, widen, shortcuts, learning."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.helpers import context_rule_batch, overfit_accuracy, padded_batch, scramble_padding

from paper_runs.step_ops import OperatorCount
from models import build_model
from models.encoders import ALL_REAL, ConvBlock1d, MaskedBatchNorm1d, MaskedConv1d, WideResidualBlock1d


CONFIGS = {
    "conv": {"name": "conv", "channels": 8, "blocks": 2, "dropout": 0.0},
    "wrn": {"name": "wrn", "channels": 4, "widen": 2, "blocks": 2, "dropout": 0.0},
    "wrn_blstm": {"name": "wrn_blstm", "channels": 4, "widen": 2, "blocks": 2, "lstm_hidden": 6, "dropout": 0.0},
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("vector_dim", [50, 0])
def test_shapes_loss_backward(name, vector_dim):
    torch.manual_seed(0)
    model = build_model({**CONFIGS[name], "dropout": 0.3}, num_labels=4, vector_dim=vector_dim, vocab_size=20)
    batch = padded_batch(dim=vector_dim)
    assert model(batch).shape == (3, 9, 4)
    loss = model.loss(batch)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_padding_does_not_leak_in_eval_or_train(name):
    torch.manual_seed(0)
    model = build_model(CONFIGS[name], num_labels=4, vector_dim=50, vocab_size=20)
    batch = padded_batch()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):  # non-trivial BatchNorm running statistics
        optimizer.zero_grad()
        model.loss(batch).backward()
        optimizer.step()
    mask = batch["mask"]
    for training in (False, True):  # masked BatchNorm statistics: no leak even in training mode
        model.train(training)
        logits = model(batch)
        assert torch.allclose(model(scramble_padding(batch))[mask], logits[mask], atol=1e-4)
    # a padded row predicts as if it were alone, without padding
    model.eval()
    alone = {key: value[-1:, :6] for key, value in batch.items()}
    assert torch.allclose(model(alone)[0], model(batch)[-1, :6], atol=1e-4)


def test_conv_layout():
    model = build_model({**CONFIGS["conv"], "blocks": 3}, num_labels=4, vector_dim=50, vocab_size=20)
    assert len(model.convs) == 4 and all(isinstance(c, ConvBlock1d) for c in model.convs)
    assert [c.conv.kernel_size[0] for c in model.convs] == [5, 3, 3, 3]


def test_parameter_count_grows_with_widen():
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    sizes = [count(build_model({**CONFIGS["wrn"], "widen": w}, num_labels=4, vector_dim=50, vocab_size=20))
             for w in (1, 2, 4, 8)]
    assert sizes == sorted(sizes) and len(set(sizes)) == 4


@pytest.mark.parametrize("blocks", [1, 2, 4])
def test_wrn_layout_and_shortcuts(blocks):
    model = build_model({**CONFIGS["wrn"], "widen": 8, "blocks": blocks}, num_labels=4, vector_dim=50,
                        vocab_size=20)
    trunk = model.trunk
    assert trunk.first.kernel_size == (5,) and trunk.first.out_channels == 4
    assert len(trunk.blocks) == blocks and all(isinstance(b, WideResidualBlock1d) for b in trunk.blocks)
    assert all(b.conv1.kernel_size == (3,) and b.conv2.out_channels == 32 for b in trunk.blocks)
    # only the first block changes channels (4 -> 32) and so only it has a 1x1 shortcut convolution
    assert isinstance(trunk.blocks[0].shortcut, MaskedConv1d) and trunk.blocks[0].shortcut.kernel_size == (1,)
    assert all(b.shortcut is None for b in trunk.blocks[1:])
    assert model.classifier.linear.in_features == 32
    unwidened = build_model({**CONFIGS["wrn"], "widen": 1}, num_labels=4, vector_dim=50, vocab_size=20)
    assert all(b.shortcut is None for b in unwidened.trunk.blocks)


def test_wrn_blstm_reads_the_trunk_with_a_blstm():
    model = build_model(CONFIGS["wrn_blstm"], num_labels=4, vector_dim=50, vocab_size=20)
    assert model.blstm.rnn.bidirectional and model.blstm.rnn.input_size == 8
    assert model.classifier.linear.in_features == 12


@pytest.mark.parametrize("name", ["wrn", "wrn_blstm"])
def test_overfits_a_context_rule(name):
    """PERIOD before a word whose first feature is large (needs the right context); COMMA on feature 2."""
    torch.manual_seed(0)
    config = {**CONFIGS[name], "channels": 8}
    model = build_model(config, num_labels=4, vector_dim=8, vocab_size=20)
    assert overfit_accuracy(model, context_rule_batch(), 120) > 0.9


def _train_step(model, batch):
    model.zero_grad(set_to_none=True)
    loss = model.loss(batch, 0.1)
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_batch_without_padding_runs_unmasked_with_the_same_result(name):
    """ALL_REAL (the host knows there is no padding): fused BatchNorm and no masking, the same loss, gradients and
    running statistics as the masked path, from far fewer operators."""
    torch.manual_seed(0)
    masked = build_model({**CONFIGS[name], "dropout": 0.0}, num_labels=4, vector_dim=50, vocab_size=20)
    unmasked = copy.deepcopy(masked)
    batch = padded_batch(short=9)  # every row whole
    counts = []
    for model, all_real in ((masked, False), (unmasked, True)):
        with OperatorCount() as counter:
            loss, grads = _train_step(model, {**batch, ALL_REAL: all_real})
        counts.append(counter.ops)
        if all_real:
            assert torch.allclose(loss, reference_loss, atol=1e-6)
            assert all(torch.allclose(grads[k], reference_grads[k], atol=1e-5) for k in grads)
        reference_loss, reference_grads = loss, grads
    for first, second in zip(masked.buffers(), unmasked.buffers()):  # running statistics, batches tracked
        assert torch.allclose(first.float(), second.float(), atol=1e-6)
    assert counts[1] < 0.6 * counts[0], counts
    masked.eval(), unmasked.eval()
    assert torch.allclose(masked(batch), unmasked({**batch, ALL_REAL: True}), atol=1e-5)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_one_position_training_batch_keeps_the_masked_statistics(name):
    model = build_model(CONFIGS[name], num_labels=4, vector_dim=50, vocab_size=20)
    batch = padded_batch(batch_size=1, length=1, short=1)
    model.loss({**batch, ALL_REAL: True}).backward()  # fused BatchNorm would refuse one value per channel
    norms = [m for m in model.modules() if isinstance(m, MaskedBatchNorm1d)]
    assert norms and all(int(norm.num_batches_tracked) == 0 for norm in norms)
