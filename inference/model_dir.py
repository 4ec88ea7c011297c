"""Loading a trained model directory quickly, with errors that name the file at fault.

A model directory, as training writes it::

    config.json          the model's settings, the training settings, labels, vector_dim, vocab_size, window, stride
    model.pt             the weights (a torch state dict)
    encoder/             a pretrained encoder's config.json and tokenizer files, for a model that has one, and
                         for encoder_tagger the encoder's TorchScript trace (traced.pt)
    embedder/            the token lookup (embeddings/embedder.py): embedder.json, vocab.txt and the vectors of
                         its vocabulary (word_vectors_words.txt + word_vectors_vectors.npy, memory-mapped);
                         speech.json when the model also reads a speech part

:func:`load_trained_model` rebuilds the model from ``config.json`` and ``model.pt`` and checks the embedder
directory against it, importing only torch, the model registry and numpy (not the training loop, gensim or
matplotlib), so that ``punctuate`` pays little more than ``import torch`` before it reads its input; on the CPU
a model whose directory holds its encoder's trace is rebuilt from it, without importing ``transformers``
(``traced=False``, as training and warm starts need, rebuilds the encoder that trains). A file that
is missing raises ``FileNotFoundError`` naming it; one that is there but unusable (a ``model.pt`` cut short by
an interrupted copy, a ``config.json`` that is not JSON, an embedder that does not fit the model) raises
:class:`ModelDirectoryError`, a ``ValueError`` naming it -- never a traceback from deep inside torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embeddings.store import EMBEDDER_DIR  # a model directory keeps its token embedder as the feature cache does

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.pt"
#: Keys of config.json the model is rebuilt from.
REQUIRED_CONFIG = ("model", "labels", "vector_dim", "vocab_size")

__all__ = ["ModelDirectoryError", "load_trained_model", "read_config", "to_device"]


class ModelDirectoryError(ValueError):
    """A trained model directory whose files are damaged or do not fit together (the message names the file)."""


def _read_json(path: Path, damaged: str = "") -> Any:
    """The JSON in ``path``; a file that is not JSON is a :class:`ModelDirectoryError` naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ModelDirectoryError(f"{path}: not valid JSON ({error}){damaged}") from error


def read_config(model_dir: str | Path) -> dict[str, Any]:
    """``config.json`` of a model directory, checked for the keys the model is rebuilt from."""
    model_dir = Path(model_dir)
    path = model_dir / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{model_dir}: not a trained model directory (no {CONFIG_FILE})")
    config = _read_json(path, "; the model directory is damaged")
    missing = [key for key in REQUIRED_CONFIG if not isinstance(config, dict) or key not in config]
    if missing:
        raise ModelDirectoryError(f"{path}: lacks {', '.join(missing)}; not a config written by training")
    return config


def _check_embedder(model_dir: Path, config: dict[str, Any]) -> None:
    """The embedder directory is there and fits the model (vocabulary size; its vector table, when it has one)."""
    directory = model_dir / EMBEDDER_DIR
    meta_path = directory / "embedder.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path}: missing; the model directory has no token embedder")
    meta = _read_json(meta_path)
    if meta.get("vocab_size") != config["vocab_size"]:
        raise ModelDirectoryError(f"{meta_path}: vocabulary of {meta.get('vocab_size')} ids, but the model in "
                                  f"{model_dir / CONFIG_FILE} has {config['vocab_size']}")
    table = meta.get("table")
    if table is None:
        return
    words = directory / f"{table['stem']}_words.txt"
    vectors = directory / f"{table['stem']}_vectors.npy"
    for path in (words, vectors):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing; the model directory's embedder is incomplete")
    try:
        shape = np.load(vectors, mmap_mode="r").shape
    except (OSError, ValueError) as error:
        raise ModelDirectoryError(f"{vectors}: cannot be read ({error}); truncated or damaged?") from error
    if shape != (table["rows"], table["dim"]):
        raise ModelDirectoryError(f"{vectors}: shape {shape}, {meta_path} records ({table['rows']}, {table['dim']})")


def load_trained_model(model_dir: str | Path, device: str = "cpu", *, traced: bool = True
                       ) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Rebuild the model saved in ``model_dir``; returns ``(model, config)``, the model in eval mode on ``device``.

    Checks ``config.json``, ``model.pt`` and the embedder directory (see the module docstring for the errors).
    ``traced``: on the CPU, a model that saved its encoder's TorchScript trace (``encoder_tagger``) is rebuilt
    from it, for inference only; ``False``: from the model's own code, as it trains.
    """
    from models import build_model  # every model module registers itself on import
    from models.registry import model_class

    model_dir = Path(model_dir)
    config = read_config(model_dir)
    _check_embedder(model_dir, config)
    weights = model_dir / WEIGHTS_FILE
    if not weights.is_file():
        raise FileNotFoundError(f"{weights}: missing; the model directory has no weights")
    try:
        # a model that keeps files of its own in the directory (a pretrained encoder's configuration and
        # tokenizer) is rebuilt from them
        cls = model_class(config["model"])
        if traced and getattr(cls, "traceable", False) and torch.device(device).type == "cpu":
            model_config = cls.config_for_loading(config["model"], model_dir, traced=True)
        else:
            model_config = cls.config_for_loading(config["model"], model_dir)
        model = build_model(model_config, num_labels=len(config["labels"]), vector_dim=int(config["vector_dim"]),
                            vocab_size=int(config["vocab_size"]))
    except FileNotFoundError as error:  # a file of the model's own that is missing (encoder/tokenizer.json): named
        if error.filename:
            raise FileNotFoundError(f"{error.filename}: missing; the model directory is incomplete") from error
        raise
    except (TypeError, ValueError, OSError) as error:
        raise ModelDirectoryError(f"{model_dir / CONFIG_FILE}: cannot build its model: {error}") from error
    try:
        state = torch.load(weights, map_location=device, weights_only=True)
    except Exception as error:  # noqa: BLE001 -- torch raises RuntimeError, EOFError, UnpicklingError, ... here
        size = os.path.getsize(weights)
        raise ModelDirectoryError(
            f"{weights}: cannot be read as model weights ({size:,} bytes; truncated or damaged? copy or train it "
            f"again): {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}") from error
    if not isinstance(state, dict):
        raise ModelDirectoryError(f"{weights}: holds a {type(state).__name__}, not a state dict of weights")
    try:
        model.load_state_dict(state)
    except RuntimeError as error:
        raise ModelDirectoryError(f"{weights}: does not fit the model of {model_dir / CONFIG_FILE}: "
                                  f"{str(error).splitlines()[0]}") from error
    model.to(device).eval()
    return model, config


def to_device(batch: dict, device: torch.device) -> dict:
    """The batch's tensors moved to ``device`` (other entries, such as the words, as they are)."""
    return {key: value.to(device, non_blocking=True) if isinstance(value, torch.Tensor) else value
            for key, value in batch.items()}
