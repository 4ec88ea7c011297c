"""``encoder_tagger``: a pretrained Transformer encoder read as a word tagger -- the punctuator ``punctuate`` uses.

The words of a window (benchmark tokens, ``do`` ``n't``) are tokenised by the checkpoint's own tokenizer
(:mod:`models.pretrained`); the encoder (any local BERT-, MiniLM-, RoBERTa- or MPNet-style checkpoint, through
``transformers``; by default the pinned MiniLM-L6) reads the subwords, and each word's label is read at one of
its subwords (``label_subword``: the first, or the last, nearer the boundary the mark stands at). A window
whose subwords exceed ``max_subwords`` is cut into spans that fit, never truncated.

Beside the words the model reads the batch's ``vectors`` -- the feature set's per-token inputs: the word
vectors, and for the timing-aware twin the timing cues after them (``combine: concat``) -- through one linear
layer into the word's state, **initialised at zero**. The text model therefore starts as the pure encoder, and
the twin started from it (:mod:`training.warm_start`: the new input columns start at zero) computes exactly
the text model's predictions before its first step, then learns to use the pause after each word.

Fine-tuned or frozen: ``freeze_layers`` keeps the embeddings and the first N layers fixed (0: fine-tune
everything; the encoder's layer count: a frozen feature extractor, run without gradients, whose forward pass
alone costs about a third of a fine-tuning step, so the head sees three times the words in the same minutes);
the weights it fine-tunes may take their own rate, ``train.encoder_lr`` (:attr:`EncoderTagger.pretrained_encoder`,
``training/optimizer.py``; for the speech model's tuning in ``reports/comparisons/speech_model_fine_tuned_encoder.md``:
both it and its control up about 1 F1 on Earnings-22 dev, the cues' value not);
``layers`` keeps only the first N layers of the checkpoint (a smaller, faster encoder); ``layer_mix`` reads a
learned weighted sum of every layer's states instead of the last layer's (ELMo's scalar mix: the upper layers
of a sentence-embedding checkpoint are tuned for pooling, the middle ones keep more syntax); ``head`` is a
linear classifier or a BiLSTM of ``head_hidden`` units per direction over the window's words;
``vector_mlp_hidden`` adds, beside the linear input of the vectors, an MLP over the word's state and its own and its
neighbours' vectors (a warm start may add it: it starts at zero output; measured for the speech model's cues in
``reports/comparisons/speech_model_cue_mlp.md``, no gain); ``vector_at_input`` adds the vectors, through one more
linear layer starting at zero, to the input embedding of each word's label subword, so the encoder's attention
reads them in every layer (``vector_at_input_first``: from that column on, such as the cues after the word vectors;
gradients pass through the frozen layers, a frozen encoder's too; the trace, which reads subword ids alone, is not
used: measured for the speech model's cues in ``reports/comparisons/speech_model_cues_at_input.md`` and
``speech_model_cues_alone_at_input.md``, about 0.2 to 0.4 F1 more cue value, not kept). The choice on a CPU budget
is measured: ``reports/encoder_choice.md``.

A trained model directory holds the encoder's ``config.json`` and tokenizer (``encoder/``) beside the weights,
so it rebuilds without the original checkpoint directory and without reading its weights twice. It also holds
the trained encoder's TorchScript trace (``encoder/traced.pt``, :mod:`models.traced_encoder`), which
``punctuate`` loads with the tokenizer read by ``tokenizers`` alone, without importing ``transformers``; training
and warm starts rebuild the ``transformers`` encoder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from models.blocks import TokenClassifier
from models.encoders import ALL_REAL, RecurrentEncoder
from models.pretrained import (
    INTERACTION_ATTENTION,
    LABEL_SUBWORDS,
    SubwordBatch,
    gather_words,
    load_encoder,
    max_positions,
    pack_pieces,
    place_words,
    save_encoder_files,
    split_long_rows,
    word_pieces,
)
from models.registry import PunctuationModel, register_model
from models.traced_encoder import TRACED_FILE, TracedEncoder, WordTokenizer, load_traced_encoder, save_trace

#: Where a model directory keeps the encoder's configuration and tokenizer.
ENCODER_FILES = "encoder"
#: What reads the word states: a linear classifier, or a BiLSTM over the window's words and then one
HEADS = ("linear", "blstm")
#: The model directory's weights (inference.model_dir.WEIGHTS_FILE), written before save_files is called.
WEIGHTS_FILE = "model.pt"


def encoder_attention_mask(encoder, attention_mask: torch.Tensor) -> torch.Tensor:
    """The attention mask to call a ``transformers`` ``encoder`` with, given the subwords' (N, S) bool mask.

    transformers turns a 2-D mask into the attention's 4-D one itself, and first asks whether it has any padding
    at all (to skip the mask): a read of the mask on the host, which on a GPU waits for the device at every call.
    A 4-D mask is used as it is, so it is made here, with the values transformers would make: a boolean
    (N, 1, 1, S) for ``sdpa``, 0 or the dtype's minimum added to the scores for ``eager`` and FF2's interaction
    attention (on the CPU the outputs and gradients are the same to the bit, tests/test_models_encoder_tagger.py).
    Other attention implementations get the 2-D mask, as before."""
    implementation = getattr(encoder.config, "_attn_implementation", None)
    keep = attention_mask[:, None, None, :]
    if implementation == "sdpa":
        return keep
    if implementation in ("eager", INTERACTION_ATTENTION):
        dtype = encoder.get_input_embeddings().weight.dtype
        return torch.where(keep, 0.0, torch.finfo(dtype).min).to(dtype)
    return attention_mask.long()


def place_word_rows(values: torch.Tensor, word_mask: torch.Tensor, spans: list[tuple[int, int, int]],
                    batch_size: int, length: int) -> torch.Tensor:
    """:func:`models.pretrained.place_words` (per-word values of the subword rows (N, W, ...) into the batch's
    rows (B, T, ...), zeros on padding) without index lists where every row is one subword row, as it is unless a
    row overflows ``max_subwords``: indexing a GPU tensor with Python lists copies the indices to the device
    and waits for the copy. The same values and gradients."""
    if len(spans) != batch_size:  # a row was cut into several spans (split_long_rows): put them back by index
        return place_words(values, spans, batch_size, length)
    kept = torch.where(word_mask.reshape(*word_mask.shape, *([1] * (values.dim() - 2))), values, 0.0)
    return F.pad(kept, [0, 0] * (values.dim() - 2) + [0, length - values.size(1)])


def span_word_rows(values: torch.Tensor, word_mask: torch.Tensor, spans: list[tuple[int, int, int]]) -> torch.Tensor:
    """The batch's per-token ``values`` (B, T, ...) laid out as the subword rows' words (N, W, ...), zeros past a
    row's words: the inverse of :func:`place_word_rows` (a row cut into spans gives each span its own words)."""
    width = word_mask.size(1)
    if len(spans) == values.size(0):  # every row is one subword row, of at most the batch's length
        rows = values[:, :width]
    else:
        rows = values.new_zeros(len(spans), width, *values.shape[2:])
        for n, (row, start, end) in enumerate(spans):
            rows[n, :end - start] = values[row, start:end]
    return torch.where(word_mask.reshape(*word_mask.shape, *([1] * (values.dim() - 2))), rows, 0.0)


def neighbour_vectors(vectors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The (B, T, D) ``vectors`` of each token's previous and next token, zeros past a row's ends (padding is
    zeros already)."""
    return F.pad(vectors, (0, 0, 1, 0))[:, :-1], F.pad(vectors, (0, 0, 0, 1))[:, 1:]


class PretrainedEncoderModel(PunctuationModel):
    """What every model over a pretrained encoder shares: its files in the model directory (the encoder's
    configuration and tokenizer, :data:`ENCODER_FILES`) and the rebuild from them without the checkpoint's
    weights; the words' subwords, and the batch's check. A subclass keeps the encoder's configuration in
    ``self.encoder_config`` and its tokenizer in ``self.tokenizer``."""

    reads_words = True
    training_only_settings = ("freeze_layers", "dropout")

    def word_pieces(self, words: list[list[str]]) -> list[list[list[int]]]:
        """:func:`models.pretrained.word_pieces` of ``words`` from a cache of each distinct word's subword ids.

        The tokenizer reads the words as given, one by one (``is_split_into_words``), so a word has the same
        subwords wherever it stands: each distinct word is tokenised once in the model's life instead of at every
        step, and a step's host work is a dictionary lookup per word. The lists are shared: read them only."""
        cache: dict[str, list[int]] | None = getattr(self, "_word_piece_cache", None)
        if cache is None:
            cache = self._word_piece_cache = {}
        new = sorted({word for row in words for word in row if word not in cache})
        if new:
            for word, pieces in zip(new, word_pieces(self.tokenizer, [[word] for word in new])):
                cache[word] = pieces[0]
        return [[cache[word] for word in row] for row in words]

    @staticmethod
    def check_words(words: list[list[str]], mask: torch.Tensor) -> None:
        """Each row of ``words`` holds exactly the real tokens of its row of ``mask``. Checked on the CPU; on a
        GPU the counts would have to come back from the device at every step, so there only that no row has more
        words than the mask has positions (the batch builders cut both from the same spans)."""
        counts = [len(row) for row in words]
        if mask.device.type == "cpu":
            wrong = mask.sum(dim=1).tolist() != counts
        else:
            wrong = len(words) != mask.size(0) or max(counts, default=0) > mask.size(1)
        if wrong:
            raise ValueError("batch['words'] does not match batch['mask']: each row must hold exactly its real words")

    def subwords_on_device(self, subwords: SubwordBatch) -> SubwordBatch:
        """The host-built subword tensors on the model's device, copied without waiting for the device."""
        device = self.classifier.linear.weight.device
        return SubwordBatch(*(t.to(device, non_blocking=True) for t in subwords))

    def save_files(self, model_dir: Path) -> None:
        save_encoder_files(self.encoder_config, self.tokenizer, Path(model_dir) / ENCODER_FILES)

    @classmethod
    def config_for_loading(cls, config: dict[str, Any], model_dir: Path) -> dict[str, Any]:
        files = Path(model_dir) / ENCODER_FILES
        if not files.is_dir():
            return config
        # the saved configuration already has the kept layers; the weights come from model.pt
        return {**config, "pretrained": str(files), "layers": None, "pretrained_weights": False}


@register_model("encoder_tagger")
class EncoderTagger(PretrainedEncoderModel):
    """Pretrained encoder -> each word's label subword (+ the word's input vector, zero-initialised) -> labels.

    ``traced``: ``pretrained`` is a model directory's ``encoder/`` folder and the encoder is its TorchScript trace
    (inference on the CPU only; :meth:`config_for_loading` with ``traced=True`` asks for it)."""

    #: Its model directory holds the encoder's trace (:meth:`save_files`), which inference may load instead.
    traceable = True
    #: Settings a warm start may add to a source without them, and the modules they add: those start at zero
    #: output, so the started model computes what the source computes (training.warm_start).
    warm_start_additions = {"vector_mlp_hidden": "vector_mlp", "vector_at_input": "vector_embed_input",
                            "vector_at_input_first": "vector_embed_input"}

    def __init__(self, *, num_labels: int, vector_dim: int, vocab_size: int, pretrained: str | None,
                 layers: int | None, freeze_layers: int, label_subword: str, dropout: float, max_subwords: int,
                 layer_mix: bool = False, head: str = "linear", head_hidden: int = 0, vector_mlp_hidden: int = 0,
                 vector_at_input: bool = False, vector_at_input_first: int = 0, pretrained_weights: bool = True,
                 traced: bool = False):
        super().__init__()
        del vocab_size  # the encoder has its own vocabulary
        if label_subword not in LABEL_SUBWORDS:
            raise ValueError(f"label_subword must be one of {LABEL_SUBWORDS}, got {label_subword!r}")
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        if head == "blstm" and head_hidden < 1:
            raise ValueError("head: blstm needs head_hidden >= 1 (units per direction)")
        if traced:
            if pretrained is None or layers is not None:
                raise ValueError("traced: pretrained must be a model directory's encoder folder, layers None")
            self.encoder = load_traced_encoder(pretrained)
            self.tokenizer = WordTokenizer.from_dir(pretrained)
            if self.encoder.layer_mix != layer_mix:
                raise ValueError(f"{Path(pretrained) / TRACED_FILE}: traced with layer_mix={self.encoder.layer_mix}, "
                                 f"but the model has layer_mix={layer_mix}")
        else:
            self.encoder, self.tokenizer = load_encoder(pretrained, layers=layers, dropout=dropout,
                                                        weights=pretrained_weights)
        self.encoder_config = self.encoder.config
        self.label_subword = label_subword
        self.max_subwords = int(max_subwords)
        limit = max_positions(self.encoder, self.tokenizer)
        if not 3 <= self.max_subwords <= limit:
            raise ValueError(f"max_subwords must lie in [3, {limit}] (the encoder's positions), got {max_subwords}")
        layer_count = int(self.encoder.config.num_hidden_layers)
        if not 0 <= freeze_layers <= layer_count:
            raise ValueError(f"freeze_layers must lie in [0, {layer_count}] (the encoder's layers), "
                             f"got {freeze_layers}")
        self.frozen = freeze_layers == layer_count
        if traced:
            self.frozen = True  # no gradients through the trace (and TracedEncoder refuses train())
        else:
            self._freeze(freeze_layers)
        width = int(self.encoder.config.hidden_size)
        # ELMo's scalar mix: a learned softmax-weighted sum of every layer's states (the embeddings' included),
        # starting as their mean; otherwise the last layer alone
        self.layer_weights: nn.Parameter | None = None
        if layer_mix:
            self.layer_weights = nn.Parameter(torch.zeros(layer_count + 1))
        self.vector_input: nn.Linear | None = None
        if vector_dim > 0:
            self.vector_input = nn.Linear(vector_dim, width)
            nn.init.zeros_(self.vector_input.weight)
            nn.init.zeros_(self.vector_input.bias)
        # vector_input moves the word's state by the same amount for a value whatever the words say (the head
        # reads the sum); this MLP reads the word's state with its own and its neighbours' vectors together, so a
        # pause may weigh by the words. Its output layer starts at zero: a warm start predicts as its source.
        self.vector_mlp: nn.Sequential | None = None
        if vector_mlp_hidden < 0 or (vector_mlp_hidden and vector_dim == 0):
            raise ValueError(f"vector_mlp_hidden must be >= 0, and > 0 only with input vectors (vector_dim "
                             f"{vector_dim}), got {vector_mlp_hidden}")
        if vector_mlp_hidden:
            self.vector_mlp = nn.Sequential(nn.Linear(width + 3 * vector_dim, vector_mlp_hidden), nn.GELU(),
                                            nn.Linear(vector_mlp_hidden, width))
            nn.init.zeros_(self.vector_mlp[2].weight)
            nn.init.zeros_(self.vector_mlp[2].bias)
        # the vectors in the encoder's input, at each word's label subword: its attention reads them in every layer.
        # It starts at zero, so a warm start predicts as its source. Gradients reach it through the encoder, frozen
        # or not (frozen weights stay fixed); the trace cannot carry them.
        # vector_at_input_first: the first of the vectors' columns it reads (the timing cues follow the word vectors)
        self.vector_embed_input: nn.Linear | None = None
        self.vector_at_input_first = int(vector_at_input_first)
        if vector_at_input:
            if vector_dim == 0 or traced or not 0 <= self.vector_at_input_first < vector_dim:
                raise ValueError(f"vector_at_input needs input vectors (vector_dim {vector_dim}), the encoder itself "
                                 f"(not its trace) and vector_at_input_first in [0, {vector_dim}), got "
                                 f"{vector_at_input_first}")
            self.vector_embed_input = nn.Linear(vector_dim - self.vector_at_input_first,
                                                int(self.encoder.config.hidden_size))
            nn.init.zeros_(self.vector_embed_input.weight)
            nn.init.zeros_(self.vector_embed_input.bias)
        self.head: RecurrentEncoder | None = None
        if head == "blstm":
            self.head = RecurrentEncoder(width, head_hidden, 1, bidirectional=True)
            width = self.head.output_dim
        self.classifier = TokenClassifier(width, num_labels, dropout)

    def _freeze(self, count: int) -> None:
        """Keep the embeddings and the first ``count`` layers fixed (none when ``count`` is 0)."""
        if count == 0:
            return
        embeddings = getattr(self.encoder, "embeddings", None)
        layers = getattr(getattr(self.encoder, "encoder", None), "layer", None)
        if embeddings is None or layers is None:
            raise ValueError(f"{type(self.encoder).__name__}: freeze_layers needs an encoder with .embeddings and "
                             ".encoder.layer (BERT-, RoBERTa- and MPNet-style)")
        frozen = [embeddings, *list(layers)[:count]]
        if count == len(layers):
            frozen = [self.encoder]
        for module in frozen:
            for parameter in module.parameters():
                parameter.requires_grad_(False)

    @property
    def pretrained_encoder(self) -> nn.Module:
        """The pretrained encoder's module: its weights train at ``train.encoder_lr`` where set (training.optimizer)."""
        return self.encoder

    @property
    def traced(self) -> bool:
        return isinstance(self.encoder, TracedEncoder)

    def save_files(self, model_dir: Path) -> None:
        """The encoder's configuration and tokenizer (:class:`PretrainedEncoderModel`), and its trace holding the
        weights of the directory's ``model.pt`` (written before; the model's own weights where there is none:
        training ends with the last weights, the directory keeps the best)."""
        if self.traced:
            raise ValueError("a model loaded from its encoder's trace cannot write a model directory; load it with "
                             "load_trained_model(..., traced=False)")
        super().save_files(model_dir)
        if self.vector_embed_input is not None:  # the trace reads subword ids alone, not the vectors beside them
            return
        files = Path(model_dir) / ENCODER_FILES
        with torch.random.fork_rng(devices=[]):  # its random initialisation leaves the generator as it was
            encoder, _ = load_encoder(files, weights=False)  # on the CPU, as the transformers path rebuilds it
        weights_path = Path(model_dir) / WEIGHTS_FILE
        if weights_path.is_file():
            state = torch.load(weights_path, map_location="cpu", weights_only=True)
            state = {key.removeprefix("encoder."): value for key, value in state.items() if key.startswith("encoder.")}
        else:
            state = self.encoder.state_dict()
        encoder.load_state_dict(state)
        save_trace(encoder, self.tokenizer, self.layer_weights is not None, files / TRACED_FILE)

    @classmethod
    def config_for_loading(cls, config: dict[str, Any], model_dir: Path, *, traced: bool = False) -> dict[str, Any]:
        """The settings that rebuild the model of ``model_dir``; ``traced``: from its encoder's trace when the
        directory has one (older directories do not)."""
        config = super().config_for_loading(config, model_dir)
        if traced and not config.get("vector_at_input") and (Path(model_dir) / ENCODER_FILES / TRACED_FILE).is_file():
            return {**config, "traced": True}
        return config

    def train(self, mode: bool = True):
        super().train(mode)
        if self.frozen:  # a frozen feature extractor keeps its dropout off
            self.encoder.eval()
        return self

    def _subwords(self, words: list[list[str]]) -> tuple[SubwordBatch, list[tuple[int, int, int]]]:
        pieces = self.word_pieces(words)
        spans = split_long_rows(pieces, self.max_subwords)
        subwords = pack_pieces(self.tokenizer, [pieces[r][s:e] for r, s, e in spans], self.max_subwords,
                               self.label_subword)
        return self.subwords_on_device(subwords), spans

    def _encoder_inputs(self, batch: dict, subwords: SubwordBatch, spans: list[tuple[int, int, int]]
                        ) -> dict[str, torch.Tensor]:
        """The encoder's input: the subword ids, or with ``vector_at_input`` their embeddings with each word's
        vectors, projected, added at its label subword (before the positions and the embeddings' LayerNorm)."""
        if self.vector_embed_input is None:
            return {"input_ids": subwords.input_ids}
        embeddings = self.encoder.get_input_embeddings()(subwords.input_ids)
        vectors = batch["vectors"][..., self.vector_at_input_first:].to(embeddings.device)
        vectors = span_word_rows(vectors, subwords.word_mask, spans)
        shift = self.vector_embed_input(vectors) * subwords.word_mask.unsqueeze(-1)
        index = subwords.label_subword_index.unsqueeze(-1).expand_as(shift)
        return {"inputs_embeds": embeddings.scatter_add(1, index, shift.to(embeddings.dtype))}

    def forward(self, batch: dict) -> torch.Tensor:
        words = batch.get("words")
        if words is None:
            raise KeyError("encoder_tagger reads the batch's 'words' (make_batch(..., words=...))")
        mask = batch["mask"]
        self.check_words(words, mask)
        subwords, spans = self._subwords(words)
        mix = self.layer_weights is not None
        # a frozen encoder runs without gradients, unless they must reach the vectors at its input
        with torch.set_grad_enabled(torch.is_grad_enabled() and not (self.frozen and self.vector_embed_input is None)):
            if self.traced:  # a tensor: the last layer's states, or every layer's stacked
                last = layers = self.encoder(subwords.input_ids, subwords.attention_mask.long())
            else:
                output = self.encoder(**self._encoder_inputs(batch, subwords, spans),
                                      attention_mask=encoder_attention_mask(self.encoder, subwords.attention_mask),
                                      output_hidden_states=mix)
                last, layers = output.last_hidden_state, output.hidden_states
        if not mix:
            states = last
        else:
            weights = torch.softmax(self.layer_weights, dim=0)
            states = sum(weight * layer for weight, layer in zip(weights, layers))
        word_states = place_word_rows(gather_words(states, subwords.label_subword_index), subwords.word_mask, spans,
                                      len(words), mask.size(1))
        if self.vector_input is not None:
            vectors = batch["vectors"].to(word_states.device)
            shift = self.vector_input(vectors)
            if self.vector_mlp is not None:
                shift = shift + self.vector_mlp(torch.cat([word_states, *neighbour_vectors(vectors), vectors], -1))
            word_states = word_states + shift
        if self.head is not None:
            word_states = self.head(word_states, mask.to(word_states.device), batch.get(ALL_REAL, False))
        return self.classifier(word_states)
