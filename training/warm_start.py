"""Starting a training run from a trained model directory: the speech model from the text model.

The default speech model (``punctuate.audio_model``) reads what the text model reads, the word
vectors, plus a few timing-cue columns (``combine: concat`` puts them after the word vector). Trained from
scratch, it has to learn the text task again beside the cues, and on a CPU budget it learns it less well: it
then loses to the text model whenever speech is missing. Started from the text model instead, with the new
input columns' weights at zero, it computes exactly the text model's predictions before its first step;
fine-tuning on cues that are missing for part of the text (the ``pauses`` settings) then teaches it to use them
without unlearning the text.

:func:`warm_start` copies every parameter of the source model into the new one. A parameter must have the same
shape in both, except a weight matrix whose *input* dimension grew (the input projection: more columns, same
rows): its source columns are copied and the new ones start at zero. The source must be the same model (name
and every setting but those the model declares training-only, ``training_only_settings``: which layers are
frozen, dropout; and the settings it declares it may add, ``warm_start_additions``, which add a module whose
output starts at zero), read the same word vectors (same source and OOV rule, per the embedders of both; the same
vocabulary too where the words are read as ids, :data:`ID_COLUMN_KEYS`) and put them first: anything else is a
:class:`WarmStartError` that names both directories.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from inference.model_dir import CONFIG_FILE, EMBEDDER_DIR, WEIGHTS_FILE, load_trained_model

#: Fields of embedder.json that decide the word-vector columns: equal in both, the columns mean the same.
WORD_COLUMN_KEYS = ("fingerprint", "oov", "dim")
#: ... and, for a model that reads token ids instead (no word vectors: ``dim`` 0, embeddings learned from the ids),
#: the vocabulary that numbers them. A word's vector is looked up by the word itself (its source's vector, or the OOV
#: rule's, seeded by the word), so two caches of one source drawn from other training text (their vocabularies
#: differ) give every word the same columns.
ID_COLUMN_KEYS = ("vocab_sha256",)


class WarmStartError(ValueError):
    """A source model that cannot start this run (the message names it and what does not fit)."""


def weights_sha256(model_dir: str | Path) -> str:
    """Content hash of a model directory's weights: part of a warm-started run's checkpoint fingerprint."""
    digest = hashlib.sha256()
    with open(Path(model_dir) / WEIGHTS_FILE, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def check_word_columns(source_dir: Path, features_dir: Path) -> None:
    """The source model's input columns are the first columns of the new run's features (see module docstring)."""
    source = _json(source_dir / EMBEDDER_DIR / "embedder.json")
    target = _json(features_dir / EMBEDDER_DIR / "embedder.json")
    keys = WORD_COLUMN_KEYS + (ID_COLUMN_KEYS if not source.get("dim") else ())
    differing = [key for key in keys if source.get(key) != target.get(key)]
    if differing:
        raise WarmStartError(
            f"{source_dir} cannot start a run on {features_dir}: their word vectors differ in "
            f"{', '.join(differing)} (the warm start keeps the source's input columns, so they must mean the same)")
    if _json(source_dir / EMBEDDER_DIR / "speech.json"):
        raise WarmStartError(f"{source_dir}: reads speech vectors; a warm start starts from a word-only model")
    speech = _json(features_dir / EMBEDDER_DIR / "speech.json")
    if speech and speech.get("combine") != "concat":
        raise WarmStartError(
            f"{features_dir}: adds its speech part to the word vectors (combine: {speech.get('combine')}); a warm "
            f"start needs the word vectors kept as they are (combine: concat)")


def warm_start(model: nn.Module, model_config: dict[str, Any], source_dir: str | Path,
               features_dir: str | Path) -> dict[str, Any]:
    """Load ``source_dir``'s weights into ``model`` (built from ``model_config`` for ``features_dir``).

    Returns what a model directory records of it: the source's path and weights hash, and the parameters that
    grew (with their old and new shapes).
    """
    source_dir, features_dir = Path(source_dir), Path(features_dir)
    source_model, source_config = load_trained_model(source_dir, traced=False)  # the encoder that trains
    free = set(getattr(model, "training_only_settings", ()))
    additions = getattr(model, "warm_start_additions", {})
    added = {setting: module for setting, module in additions.items()
             if model_config.get(setting) and not source_config["model"].get(setting)}
    free |= set(added)
    if {k: v for k, v in source_config["model"].items() if k not in free} != \
            {k: v for k, v in model_config.items() if k not in free}:
        raise WarmStartError(
            f"{source_dir / CONFIG_FILE}: its model {source_config['model']} is not this run's {model_config}; a "
            f"warm start needs the same model and settings"
            + (f" (only {', '.join(sorted(free))} may differ)" if free else ""))
    check_word_columns(source_dir, features_dir)
    source_state = source_model.state_dict()
    target_state = model.state_dict()
    new_modules = tuple(f"{module}." for module in added.values())
    missing = sorted((set(target_state) ^ set(source_state)) - {name for name in target_state
                                                                  if name.startswith(new_modules)})
    if missing:
        raise WarmStartError(f"{source_dir / WEIGHTS_FILE}: parameters {missing[:5]} are in only one of the models")
    grown = {}
    with torch.no_grad():
        for name, target in target_state.items():
            if name not in source_state:  # an added module's parameter (checked above): it keeps its own start
                continue
            source = source_state[name]
            if source.shape == target.shape:
                target.copy_(source)
            elif (source.dim() == 2 and source.shape[0] == target.shape[0]
                  and source.shape[1] < target.shape[1]):
                target.zero_()
                target[:, :source.shape[1]].copy_(source)
                grown[name] = [list(source.shape), list(target.shape)]
            else:
                raise WarmStartError(
                    f"{source_dir / WEIGHTS_FILE}: {name} has shape {list(source.shape)}, this run's "
                    f"{list(target.shape)}; only an input projection may grow (new input columns)")
    record = {"path": str(source_dir), "weights_sha256": weights_sha256(source_dir), "grown": grown}
    if added:
        record["added"] = sorted(added)
    return record
