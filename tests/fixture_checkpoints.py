"""Tiny local checkpoint directories of three encoder families, made with transformers and tokenizers alone:
BERT (WordPiece), RoBERTa (byte-level BPE) and MPNet (WordPiece with <s>/</s>), random weights, a few hundred
vocabulary entries. What a user's own checkpoint directory looks like, at a size a test can load in a second."""

from __future__ import annotations

from pathlib import Path

import torch

WORDS = ("so i do n't think it 's well-known here today the a b c never ever say goodbye we 're going to see "
         "what happens next and then stop right there please").split()
ARCHITECTURES = ("bert", "roberta", "mpnet")


def _wordpiece_vocab(specials: list[str]) -> dict[str, int]:
    pieces = sorted({*WORDS, *"abcdefghijklmnopqrstuvwxyz'-", *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz'-"),
                     "n", "t", "s", "m", "re", "##t", "##s"})
    return {piece: index for index, piece in enumerate([*specials, *pieces])}


def make_checkpoint(directory: Path, architecture: str, *, layers: int = 2, seed: int = 0) -> Path:
    """Write a tiny random ``architecture`` checkpoint (config, safetensors weights, tokenizer) to ``directory``."""
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    if architecture == "bert":
        tokenizer = transformers.BertTokenizer(vocab=_wordpiece_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
        config_class, model_class = transformers.BertConfig, transformers.BertModel
    elif architecture == "mpnet":
        tokenizer = transformers.MPNetTokenizer(vocab=_wordpiece_vocab(["<s>", "<pad>", "</s>", "[UNK]", "<mask>"]))
        config_class, model_class = transformers.MPNetConfig, transformers.MPNetModel
    elif architecture == "roberta":
        import json

        from tokenizers import ByteLevelBPETokenizer

        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator([" ".join(WORDS)] * 20, vocab_size=300, min_frequency=1,
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        model = json.loads(bpe.to_str())["model"]
        merges = [tuple(merge) if isinstance(merge, list) else tuple(merge.split(" ")) for merge in model["merges"]]
        tokenizer = transformers.RobertaTokenizer(vocab=model["vocab"], merges=merges)
        config_class, model_class = transformers.RobertaConfig, transformers.RobertaModel
    else:
        raise ValueError(architecture)
    torch.manual_seed(seed)
    options = dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                   intermediate_size=64, max_position_embeddings=130, pad_token_id=tokenizer.pad_token_id,
                   initializer_range=0.3)  # weights large enough for attention that is not near uniform
    if architecture != "mpnet":
        options["type_vocab_size"] = 1 if architecture == "roberta" else 2
    model = model_class(config_class(**options))
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory
