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
``layers`` keeps only the first N layers of the checkpoint (a smaller, faster encoder); ``layer_mix`` reads a
learned weighted sum of every layer's states instead of the last layer's (ELMo's scalar mix: the upper layers
of a sentence-embedding checkpoint are tuned for pooling, the middle ones keep more syntax); ``head`` is a
linear classifier or a BiLSTM of ``head_hidden`` units per direction over the window's words. The choice on a
CPU budget is measured: ``reports/encoder_choice.md``.

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

from models.blocks import TokenClassifier
from models.encoders import RecurrentEncoder
from models.pretrained import (
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


class PretrainedEncoderModel(PunctuationModel):
    """What every model over a pretrained encoder shares: its files in the model directory (the encoder's
    configuration and tokenizer, :data:`ENCODER_FILES`) and the rebuild from them without the checkpoint's
    weights. A subclass keeps the encoder's configuration in ``self.encoder_config`` and its tokenizer in
    ``self.tokenizer``."""

    reads_words = True
    training_only_settings = ("freeze_layers", "dropout")

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

    def __init__(self, *, num_labels: int, vector_dim: int, vocab_size: int, pretrained: str | None,
                 layers: int | None, freeze_layers: int, label_subword: str, dropout: float, max_subwords: int,
                 layer_mix: bool = False, head: str = "linear", head_hidden: int = 0,
                 pretrained_weights: bool = True, traced: bool = False):
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
        if traced and (Path(model_dir) / ENCODER_FILES / TRACED_FILE).is_file():
            return {**config, "traced": True}
        return config

    def train(self, mode: bool = True):
        super().train(mode)
        if self.frozen:  # a frozen feature extractor keeps its dropout off
            self.encoder.eval()
        return self

    def _subwords(self, words: list[list[str]]) -> tuple[SubwordBatch, list[tuple[int, int, int]]]:
        pieces = word_pieces(self.tokenizer, words)
        spans = split_long_rows(pieces, self.max_subwords)
        subwords = pack_pieces(self.tokenizer, [pieces[r][s:e] for r, s, e in spans], self.max_subwords,
                               self.label_subword)
        device = self.classifier.linear.weight.device
        return SubwordBatch(*(t.to(device) for t in subwords)), spans

    def forward(self, batch: dict) -> torch.Tensor:
        words = batch.get("words")
        if words is None:
            raise KeyError("encoder_tagger reads the batch's 'words' (make_batch(..., words=...))")
        mask = batch["mask"]
        if mask.sum(dim=1).tolist() != [len(row) for row in words]:
            raise ValueError("batch['words'] does not match batch['mask']: each row must hold exactly its real words")
        subwords, spans = self._subwords(words)
        mix = self.layer_weights is not None
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.frozen):
            if self.traced:  # a tensor: the last layer's states, or every layer's stacked
                last = layers = self.encoder(subwords.input_ids, subwords.attention_mask.long())
            else:
                output = self.encoder(input_ids=subwords.input_ids, attention_mask=subwords.attention_mask.long(),
                                      output_hidden_states=mix)
                last, layers = output.last_hidden_state, output.hidden_states
        if not mix:
            states = last
        else:
            weights = torch.softmax(self.layer_weights, dim=0)
            states = sum(weight * layer for weight, layer in zip(weights, layers))
        word_states = place_words(gather_words(states, subwords.label_subword_index), spans, len(words),
                                  mask.size(1))
        if self.vector_input is not None:
            word_states = word_states + self.vector_input(batch["vectors"].to(word_states.device))
        if self.head is not None:
            word_states = self.head(word_states, mask.to(word_states.device))
        return self.classifier(word_states)
