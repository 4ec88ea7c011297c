"""A trained encoder as a TorchScript trace, and its tokenizer through ``tokenizers`` alone: ``punctuate``'s start-up
without importing ``transformers``.

Importing ``transformers``' modelling code costs ``punctuate`` about two seconds before it reads a word. Training
therefore also writes the trained encoder's trace (:func:`save_trace`: ``encoder/traced.pt`` in the model
directory, traced with ``transformers`` at the end of the run) and inference reads it back with ``torch.jit``
(:func:`load_traced_encoder`) beside :class:`WordTokenizer`, the checkpoint's ``tokenizer.json`` read by
``tokenizers``. The weights still come from ``model.pt``: :class:`TracedEncoder`'s state dict has the keys of
the ``transformers`` encoder, so ``load_state_dict`` fills the trace from them.

The trace runs inference on the CPU only (``transformers``' mask code puts a ``cpu`` device constant into it;
dropout is traced off), and it is traced with a padded batch, so the padding-mask path is what it records.
Its bytes are the same whenever the same weights are traced: fresh TorchScript type names for each trace and no
debug records (they name the source files' absolute paths). torch 2.13 marks ``torch.jit`` deprecated (a
``DeprecationWarning`` at trace, save and load); it still works, and the tests check that it computes the same.
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Sequence

import torch
from torch import nn

#: The trace's file inside a model directory's ``encoder/`` folder.
TRACED_FILE = "traced.pt"
_META = "meta.json"  # the trace's extra record: layer_mix and the encoder's state-dict keys
_SPECIALS = ("unk", "pad", "cls", "sep")


class _EncoderStates(nn.Module):
    """What is traced: the encoder's last-layer states, or every layer's stacked (``layer_mix``)."""

    def __init__(self, encoder: nn.Module, layer_mix: bool):
        super().__init__()
        self.encoder = encoder
        self.layer_mix = layer_mix

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        output = self.encoder(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=self.layer_mix)
        return torch.stack(output.hidden_states) if self.layer_mix else output.last_hidden_state


@contextlib.contextmanager
def _fresh_type_names():
    """TorchScript names a traced module's types after those it already made in this process
    (``___torch_mangle_N``); a fresh compilation unit and type store make the names, and the bytes, the same."""
    import torch.jit._recursive as recursive
    import torch.jit._state as state

    saved = state._python_cu, recursive.concrete_type_store
    state._python_cu, recursive.concrete_type_store = torch._C.CompilationUnit(), recursive.ConcreteTypeStore()
    try:
        yield state._python_cu
    finally:
        state._python_cu, recursive.concrete_type_store = saved


def trace_encoder(encoder: nn.Module, tokenizer, layer_mix: bool) -> torch.jit.ScriptModule:
    """The TorchScript trace of ``encoder`` (eval mode, no gradients) taking ``(input_ids, attention_mask)`` and
    returning the last layer's states (N, S, D), or with ``layer_mix`` every layer's (L + 1, N, S, D). Traced on
    two rows of different lengths, so that the padding mask is applied as it is for any batch."""
    filler = tokenizer.unk_token_id if tokenizer.unk_token_id is not None else tokenizer.cls_token_id
    cls, sep, pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
    input_ids = torch.tensor([[cls, filler, filler, filler, sep], [cls, filler, sep, pad, pad]])
    attention_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    device = next(encoder.parameters()).device
    training = encoder.training
    try:
        with torch.no_grad(), warnings.catch_warnings(), _fresh_type_names() as unit:
            warnings.simplefilter("ignore", torch.jit.TracerWarning)  # Python values fixed by the trace
            warnings.simplefilter("ignore", FutureWarning)  # transformers' deprecated attributes, read by the tracer
            # verified against the encoder itself by the tests, on other batch sizes and widths
            return torch.jit.trace(_EncoderStates(encoder, layer_mix).eval(),
                                   (input_ids.to(device), attention_mask.to(device)), check_trace=False,
                                   _compilation_unit=unit)
    finally:
        encoder.train(training)


def trace_bytes(traced: torch.jit.ScriptModule, meta: dict) -> bytes:
    """``torch.jit.save``'s archive of ``traced`` (with ``meta`` as an extra record), less its debug records."""
    buffer = io.BytesIO()
    torch.jit.save(traced, buffer, _extra_files={_META: json.dumps(meta, sort_keys=True)})
    reader = torch._C.PyTorchFileReader(io.BytesIO(buffer.getvalue()))
    out = io.BytesIO()
    writer = torch._C.PyTorchFileWriter(out)
    for name in reader.get_all_records():
        if not name.endswith(".debug_pkl") and name != ".data/serialization_id":  # the writer makes its own id
            data = reader.get_record(name)
            writer.write_record(name, data, len(data))
    writer.write_end_of_file()
    del writer
    return out.getvalue()


def save_trace(encoder: nn.Module, tokenizer, layer_mix: bool, path: str | Path) -> Path:
    """Trace ``encoder`` (:func:`trace_encoder`) and write it to ``path``."""
    path = Path(path)
    meta = {"layer_mix": bool(layer_mix), "state_keys": list(encoder.state_dict())}
    path.write_bytes(trace_bytes(trace_encoder(encoder, tokenizer, layer_mix), meta))
    return path


class TracedEncoder(nn.Module):
    """A trace read back (:func:`load_traced_encoder`), called as ``encoder(input_ids, attention_mask)``; its
    state dict has the keys of the encoder it traced (the trace's own buffers that are not saved left out),
    ``config`` the encoder's ``config.json`` as a namespace. Inference only: ``train()`` is refused."""

    def __init__(self, traced: torch.jit.ScriptModule, state_keys: Sequence[str], layer_mix: bool,
                 config: SimpleNamespace):
        super().__init__()
        self.traced = traced
        self.state_keys = list(state_keys)
        self.layer_mix = layer_mix
        self.config = config
        self.register_state_dict_post_hook(_saved_keys)
        self.register_load_state_dict_pre_hook(_traced_keys)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        with torch.jit.optimized_execution(False):  # no profiling runs: shapes change at every call
            return self.traced(input_ids, attention_mask)

    def train(self, mode: bool = True):
        if mode:
            raise RuntimeError("this encoder_tagger was loaded from its encoder's TorchScript trace "
                               f"(encoder/{TRACED_FILE}), which runs inference only; to train or fine-tune it, "
                               "load the model directory with load_trained_model(..., traced=False)")
        return super().train(False)


_INSIDE = "traced.encoder."  # where the traced module keeps the encoder's weights


def _saved_keys(module: TracedEncoder, state_dict: dict, prefix: str, local_metadata) -> None:
    inner = {key[len(prefix + _INSIDE):]: state_dict.pop(key) for key in list(state_dict)
             if key.startswith(prefix + _INSIDE)}
    for key in module.state_keys:
        state_dict[prefix + key] = inner[key]


def _traced_keys(module: TracedEncoder, state_dict: dict, prefix: str, *args) -> None:
    for key in module.state_keys:
        if prefix + key in state_dict:
            state_dict[prefix + _INSIDE + key] = state_dict.pop(prefix + key)
    # buffers the encoder does not save (position ids) keep the trace's values
    for key, value in module.traced.state_dict().items():
        inner = key[len("encoder."):]
        if inner not in module.state_keys:
            state_dict.setdefault(prefix + "traced." + key, value)


def read_encoder_config(directory: str | Path) -> SimpleNamespace:
    """An encoder's ``config.json`` as a namespace (``hidden_size``, ``num_hidden_layers``, ...)."""
    return SimpleNamespace(**json.loads((Path(directory) / "config.json").read_text(encoding="utf-8")))


def load_traced_encoder(directory: str | Path) -> TracedEncoder:
    """The trace in ``directory`` (a model directory's ``encoder/``) with that directory's ``config.json``."""
    path = Path(directory) / TRACED_FILE
    extra = {_META: ""}
    try:
        traced = torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
        meta = json.loads(extra[_META])
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"{path}: cannot be read as the encoder's TorchScript trace (truncated or damaged? "
                         f"train the model again): {str(error).splitlines()[0] if str(error) else error}") from error
    return TracedEncoder(traced.eval(), meta["state_keys"], meta["layer_mix"], read_encoder_config(directory))


class WordTokenizer:
    """A checkpoint's fast tokenizer read with ``tokenizers`` alone (``tokenizer.json``; the special tokens and
    ``model_max_length`` from ``tokenizer_config.json`` and ``special_tokens_map.json``): what
    :func:`models.pretrained.word_pieces` and :func:`~models.pretrained.pack_pieces` use of a ``transformers``
    tokenizer, which it gives the same subwords as."""

    def __init__(self, backend, settings: dict):
        self.backend = backend
        self.backend.no_truncation()  # as transformers' call with truncation=False, padding=False
        self.backend.no_padding()
        for special in _SPECIALS:
            token = settings.get(f"{special}_token")
            token = token.get("content") if isinstance(token, dict) else token
            setattr(self, f"{special}_token_id", None if token is None else backend.token_to_id(token))
        self.model_max_length = settings.get("model_max_length")

    @classmethod
    def from_dir(cls, directory: str | Path) -> "WordTokenizer":
        from tokenizers import Tokenizer

        directory = Path(directory)
        settings: dict = {}
        for name in ("tokenizer_config.json", "special_tokens_map.json"):  # the second's tokens win, as in transformers
            if (directory / name).is_file():
                settings.update(json.loads((directory / name).read_text(encoding="utf-8")))
        if not (directory / "tokenizer.json").is_file():  # tokenizers would say only "No such file or directory"
            raise FileNotFoundError(f"{directory / 'tokenizer.json'}: missing; the model directory's encoder files "
                                    "are incomplete (copy the whole model directory)")
        backend = Tokenizer.from_file(str(directory / "tokenizer.json"))
        pre_tokenizer = backend.pre_tokenizer
        if "ByteLevel" in type(pre_tokenizer).__name__ and not pre_tokenizer.add_prefix_space:
            pre_tokenizer.add_prefix_space = True  # as models.pretrained.load_tokenizer: words given one by one
            backend.pre_tokenizer = pre_tokenizer
        return cls(backend, settings)

    def encode_words(self, rows: Sequence[Sequence[str]]) -> list[tuple[list[int], list[int | None]]]:
        """Each row's subword ids (no special tokens) and the word each comes from."""
        encodings = self.backend.encode_batch([list(row) for row in rows], is_pretokenized=True,
                                              add_special_tokens=False)
        return [(encoding.ids, encoding.word_ids) for encoding in encodings]
