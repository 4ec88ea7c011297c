"""The pretrained encoder rebuilt from our blocks equals transformers' own model; word/subword alignment."""

import json
import shutil

import pytest
import torch

from models.pretrained import (
    SubwordOverflowError,
    default_checkpoint_dir,
    load_pretrained_encoder,
    split_long_rows,
    subword_batch,
    word_pieces,
)

transformers = pytest.importorskip("transformers")

ROWS = [["so", "i", "do", "n't", "think", "it", "'s", "well-known"], ["i", "'m", "here"]]


@pytest.fixture(scope="module")
def minilm():
    encoder, tokenizer = load_pretrained_encoder(None, interaction=False, dropout=0.0)
    return encoder.eval(), tokenizer


@pytest.fixture(scope="module")
def reference():
    return transformers.AutoModel.from_pretrained(str(default_checkpoint_dir()), local_files_only=True).eval()


def hidden_states(encoder, subwords):
    with torch.no_grad():
        return encoder(subwords.input_ids, subwords.attention_mask)[0]


def reference_states(model, subwords):
    with torch.no_grad():
        return model(input_ids=subwords.input_ids, attention_mask=subwords.attention_mask.long()).last_hidden_state


def test_encoder_equals_transformers(minilm, reference):
    encoder, tokenizer = minilm
    subwords = subword_batch(tokenizer, ROWS)
    ours, theirs = hidden_states(encoder, subwords), reference_states(reference, subwords)
    real = subwords.attention_mask
    assert ours.shape == theirs.shape == (2, subwords.input_ids.size(1), 384)
    torch.testing.assert_close(ours[real], theirs[real], atol=1e-4, rtol=1e-4)


def test_interaction_encoder_with_zero_mixing_equals_transformers(reference, minilm):
    encoder, tokenizer = load_pretrained_encoder(None, interaction=True, dropout=0.0)
    encoder.eval()
    subwords = subword_batch(tokenizer, ROWS)
    real = subwords.attention_mask
    layers = encoder.encoder.layers
    assert len(layers) == 6 and all(layer.attention.head_mixing.shape == (12, 12) for layer in layers)
    # the new mixing matrices are at their (small, random) init: close to but not exactly the pretrained model
    mixed = hidden_states(encoder, subwords)
    assert not torch.allclose(mixed[real], reference_states(reference, subwords)[real], atol=1e-4)
    # all other weights equal the plain encoder's
    plain = minilm[0].state_dict()
    for name, tensor in encoder.state_dict().items():
        if not name.endswith("head_mixing"):
            assert torch.equal(tensor, plain[name]), name
    with torch.no_grad():
        for layer in layers:
            layer.attention.head_mixing.zero_()
    torch.testing.assert_close(hidden_states(encoder, subwords)[real], reference_states(reference, subwords)[real],
                               atol=1e-4, rtol=1e-4)


def test_alignment_of_benchmark_tokens(minilm):
    _, tokenizer = minilm
    subwords = subword_batch(tokenizer, ROWS)
    ids, first = subwords.input_ids, subwords.first_subword_index
    tokens = tokenizer.convert_ids_to_tokens(ids[0].tolist())
    assert tokens == ["[CLS]", "so", "i", "do", "n", "'", "t", "think", "it", "'", "s", "well", "-", "known", "[SEP]"]
    assert first[0].tolist() == [1, 2, 3, 4, 7, 8, 9, 11]  # n't starts at "n", 's at "'", well-known at "well"
    assert subwords.word_mask[0].all()
    # row 2: i 'm here, then padding
    assert tokenizer.convert_ids_to_tokens(ids[1, :6].tolist()) == ["[CLS]", "i", "'", "m", "here", "[SEP]"]
    assert first[1].tolist() == [1, 2, 4, 0, 0, 0, 0, 0]
    assert subwords.word_mask[1].tolist() == [True] * 3 + [False] * 5
    assert subwords.attention_mask.sum(1).tolist() == [15, 6]
    assert (ids[1, 6:] == tokenizer.pad_token_id).all()


def test_words_without_subwords_become_unk(minilm):
    _, tokenizer = minilm
    pieces = word_pieces(tokenizer, [["a", "", "\u200b", "b"], []])
    assert pieces[0][1] == pieces[0][2] == [tokenizer.unk_token_id]
    assert pieces[1] == []
    subwords = subword_batch(tokenizer, [["a", "", "\u200b", "b"], []])
    assert subwords.first_subword_index[0].tolist() == [1, 2, 3, 4]
    assert subwords.word_mask.sum(1).tolist() == [4, 0]


def test_overflow_raises_and_split_long_rows_covers_every_word(minilm):
    _, tokenizer = minilm
    words = ["well-known"] * 10  # 3 subwords each: 30 + 2 special
    subword_batch(tokenizer, [words], max_subwords=32)
    with pytest.raises(SubwordOverflowError, match="max_subwords=31"):
        subword_batch(tokenizer, [words], max_subwords=31)
    pieces = word_pieces(tokenizer, [words, ["a"]])
    spans = split_long_rows(pieces, max_subwords=11)  # 3 words (9 subwords) per piece
    assert spans == [(0, 0, 3), (0, 3, 6), (0, 6, 9), (0, 9, 10), (1, 0, 1)]
    with pytest.raises(SubwordOverflowError, match="alone"):
        split_long_rows(pieces, max_subwords=4)


def test_any_local_bert_checkpoint_loads(tmp_path, minilm):
    """A tiny random BertForMaskedLM ('bert.' prefix, MLM head, .bin weights) maps onto our blocks exactly."""
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64, layer_norm_eps=1e-7)
    model = transformers.BertForMaskedLM(config).eval()
    config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    source = default_checkpoint_dir()
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(source / name, tmp_path / name)
    encoder, tokenizer = load_pretrained_encoder(str(tmp_path), interaction=False, dropout=0.0)
    assert encoder.encoder.layers[0].after_attention.norm.eps == 1e-7
    subwords = subword_batch(tokenizer, ROWS)
    real = subwords.attention_mask
    torch.testing.assert_close(hidden_states(encoder.eval(), subwords)[real],
                               reference_states(model.bert, subwords)[real], atol=1e-5, rtol=1e-5)


def test_refuses_what_it_cannot_load(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a local directory"):
        load_pretrained_encoder("bert-base-uncased", interaction=False, dropout=0.0)  # never a hub download
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta"}))
    with pytest.raises(ValueError, match="not supported"):
        load_pretrained_encoder(str(tmp_path), interaction=False, dropout=0.0)
