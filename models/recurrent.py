"""Recurrent baselines: unidirectional ``lstm`` and bidirectional ``blstm`` taggers.

input layer (``InputLayer``: cached vectors projected to ``hidden``, or learned id embeddings when
vector_dim == 0) -> dropout -> ``layers`` LSTM layers (``hidden`` units per direction, packed sequences,
dropout between layers) -> position-wise classifier (dropout + linear).

The unidirectional model sees only the words up to the current one, the bidirectional one the whole
sentence.
"""

from __future__ import annotations

import torch
from torch import nn

from models.blocks import InputLayer, TokenClassifier
from models.encoders import ALL_REAL, RecurrentEncoder
from models.registry import PunctuationModel, register_model


class RecurrentPunctuator(PunctuationModel):
    """Shared body of ``lstm``/``blstm``; itself not registered."""

    bidirectional: bool = True

    def __init__(self, *, num_labels: int, vector_dim: int, vocab_size: int, hidden: int, layers: int,
                 dropout: float):
        super().__init__()
        self.input = InputLayer(vector_dim, vocab_size, hidden)
        self.dropout = nn.Dropout(dropout)
        self.encoder = RecurrentEncoder(hidden, hidden, layers, bidirectional=self.bidirectional,
                                        dropout=dropout, cell="lstm")
        self.classifier = TokenClassifier(self.encoder.output_dim, num_labels, dropout)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        states = self.encoder(self.dropout(self.input(batch)), batch["mask"], batch.get(ALL_REAL, False))
        return self.classifier(states)


@register_model("lstm")
class LSTMPunctuator(RecurrentPunctuator):
    bidirectional = False


@register_model("blstm")
class BLSTMPunctuator(RecurrentPunctuator):
    bidirectional = True
