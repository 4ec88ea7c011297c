"""The pretrained-encoder punctuator (``encoder_tagger``): any local checkpoint, frozen or fine-tuned layers, the
zero-initialised per-word input, long windows split, and a trained model directory that `punctuate` loads
without the checkpoint it was trained from, keeping every word of the user."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from models import build_model
from tests.fixture_checkpoints import ARCHITECTURES, make_checkpoint
from tests.fixture_corpus import TINY_TRAIN, write_feature_cache
from tests.helpers import train_on_batch

pytest.importorskip("transformers")

ROWS = [["so", "i", "do", "n't", "think", "it", "'s", "well-known"], ["i", "'m", "here", "today"]]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("tagger_checkpoints")
    return {name: make_checkpoint(root / name, name) for name in ARCHITECTURES}


def tagger(checkpoint, vector_dim=3, **changes):
    config = {"name": "encoder_tagger", "pretrained": str(checkpoint), "layers": None, "freeze_layers": 0,
              "label_subword": "last", "dropout": 0.0, "max_subwords": 64, **changes}
    return build_model(config, num_labels=4, vector_dim=vector_dim, vocab_size=10)


def batch_of(rows=ROWS, vector_dim=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    length = max(len(row) for row in rows)
    mask = torch.zeros(len(rows), length, dtype=torch.bool)
    for i, row in enumerate(rows):
        mask[i, : len(row)] = True
    return {"vectors": torch.randn(len(rows), length, vector_dim, generator=generator),
            "ids": torch.zeros(len(rows), length, dtype=torch.long), "mask": mask,
            "labels": torch.randint(0, 4, (len(rows), length), generator=generator), "words": rows}


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_any_checkpoint_tags_every_word_and_learns(checkpoints, architecture):
    torch.manual_seed(0)
    model = tagger(checkpoints[architecture]).train()
    batch = batch_of()
    assert model(batch).shape == (2, 8, 4)
    losses = train_on_batch(model, batch, steps=25, lr=3e-3)
    assert losses[-1] < 0.2 * losses[0], losses
    model.eval()
    assert torch.equal(model.predict(batch)[batch["mask"]], batch["labels"][batch["mask"]])


def test_the_word_input_starts_at_zero_and_is_learned(checkpoints):
    model = tagger(checkpoints["bert"]).eval()
    batch = batch_of()
    with torch.no_grad():
        reference = model(batch)
        assert torch.equal(model({**batch, "vectors": 100 * batch["vectors"]}), reference)
    model.train()
    model.loss(batch).backward()
    assert model.vector_input.weight.grad.abs().sum() > 0
    assert tagger(checkpoints["bert"], vector_dim=0).vector_input is None


def test_frozen_layers_do_not_move(checkpoints):
    torch.manual_seed(0)
    model = tagger(checkpoints["bert"], freeze_layers=1).train()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model.loss(batch_of()).backward()
    optimizer.step()
    moved = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    assert not any(name.startswith(("encoder.embeddings.", "encoder.encoder.layer.0.")) for name in moved)
    assert any(name.startswith("encoder.encoder.layer.1.") for name in moved) and "classifier.linear.weight" in moved
    frozen = tagger(checkpoints["bert"], freeze_layers=2).train()
    assert not any(p.requires_grad for p in frozen.encoder.parameters()) and not frozen.encoder.training
    with pytest.raises(ValueError, match="freeze_layers"):
        tagger(checkpoints["bert"], freeze_layers=3)


def test_long_windows_are_split_not_truncated(checkpoints):
    model = tagger(checkpoints["bert"], max_subwords=12).eval()
    rows = [["well-known"] * 4 + ["a", "b"], ["i", "'m", "here"]]  # row 0: more subwords than fit
    batch = batch_of(rows)
    with torch.no_grad():
        logits = model(batch)
        alone = model(batch_of([rows[0][:2]]) | {"vectors": batch["vectors"][:1, :2]})
    assert logits.shape == (2, 6, 4)
    torch.testing.assert_close(logits[0, :2], alone[0])


def test_words_must_match_the_mask(checkpoints):
    model = tagger(checkpoints["bert"])
    batch = batch_of()
    with pytest.raises(ValueError, match="does not match"):
        model({**batch, "words": [ROWS[0], ROWS[1][:2]]})
    with pytest.raises(KeyError, match="words"):
        model({k: v for k, v in batch.items() if k != "words"})


@pytest.mark.slow
def test_a_trained_directory_punctuates_without_its_checkpoint(checkpoints, tmp_path):
    """Training writes the encoder's configuration and tokenizer beside the weights: the directory punctuates
    (every word kept, overlapping windows over any length) after the checkpoint it came from is gone."""
    from inference.punctuator import Punctuator
    from training import train_model

    checkpoint = shutil.copytree(checkpoints["roberta"], tmp_path / "checkpoint")
    features = write_feature_cache(tmp_path, talks=8, sentences_per_talk=10, train_tokens=800)
    config = {"name": "encoder_tagger", "pretrained": str(checkpoint), "layers": 1, "freeze_layers": 0,
              "label_subword": "last", "dropout": 0.1, "max_subwords": 128}
    train_model(features, tmp_path / "model", tmp_path / "state", model_config=config,
                train_config={**TINY_TRAIN, "lr": 0.003, "max_steps": 8, "eval_every_steps": 4,
                              "dev_eval_tokens": 100}, window=30, stride=15)
    assert sorted(path.name for path in (tmp_path / "model" / "encoder").iterdir()) == [
        "config.json", "tokenizer.json", "tokenizer_config.json", "traced.pt"]
    shutil.rmtree(checkpoint)
    punctuator = Punctuator(tmp_path / "model")  # the checkpoint is gone: everything comes from the directory
    text = "Well, the river stone done right?  Don't  stop  the world however the city finished\n" * 30
    words, labels = punctuator.punctuate(text)
    assert words == [w.rstrip(",?") for w in text.split()] and len(labels) == len(words)
    # a window's labels do not depend on the text around it beyond the windows that cover it
    # (40 words: its first window, tokens 0-29, is the long text's first one, and no later window covers words 0-9)
    short_words, short_labels = punctuator.punctuate(" ".join(text.split()[:40]))
    assert short_words == words[:40]
    assert np.mean([a == b for a, b in zip(short_labels[:10], labels[:10])]) == 1.0


def test_a_layer_mix_and_a_blstm_head_read_the_encoder(checkpoints):
    torch.manual_seed(0)
    model = tagger(checkpoints["bert"], freeze_layers=2, layer_mix=True, head="blstm", head_hidden=8).train()
    assert model.layer_weights.shape == (3,)  # the embeddings and both layers, starting as their mean
    batch = batch_of()
    logits = model(batch)
    assert logits.shape == (2, 8, 4)
    model.loss(batch).backward()
    assert model.layer_weights.grad.abs().sum() > 0  # the mix is learned while the encoder stays fixed
    assert all(p.grad is None for p in model.encoder.parameters())
    with pytest.raises(ValueError, match="head_hidden"):
        tagger(checkpoints["bert"], head="blstm")
    with pytest.raises(ValueError, match="head must be"):
        tagger(checkpoints["bert"], head="crf")


def test_the_vector_mlp_starts_at_zero_reads_the_neighbours_and_learns(checkpoints):
    """``vector_mlp_hidden``: an MLP over the word's state and its own and its neighbours' vectors, added to the
    word's state, its output layer at zero: the tagger predicts as it would without it until it learns."""
    torch.manual_seed(0)
    plain = tagger(checkpoints["bert"]).eval()
    model = tagger(checkpoints["bert"], vector_mlp_hidden=16)
    missing, unexpected = model.load_state_dict(plain.state_dict(), strict=False)
    assert sorted(missing) == ["vector_mlp.0.bias", "vector_mlp.0.weight", "vector_mlp.2.bias",
                               "vector_mlp.2.weight"] and not unexpected
    assert model.vector_mlp[0].in_features == 32 + 3 * 3  # the tiny encoder's width, three tokens' vectors
    batch = batch_of()
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(batch), plain(batch))
    losses = train_on_batch(model.train(), batch, steps=5, lr=3e-3)
    assert model.vector_mlp[2].weight.abs().sum() > 0 and losses[-1] < losses[0]
    # the next token's vector reaches a token's label, and nothing past the row's end does
    model.eval()
    changed = {**batch, "vectors": batch["vectors"].clone()}
    changed["vectors"][0, 3] += 10.0
    with torch.no_grad():
        moved = (model(changed) - model(batch)).abs().sum(-1)[0]
    assert moved[2] > 0 and moved[4] > 0 and moved[3] > 0 and torch.all(moved[[0, 1, 5, 6, 7]] == 0)
    with pytest.raises(ValueError, match="vector_mlp_hidden"):
        tagger(checkpoints["bert"], vector_dim=0, vector_mlp_hidden=8)


@pytest.mark.parametrize("max_subwords", [64, 12])  # 12: the rows are cut into spans (split_long_rows)
def test_vectors_at_the_input_start_at_zero_reach_every_word_and_learn(checkpoints, max_subwords):
    """``vector_at_input``: each word's vectors, through a linear layer starting at zero, join its label subword's
    input embedding: the tagger predicts as it would without it until it learns, and through the encoder's attention
    one word's vector moves the labels of the words around it, in its own row (its own span) only."""
    torch.manual_seed(0)
    plain = tagger(checkpoints["bert"], max_subwords=max_subwords).eval()
    model = tagger(checkpoints["bert"], max_subwords=max_subwords, vector_at_input=True)
    missing, unexpected = model.load_state_dict(plain.state_dict(), strict=False)
    assert sorted(missing) == ["vector_embed_input.bias", "vector_embed_input.weight"] and not unexpected
    batch = batch_of()
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(batch), plain(batch))
    losses = train_on_batch(model.train(), batch, steps=5, lr=3e-3)
    assert model.vector_embed_input.weight.abs().sum() > 0 and losses[-1] < losses[0]
    model.eval()
    changed = {**batch, "vectors": batch["vectors"].clone()}
    changed["vectors"][0, 3] += 10.0
    with torch.no_grad():
        moved = (model(changed) - model(batch)).abs().sum(-1)
    assert torch.all(moved[1] == 0) and moved[0, 3] > 0
    if max_subwords == 64:  # one subword row: the vector reaches the row's first and last words
        assert moved[0, 0] > 0 and moved[0, 7] > 0
    else:  # spans: a word past its span's end is not reached
        assert (moved[0] == 0).any()


def test_vectors_at_the_input_of_a_frozen_encoder_learn_while_its_weights_stay(checkpoints):
    """A frozen encoder (the speech model's tuning freezes all of it) passes gradients to the vectors at its input;
    its own weights get none, and its dropout stays off."""
    torch.manual_seed(0)
    model = tagger(checkpoints["bert"], freeze_layers=2, dropout=0.1, vector_at_input=True)  # the tiny encoder: 2
    batch = batch_of()
    model.train()
    assert not model.encoder.training
    model.loss(batch).backward()
    assert model.vector_embed_input.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.encoder.parameters())
    with pytest.raises(ValueError, match="vector_at_input"):
        tagger(checkpoints["bert"], vector_dim=0, vector_at_input=True)
    with pytest.raises(ValueError, match="vector_at_input_first"):
        tagger(checkpoints["bert"], vector_at_input=True, vector_at_input_first=3)
    # from column 2 on (the cues after the word vectors): the first columns never reach the encoder's input
    model = tagger(checkpoints["bert"], freeze_layers=2, vector_at_input=True, vector_at_input_first=2).eval()
    assert model.vector_embed_input.in_features == 1
    torch.nn.init.normal_(model.vector_embed_input.weight)
    first, last = ({**batch, "vectors": batch["vectors"].clone()} for _ in range(2))
    first["vectors"][0, 3, :2] += 10.0
    last["vectors"][0, 3, 2] += 10.0
    with torch.no_grad():
        assert torch.equal(model(first), model(batch))  # the head's input reads them, but it starts at zero
        assert (model(last) - model(batch)).abs().sum(-1)[0, 0] > 0  # word 3's cue reaches word 0 through attention


def test_span_word_rows_undoes_place_word_rows():
    from models.encoder_tagger import place_word_rows, span_word_rows

    values = torch.arange(2 * 5 * 2, dtype=torch.float32).reshape(2, 5, 2)
    spans = [(0, 0, 3), (0, 3, 5), (1, 0, 2)]  # row 0 cut in two spans; row 1 has two words
    word_mask = torch.tensor([[True, True, True], [True, True, False], [True, True, False]])
    rows = span_word_rows(values, word_mask, spans)
    assert rows.shape == (3, 3, 2) and torch.all(rows[1, 2] == 0)
    back = place_word_rows(rows, word_mask, spans, 2, 5)
    assert torch.equal(back[0], values[0]) and torch.equal(back[1, :2], values[1, :2]) and torch.all(back[1, 2:] == 0)
