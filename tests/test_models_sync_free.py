"""The models' training step without host-device syncs computes what it computed before, on the CPU:
the weighted loss against the boolean-mask selection it replaced, every model's loss and gradients against the
old computation, unpacked recurrent encoders on whole batches against packed ones, the masked BatchNorm's running
statistics, FF2's R-Drop terms, and the pretrained encoders' word-piece cache, ready-made attention masks and
word placement (the same to the bit)."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from models import build_model
from models.blocks import masked_cross_entropy
from models.encoders import ALL_REAL, MaskedBatchNorm1d
from tests.fixture_checkpoints import ARCHITECTURES, make_checkpoint

WORDS = "so i do n't think it 's well-known here today the a b c never ever say goodbye we 're".split()
BASE = {
    "transformer": {"name": "transformer", "d_model": 16, "heads": 2, "ffn": 32, "encoder_layers": 1,
                    "decoder_layers": 1, "dropout": 0.1, "aligned_memory": True, "input_scale": 1.0,
                    "relative_window": 4},
    "drnn_lwma": {"name": "drnn_lwma", "hidden": 8, "layers": 2, "heads": 2, "layerwise": True, "dropout": 0.1},
    "wrn": {"name": "wrn", "channels": 8, "widen": 2, "blocks": 2, "dropout": 0.1},
    "wrn_blstm": {"name": "wrn_blstm", "channels": 8, "widen": 2, "blocks": 1, "lstm_hidden": 8, "dropout": 0.1},
    "conv": {"name": "conv", "channels": 8, "blocks": 2, "dropout": 0.1},
    # nn.LSTM's own dropout between stacked layers draws a mask per packed or padded layout: 0 here so that the
    # packed and the unpacked run draw the same
    "blstm": {"name": "blstm", "hidden": 8, "layers": 2, "dropout": 0.0},
    "lstm": {"name": "lstm", "hidden": 8, "layers": 1, "dropout": 0.1},
}
PRETRAINED = {
    "ff2": {"name": "ff2", "pretrained": None, "layers": 1, "interaction": True, "use_pretrained_stream": True,
            "use_second_stream": True, "second_dim": 16, "second_layers": 1, "second_heads": 2, "fusion_heads": 4,
            "fusion_ffn": 32, "dropout": 0.1, "rdrop_alpha": 1.0, "max_subwords": 64},
    "encoder_tagger": {"name": "encoder_tagger", "pretrained": None, "layers": 1, "freeze_layers": 0,
                       "label_subword": "first", "dropout": 0.1, "max_subwords": 64, "layer_mix": True,
                       "head": "blstm", "head_hidden": 8},
}
PRETRAINED["ffa"] = {**PRETRAINED["ff2"], "name": "ffa", "rdrop_alpha": 0.0}
CONFIGS = {**BASE, **PRETRAINED}


def make_batch(*, padded: bool, rows: int = 3, length: int = 10, vector_dim: int = 6, seed: int = 0) -> dict:
    """Random vectors, ids, labels and words; the last row padded after 6 tokens when ``padded``."""
    generator = torch.Generator().manual_seed(seed)
    mask = torch.ones(rows, length, dtype=torch.bool)
    if padded:
        mask[-1, 6:] = False
    counts = mask.sum(dim=1).tolist()
    return {"vectors": torch.randn(rows, length, vector_dim, generator=generator),
            "ids": torch.randint(1, 9, (rows, length), generator=generator), "mask": mask,
            "labels": torch.randint(0, 4, (rows, length), generator=generator),
            "words": [[WORDS[(3 * r + i) % len(WORDS)] for i in range(counts[r])] for r in range(rows)]}


def build(name: str):
    if name in PRETRAINED:
        pytest.importorskip("transformers")
    torch.manual_seed(0)
    return build_model(CONFIGS[name], num_labels=4, vector_dim=6, vocab_size=10).train()


def loss_and_gradients(model, compute, seed: int = 1) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``compute()`` (a loss) with the random state at ``seed`` (the same dropout masks for every caller), and its
    gradients with respect to the trainable parameters (zeros for parameters it does not reach)."""
    torch.manual_seed(seed)
    loss = compute()
    parameters = [p for p in model.parameters() if p.requires_grad]
    gradients = torch.autograd.grad(loss, parameters, allow_unused=True)
    return loss.detach(), [torch.zeros_like(p) if g is None else g for p, g in zip(parameters, gradients)]


@pytest.fixture
def old_pretrained_path(monkeypatch):
    """The pretrained encoders as they were called before: a 2-D attention mask, words put back by index lists."""
    import models.encoder_tagger
    import models.ff2
    from models.pretrained import place_words

    def old_place(values, word_mask, spans, batch_size, length):
        return place_words(values, spans, batch_size, length)

    def patch():
        for module in (models.encoder_tagger, models.ff2):
            monkeypatch.setattr(module, "encoder_attention_mask", lambda encoder, mask: mask.long())
            monkeypatch.setattr(module, "place_word_rows", old_place)

    return patch


def old_loss(model, batch, label_smoothing):
    """The loss with syncs: the real positions selected with the boolean mask (and FF2's R-Drop on them)."""
    if getattr(model, "rdrop_alpha", 0) > 0 and model.training:
        from models.pretrained import SubwordBatch, place_words

        prepared = model._prepare(batch)
        doubled = SubwordBatch(*(torch.cat([t, t]) for t in prepared.subwords))
        logits, _ = model._encode(doubled)
        first, second = logits.chunk(2)
        mask, labels = batch["mask"], batch["labels"]
        first = place_words(first, prepared.spans, prepared.batch_size, prepared.length)[mask]
        second = place_words(second, prepared.spans, prepared.batch_size, prepared.length)[mask]
        ce = 0.5 * (F.cross_entropy(first, labels[mask], label_smoothing=label_smoothing)
                    + F.cross_entropy(second, labels[mask], label_smoothing=label_smoothing))
        log_p, log_q = F.log_softmax(first, dim=-1), F.log_softmax(second, dim=-1)
        kl = 0.5 * (F.kl_div(log_p, log_q, reduction="batchmean", log_target=True)
                    + F.kl_div(log_q, log_p, reduction="batchmean", log_target=True))
        return ce + model.rdrop_alpha * kl
    mask = batch["mask"]
    return F.cross_entropy(model(batch)[mask], batch["labels"][mask], label_smoothing=label_smoothing)


def test_the_weighted_loss_is_the_mean_over_the_selected_real_tokens():
    torch.manual_seed(0)
    logits = torch.randn(3, 7, 4, requires_grad=True)
    labels = torch.randint(0, 4, (3, 7))
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[1, 4:] = False
    mask[2, 1:] = False
    for smoothing in (0.0, 0.1):
        new = masked_cross_entropy(logits, labels, mask, smoothing)
        old = F.cross_entropy(logits[mask], labels[mask], label_smoothing=smoothing)
        torch.testing.assert_close(new, old)
        torch.testing.assert_close(torch.autograd.grad(new, logits)[0], torch.autograd.grad(old, logits)[0])
    # what a model leaves at padded positions (even NaN, or a label out of range) reaches neither loss nor gradient
    spoiled = logits.detach().clone().masked_fill(~mask[..., None], float("nan")).requires_grad_()
    odd_labels = labels.masked_fill(~mask, 99)
    loss = masked_cross_entropy(spoiled, odd_labels, mask, 0.1)
    torch.testing.assert_close(loss, F.cross_entropy(logits[mask], labels[mask], label_smoothing=0.1))
    assert torch.isfinite(torch.autograd.grad(loss, spoiled)[0]).all()
    assert masked_cross_entropy(logits, labels, torch.zeros_like(mask)).item() == 0.0


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_model_trains_on_the_loss_and_gradients_it_had(name, old_pretrained_path):
    """Loss and gradients of a padded batch (and FF2's R-Drop terms) as the old computation gives them."""
    model = build(name)
    batch = make_batch(padded=True)
    new = loss_and_gradients(model, lambda: model.loss(batch, 0.1))
    old_pretrained_path()
    old = loss_and_gradients(model, lambda: old_loss(model, batch, 0.1))
    torch.testing.assert_close(new, old)


@pytest.mark.parametrize("name", ["blstm", "lstm", "drnn_lwma", "wrn_blstm", "encoder_tagger"])
def test_a_whole_batch_runs_unpacked_to_the_same_loss_and_gradients(name):
    model = build(name)
    batch = make_batch(padded=False)
    packed = loss_and_gradients(model, lambda: model.loss(batch, 0.1))
    unpacked = loss_and_gradients(model, lambda: model.loss({**batch, ALL_REAL: True}, 0.1))
    torch.testing.assert_close(unpacked, packed)


def test_masked_batchnorm_updates_its_running_statistics_as_before_and_skips_a_lone_position():
    torch.manual_seed(0)
    x = torch.randn(3, 4, 9) * 3 + 1
    mask = torch.ones(3, 9, dtype=torch.bool)
    mask[2, 5:] = False
    norm = MaskedBatchNorm1d(4)
    norm(x, mask)
    # the update as it was written before (momentum 0.1, count read on the host): the same float operations
    keep = mask.unsqueeze(1).float()
    count = keep.sum() * 1.0
    mean = (x * keep).sum(dim=(0, 2)) / count
    variance = (((x - mean[None, :, None]) * keep) ** 2).sum(dim=(0, 2)) / count
    expected_mean = torch.zeros(4).mul_(0.9).add_(0.1 * mean)
    expected_var = torch.ones(4).mul_(0.9).add_(0.1 * (variance * (count / (count - 1))))
    assert torch.equal(norm.running_mean, expected_mean) and torch.equal(norm.running_var, expected_var)
    assert norm.num_batches_tracked.item() == 1
    lone = torch.zeros(3, 9, dtype=torch.bool)
    lone[0, 0] = True
    norm(x, lone)  # one real position has no variance to learn from: the statistics stay as they are
    assert torch.equal(norm.running_mean, expected_mean) and torch.equal(norm.running_var, expected_var)
    assert norm.num_batches_tracked.item() == 1
    cumulative = MaskedBatchNorm1d(4, momentum=None)
    cumulative(x, mask)
    torch.testing.assert_close(cumulative.running_mean, mean)


# -- the pretrained encoders' words ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("sync_free_checkpoints")
    return {name: make_checkpoint(root / name, name) for name in ARCHITECTURES}


def tagger(checkpoint):
    config = {**PRETRAINED["encoder_tagger"], "pretrained": None if checkpoint is None else str(checkpoint)}
    torch.manual_seed(0)
    return build_model(config, num_labels=4, vector_dim=0, vocab_size=10)


@pytest.mark.parametrize("architecture", [*ARCHITECTURES, "default"])
def test_cached_word_pieces_are_those_of_the_whole_rows(checkpoints, architecture):
    from models.pretrained import word_pieces

    model = tagger(checkpoints.get(architecture))
    rows = [["so", "I", "do", "n't", "think", "it", "'s", "well-known", "", "Zürich"], ["i", "'m", "here", "today"],
            [], ["xyzzy", "so", "so", "--", "3.5"]]
    assert model.word_pieces(rows) == word_pieces(model.tokenizer, rows)
    assert model.word_pieces(rows[::-1]) == word_pieces(model.tokenizer, rows[::-1])  # from the cache this time


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("interaction", [False, True])
def test_a_ready_made_attention_mask_gives_the_encoder_outputs_and_gradients_to_the_bit(checkpoints, architecture,
                                                                                        interaction):
    from models.encoder_tagger import encoder_attention_mask
    from models.pretrained import add_interaction, load_encoder

    encoder, tokenizer = load_encoder(checkpoints[architecture], dropout=0.0)
    if interaction:
        add_interaction(encoder, tokenizer)
    ids = torch.randint(5, len(tokenizer), (3, 12), generator=torch.Generator().manual_seed(0))
    for padded in (True, False):
        mask = torch.ones(3, 12, dtype=torch.bool)
        if padded:
            mask[1, 7:], mask[2, 10:] = False, False
        ids = torch.where(mask, ids, tokenizer.pad_token_id)
        outputs = [encoder(input_ids=ids, attention_mask=m, output_hidden_states=True)
                   for m in (mask.long(), encoder_attention_mask(encoder, mask))]
        for a, b in zip(outputs[0].hidden_states, outputs[1].hidden_states):
            assert torch.equal(a, b)
        gradients = [torch.autograd.grad(o.last_hidden_state.pow(2).sum(), list(encoder.parameters()),
                                         allow_unused=True) for o in outputs]
        assert all((a is None and b is None) or torch.equal(a, b) for a, b in zip(*gradients))


def test_words_are_put_back_as_by_index_to_the_bit():
    from models.encoder_tagger import place_word_rows
    from models.pretrained import place_words

    values = torch.randn(2, 5, 3, requires_grad=True)
    word_mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    spans = [(0, 0, 5), (1, 0, 2)]
    new, old = place_word_rows(values, word_mask, spans, 2, 7), place_words(values, spans, 2, 7)
    assert torch.equal(new, old)
    weights = torch.randn(2, 7, 3)
    assert torch.equal(torch.autograd.grad((new * weights).sum(), values)[0],
                       torch.autograd.grad((old * weights).sum(), values)[0])
    split = [(0, 0, 3), (0, 3, 5), (1, 0, 2)]  # a row cut in two spans goes back by index
    span_values, span_mask = values[[0, 0, 1], :3], torch.tensor([[True] * 3, [True, True, False], [True, True, False]])
    assert torch.equal(place_word_rows(span_values, span_mask, split, 2, 7), place_words(span_values, split, 2, 7))
