"""Overlapping windows combined (Courtland et al. 2020): each token's logits summed over every window
covering it -- the same labels as the centre rule with one window per token, the right ones on a hand-made
case, and one rule for dev evaluation, the evaluate stage and ``punctuate``, read from the model directory."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from corpus.labels import LABELS
from inference.windows import combine_windows, predict_stream, predict_streams, window_starts
from tests.fixture_corpus import TINY_BLSTM, TINY_MODEL, TINY_TRAIN, write_feature_cache

TABLE = torch.randn(5000, 64, len(LABELS), generator=torch.Generator().manual_seed(0))


def logits(batch):
    """A fake model's logits: a fixed random function of each token's id and its position in its window."""
    positions = torch.arange(batch["ids"].shape[1]).expand_as(batch["ids"])
    return TABLE[batch["ids"] % 5000, positions]


def labels_of(batch):
    return logits(batch).argmax(dim=-1)


@pytest.mark.parametrize("length, window", [(600, 50), (37, 64), (64, 64), (1, 8)])
def test_with_one_window_per_token_the_sum_is_the_centre_rule(length, window):
    ids, vectors = np.arange(length) * 7 + 3, np.zeros((length, 1), np.float32)
    centre = predict_stream(labels_of, vectors, ids, window=window, stride=window, batch_size=3)
    summed = predict_stream(logits, vectors, ids, window=window, stride=window, batch_size=3, combine="sum")
    assert np.array_equal(centre, summed)  # lengths that windows tile exactly, or that fit in one window


def test_a_hand_made_case():
    """Windows of 4 every 2 over 6 tokens: [0, 4) and [2, 6). Token 3 is owned by the second window (centre 3.5),
    which weakly says O; the first says PERIOD with confidence: the sum takes PERIOD, the centre rule O. Token 2
    (owned by the first) is the other way round."""
    table = {  # (window start, token) -> logits over O, COMMA, PERIOD, QUESTION
        (0, 2): [0.0, 0.0, 0.2, 0.0], (2, 2): [0.0, 3.0, 0.0, 0.0],
        (0, 3): [0.0, 0.0, 4.0, 0.0], (2, 3): [0.5, 0.0, 0.0, 0.0],
    }

    def window_logits(batch):
        out = torch.zeros(*batch["ids"].shape, len(LABELS))
        for row in range(batch["ids"].shape[0]):
            start = int(batch["ids"][row, 0])
            for position in range(int(batch["mask"][row].sum())):
                token = int(batch["ids"][row, position])
                out[row, position] = torch.tensor(table.get((start, token), [1.0, 0.0, 0.0, 0.0]))
        return out

    ids, vectors = np.arange(6), np.zeros((6, 1), np.float32)
    assert window_starts(6, 4, 2) == [0, 2]
    centre = predict_stream(lambda b: window_logits(b).argmax(-1), vectors, ids, window=4, stride=2)
    summed = predict_stream(window_logits, vectors, ids, window=4, stride=2, combine="sum")
    assert [LABELS[i] for i in centre] == ["O", "O", "PERIOD", "O", "O", "O"]
    assert [LABELS[i] for i in summed] == ["O", "O", "COMMA", "PERIOD", "O", "O"]


def test_every_window_covering_a_token_counts():
    length, window, stride = 40, 8, 2
    starts = window_starts(length, window, stride)
    rows = np.random.default_rng(1).standard_normal((len(starts), window, 4))
    labels, mean = combine_windows(rows, 0, starts, length, window)
    for token in range(length):
        covering = [rows[k, token - s] for k, s in enumerate(starts) if s <= token < s + window]
        assert len(covering) == (4 if 6 <= token < 34 else len(covering))  # window / stride inside the stream
        assert np.allclose(mean[token], np.mean(covering, axis=0))
        assert labels[token] == np.argmax(np.sum(covering, axis=0))


def test_streams_sharing_batches_are_combined_each_as_alone():
    lengths = [5, 130, 1, 64]
    streams = [(np.zeros((n, 1), np.float32), np.arange(n) + 1000 * k, None) for k, n in enumerate(lengths)]
    shared = predict_streams(logits, streams, window=20, stride=5, batch_size=4, combine="sum")
    for (vectors, ids, _), (labels, mean) in zip(streams, shared):
        [(alone, alone_mean)] = predict_streams(logits, [(vectors, ids, None)], window=20, stride=5, combine="sum")
        assert np.array_equal(labels, alone) and np.array_equal(mean, alone_mean) and mean.shape == (len(ids), 4)
        assert np.array_equal(labels, predict_stream(logits, vectors, ids, window=20, stride=5, combine="sum"))


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="unknown window combination"):
        predict_stream(logits, np.zeros((3, 1), np.float32), np.arange(3), window=2, stride=1, combine="mean")


# ------------------------------------------------------------------------------- one rule, every decoder

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny BLSTM trained a few steps with decode_combine: sum in windows of 12 every 3 (four predictions per
    token), its classifier then sharpened so that its labels vary (and the two rules disagree on some), and a
    tiny Transformer (a decoder of its own)."""
    from training import train_model

    root = tmp_path_factory.mktemp("combine")
    features = write_feature_cache(root, talks=8, sentences_per_talk=10, train_tokens=800)
    train = {**TINY_TRAIN, "max_steps": 3, "eval_every_steps": 3, "dev_eval_tokens": 60, "decode_combine": "sum"}
    train_model(features, root / "blstm", root / "blstm_state", model_config=TINY_BLSTM, train_config=train,
                window=12, stride=3)
    weights = torch.load(root / "blstm" / "model.pt", weights_only=True)
    weights["classifier.linear.weight"] *= 30
    weights["classifier.linear.bias"].zero_()
    torch.save(weights, root / "blstm" / "model.pt")
    train_model(features, root / "transformer", root / "transformer_state", model_config=TINY_MODEL,
                train_config={**train, "max_steps": 1, "eval_every_steps": 1}, window=12, stride=3)
    return {"root": root, "features": features, "blstm": root / "blstm", "transformer": root / "transformer"}


def test_the_rule_is_the_model_directorys(trained):
    from inference.punctuator import Punctuator

    config = json.loads((trained["blstm"] / "config.json").read_text(encoding="utf-8"))
    assert config["train"]["decode_combine"] == "sum" and (config["window"], config["stride"]) == (12, 3)
    assert Punctuator(trained["blstm"]).decode_combine == "sum"
    assert Punctuator(trained["blstm"], decode_combine="centre").decode_combine == "centre"
    # the Transformer decodes label by label (no logits per window to add up): it keeps the centre rule
    assert json.loads((trained["transformer"] / "config.json").read_text())["train"]["decode_combine"] == "sum"
    assert Punctuator(trained["transformer"]).decode_combine == "centre"


def test_dev_evaluation_decodes_as_punctuate(trained):
    """The trainer's dev scores are those of the Punctuator's labels for the same tokens, under either rule."""
    from embeddings.store import load_split, load_split_words
    from evaluation.scoring import score_labels
    from inference.punctuator import Punctuator
    from training.dev_eval import TokenSlice, evaluate_on_tokens

    dev = TokenSlice(load_split(trained["features"], "dev"), None, load_split_words(trained["features"], "dev"))
    reference = [LABELS[i] for i in np.asarray(dev.labels)]
    for rule in ("sum", "centre"):
        punctuator = Punctuator(trained["blstm"], decode_combine=rule)
        labels = punctuator.label_vectors(np.asarray(dev.vectors), np.asarray(dev.ids), dev.words)
        scores = evaluate_on_tokens(punctuator.model, dev, window=12, stride=3, label_smoothing=0.0,
                                    device=torch.device("cpu"), batch_size=64, combine=rule)["scores"]
        assert scores == score_labels(reference, labels), rule


def test_punctuate_and_the_evaluate_stage_use_the_same_rule(trained, tmp_path, monkeypatch):
    """The evaluate stage and `punctuate --format iwslt` label the Ref words alike, both summing the windows (the
    rule recorded in the model directory), and the rule matters: the centre rule labels some words otherwise."""
    import inference.windows
    from corpus.iwslt import read_iwslt
    from evaluation.benchmark import evaluate_model
    from inference import cli
    from inference.punctuator import Punctuator

    calls = []
    real = inference.windows.combine_windows
    monkeypatch.setattr(inference.windows, "combine_windows", lambda *a, **k: calls.append(1) or real(*a, **k))
    prepared = trained["root"] / "prepared"
    evaluate_model(trained["blstm"], prepared, tmp_path / "eval", splits=["ref"])
    evaluated = read_iwslt(tmp_path / "eval" / "ref.tsv")
    assert calls
    calls.clear()
    reference = read_iwslt(prepared / "ref.tsv")
    (tmp_path / "ref.txt").write_text("\n".join(reference.words) + "\n", encoding="utf-8")
    assert cli.main(["--model", str(trained["blstm"]), str(tmp_path / "ref.txt"), "--format", "iwslt",
                     "-o", str(tmp_path / "punctuated.tsv")]) == 0
    assert calls
    punctuated = [line.split("\t")[1] for line in (tmp_path / "punctuated.tsv").read_text().splitlines()]
    assert punctuated == evaluated.labels == Punctuator(trained["blstm"], decode_combine="sum").punctuate_words(
        reference.words)
    centre = Punctuator(trained["blstm"], decode_combine="centre").punctuate_words(reference.words)
    assert centre != punctuated


def test_probabilities_are_the_combined_ones(trained):
    """With probabilities asked for, the labels do not change and each word's probabilities (the softmax of its
    windows' mean logits) have the label as their arg-max."""
    from inference.punctuator import Punctuator

    punctuator = Punctuator(trained["blstm"])
    text = " ".join(read_words(trained["root"] / "prepared" / "ref.tsv")[:200])
    prepared = punctuator.prepare_text(text)
    [plain] = punctuator.punctuate_prepared([prepared])
    [with_probabilities] = punctuator.punctuate_prepared([prepared], probabilities=True)
    assert plain.labels == with_probabilities.labels
    rows = with_probabilities.probabilities
    assert np.allclose(rows.sum(axis=1), 1.0, atol=1e-5)
    assert [LABELS[i] for i in rows.argmax(axis=1)] == with_probabilities.labels


def read_words(path):
    from corpus.iwslt import read_iwslt

    return read_iwslt(path).words
