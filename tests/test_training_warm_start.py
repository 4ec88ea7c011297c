"""Warm start (training/warm_start.py): a run that starts from a trained word-only model, as the default speech
model starts from the default text model; and the ``variants`` entries that ask for it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from embeddings.cache import build_feature_cache
from embeddings.store import load_split, load_split_words
from experiments.params import ParamsError, runs_on_feature_sets, tuning_config
from inference.model_dir import load_trained_model
from models import build_model
from tests.fixture_corpus import TINY_BLSTM, TINY_TRAIN, write_prepared_corpus
from tests.helpers import write_word2vec_text
from training import train_model
from training.warm_start import WarmStartError, warm_start

TRAIN = {**TINY_TRAIN, "max_steps": 6, "eval_every_steps": 3, "dev_eval_tokens": 100}


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    """A word-only cache, the same words with a 3-d speech part concatenated, and summed; a text model."""
    root = tmp_path_factory.mktemp("warm_start")
    corpus = write_prepared_corpus(root / "corpus", root / "prepared", talks=8, sentences_per_talk=10,
                                   train_tokens=800)
    words = [line.split()[0] for line in corpus["vectors"].read_text().splitlines()[1:]]
    rng = np.random.default_rng(0)
    speech3 = write_word2vec_text(root / "speech3.txt", {w: list(rng.normal(size=3)) for w in words})
    speech8 = write_word2vec_text(root / "speech8.txt", {w: list(rng.normal(size=8)) for w in words})
    other_words = write_word2vec_text(root / "other.txt", {w: list(rng.normal(size=8)) for w in words})
    word_source = {"type": "word2vec-text", "path": str(corpus["vectors"])}
    out = {"root": root}
    for name, extra in (("words", {}),
                        ("concat", {"speech_source": {"type": "word2vec-text", "path": str(speech3)},
                                    "combine": "concat"}),
                        ("summed", {"speech_source": {"type": "word2vec-text", "path": str(speech8)},
                                    "combine": "sum"})):
        build_feature_cache(root / "prepared", root / name, word_source=word_source, oov="random", **extra)
        out[name] = root / name
    build_feature_cache(root / "prepared", root / "other", word_source={"type": "word2vec-text", "path": str(other_words)},
                        oov="random")
    out["other"] = root / "other"
    train_model(out["words"], root / "text_model", root / "state_text", model_config=TINY_BLSTM, train_config=TRAIN,
                window=30, stride=15)
    out["text_model"] = root / "text_model"
    return out


def _batch(features_dir, n: int = 30) -> dict[str, torch.Tensor]:
    split = load_split(features_dir, "dev")
    vectors = torch.tensor(np.array(split.vectors[:n]), dtype=torch.float32)[None]
    return {"vectors": vectors, "ids": torch.tensor(np.array(split.ids[:n]), dtype=torch.long)[None],
            "mask": torch.ones(1, n, dtype=torch.bool)}


def test_a_warm_started_model_predicts_as_its_source_whatever_the_new_columns_hold(caches):
    source, source_config = load_trained_model(caches["text_model"])
    model = build_model(TINY_BLSTM, num_labels=4, vector_dim=11, vocab_size=source_config["vocab_size"])
    info = warm_start(model, TINY_BLSTM, caches["text_model"], caches["concat"])
    assert info["grown"] == {"input.projection.weight": [[16, 8], [16, 11]]}
    assert len(info["weights_sha256"]) == 64
    model.eval()
    batch = _batch(caches["concat"])
    words_only = {**batch, "vectors": batch["vectors"][..., :8]}
    assert torch.equal(batch["vectors"][..., :8], _batch(caches["words"])["vectors"])  # word columns come first
    noisy = {**batch, "vectors": torch.cat([batch["vectors"][..., :8], 100 * torch.randn(1, 30, 3)], dim=-1)}
    with torch.no_grad():
        expected = source(words_only)
        assert torch.allclose(model(batch), expected, atol=1e-6)
        assert torch.allclose(model(noisy), expected, atol=1e-6)


def test_a_warm_started_run_records_its_source_and_does_not_reuse_a_scratch_checkpoint(caches, tmp_path):
    train_model(caches["concat"], tmp_path / "scratch", tmp_path / "state", model_config=TINY_BLSTM,
              train_config=TRAIN, window=30, stride=15)
    warm = train_model(caches["concat"], tmp_path / "warm", tmp_path / "state", model_config=TINY_BLSTM,
                       train_config=TRAIN, window=30, stride=15, init_from=caches["text_model"])
    scratch_config = json.loads((tmp_path / "scratch" / "config.json").read_text())
    config = json.loads((tmp_path / "warm" / "config.json").read_text())
    assert "initialised_from" not in scratch_config
    assert config["initialised_from"]["path"] == str(caches["text_model"])
    assert config["fingerprint"] != scratch_config["fingerprint"]
    assert warm.metrics["steps"] == TRAIN["max_steps"]  # trained its own schedule from the source, not resumed
    # the words' weights moved on from the source's, the new columns from zero
    source = torch.load(caches["text_model"] / "model.pt", weights_only=True)
    trained = torch.load(tmp_path / "warm" / "model.pt", weights_only=True)
    assert trained["input.projection.weight"][:, 8:].abs().sum() > 0
    assert not torch.equal(trained["input.projection.weight"][:, :8], source["input.projection.weight"])


def test_sources_that_do_not_fit_are_refused_by_name(caches):
    def start(config, features, vector_dim):
        model = build_model(config, num_labels=4, vector_dim=vector_dim, vocab_size=10)
        return warm_start(model, config, caches["text_model"], features)

    with pytest.raises(WarmStartError, match="not this run's"):
        start({**TINY_BLSTM, "hidden": 32}, caches["concat"], 11)
    with pytest.raises(WarmStartError, match=r"combine: sum"):
        start(TINY_BLSTM, caches["summed"], 8)
    with pytest.raises(WarmStartError, match=r"word vectors differ in fingerprint"):
        start(TINY_BLSTM, caches["other"], 8)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        warm_start(build_model(TINY_BLSTM, num_labels=4, vector_dim=11, vocab_size=10), TINY_BLSTM,
                   caches["root"] / "nowhere", caches["concat"])


def test_a_vocabulary_of_other_training_text_matters_only_where_words_are_read_as_ids(caches, tmp_path):
    """The words of a longer draw number otherwise (another vocabulary) but look up the same vectors: a model that
    reads the vectors starts from them, and the warm-started model predicts as its source; a model whose words are
    ids (no word vectors) is refused by name, its ids meaning other words."""
    prepared = caches["root"] / "prepared"
    longer = tmp_path / "longer"
    lines = prepared.joinpath("train.tsv").read_text(encoding="utf-8").splitlines()
    longer.mkdir()
    for split in ("dev", "ref", "asr"):
        longer.joinpath(f"{split}.tsv").write_bytes(prepared.joinpath(f"{split}.tsv").read_bytes())
    longer.joinpath("train.tsv").write_text("\n".join(lines + ["zebra\tO", "quokka\tPERIOD"]) + "\n",
                                            encoding="utf-8")
    word_source = {"type": "word2vec-text", "path": str(caches["root"] / "corpus" / "vectors.txt")}
    other_vocab = build_feature_cache(longer, tmp_path / "features", word_source=word_source, oov="random").root
    ours, theirs = (json.loads((d / "embedder" / "embedder.json").read_text()) for d in (caches["words"], other_vocab))
    assert ours["vocab_sha256"] != theirs["vocab_sha256"] and ours["fingerprint"] == theirs["fingerprint"]
    model = build_model(TINY_BLSTM, num_labels=4, vector_dim=8, vocab_size=10)
    warm_start(model, TINY_BLSTM, caches["text_model"], other_vocab)
    source, _ = load_trained_model(caches["text_model"])
    model.eval()
    batch = _batch(other_vocab)
    assert torch.equal(model(batch).argmax(-1), source(batch).argmax(-1))

    ids_source = tmp_path / "ids_model"
    build_feature_cache(prepared, tmp_path / "ids", word_source={"type": "none"}, oov="random")
    build_feature_cache(longer, tmp_path / "ids_longer", word_source={"type": "none"}, oov="random")
    train_model(tmp_path / "ids", ids_source, tmp_path / "ids_state", model_config=TINY_BLSTM,
                train_config={**TRAIN, "max_steps": 2}, window=30, stride=15)
    with pytest.raises(WarmStartError, match=r"word vectors differ in vocab_sha256"):
        warm_start(build_model(TINY_BLSTM, num_labels=4, vector_dim=0, vocab_size=50), TINY_BLSTM, ids_source,
                   tmp_path / "ids_longer")


def _params(tunings, experiments=("blstm",)):
    experiment = {"model": TINY_BLSTM, "train": dict(TRAIN)}
    return {"active": {"experiments": {"blstm": experiment}}, "experiments": list(experiments), "tunings": tunings}


def test_tunings_start_from_a_trained_experiment_with_their_own_schedule():
    params = _params({"cues": {"from": "blstm", "features": "word_pauses", "train": {"max_steps": 50, "lr": 0.0005}}})
    experiment, model, train = tuning_config(params, "cues")
    assert (experiment, model) == ("blstm", TINY_BLSTM)
    assert train == {**TRAIN, "max_steps": 50, "lr": 0.0005}
    for tunings, message in (({"x": {"from": "blstm", "epochs": 2}}, r"unknown epochs"),
                             ({"x": {"from": "blstm", "train": {"epoch": 2}}}, r"tunings\.x\.train\.epoch"),
                             ({"x": {"from": "blstm", "start_from": "text_model"}}, "unknown start_from"),
                             ({"y": {"from": "blstm"}}, "tunings.x is not defined")):
        with pytest.raises(ParamsError, match=message):
            tuning_config(_params(tunings), "x")
    with pytest.raises(ParamsError, match="not one of the experiments the pipeline trains"):
        tuning_config(_params({"x": {"from": "blstm"}}, experiments=("transformer",)), "x")


def test_variants_and_tunings_are_listed_together_for_the_reports():
    params = {"variants": {"plain": {"experiment": "blstm", "features": "learned", "published": "p/q"}},
              "tunings": {"cues": {"from": "blstm", "features": "word_pauses", "train": {"max_steps": 5}}}}
    assert runs_on_feature_sets(params) == {
        "plain": {"experiment": "blstm", "features": "learned", "published": "p/q", "tuned": False},
        "cues": {"experiment": "blstm", "features": "word_pauses", "tuned": True}}
    with pytest.raises(ParamsError, match="both a variant and a tuning"):
        runs_on_feature_sets({"variants": {"x": {"experiment": "blstm"}}, "tunings": {"x": {"from": "blstm"}}})


def test_a_tuning_may_change_how_the_model_trains_but_not_the_model(caches, tmp_path, monkeypatch):
    """Training-only settings (the encoder's frozen layers, dropout) may differ between the source and the run;
    anything else is refused, naming what may differ."""
    from models.recurrent import BLSTMPunctuator

    monkeypatch.setattr(BLSTMPunctuator, "training_only_settings", ("dropout",))
    model = build_model({**TINY_BLSTM, "dropout": 0.5}, num_labels=4, vector_dim=11,
                        vocab_size=load_trained_model(caches["text_model"])[1]["vocab_size"])
    info = warm_start(model, {**TINY_BLSTM, "dropout": 0.5}, caches["text_model"], caches["concat"])
    assert info["grown"] == {"input.projection.weight": [[16, 8], [16, 11]]}
    with pytest.raises(WarmStartError, match=r"only dropout may differ"):
        warm_start(build_model({**TINY_BLSTM, "hidden": 32}, num_labels=4, vector_dim=11, vocab_size=10),
                   {**TINY_BLSTM, "hidden": 32}, caches["text_model"], caches["concat"])
    params = _params({"cues": {"from": "blstm", "features": "word_pauses", "model": {"dropout": 0.5}}})
    assert tuning_config(params, "cues")[1] == {**TINY_BLSTM, "dropout": 0.5}
    with pytest.raises(ParamsError, match=r"tunings\.cues\.model\.depth"):
        tuning_config(_params({"cues": {"from": "blstm", "model": {"depth": 2}}}), "cues")


@pytest.mark.parametrize("setting, value", [("vector_mlp_hidden", 8), ("vector_at_input", True)])
def test_a_warm_start_may_add_a_module_that_starts_at_zero(caches, tmp_path, setting, value):
    """encoder_tagger's ``vector_mlp_hidden`` and ``vector_at_input`` (its warm_start_additions): a source without
    the module starts a run with it, predicting as the source does; any other difference is still refused, and a
    source with the module does not start a run without it."""
    pytest.importorskip("transformers")
    from tests.fixture_checkpoints import make_checkpoint

    tagger = {"name": "encoder_tagger", "pretrained": str(make_checkpoint(tmp_path / "bert", "bert")), "layers": None,
              "freeze_layers": 0, "label_subword": "last", "dropout": 0.0, "max_subwords": 64}
    train_model(caches["words"], tmp_path / "text", tmp_path / "state", model_config=tagger,
                train_config={**TRAIN, "lr": 0.003}, window=30, stride=15)
    source, _ = load_trained_model(tmp_path / "text", traced=False)
    with_mlp = {**tagger, "freeze_layers": 1, setting: value}
    model = build_model(with_mlp, num_labels=4, vector_dim=11, vocab_size=10)
    info = warm_start(model, with_mlp, tmp_path / "text", caches["concat"])
    assert info["added"] == [setting] and "vector_input.weight" in info["grown"]
    batch = {**_batch(caches["concat"]), "words": [load_split_words(caches["concat"], "dev")[:30]]}
    model.eval()
    source.eval()
    with torch.no_grad():
        assert torch.allclose(model(batch), source({**batch, "vectors": batch["vectors"][..., :8]}), atol=1e-6)
    with pytest.raises(WarmStartError, match="not this run's"):
        other = {**with_mlp, "label_subword": "first"}
        warm_start(build_model(other, num_labels=4, vector_dim=11, vocab_size=10), other, tmp_path / "text",
                   caches["concat"])
    train_model(caches["concat"], tmp_path / "speech", tmp_path / "state", model_config=with_mlp,
                train_config={**TRAIN, "lr": 0.003}, window=30, stride=15, init_from=tmp_path / "text")
    if setting == "vector_at_input":  # the encoder's trace reads no vectors: inference loads the encoder itself
        assert not (tmp_path / "speech" / "encoder" / "traced.pt").exists()
        assert not load_trained_model(tmp_path / "speech", traced=True)[0].traced
    with pytest.raises(WarmStartError, match="not this run's"):
        warm_start(build_model(tagger, num_labels=4, vector_dim=11, vocab_size=10), tagger, tmp_path / "speech",
                   caches["concat"])
