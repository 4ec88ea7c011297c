"""FF2: a feature-fusion two-stream punctuator (Wu et al., "FF2: A Feature Fusion Two-Stream Framework for
Punctuation Restoration", 2022), and its masked-attention variant FFA.

Both models read the batch's ``words`` (one list of word strings per row) and tokenise them into subwords
with the pretrained checkpoint's tokenizer; ``vectors`` and ``ids`` are ignored (so the cached word vectors
play no part, and ``vector_dim``/``vocab_size`` are accepted only for the registry's interface).

* stream 1 - a pretrained encoder from a local checkpoint through ``transformers`` (:mod:`models.pretrained`:
  any BERT-, MiniLM-, RoBERTa- or MPNet-style checkpoint the ``encoder_tagger`` reads; all-MiniLM-L6-v2 by
  default) whose self-attention layers mix their heads' score maps (``interaction=True``, the FF2
  "interaction attention", :func:`models.pretrained.add_interaction`);
* stream 2 - ``ff2``: a small randomly initialised Transformer encoder (own subword embedding + sinusoidal
  positions) over the same subwords; ``ffa``: the same but with masked (causal, left-to-right) self-attention;
* fusion - the two streams' per-subword states are concatenated (width = pretrained width + ``second_dim``)
  and pass through one Transformer encoder layer (``fusion_heads``, ``fusion_ffn``); each word's state is
  read at its first subword and classified.

Ablations: ``use_pretrained_stream=False`` (stream 2 only; the checkpoint still supplies the tokenizer) and
``use_second_stream=False`` (stream 1 only). ``interaction`` only concerns stream 1.

R-Drop (``rdrop_alpha > 0``; Liang et al. 2021): in training, :meth:`loss` runs the batch twice with
independent dropout (as one doubled batch) and returns the mean cross-entropy of the two passes plus
``rdrop_alpha`` times the symmetric KL divergence between the two predicted label distributions, averaged
over real words. With ``rdrop_alpha = 0`` (or in eval mode) it is the plain cross-entropy of one pass.

A row whose subwords do not fit in ``max_subwords`` (with the special tokens) is cut into consecutive word spans
that do (:func:`models.pretrained.split_long_rows`), each encoded on its own; the words' logits are put
back in place. With the pipeline's ~100-word windows this never happens at ``max_subwords=256``. Like the
``encoder_tagger``, a trained model directory keeps the encoder's configuration and tokenizer.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from models.blocks import PositionalEncoding, TokenClassifier, TransformerEncoder, masked_cross_entropy
from models.encoder_tagger import PretrainedEncoderModel, encoder_attention_mask, place_word_rows
from models.pretrained import (
    SubwordBatch,
    add_interaction,
    gather_words,
    load_encoder,
    max_positions,
    pack_pieces,
    split_long_rows,
)
from models.registry import register_model


class _Prepared(NamedTuple):
    subwords: SubwordBatch                 # one row per span
    spans: list[tuple[int, int, int]]      # (batch row, first word, end word) of each subword row
    batch_size: int
    length: int                            # T of the output (the batch's mask width)


class TwoStreamPunctuator(PretrainedEncoderModel):
    """Shared implementation of ``ff2`` and ``ffa`` (they differ only in ``causal_second_stream``)."""

    causal_second_stream = False

    def __init__(self, *, num_labels: int, vector_dim: int, vocab_size: int, pretrained: str | None,
                 interaction: bool, use_pretrained_stream: bool, use_second_stream: bool, second_dim: int,
                 second_layers: int, second_heads: int, fusion_heads: int, fusion_ffn: int, dropout: float,
                 rdrop_alpha: float, max_subwords: int, layers: int | None = None, pretrained_weights: bool = True):
        super().__init__()
        del vector_dim, vocab_size  # the model reads words, not the cached vectors/ids
        if not (use_pretrained_stream or use_second_stream):
            raise ValueError("at least one of use_pretrained_stream and use_second_stream must be true")
        if rdrop_alpha < 0:
            raise ValueError(f"rdrop_alpha must be >= 0, got {rdrop_alpha}")
        self.rdrop_alpha = float(rdrop_alpha)
        self.max_subwords = int(max_subwords)
        # the encoder is built whatever the streams: its configuration and tokenizer are the model's subwords
        encoder, self.tokenizer = load_encoder(pretrained, layers=layers, dropout=dropout,
                                               weights=pretrained_weights and use_pretrained_stream)
        self.encoder_config = encoder.config
        limit = max_positions(encoder, self.tokenizer)
        if not 3 <= self.max_subwords <= limit:
            raise ValueError(f"max_subwords must lie in [3, {limit}] (the encoder's positions), got {max_subwords}")
        self.pretrained_stream: nn.Module | None = None
        if use_pretrained_stream:
            self.pretrained_stream = encoder
            if interaction:
                add_interaction(encoder, self.tokenizer)
        width = int(encoder.config.hidden_size) if use_pretrained_stream else 0
        self.second_embedding: nn.Embedding | None = None
        if use_second_stream:
            self.second_embedding = nn.Embedding(len(self.tokenizer), second_dim,
                                                 padding_idx=self.tokenizer.pad_token_id)
            self.second_positions = PositionalEncoding(second_dim, dropout)
            self.second_encoder = TransformerEncoder(second_layers, second_dim, second_heads, 4 * second_dim,
                                                     dropout, causal=self.causal_second_stream)
            self.second_scale = second_dim ** 0.5
            width += second_dim
        if width % fusion_heads:
            pretrained_width = encoder.config.hidden_size if use_pretrained_stream else 0
            raise ValueError(f"the fused width {width} (pretrained {pretrained_width} + second_dim "
                             f"{second_dim if use_second_stream else 0}) is not divisible by fusion_heads={fusion_heads}")
        self.fusion = TransformerEncoder(1, width, fusion_heads, fusion_ffn, dropout)
        self.classifier = TokenClassifier(width, num_labels, dropout)
        self.num_labels = num_labels

    # -- inputs -------------------------------------------------------------------------------------------

    def _prepare(self, batch: dict) -> _Prepared:
        words = batch.get("words")
        if words is None:
            raise KeyError(f"{type(self).__name__} reads the batch's 'words' (make_batch(..., words=...))")
        length = max((len(row) for row in words), default=0)
        if "mask" in batch:
            self.check_words(words, batch["mask"])
            length = batch["mask"].size(1)
        pieces = self.word_pieces(words)
        spans = split_long_rows(pieces, self.max_subwords)
        subwords = pack_pieces(self.tokenizer, [pieces[r][s:e] for r, s, e in spans], self.max_subwords)
        return _Prepared(self.subwords_on_device(subwords), spans, len(words), length)

    # -- streams ------------------------------------------------------------------------------------------

    def second_stream_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor
                             ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Stream 2's per-subword states (N, S, second_dim) and its attention maps."""
        x = self.second_positions(self.second_embedding(input_ids) * self.second_scale)
        return self.second_encoder(x, attention_mask)

    def _encode(self, subwords: SubwordBatch, *, maps_wanted: bool = False
                ) -> tuple[torch.Tensor, dict[str, list[torch.Tensor]]]:
        """Per-word logits (N, T_words, labels) of each subword row, and every attention map."""
        states, maps = [], {}
        if self.pretrained_stream is not None:
            output = self.pretrained_stream(
                input_ids=subwords.input_ids,
                attention_mask=encoder_attention_mask(self.pretrained_stream, subwords.attention_mask),
                output_attentions=maps_wanted)
            states.append(output.last_hidden_state)
            if maps_wanted and output.attentions:
                maps["pretrained"] = list(output.attentions)
        if self.second_embedding is not None:
            hidden, maps["second"] = self.second_stream_states(subwords.input_ids, subwords.attention_mask)
            states.append(hidden)
        fused, maps["fusion"] = self.fusion(torch.cat(states, dim=-1), subwords.attention_mask)
        return self.classifier(gather_words(fused, subwords.label_subword_index)), maps

    @staticmethod
    def _place(logits: torch.Tensor, prepared: _Prepared) -> torch.Tensor:
        """Word logits of the span rows (N, T_words, L) put back into the batch's rows (B, T, L); zeros on padding."""
        return place_word_rows(logits, prepared.subwords.word_mask, prepared.spans, prepared.batch_size,
                               prepared.length)

    def forward(self, batch: dict) -> torch.Tensor:
        prepared = self._prepare(batch)
        logits, _ = self._encode(prepared.subwords)
        return self._place(logits, prepared)

    @torch.no_grad()
    def attention_maps(self, batch: dict) -> dict:
        """Attention weights of every layer: ``{"pretrained"|"second"|"fusion": [(N, H, S, S), ...]}`` over the
        subword rows, plus ``"subwords"`` (the :class:`SubwordBatch`, whose ids name the tokens) and ``"spans"``."""
        prepared = self._prepare(batch)
        _, maps = self._encode(prepared.subwords, maps_wanted=True)
        return {**maps, "subwords": prepared.subwords, "spans": prepared.spans}

    # -- training -----------------------------------------------------------------------------------------

    def rdrop_terms(self, batch: dict, label_smoothing: float = 0.0
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(loss, mean cross-entropy of two passes, symmetric KL)`` with ``loss = ce + rdrop_alpha * kl``.

        Both terms are means over the real words, taken as weighted sums over every position (weight 0 on
        padding) rather than over the selected real positions: the same values, without a boolean-mask selection
        whose data-dependent size makes a GPU wait for the device at every step."""
        prepared = self._prepare(batch)
        doubled = SubwordBatch(*(torch.cat([t, t]) for t in prepared.subwords))
        logits, _ = self._encode(doubled)
        first, second = logits.chunk(2)
        mask, labels = batch["mask"].to(logits.device), batch["labels"].to(logits.device)
        first, second = self._place(first, prepared), self._place(second, prepared)
        ce = 0.5 * (masked_cross_entropy(first, labels, mask, label_smoothing)
                    + masked_cross_entropy(second, labels, mask, label_smoothing))
        real = mask.reshape(-1, 1)
        log_p = torch.where(real, F.log_softmax(first.reshape(-1, first.size(-1)), dim=-1), 0.0)
        log_q = torch.where(real, F.log_softmax(second.reshape(-1, second.size(-1)), dim=-1), 0.0)
        # kl_div(a, b, log_target=True) summed over the labels is KL(b || a) per word; padded rows are 0 - 0
        words = real.sum().clamp(min=1).to(log_p.dtype)
        kl = 0.5 * (F.kl_div(log_p, log_q, reduction="sum", log_target=True)
                    + F.kl_div(log_q, log_p, reduction="sum", log_target=True)) / words
        return ce + self.rdrop_alpha * kl, ce, kl

    def loss(self, batch: dict, label_smoothing: float = 0.0) -> torch.Tensor:
        if self.training and self.rdrop_alpha > 0:
            return self.rdrop_terms(batch, label_smoothing)[0]
        logits = self(batch)
        return masked_cross_entropy(logits, batch["labels"].to(logits.device), batch["mask"].to(logits.device),
                                    label_smoothing)


@register_model("ff2")
class FF2Punctuator(TwoStreamPunctuator):
    """Interaction-attention pretrained stream + a tiny Transformer stream, fused by one Transformer layer."""

    causal_second_stream = False


@register_model("ffa")
class FFAPunctuator(TwoStreamPunctuator):
    """Interaction-attention pretrained stream + a masked (causal) self-attention stream."""

    causal_second_stream = True
