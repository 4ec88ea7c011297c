"""What a finished training run leaves: the self-contained model directory that ``punctuate`` loads.

::

    model.pt             the best weights by dev F1, or the last step's (``train.keep``; a torch state dict)
    config.json          the model's and the training's settings, labels, vector_dim, vocab_size, window, stride,
                         the run's fingerprint and its figures (no wall-clock time: the directory is the same
                         bytes whenever the same run is repeated, so DVC can check a rerun by its hash)
    embedder/            the token lookup of the features it was trained on (inference.model_dir)
    encoder/             for a model over a pretrained encoder: its config.json and tokenizer files, and for
                         encoder_tagger the TorchScript trace of the encoder with model.pt's weights (traced.pt)
    history.csv          the learning curve; learning_curves.png draws it

The best weights are read back before they are copied: a best model cut short (full disk, killed copy) falls
back to the previous best, then to the last weights, each with a warning naming the unreadable file.
"""

from __future__ import annotations

import csv
import json
import logging
import shutil
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from inference.model_dir import CONFIG_FILE, EMBEDDER_DIR, WEIGHTS_FILE
from training.checkpoints import atomic_torch_save, load_checkpoint

log = logging.getLogger(__name__)

HISTORY_COLUMNS = ("step", "epoch", "train_loss", "dev_loss", "dev_f1", "lr")
#: the learning curve in a model directory
HISTORY_FILE = "history.csv"


def dev_evaluations(history_csv: Path) -> int:
    """How many dev evaluations a run made, as its ``history.csv`` records them (every ``eval_every_steps``, at each
    epoch's end and at the run's end: the rows with a ``dev_f1``)."""
    with open(history_csv, newline="", encoding="utf-8") as handle:
        return sum(1 for row in csv.DictReader(handle) if row["dev_f1"] != "")


def best_weights(best_path: Path, state: dict[str, Any]) -> tuple[Path | None, dict[str, Any]]:
    """The file holding the best weights and the ``{best_f1, best_step}`` it stands for (``None``: the model's
    last weights), given the run's ``state`` (``best_f1``, ``best_step``, ``previous_best``, ``history``)."""

    def check(content: Any) -> None:
        if not isinstance(content, dict) or not all(isinstance(v, torch.Tensor) for v in content.values()):
            raise TypeError("not a state dict")

    loaded = load_checkpoint(best_path, map_location="cpu", weights_only=True, check=check)
    if loaded is not None and loaded[1] == best_path:
        return best_path, {"best_f1": state["best_f1"], "best_step": state["best_step"]}
    if loaded is not None and state.get("previous_best"):
        f1, step = state["previous_best"]
        log.warning("%s: the best model (step %d) is unreadable; the model is the previous best, of step %d",
                    best_path, state["best_step"], step)
        return loaded[1], {"best_f1": f1, "best_step": step}
    last = next((row for row in reversed(state["history"]) if row.get("dev_f1") != ""), None)
    log.warning("%s: no readable best model; the model is the last weights (step %d)", best_path, state["step"])
    return None, {"best_f1": last["dev_f1"] if last else -1.0, "best_step": state["step"]}


def kept_weights(best_path: Path, state: dict[str, Any], keep: str
                 ) -> tuple[Path | None, dict[str, Any], dict[str, Any]]:
    """:func:`best_weights`, then which weights the model directory gets by ``keep`` (``train.keep``): the file
    ``best_weights`` names, or ``None`` (the model's last weights) for ``last``; and what the run's metrics record of
    that (nothing for ``best``, so the metrics of every run before the setting stay as they were)."""
    source, best = best_weights(best_path, state)
    if keep == "best":
        return source, best, {}
    return None, best, {"kept": {"rule": keep, "step": state["step"]}}


def write_model_dir(out_dir: Path, *, model: nn.Module, weights: Path | None, embedder: Path,
                    history: Sequence[dict[str, Any]], config: dict[str, Any]) -> Path:
    """Write the model directory ``out_dir``: ``weights`` (a state-dict file; ``None``: ``model``'s own
    weights), a copy of the ``embedder`` directory, ``history`` and ``config``."""
    from figures.plots import plot_learning_curves  # matplotlib: not on the way of `punctuate`

    out_dir.mkdir(parents=True, exist_ok=True)
    if weights is None:
        atomic_torch_save(model.state_dict(), out_dir / WEIGHTS_FILE, keep_previous=False)
    else:
        shutil.copyfile(weights, out_dir / WEIGHTS_FILE)
    embedder_dir = out_dir / EMBEDDER_DIR
    if embedder_dir.exists():
        shutil.rmtree(embedder_dir)
    shutil.copytree(embedder, embedder_dir)
    with open(out_dir / HISTORY_FILE, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=HISTORY_COLUMNS)
        writer.writeheader()
        writer.writerows(history)
    plot_learning_curves(out_dir / HISTORY_FILE, out_dir / "learning_curves.png")
    model.save_files(out_dir)  # what the model needs besides its weights (a pretrained encoder's tokenizer)
    (out_dir / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return out_dir
