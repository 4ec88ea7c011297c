"""Deep recurrent network with layer-wise multi-head attentions, DRNN-LWMA (Kim, ICASSP 2019).

Kim, S. "Deep recurrent neural networks with layer-wise multi-head attentions for punctuation
restoration", ICASSP 2019.

Architecture, per position t::

    input layer (InputLayer: linear projection of the cached vectors to ``hidden``, or a learned
                 embedding of the token ids when vector_dim == 0)
    -> ``layers`` stacked BiGRU layers            h^1_t .. h^n_t     (each 2 * hidden wide)
    -> a unidirectional GRU over the top layer     s_t               (the query of position t)
    -> for each layer l: ``heads``-head scaled dot-product attention of s_t over h^l_1..h^l_T
                                                   c^l_t             (layer-wise; with layerwise=False
                                                                      only over the top layer, c^n_t)
    -> softmax classifier over [s_t; c^1_t; ...; c^n_t]

Design choices (the paper leaves them open or they are ours):

* ``hidden`` is the size of EACH direction of every BiGRU layer (d = 256 in the paper), so a layer's
  output, and the attention width, is 2 * hidden.
* The attention is :class:`models.blocks.MultiHeadAttention`, which needs its width divisible by
  ``heads``. The working width is ``A = heads * ceil(2 * hidden / heads)``: with 2 * hidden divisible
  by ``heads`` (heads = 1, 2, 4 for d = 256) the layer outputs are used as they are; otherwise
  (heads = 3 or 5) each layer's outputs go through a learned linear map 2 * hidden -> A first (e.g.
  512 -> 513 for 3 heads, 515 for 5), so every head has ``A / heads`` dimensions. The query GRU has A
  units, so queries and keys have the same width. Each attention module has its own parameters
  (one per attended layer); its output (heads concatenated, then the output projection) is the
  layer's context vector c^l_t.
* Attention looks at every real position of the sentence (keys at padding are masked out); the query
  GRU is causal (left to right) like the paper's unidirectional GRU.
* ``dropout`` (0.5 in the paper) is applied to the input layer's output, between BiGRU layers, to the
  query GRU's input and before the classifier; not to the attention weights.
* GloVe-initialised vs randomly-initialised word embeddings (compared in the paper) is a data-side
  choice: feed cached GloVe vectors (vector_dim > 0) or token ids only (vector_dim == 0, learned
  embedding table); nothing in this model changes.

``attention_maps(batch)`` returns each attended layer's weights, name ``"layer<l>"`` (1 = lowest) ->
(B, heads, T, T), for the paper's per-layer attention figures (``models.analysis.attention_matrix``, drawn by
``figures.analysis.plot_attention_maps``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from models.blocks import InputLayer, MultiHeadAttention, TokenClassifier
from models.encoders import ALL_REAL, RecurrentEncoder, StackedBiGRU
from models.registry import PunctuationModel, register_model


@register_model("drnn_lwma")
class DRNNLWMA(PunctuationModel):
    def __init__(self, *, num_labels: int, vector_dim: int, vocab_size: int, hidden: int, layers: int,
                 heads: int, layerwise: bool, dropout: float):
        super().__init__()
        if layers < 1 or heads < 1 or hidden < 1:
            raise ValueError(f"drnn_lwma needs hidden, layers and heads >= 1, got {hidden}, {layers}, {heads}")
        self.layers, self.heads, self.layerwise = layers, heads, bool(layerwise)
        self.input = InputLayer(vector_dim, vocab_size, hidden)
        self.dropout = nn.Dropout(dropout)
        self.encoder = StackedBiGRU(hidden, hidden, layers, dropout)
        width = self.encoder.output_dim
        self.attention_dim = heads * math.ceil(width / heads)
        self.query_rnn = RecurrentEncoder(width, self.attention_dim, 1, bidirectional=False, cell="gru")
        #: indices (0 = lowest) of the BiGRU layers attended to
        self.attended_layers = list(range(layers)) if self.layerwise else [layers - 1]
        self.key_projections = nn.ModuleList(
            nn.Identity() if width == self.attention_dim else nn.Linear(width, self.attention_dim)
            for _ in self.attended_layers
        )
        self.attentions = nn.ModuleList(
            MultiHeadAttention(self.attention_dim, heads, dropout=0.0) for _ in self.attended_layers
        )
        self.classifier = TokenClassifier(self.attention_dim * (len(self.attended_layers) + 1), num_labels,
                                          dropout)

    def _run(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        mask, all_real = batch["mask"], batch.get(ALL_REAL, False)
        outputs = self.encoder(self.dropout(self.input(batch)), mask, all_real)
        query = self.query_rnn(self.dropout(outputs[-1]), mask, all_real)
        features, maps = [query], {}
        for index, projection, attention in zip(self.attended_layers, self.key_projections, self.attentions):
            context, weights = attention(query, projection(outputs[index]), key_mask=mask)
            features.append(context)
            maps[f"layer{index + 1}"] = weights
        return self.classifier(torch.cat(features, dim=-1)), maps

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self._run(batch)[0]

    @torch.no_grad()
    def attention_maps(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Attention weights per attended layer: ``"layer<l>"`` -> (B, heads, T_query, T_key).

        Rows of real queries sum to 1 over the real keys (padded keys get 0). Computed in the model's
        current mode: call ``.eval()`` first for deterministic maps.
        """
        return self._run(batch)[1]
