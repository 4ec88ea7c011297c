"""Model registry: a model is selected by ``name`` in ``params.yaml`` (``experiment_defs.<name>.model``).

Adding a model = one file defining a :class:`PunctuationModel` subclass decorated with
``@register_model("name")``; ``models/__init__.py`` imports every module of the package, so the decorator
is the registry entry.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from models.blocks import masked_cross_entropy

MODEL_REGISTRY: dict[str, type["PunctuationModel"]] = {}


class PunctuationModel(nn.Module):
    """Interface every model implements.

    A batch is a dict of tensors: ``vectors`` (B, T, V) float input vectors (V may be 0), ``ids`` (B, T)
    long vocabulary ids, ``mask`` (B, T) bool, True on real tokens, and for training ``labels`` (B, T) long.
    Constructors take ``num_labels``, ``vector_dim``, ``vocab_size`` and the model's own hyper-parameters.
    Models that tokenise text themselves (pretrained language models) set ``reads_words = True`` and then
    also get ``words``: one list of token strings per row.
    """

    reads_words: bool = False
    #: Settings that change how the model trains, not its weights (which layers are frozen): a warm start may
    #: change them (training.warm_start compares the rest)
    training_only_settings: tuple[str, ...] = ()
    #: Settings a warm start may add to a source model that lacks them (absent, or 0 there), by the module each
    #: adds: a module whose output starts at zero, so the started model computes what the source computes
    warm_start_additions: dict[str, str] = {}

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:  # pragma: no cover - interface
        """Label logits (B, T, num_labels) given the whole batch (teacher forcing where a model needs it)."""
        raise NotImplementedError

    def loss(self, batch: dict[str, torch.Tensor], label_smoothing: float = 0.0) -> torch.Tensor:
        return masked_cross_entropy(self(batch), batch["labels"], batch["mask"], label_smoothing)

    @torch.no_grad()
    def predict(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Predicted label ids (B, T). Models without a label decoder take the arg-max of the logits."""
        return self(batch).argmax(dim=-1)

    # A model directory is self-contained: a model that needs files besides its weights (a pretrained encoder's
    # configuration and tokenizer) writes them there and is rebuilt from them.

    def save_files(self, model_dir: Path) -> None:
        """Write the files the model needs besides its weights into ``model_dir`` (default: none)."""

    @classmethod
    def config_for_loading(cls, config: dict[str, Any], model_dir: Path) -> dict[str, Any]:
        """The settings that rebuild the model saved in ``model_dir`` (before its weights are loaded); by
        default the settings it was trained with."""
        return config


def register_model(name: str) -> Callable[[type[PunctuationModel]], type[PunctuationModel]]:
    def decorate(cls: type[PunctuationModel]) -> type[PunctuationModel]:
        if name in MODEL_REGISTRY:
            raise ValueError(f"model name {name!r} is registered twice")
        MODEL_REGISTRY[name] = cls
        return cls

    return decorate


def model_class(config: dict[str, Any]) -> type[PunctuationModel]:
    """The registered class of the model named ``config["name"]``."""
    name = config.get("name")
    if name not in MODEL_REGISTRY:
        raise ValueError(f"unknown model {name!r}; registered models: {sorted(MODEL_REGISTRY)}")
    return MODEL_REGISTRY[name]


def build_model(config: dict[str, Any], *, num_labels: int, vector_dim: int, vocab_size: int) -> PunctuationModel:
    """Instantiate the model named ``config["name"]`` with the rest of ``config`` as hyper-parameters.

    Unknown names and unknown or missing hyper-parameters are refused with a message listing what is valid.
    """
    cls = model_class(config)
    config = dict(config)
    name = config.pop("name")
    signature = inspect.signature(cls.__init__)
    accepted = {p for p in signature.parameters if p not in ("self", "num_labels", "vector_dim", "vocab_size")}
    unknown = sorted(set(config) - accepted)
    if unknown:
        raise ValueError(f"model {name!r} does not take {unknown}; it takes {sorted(accepted)}")
    missing = sorted(
        p for p in accepted
        if signature.parameters[p].default is inspect.Parameter.empty and p not in config
    )
    if missing:
        raise ValueError(f"model {name!r} needs {missing} in its params")
    return cls(num_labels=num_labels, vector_dim=vector_dim, vocab_size=vocab_size, **config)
