"""Self-attention encoder-decoder punctuator (Yi & Tao, ICASSP 2019).

The encoder reads the token vectors (GloVe, speech vectors, or their sum; linear projection to d_model plus
sinusoidal positions). The decoder reads the labels emitted so far (shifted right behind a start symbol)
with masked self-attention and attends to the encoder; training uses teacher forcing, inference greedy
decoding, one position at a time with cached keys/values.

Input and output are aligned one to one (a label per token), which the strict encoder-decoder must learn
through cross-attention alone (queries and keys matched by position). With ``aligned_memory=True`` the
decoder input at position t also receives the encoder state of token t, so the alignment is given rather than
learned; cross-attention still sees the whole sentence. ``False`` is the strict Transformer of the paper.
``input_scale`` multiplies the projected input vectors before the positions are added (the Transformer
scales its embeddings by sqrt(d_model) so that they are not drowned by the positions).
``relative_window > 0`` gives the encoder's self-attention a learned bias per head and relative distance
(up to that many tokens; :class:`models.blocks.RelativePositionBias`) on top of the sinusoidal positions;
0 is the paper's encoder.
``norm``: ``post`` (the paper's, after Vaswani et al.) or ``pre`` (LayerNorm before each sublayer, and once more
after each stack). ``learned_positions > 0``: a trained table of that many positions for the encoder and the
decoder instead of the sinusoids (Kyubyong/transformer's default); decoding windows must then fit in it.
The three default to the paper's choices, which model directories saved before them were trained with.
"""

from __future__ import annotations

import torch
from torch import nn

from models.blocks import (
    InputLayer,
    PositionalEncoding,
    TokenClassifier,
    TransformerDecoderLayer,
    TransformerEncoder,
)
from models.registry import PunctuationModel, register_model


@register_model("transformer")
class SelfAttentionPunctuator(PunctuationModel):
    def __init__(self, *, num_labels: int, vector_dim: int, vocab_size: int, d_model: int, heads: int,
                 ffn: int, encoder_layers: int, decoder_layers: int, dropout: float, aligned_memory: bool,
                 input_scale: float, relative_window: int = 0, norm: str = "post", learned_positions: int = 0):
        # relative_window, norm and learned_positions have defaults only so that model directories saved before
        # they existed still load
        super().__init__()
        self.num_labels = num_labels
        self.aligned_memory = aligned_memory
        self.start_label = num_labels  # an extra "label" id that starts every decoded sequence
        self.input = InputLayer(vector_dim, vocab_size, d_model)
        self.encoder_positions = PositionalEncoding(d_model, dropout, learned=learned_positions)
        self.encoder = TransformerEncoder(encoder_layers, d_model, heads, ffn, dropout,
                                          relative_window=relative_window, norm=norm)
        self.label_embedding = nn.Embedding(num_labels + 1, d_model)
        self.decoder_positions = PositionalEncoding(d_model, dropout, learned=learned_positions)
        self.decoder = nn.ModuleList(
            TransformerDecoderLayer(d_model, heads, ffn, dropout, norm=norm) for _ in range(decoder_layers)
        )
        self.decoder_norm = nn.LayerNorm(d_model) if norm == "pre" else None
        self.classifier = TokenClassifier(d_model, num_labels, dropout=0.0)
        self.input_scale = input_scale

    def encode(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        x = self.encoder_positions(self.input(batch) * self.input_scale)
        memory, _ = self.encoder(x, batch["mask"])
        return memory

    def _decode(self, previous_labels: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor,
                caches: list[dict] | None = None, start: int = 0) -> torch.Tensor:
        # unscaled: the embedding's N(0, 1) entries already match the positions' and the memory's magnitude
        x = self.label_embedding(previous_labels)
        if self.aligned_memory:
            x = x + memory[:, start:start + x.size(1)]
        x = self.decoder_positions(x, start=start)
        for i, layer in enumerate(self.decoder):
            x = layer(x, memory, memory_mask, cache=None if caches is None else caches[i])
        return self.classifier(x if self.decoder_norm is None else self.decoder_norm(x))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        labels = batch["labels"]
        start = torch.full_like(labels[:, :1], self.start_label)
        previous = torch.cat([start, labels[:, :-1]], dim=1)
        return self._decode(previous, self.encode(batch), batch["mask"])

    @torch.no_grad()
    def predict(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        memory = self.encode(batch)
        batch_size, length = batch["mask"].shape
        caches: list[dict] = [{} for _ in self.decoder]
        previous = torch.full((batch_size, 1), self.start_label, dtype=torch.long, device=memory.device)
        predicted = []
        for position in range(length):
            logits = self._decode(previous, memory, batch["mask"], caches, start=position)
            previous = logits[:, -1].argmax(dim=-1, keepdim=True)
            predicted.append(previous)
        return torch.cat(predicted, dim=1)
