"""FF2 / FFA two-stream punctuators: shapes, ablations, causal stream, R-Drop, interaction, long rows, learning."""

import pytest
import torch

from models import MODEL_REGISTRY, build_model
from models.blocks import masked_cross_entropy
from models.pretrained import self_attention_modules
from tests.helpers import train_on_batch

pytest.importorskip("transformers")

SMALL = {"name": "ff2", "pretrained": None, "interaction": True, "use_pretrained_stream": True,
         "use_second_stream": True, "second_dim": 32, "second_layers": 1, "second_heads": 4, "fusion_heads": 8,
         "fusion_ffn": 128, "dropout": 0.0, "rdrop_alpha": 0.0, "max_subwords": 256}
ROWS = [["so", "i", "do", "n't", "think", "it", "'s", "well-known"], ["i", "'m", "here", "today"]]


def build(**changes):
    return build_model({**SMALL, **changes}, num_labels=4, vector_dim=0, vocab_size=10)


def make_batch(rows=ROWS, seed=0):
    generator = torch.Generator().manual_seed(seed)
    length = max(len(row) for row in rows)
    mask = torch.zeros(len(rows), length, dtype=torch.bool)
    for i, row in enumerate(rows):
        mask[i, : len(row)] = True
    return {"vectors": torch.zeros(len(rows), length, 0), "ids": torch.zeros(len(rows), length, dtype=torch.long),
            "mask": mask, "labels": torch.randint(0, 4, (len(rows), length), generator=generator), "words": rows}


@pytest.fixture(scope="module")
def ff2():
    torch.manual_seed(0)
    return build(dropout=0.1, rdrop_alpha=1.0)


@pytest.fixture(scope="module")
def ffa():
    torch.manual_seed(0)
    return build(name="ffa").eval()


def test_registry_and_refusals():
    assert {"ff2", "ffa"} <= set(MODEL_REGISTRY)
    with pytest.raises(ValueError, match="needs"):
        build_model({"name": "ff2", "pretrained": None}, num_labels=4, vector_dim=0, vocab_size=10)
    with pytest.raises(ValueError, match="at least one"):
        build(use_pretrained_stream=False, use_second_stream=False)
    with pytest.raises(ValueError, match="divisible"):
        build(second_dim=36)
    with pytest.raises(ValueError, match="max_subwords"):
        build(max_subwords=1000)


@pytest.mark.parametrize("changes", [
    {},
    {"name": "ffa"},
    {"use_pretrained_stream": False},
    {"use_second_stream": False},
    {"name": "ffa", "use_pretrained_stream": False},
])
def test_shapes_of_every_variant(changes):
    torch.manual_seed(0)
    model = build(**changes)
    batch = make_batch()
    logits = model(batch)
    assert logits.shape == (2, 8, 4)
    assert torch.equal(logits[1, 4:], torch.zeros(4, 4))  # padding words
    loss = model.loss(batch, label_smoothing=0.1)
    loss.backward()
    assert torch.isfinite(loss)
    assert model.predict(batch).shape == (2, 8)
    assert (model.pretrained_stream is not None) == changes.get("use_pretrained_stream", True)
    assert (model.second_embedding is not None) == changes.get("use_second_stream", True)


def test_interaction_mixing_in_every_pretrained_layer_iff_asked(ff2):
    layers = self_attention_modules(ff2.pretrained_stream)
    assert len(layers) == 6 and all(layer.head_mixing.shape == (12, 12) for layer in layers)
    plain = build(interaction=False, use_second_stream=False)
    assert not any("head_mixing" in name for name, _ in plain.named_parameters())
    # only the pretrained stream interacts
    assert all(layer.attention.head_mixing is None for layer in ff2.second_encoder.layers)
    assert all(layer.attention.head_mixing is None for layer in ff2.fusion.layers)


def test_a_trained_ff2_directory_rebuilds_without_the_checkpoint(ff2, tmp_path):
    """The model directory keeps the encoder's configuration and tokenizer; the rebuilt model (no checkpoint
    weights read) with the trained weights predicts exactly as the trained one."""
    ff2.eval()
    ff2.save_files(tmp_path)
    config = type(ff2).config_for_loading({**SMALL, "name": "ff2", "dropout": 0.1, "rdrop_alpha": 1.0}, tmp_path)
    assert config["pretrained"] == str(tmp_path / "encoder") and config["pretrained_weights"] is False
    rebuilt = build_model(config, num_labels=4, vector_dim=0, vocab_size=10).eval()
    rebuilt.load_state_dict(ff2.state_dict())
    batch = make_batch()
    torch.testing.assert_close(rebuilt(batch), ff2(batch))
    ff2.train()


def test_causal_stream_of_ffa_does_not_see_the_future(ffa, ff2):
    rows = [["so", "i", "do", "n't", "think", "it", "'s", "well-known"]]
    changed = [rows[0][:4] + ["never", "ever", "say", "goodbye"]]
    a, b = (ffa._prepare(make_batch(r)).subwords for r in (rows, changed))
    end = int(a.label_subword_index[0, 4])  # subwords before word 4 ("think" / "never")
    assert torch.equal(a.input_ids[0, :end], b.input_ids[0, :end])
    with torch.no_grad():
        states_a, _ = ffa.second_stream_states(a.input_ids, a.attention_mask)
        states_b, _ = ffa.second_stream_states(b.input_ids, b.attention_mask)
        assert torch.allclose(states_a[0, :end], states_b[0, :end], atol=1e-6)
        assert not torch.allclose(states_a[0, end], states_b[0, end], atol=1e-3)
        # the ff2 stream is bidirectional: the same change reaches earlier positions
        ff2.eval()
        bidirectional_a, _ = ff2.second_stream_states(a.input_ids, a.attention_mask)
        bidirectional_b, _ = ff2.second_stream_states(b.input_ids, b.attention_mask)
        ff2.train()
    assert not torch.allclose(bidirectional_a[0, :end], bidirectional_b[0, :end], atol=1e-3)


def test_rdrop_loss(ff2):
    batch = make_batch()
    ff2.train()
    torch.manual_seed(3)
    total, ce, kl = ff2.rdrop_terms(batch)
    assert kl > 0 and total > ce
    torch.manual_seed(3)
    assert torch.allclose(ff2.loss(batch), total)
    torch.testing.assert_close(total, ce + ff2.rdrop_alpha * kl)
    # alpha = 0: exactly the plain cross-entropy of one pass (same dropout draws)
    ff2.rdrop_alpha = 0.0
    try:
        torch.manual_seed(4)
        plain_rdrop_off = ff2.loss(batch)
        torch.manual_seed(4)
        plain = masked_cross_entropy(ff2(batch), batch["labels"], batch["mask"])
        assert torch.equal(plain_rdrop_off, plain)
    finally:
        ff2.rdrop_alpha = 1.0
    # without dropout the two passes agree: no KL, loss = CE
    ff2.eval()
    total, ce, kl = ff2.rdrop_terms(batch)
    ff2.train()
    assert abs(kl.item()) < 1e-6 and torch.allclose(total, ce, atol=1e-6)


def test_long_rows_are_split_not_truncated():
    torch.manual_seed(0)
    model = build(max_subwords=12).eval()
    rows = [["well-known"] * 5 + ["a", "b", "c"], ["i", "'m", "here"]]  # row 0: 18 subwords > 10
    logits = model(make_batch(rows))
    assert logits.shape == (2, 8, 4)
    prepared = model._prepare(make_batch(rows))
    assert prepared.spans == [(0, 0, 3), (0, 3, 8), (1, 0, 3)]
    torch.testing.assert_close(logits[0, :3], model({"words": [rows[0][:3]]})[0])
    torch.testing.assert_close(logits[0, 3:], model({"words": [rows[0][3:]]})[0])
    torch.testing.assert_close(logits[1, :3], model({"words": [rows[1]]})[0])


def test_words_must_match_the_mask(ffa):
    batch = make_batch()
    with pytest.raises(ValueError, match="does not match"):
        ffa({**batch, "words": [ROWS[0], ROWS[1][:2]]})
    with pytest.raises(KeyError, match="words"):
        ffa({k: v for k, v in batch.items() if k != "words"})


def test_attention_maps(ffa):
    maps = ffa.attention_maps(make_batch())
    width = maps["subwords"].input_ids.size(1)
    assert len(maps["pretrained"]) == 6 and maps["pretrained"][0].shape == (2, 12, width, width)
    assert len(maps["second"]) == 1 and len(maps["fusion"]) == 1
    # causal stream: no weight above the diagonal
    assert torch.all(maps["second"][0].triu(diagonal=1) == 0)


def test_overfits_two_sentences():
    torch.manual_seed(0)
    model = build(dropout=0.1).train()
    batch = make_batch(seed=1)
    losses = train_on_batch(model, batch, steps=15, lr=3e-4)
    assert losses[-1] < 0.1 * losses[0], losses
    model.eval()
    assert torch.equal(model.predict(batch)[batch["mask"]], batch["labels"][batch["mask"]])
