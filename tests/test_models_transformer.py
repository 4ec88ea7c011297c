import pytest
import torch

from models import MODEL_REGISTRY, build_model

SMALL = {"name": "transformer", "d_model": 32, "heads": 4, "ffn": 64, "encoder_layers": 2, "decoder_layers": 2,
         "dropout": 0.0, "aligned_memory": True, "input_scale": 1.0,
         "relative_window": 0}


def make_batch(batch_size=3, length=9, dim=50):
    torch.manual_seed(1)
    mask = torch.ones(batch_size, length, dtype=torch.bool)
    mask[-1, 6:] = False
    return {"vectors": torch.randn(batch_size, length, dim), "ids": torch.randint(2, 20, (batch_size, length)),
            "mask": mask, "labels": torch.randint(0, 4, (batch_size, length))}


def test_registry_knows_the_transformer_and_refuses_bad_params():
    assert "transformer" in MODEL_REGISTRY
    with pytest.raises(ValueError, match="unknown model"):
        build_model({"name": "nope"}, num_labels=4, vector_dim=50, vocab_size=10)
    with pytest.raises(ValueError, match="does not take"):
        build_model({**SMALL, "colour": 1}, num_labels=4, vector_dim=50, vocab_size=10)
    with pytest.raises(ValueError, match="needs"):
        build_model({"name": "transformer"}, num_labels=4, vector_dim=50, vocab_size=10)


@pytest.mark.parametrize("vector_dim", [50, 0])
def test_shapes_and_loss(vector_dim):
    model = build_model(SMALL, num_labels=4, vector_dim=vector_dim, vocab_size=20)
    batch = make_batch(dim=vector_dim)
    assert model(batch).shape == (3, 9, 4)
    loss = model.loss(batch, label_smoothing=0.1)
    loss.backward()
    assert torch.isfinite(loss)


@pytest.mark.parametrize("aligned", [True, False])
def test_greedy_decoding_with_cache_equals_teacher_forced_argmax(aligned):
    torch.manual_seed(0)
    model = build_model({**SMALL, "aligned_memory": aligned}, num_labels=4, vector_dim=50, vocab_size=20).eval()
    batch = make_batch()
    predicted = model.predict(batch)
    # Feeding the greedy output back as teacher-forcing input must reproduce it position by position.
    logits = model({**batch, "labels": predicted})
    assert torch.equal(logits.argmax(-1), predicted)


def test_decoder_does_not_see_future_labels():
    torch.manual_seed(0)
    model = build_model(SMALL, num_labels=4, vector_dim=50, vocab_size=20).eval()
    batch = make_batch()
    logits = model(batch)
    changed = dict(batch, labels=batch["labels"].clone())
    changed["labels"][:, 5:] = (changed["labels"][:, 5:] + 1) % 4
    # logits at position t depend on labels < t only: positions <= 5 are unchanged
    assert torch.allclose(model(changed)[:, :6], logits[:, :6], atol=1e-5)


def test_learns_a_simple_rule():
    """A few hundred steps teach the model that a marked word is followed by PERIOD."""
    torch.manual_seed(0)
    model = build_model(SMALL, num_labels=4, vector_dim=8, vocab_size=20)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    vectors = torch.randn(16, 12, 8)
    labels = (vectors[..., 0] > 0.8).long() * 2  # PERIOD where the first feature is large
    batch = {"vectors": vectors, "ids": torch.zeros(16, 12, dtype=torch.long),
             "mask": torch.ones(16, 12, dtype=torch.bool), "labels": labels}
    for _ in range(300):
        optimizer.zero_grad()
        model.loss(batch).backward()
        optimizer.step()
    model.eval()
    assert (model.predict(batch) == labels).float().mean() > 0.95


@pytest.mark.parametrize("changes", [{"norm": "pre"}, {"learned_positions": 9}, {"norm": "pre", "learned_positions": 12}])
def test_pre_norm_and_learned_positions_decode_as_they_train(changes):
    """The readings of the paper's open points (models/transformer.py): greedy decoding with the cache still equals
    the teacher-forced argmax of its own output, and the decoder still does not see future labels."""
    torch.manual_seed(0)
    model = build_model({**SMALL, "aligned_memory": False, **changes}, num_labels=4, vector_dim=50,
                        vocab_size=20).eval()
    batch = make_batch()
    predicted = model.predict(batch)
    assert torch.equal(model({**batch, "labels": predicted}).argmax(-1), predicted)
    changed = dict(batch, labels=batch["labels"].clone())
    changed["labels"][:, 5:] = (changed["labels"][:, 5:] + 1) % 4
    assert torch.allclose(model(changed)[:, :6], model(batch)[:, :6], atol=1e-5)


def test_pre_norm_adds_final_norms_and_post_norm_keeps_the_saved_layout():
    post = build_model(SMALL, num_labels=4, vector_dim=50, vocab_size=20)
    pre = build_model({**SMALL, "norm": "pre"}, num_labels=4, vector_dim=50, vocab_size=20)
    # post-norm (the paper's) has exactly the parameters of model directories saved before these options
    assert not any("final_norm" in k or "decoder_norm" in k or "positions" in k for k in post.state_dict())
    assert set(pre.state_dict()) - set(post.state_dict()) == {
        "encoder.final_norm.weight", "encoder.final_norm.bias", "decoder_norm.weight", "decoder_norm.bias"}
    with pytest.raises(ValueError, match="norm must be one of"):
        build_model({**SMALL, "norm": "sandwich"}, num_labels=4, vector_dim=50, vocab_size=20)


def test_learned_positions_refuse_windows_longer_than_their_table():
    model = build_model({**SMALL, "learned_positions": 5}, num_labels=4, vector_dim=50, vocab_size=20).eval()
    with pytest.raises(ValueError, match="learned position table has 5"):
        model.predict(make_batch(length=9))
