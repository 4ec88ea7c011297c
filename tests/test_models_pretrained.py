"""Pretrained encoders from local checkpoint directories through transformers (BERT, RoBERTa and MPNet alike),
interaction attention on each, and the alignment of words to subwords."""

import json

import pytest
import torch

from models.pretrained import (
    SubwordOverflowError,
    add_interaction,
    default_checkpoint_dir,
    load_encoder,
    load_tokenizer,
    save_encoder_files,
    self_attention_modules,
    split_long_rows,
    subword_batch,
    word_pieces,
)
from tests.fixture_checkpoints import ARCHITECTURES, make_checkpoint

transformers = pytest.importorskip("transformers")

ROWS = [["so", "i", "do", "n't", "think", "it", "'s", "well-known"], ["i", "'m", "here"]]


@pytest.fixture(scope="module")
def minilm_tokenizer():
    return load_tokenizer(default_checkpoint_dir())


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkpoints")
    return {name: make_checkpoint(root / name, name) for name in ARCHITECTURES}


def states(encoder, subwords):
    with torch.no_grad():
        return encoder(input_ids=subwords.input_ids, attention_mask=subwords.attention_mask.long()).last_hidden_state


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_any_local_checkpoint_loads_through_transformers(checkpoints, architecture):
    directory = checkpoints[architecture]
    encoder, tokenizer = load_encoder(directory, dropout=0.0)
    reference = transformers.AutoModel.from_pretrained(str(directory), local_files_only=True).eval()
    subwords = subword_batch(tokenizer, ROWS)
    real = subwords.attention_mask
    torch.testing.assert_close(states(encoder.eval(), subwords)[real], states(reference, subwords)[real])
    assert not any(name.startswith("pooler") for name, _ in encoder.named_parameters())
    # every word gets at least one subword, and the row ends with the checkpoint's own separator
    assert subwords.input_ids[0, 0] == tokenizer.cls_token_id
    assert subwords.input_ids[1, int(real[1].sum()) - 1] == tokenizer.sep_token_id


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_interaction_with_zero_mixing_is_the_pretrained_attention(checkpoints, architecture):
    directory = checkpoints[architecture]
    plain, tokenizer = load_encoder(directory, dropout=0.0)
    mixed, _ = load_encoder(directory, dropout=0.0)
    matrices = add_interaction(mixed, tokenizer)
    assert len(matrices) == 2 and all(m.shape == (4, 4) for m in matrices)
    subwords = subword_batch(tokenizer, ROWS)
    real = subwords.attention_mask
    # the matrices start small (std 0.1 / sqrt(head size)); set larger, they move the states ...
    assert all(0 < float(m.detach().abs().max()) < 0.2 for m in matrices)
    with torch.no_grad():
        for matrix in matrices:
            matrix.normal_(0, 1.0)
    assert not torch.allclose(states(mixed.eval(), subwords)[real], states(plain.eval(), subwords)[real], atol=1e-3)
    # ... and at zero they are exactly the plain encoder's attention
    with torch.no_grad():
        for matrix in matrices:
            matrix.zero_()
    torch.testing.assert_close(states(mixed, subwords)[real], states(plain, subwords)[real], atol=1e-5, rtol=1e-5)
    # the matrices are trained: the loss reaches them
    with torch.no_grad():
        for matrix in matrices:
            matrix.normal_(0, 0.1)
    mixed.train()
    mixed(input_ids=subwords.input_ids, attention_mask=real.long()).last_hidden_state.pow(2).mean().backward()
    assert all(m.grad is not None and m.grad.abs().sum() > 0 for m in matrices)


def test_interaction_is_refused_where_it_cannot_reach_the_attention(checkpoints):
    encoder, tokenizer = load_encoder(checkpoints["bert"], dropout=0.0)
    for module in self_attention_modules(encoder):  # an attention that never calls the interface
        module.forward = lambda hidden_states, *args, **kwargs: (hidden_states, None)
    with pytest.raises(ValueError, match="attention interface"):
        add_interaction(encoder, tokenizer)


def test_layers_keep_the_first_layers_and_files_rebuild_without_weights(checkpoints, tmp_path):
    full, tokenizer = load_encoder(checkpoints["mpnet"], dropout=0.0)
    short, _ = load_encoder(checkpoints["mpnet"], dropout=0.0, layers=1)
    assert short.config.num_hidden_layers == 1 and len(short.encoder.layer) == 1
    torch.testing.assert_close(short.encoder.layer[0].state_dict(), full.encoder.layer[0].state_dict())
    save_encoder_files(short.config, tokenizer, tmp_path / "files")
    assert not any(path.suffix in (".safetensors", ".bin") for path in (tmp_path / "files").iterdir())
    rebuilt, _ = load_encoder(tmp_path / "files", weights=False)
    rebuilt.load_state_dict(short.state_dict())
    subwords = subword_batch(tokenizer, ROWS)
    torch.testing.assert_close(states(rebuilt.eval(), subwords), states(short.eval(), subwords))
    with pytest.raises(ValueError, match="layers must lie"):
        load_encoder(checkpoints["mpnet"], layers=3)


def test_alignment_of_benchmark_tokens_first_and_last_subword(minilm_tokenizer):
    tokenizer = minilm_tokenizer
    subwords = subword_batch(tokenizer, ROWS)
    ids, first = subwords.input_ids, subwords.label_subword_index
    tokens = tokenizer.convert_ids_to_tokens(ids[0].tolist())
    assert tokens == ["[CLS]", "so", "i", "do", "n", "'", "t", "think", "it", "'", "s", "well", "-", "known", "[SEP]"]
    assert first[0].tolist() == [1, 2, 3, 4, 7, 8, 9, 11]  # n't starts at "n", 's at "'", well-known at "well"
    last = subword_batch(tokenizer, ROWS, label_subword="last").label_subword_index
    assert last[0].tolist() == [1, 2, 3, 6, 7, 8, 10, 13]  # n't ends at "t", 's at "s", well-known at "known"
    assert subwords.word_mask[0].all()
    assert tokenizer.convert_ids_to_tokens(ids[1, :6].tolist()) == ["[CLS]", "i", "'", "m", "here", "[SEP]"]
    assert first[1].tolist() == [1, 2, 4, 0, 0, 0, 0, 0]
    assert subwords.word_mask[1].tolist() == [True] * 3 + [False] * 5
    assert subwords.attention_mask.sum(1).tolist() == [15, 6]
    assert (ids[1, 6:] == tokenizer.pad_token_id).all()
    with pytest.raises(ValueError, match="label_subword"):
        subword_batch(tokenizer, ROWS, label_subword="middle")


def test_byte_level_bpe_words_are_read_with_a_prefix_space(checkpoints):
    tokenizer = load_tokenizer(checkpoints["roberta"])
    pieces = word_pieces(tokenizer, [["so", "i", "think"]])[0]
    with_space = tokenizer(" think", add_special_tokens=False)["input_ids"]
    assert pieces[2] == with_space  # a word given alone reads as a word inside a sentence


def test_words_without_subwords_become_unk(minilm_tokenizer):
    tokenizer = minilm_tokenizer
    pieces = word_pieces(tokenizer, [["a", "", "\u200b", "b"], []])
    assert pieces[0][1] == pieces[0][2] == [tokenizer.unk_token_id]
    assert pieces[1] == []
    subwords = subword_batch(tokenizer, [["a", "", "\u200b", "b"], []])
    assert subwords.label_subword_index[0].tolist() == [1, 2, 3, 4]
    assert subwords.word_mask.sum(1).tolist() == [4, 0]


def test_overflow_raises_and_split_long_rows_covers_every_word(minilm_tokenizer):
    tokenizer = minilm_tokenizer
    words = ["well-known"] * 10  # 3 subwords each: 30 + 2 special
    subword_batch(tokenizer, [words], max_subwords=32)
    with pytest.raises(SubwordOverflowError, match="max_subwords=31"):
        subword_batch(tokenizer, [words], max_subwords=31)
    pieces = word_pieces(tokenizer, [words, ["a"]])
    spans = split_long_rows(pieces, max_subwords=11)  # 3 words (9 subwords) per piece
    assert spans == [(0, 0, 3), (0, 3, 6), (0, 6, 9), (0, 9, 10), (1, 0, 1)]
    with pytest.raises(SubwordOverflowError, match="alone"):
        split_long_rows(pieces, max_subwords=4)


def test_refuses_what_it_cannot_load(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a local directory"):
        load_encoder("bert-base-uncased")  # never a hub download
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_encoder(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    with pytest.raises(ValueError):
        load_encoder(tmp_path)


def test_saved_tokenizer_files_do_not_depend_on_its_last_call(tmp_path):
    """A fast tokenizer keeps the padding and truncation of its last call; the files a model directory gets must be
    the same whether it was used before (a finished run) or not (a run resumed from its last checkpoint)."""
    tokenizer = load_tokenizer(default_checkpoint_dir())
    save_encoder_files(transformers.AutoConfig.from_pretrained(default_checkpoint_dir()), tokenizer, tmp_path / "fresh")
    tokenizer(["so i do"], padding="max_length", truncation=True, max_length=16)
    assert tokenizer.backend_tokenizer.padding is not None
    config = transformers.AutoConfig.from_pretrained(default_checkpoint_dir())
    save_encoder_files(config, tokenizer, tmp_path / "used")
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        assert (tmp_path / "used" / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), name
    assert json.loads((tmp_path / "used" / "tokenizer.json").read_text())["padding"] is None
    assert tokenizer(["so i do"], padding="max_length", max_length=8)["input_ids"][0][-1] == tokenizer.pad_token_id
