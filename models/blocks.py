"""Building blocks shared by every model: attention, Transformer layers, input layers and classifier heads.

A model file combines these blocks; it never carries its own copy of one. Shapes use B = batch, T = tokens,
H = heads, D = model width.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


def sinusoidal_positions(length: int, dim: int, *, device: torch.device | None = None) -> torch.Tensor:
    """The fixed sine/cosine position table of Vaswani et al. (2017), shape (length, dim)."""
    position = torch.arange(length, dtype=torch.float32, device=device).unsqueeze(1)
    frequency = torch.exp(
        torch.arange(0, dim, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / dim)
    )
    table = torch.zeros(length, dim, device=device)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: dim // 2])
    return table


class PositionalEncoding(nn.Module):
    """Adds positions (offset by ``start`` for incremental decoding), then dropout.

    ``learned=0``: the fixed sinusoids of Vaswani et al.; ``learned=N``: a trained table of N positions (N(0, 1)
    at the start, like a word embedding), as in the most used public TensorFlow Transformer of 2017
    (Kyubyong/transformer, ``sinusoid=False``). A learned table cannot go beyond N: decoding windows must fit.
    """

    def __init__(self, dim: int, dropout: float, learned: int = 0):
        super().__init__()
        self.dim = dim
        self.dropout = nn.Dropout(dropout)
        self.table = nn.Embedding(learned, dim) if learned > 0 else None

    def positions(self, length: int, *, device: torch.device | None = None) -> torch.Tensor:
        """The (length, dim) table of positions 0 .. length - 1 (computed once for a whole decoding: ``table=``)."""
        if self.table is None:
            return sinusoidal_positions(length, self.dim, device=device)
        if length > self.table.num_embeddings:
            raise ValueError(f"{length} positions, but the learned position table has "
                             f"{self.table.num_embeddings}: decode with windows of at most that many tokens")
        return self.table.weight[:length]

    def forward(self, x: torch.Tensor, start: int = 0, table: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` (B, T, D) at positions ``start`` .. ``start + T - 1``; ``table``: :meth:`positions` of at least
        that many (else computed here)."""
        if table is None:
            table = self.positions(start + x.size(1), device=x.device)
        return self.dropout(x + table[start:start + x.size(1)].unsqueeze(0))


def causal_mask(length: int, *, device: torch.device | None = None) -> torch.Tensor:
    """Boolean (length, length) mask, True where query i may attend to key j (j <= i)."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


class RelativePositionBias(nn.Module):
    """A learned score bias per head and clipped relative distance (Shaw et al. 2018; T5 shares one per stack).

    ``bias[h, i, j] = table[clip(j - i, -window, window), h]``. With absolute sinusoidal positions alone, a
    head must learn query/key projections that implement "look at the next word" before it can use the right
    context that punctuation depends on (the mark after a word is mostly decided by the word that follows);
    one scalar per distance makes that pattern directly learnable.

    Adam moves a parameter by about the learning rate per step, so a zero-initialised table would need
    thousands of steps to become a useful bias; it therefore starts as a locality prior. A symmetric prior
    (ALiBi, Press et al. 2022) mixes the words on both sides alike, and a head still has to learn which side
    it looks at, so the first two heads start pointed: head 0 at the next word and head 1 at the previous one
    (a penalty of ``POINTED_SLOPE`` per token away from it); the others penalise distance linearly with slope
    2^-(h-1), from the neighbours to the whole window. Training then reshapes every head's profile.
    """

    #: score penalty per token away from a pointed head's word: exp(-3) ~ 5 % of the weight one token off
    POINTED_SLOPE = 3.0

    def __init__(self, heads: int, window: int):
        super().__init__()
        self.window = window
        offset = torch.arange(-window, window + 1, dtype=torch.float32)
        columns = []
        for head in range(heads):
            if head < 2 and heads > 2:
                target = 1.0 if head == 0 else -1.0
                columns.append(-(offset - target).abs() * self.POINTED_SLOPE)
            else:
                columns.append(-offset.abs() * 2.0 ** -(head - 1 if heads > 2 else head + 1))
        self.table = nn.Parameter(torch.stack(columns, dim=1))

    def forward(self, length: int) -> torch.Tensor:
        """The (heads, length, length) bias to add to the attention scores."""
        position = torch.arange(length, device=self.table.device)
        distance = (position[None, :] - position[:, None]).clamp(-self.window, self.window) + self.window
        return self.table[distance].permute(2, 0, 1)


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention, optionally with *interaction* between heads.

    With ``interaction=True`` (FF2, Wu et al.) the heads' score maps are mixed by a learned H x H matrix
    before the softmax: ``scores_h + sum_g M[h, g] * scores_g``. The residual form means an all-zero ``M``
    is exactly standard attention; ``M`` starts near zero (std 0.1 / sqrt(d_head)) so training starts from
    standard attention.

    Step-by-step decoding projects keys/values once (:meth:`key_values`: the memory's for cross-attention, or
    the newest position's, written into a preallocated cache) and attends over them (:meth:`attend`).
    """

    def __init__(self, dim: int, heads: int, dropout: float = 0.0, *, interaction: bool = False):
        super().__init__()
        if dim % heads:
            raise ValueError(f"model width {dim} is not divisible by {heads} heads")
        self.dim, self.heads, self.head_dim = dim, heads, dim // heads
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.output = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)
        self.head_mixing: nn.Parameter | None = None
        if interaction:
            self.head_mixing = nn.Parameter(torch.randn(heads, heads) * (0.1 / math.sqrt(self.head_dim)))

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.heads, self.head_dim).transpose(1, 2)

    def key_values(self, key_value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The projected keys and values of ``key_value`` (B, Tk, D), each (B, H, Tk, D / H)."""
        return self._split(self.key(key_value)), self._split(self.value(key_value))

    def forward(
        self,
        query: torch.Tensor,
        key_value: torch.Tensor,
        *,
        key_mask: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from ``query`` (B, Tq, D) over ``key_value`` (B, Tk, D).

        ``key_mask`` (B, Tk) is True for real keys; ``attention_mask`` (Tq, Tk) is True where a query may
        look (e.g. :func:`causal_mask`); ``position_bias`` (H, Tq, Tk) is added to the scores (e.g.
        :class:`RelativePositionBias`). Returns the output (B, Tq, D) and the weights (B, H, Tq, Tk).
        """
        k, v = self.key_values(key_value)
        return self.attend(query, k, v, key_mask=key_mask, attention_mask=attention_mask,
                           position_bias=position_bias)

    def attend(
        self,
        query: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        *,
        key_mask: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` over keys and values already projected (:meth:`key_values`, or a view of a cache)."""
        q = self._split(self.query(query)) / math.sqrt(self.head_dim)
        scores = q @ k.transpose(-1, -2)  # (B, H, Tq, Tk)
        if self.head_mixing is not None:
            scores = scores + torch.einsum("hg,bgqk->bhqk", self.head_mixing, scores)
        if position_bias is not None:
            scores = scores + position_bias
        if key_mask is not None:
            scores = scores.masked_fill(~key_mask[:, None, None, :], float("-inf"))
        if attention_mask is not None:
            scores = scores.masked_fill(~attention_mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        # A query whose keys are all masked (padding) gets NaN from softmax; zero it instead.
        weights = torch.nan_to_num(weights, nan=0.0)
        attended = self.dropout(weights) @ v
        batch, _, length, _ = attended.shape
        attended = attended.transpose(1, 2).reshape(batch, length, self.dim)
        return self.output(attended), weights


ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}


class FeedForward(nn.Module):
    """Position-wise two-layer network (ReLU as in the Transformer; GELU for BERT-style pretrained layers)."""

    def __init__(self, dim: int, hidden: int, dropout: float, activation: str = "relu"):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), ACTIVATIONS[activation](), nn.Dropout(dropout),
                                 nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


NORMS = ("post", "pre")


class _Sublayer(nn.Module):
    """Residual connection + dropout + LayerNorm around one sublayer.

    ``norm="post"``: ``LayerNorm(x + sublayer(x))``, as in the original Transformer (and BERT); ``"pre"``:
    ``x + sublayer(LayerNorm(x))`` (Xiong et al. 2020: trains without a long warm-up). A layer calls
    :meth:`inputs` for what its sublayer reads and :meth:`forward` to add the update back.
    """

    def __init__(self, dim: int, dropout: float, norm_eps: float = 1e-5, norm: str = "post"):
        super().__init__()
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {', '.join(NORMS)}, got {norm!r}")
        self.pre = norm == "pre"
        self.norm = nn.LayerNorm(dim, eps=norm_eps)
        self.dropout = nn.Dropout(dropout)

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) if self.pre else x

    def forward(self, x: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        if self.pre:
            return x + self.dropout(update)
        return self.norm(x + self.dropout(update))


class TransformerEncoderLayer(nn.Module):
    """Self-attention + feed-forward; ``causal=True`` makes it a masked (left-to-right) layer.

    The layout (post-norm, names of the sublayers) matches BERT's, so pretrained BERT-style weights load
    into it (``activation="gelu"``, ``norm_eps=1e-12``).
    """

    def __init__(self, dim: int, heads: int, ffn: int, dropout: float, *, interaction: bool = False,
                 causal: bool = False, activation: str = "relu", norm_eps: float = 1e-5, norm: str = "post"):
        super().__init__()
        self.causal = causal
        self.attention = MultiHeadAttention(dim, heads, dropout, interaction=interaction)
        self.feed_forward = FeedForward(dim, ffn, dropout, activation)
        self.after_attention = _Sublayer(dim, dropout, norm_eps, norm)
        self.after_feed_forward = _Sublayer(dim, dropout, norm_eps, norm)

    def forward(self, x: torch.Tensor, mask: torch.Tensor,
                position_bias: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        attention_mask = causal_mask(x.size(1), device=x.device) if self.causal else None
        read = self.after_attention.inputs(x)
        attended, weights = self.attention(read, read, key_mask=mask, attention_mask=attention_mask,
                                           position_bias=position_bias)
        x = self.after_attention(x, attended)
        return self.after_feed_forward(x, self.feed_forward(self.after_feed_forward.inputs(x))), weights


class TransformerEncoder(nn.Module):
    """A stack of :class:`TransformerEncoderLayer`; returns the last layer and every layer's attention.

    ``relative_window > 0`` adds one :class:`RelativePositionBias` shared by the stack's layers. A pre-norm
    stack (``norm="pre"``) ends with a LayerNorm of its own, as its layers leave their sum unnormalised.
    """

    def __init__(self, layers: int, dim: int, heads: int, ffn: int, dropout: float, *,
                 interaction: bool = False, causal: bool = False, activation: str = "relu",
                 norm_eps: float = 1e-5, relative_window: int = 0, norm: str = "post"):
        super().__init__()
        self.relative_bias = RelativePositionBias(heads, relative_window) if relative_window > 0 else None
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(dim, heads, ffn, dropout, interaction=interaction, causal=causal,
                                    activation=activation, norm_eps=norm_eps, norm=norm)
            for _ in range(layers)
        )
        self.final_norm = nn.LayerNorm(dim, eps=norm_eps) if norm == "pre" else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        attention_maps = []
        bias = None if self.relative_bias is None else self.relative_bias(x.size(1))
        for layer in self.layers:
            x, weights = layer(x, mask, bias)
            attention_maps.append(weights)
        return (x if self.final_norm is None else self.final_norm(x)), attention_maps


class TransformerDecoderLayer(nn.Module):
    """Masked self-attention over the outputs so far, cross-attention to the encoder, feed-forward.

    :meth:`forward` reads every position at once (teacher forcing); greedy decoding calls :meth:`start_decoding`
    once per batch of windows and then :meth:`step` once per position, at O(T) cost per step instead of
    re-running the whole prefix: the memory's cross-attention keys/values are projected once, and the
    self-attention's keys/values live in a cache allocated for the whole window, written in place position by
    position (no tensor grows, nothing waits for the device).
    """

    def __init__(self, dim: int, heads: int, ffn: int, dropout: float, norm: str = "post"):
        super().__init__()
        self.self_attention = MultiHeadAttention(dim, heads, dropout)
        self.cross_attention = MultiHeadAttention(dim, heads, dropout)
        self.feed_forward = FeedForward(dim, ffn, dropout)
        self.after_self_attention = _Sublayer(dim, dropout, norm=norm)
        self.after_cross_attention = _Sublayer(dim, dropout, norm=norm)
        self.after_feed_forward = _Sublayer(dim, dropout, norm=norm)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor) -> torch.Tensor:
        read = self.after_self_attention.inputs(x)
        attended, _ = self.self_attention(read, read, attention_mask=causal_mask(x.size(1), device=x.device))
        return self._after_self_attention(x, attended, self.cross_attention.key_values(memory), memory_mask)

    def start_decoding(self, memory: torch.Tensor, length: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """The layer's decoding state for a batch of windows of ``length`` positions over ``memory`` (B, T, D):
        the memory's cross-attention keys/values (``"cross"``) and the self-attention's key/value cache
        (``"self"``, (B, H, length, D / H) each, filled by :meth:`step`; of the projections' dtype, also under
        autocast)."""
        keys, values = self.cross_attention.key_values(memory)
        shape = (memory.size(0), self.self_attention.heads, length, self.self_attention.head_dim)
        return {"cross": (keys, values), "self": (keys.new_empty(shape), values.new_empty(shape))}

    def step(self, x: torch.Tensor, position: int, memory_mask: torch.Tensor,
             state: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """The layer's output (B, 1, D) at ``position`` from its input there (B, 1, D); the positions before it
        were stepped through already (their keys/values are in ``state``, :meth:`start_decoding`)."""
        read = self.after_self_attention.inputs(x)
        keys, values = state["self"]
        k, v = self.self_attention.key_values(read)
        keys[:, :, position:position + 1] = k
        values[:, :, position:position + 1] = v
        attended, _ = self.self_attention.attend(read, keys[:, :, :position + 1], values[:, :, :position + 1])
        return self._after_self_attention(x, attended, state["cross"], memory_mask)

    def _after_self_attention(self, x: torch.Tensor, attended: torch.Tensor,
                              cross: tuple[torch.Tensor, torch.Tensor], memory_mask: torch.Tensor) -> torch.Tensor:
        """The rest of the layer after self-attention: cross-attention over the memory's projected keys/values
        ``cross`` (:meth:`MultiHeadAttention.key_values`), then the feed-forward sublayer."""
        x = self.after_self_attention(x, attended)
        attended, _ = self.cross_attention.attend(self.after_cross_attention.inputs(x), *cross, key_mask=memory_mask)
        x = self.after_cross_attention(x, attended)
        return self.after_feed_forward(x, self.feed_forward(self.after_feed_forward.inputs(x)))


class InputLayer(nn.Module):
    """Maps a token's input to the model width.

    With cached vectors (``vector_dim > 0``: GloVe, speech vectors, their sum) a linear projection, as in
    Yi & Tao (50 -> d_model); without (``vector_dim == 0``) an embedding table learned from token ids.
    """

    def __init__(self, vector_dim: int, vocab_size: int, dim: int):
        super().__init__()
        self.vector_dim = vector_dim
        if vector_dim > 0:
            self.projection: nn.Module = nn.Linear(vector_dim, dim)
        else:
            self.projection = nn.Embedding(vocab_size, dim, padding_idx=0)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.vector_dim > 0:
            return self.projection(batch["vectors"])
        return self.projection(batch["ids"])


class TokenClassifier(nn.Module):
    """Position-wise classifier head: dropout + linear to label logits."""

    def __init__(self, dim: int, num_labels: int, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(dim, num_labels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.dropout(x))


def masked_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor,
                         label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean token-level cross-entropy over real (unmasked) tokens: ``sum(loss * mask) / mask.sum()``.

    Weighted rather than selected (``logits[mask]``): boolean-mask indexing has a data-dependent shape, so on
    CUDA it waits for the device to count the mask on every call; this keeps every shape fixed and the whole
    loss on the device. Padded positions read logits 0 and label 0 with weight 0, so whatever a model leaves
    there (even NaN) reaches neither the loss nor the gradients; a batch without a real token has loss 0."""
    real = mask.reshape(-1)
    logits = torch.where(real[:, None], logits.reshape(-1, logits.size(-1)), 0.0)
    per_token = F.cross_entropy(logits, torch.where(real, labels.reshape(-1), 0), reduction="none",
                                label_smoothing=label_smoothing)
    return torch.where(real, per_token, 0.0).sum() / real.sum().clamp(min=1).to(per_token.dtype)
