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

    def _decode(self, previous_labels: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: the logits at every position, given the labels before it (``previous_labels``)."""
        # unscaled: the embedding's N(0, 1) entries already match the positions' and the memory's magnitude
        x = self.label_embedding(previous_labels)
        if self.aligned_memory:
            x = x + memory[:, :x.size(1)]
        x = self.decoder_positions(x)
        for layer in self.decoder:
            x = layer(x, memory, memory_mask)
        return self.classifier(x if self.decoder_norm is None else self.decoder_norm(x))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        labels = batch["labels"]
        start = torch.full_like(labels[:, :1], self.start_label)
        previous = torch.cat([start, labels[:, :-1]], dim=1)
        return self._decode(previous, self.encode(batch), batch["mask"])

    @torch.no_grad()
    def predict(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Greedy decoding, one position at a time: the memory's cross-attention keys/values projected once per
        batch, the self-attention's in caches allocated for the whole window (written in place), the positions
        read from one table. The same kernels at every position and no wait for the device: the labels decoded
        stay on it. The same computation, position by position, as :meth:`forward` fed its own output."""
        memory = self.encode(batch)
        mask = batch["mask"]
        batch_size, length = mask.shape
        positions = self.decoder_positions.positions(length, device=memory.device)
        states = [layer.start_decoding(memory, length) for layer in self.decoder]
        previous = torch.full((batch_size, 1), self.start_label, dtype=torch.long, device=memory.device)
        predicted = []
        for position in range(length):
            x = self.label_embedding(previous)
            if self.aligned_memory:
                x = x + memory[:, position:position + 1]
            x = self.decoder_positions(x, start=position, table=positions)
            for layer, state in zip(self.decoder, states):
                x = layer.step(x, position, mask, state)
            logits = self.classifier(x if self.decoder_norm is None else self.decoder_norm(x))
            previous = logits[:, -1].argmax(dim=-1, keepdim=True)
            predicted.append(previous)
        return torch.cat(predicted, dim=1)
