"""The trainer's Adam: one rate for every weight, or ``train.encoder_lr`` for a pretrained encoder's own weights."""

from __future__ import annotations

import pytest
import torch

from models import build_model
from tests.fixture_checkpoints import make_checkpoint
from tests.fixture_corpus import TINY_BLSTM, TINY_TRAIN
from training.batches import lr_schedule
from training.config import ConfigError, TrainConfig
from training.optimizer import graph_optimizer, optimizer_groups, trainer_adam

pytest.importorskip("transformers")

ROWS = [["so", "i", "do", "n't", "think"], ["i", "'m", "here", "today", "now"]]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_checkpoint(tmp_path_factory.mktemp("optimizer_checkpoint") / "bert", "bert")


def tagger(checkpoint, **changes):
    config = {"name": "encoder_tagger", "pretrained": str(checkpoint), "layers": None, "freeze_layers": 0,
              "label_subword": "last", "dropout": 0.0, "max_subwords": 64, "vector_at_input": True, **changes}
    return build_model(config, num_labels=4, vector_dim=3, vocab_size=10)


def batch():
    generator = torch.Generator().manual_seed(0)
    return {"vectors": torch.randn(2, 5, 3, generator=generator), "ids": torch.zeros(2, 5, dtype=torch.long),
            "mask": torch.ones(2, 5, dtype=torch.bool), "labels": torch.randint(0, 4, (2, 5), generator=generator),
            "words": ROWS}


def config(**changes):
    return TrainConfig.from_mapping({**TINY_TRAIN, **changes})


def test_encoder_lr_is_checked_and_recorded_only_when_set():
    assert "encoder_lr" not in config().as_params()  # older runs keep their fingerprints
    assert config(encoder_lr=5e-5).as_params()["encoder_lr"] == 5e-5
    assert config(encoder_lr="5e-5").encoder_lr == 5e-5  # YAML 1.1 reads 5e-5 as a string
    for bad in (0, -1e-4, float("nan")):
        with pytest.raises(ConfigError, match="encoder_lr"):
            config(encoder_lr=bad)


def test_without_encoder_lr_every_weight_is_one_group(checkpoint):
    model = tagger(checkpoint)
    (group,) = optimizer_groups(model, config())
    assert group["params"] == list(model.parameters()) and "lr" not in group


def test_the_encoder_trains_at_its_own_rate_and_the_rest_at_lr(checkpoint):
    torch.manual_seed(0)
    model = tagger(checkpoint).train()
    head, encoder = optimizer_groups(model, config(lr=1e-2, encoder_lr=1e-4))
    encoder_ids = {id(p) for p in model.encoder.parameters()}
    assert {id(p) for p in encoder["params"]} == encoder_ids and encoder["lr"] == 1e-4
    assert not encoder_ids & {id(p) for p in head["params"]}
    assert len(head["params"]) + len(encoder["params"]) == len(list(model.parameters()))
    # the new cue input at the encoder's input is not the encoder's: it gets the head's rate
    assert any(p is model.vector_embed_input.weight for p in head["params"])

    optimizer = trainer_adam(model, config(lr=1e-2, encoder_lr=1e-4), torch.device("cpu"), graph=False)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule("linear", 2, 10))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    for _ in range(3):
        optimizer.zero_grad()
        model.loss(batch()).backward()
        optimizer.step()
        scheduler.step()
    # Adam moves each weight by about its rate a step: the encoder's 100 times less than the classifier's
    change = {name: (p.detach() - before[name]).abs().max().item() for name, p in model.named_parameters()}
    encoder_change = max(change[name] for name in change if name.startswith("encoder."))
    assert 0 < encoder_change < 4 * 3 * 1e-4
    assert change["classifier.linear.weight"] > 10 * encoder_change
    # the schedule scales both peaks alike
    rates = [group["lr"] for group in optimizer.param_groups]
    assert rates[0] / rates[1] == pytest.approx(100.0) and rates[0] < 1e-2


def test_encoder_lr_on_a_model_without_a_pretrained_encoder_is_refused():
    model = build_model(TINY_BLSTM, num_labels=4, vector_dim=3, vocab_size=10)
    assert len(optimizer_groups(model, config())) == 1
    with pytest.raises(ConfigError, match="encoder_lr.*no pretrained encoder"):
        optimizer_groups(model, config(encoder_lr=1e-4))


def test_the_graph_optimizer_gives_each_group_its_own_rate_tensor(checkpoint):
    model = tagger(checkpoint)
    optimizer = graph_optimizer(optimizer_groups(model, config(lr=1e-2, encoder_lr=1e-4)), 1e-2, torch.device("cpu"))
    rates = [group["lr"] for group in optimizer.param_groups]
    assert all(isinstance(rate, torch.Tensor) and rate.dtype == torch.float32 for rate in rates)
    assert rates[0] is not rates[1]  # a schedule fills each in place
    assert [float(rate) for rate in rates] == pytest.approx([1e-2, 1e-4])
