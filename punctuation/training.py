"""Training a punctuation model from the cached token features.

The loop is seeded and deterministic (the window order of every epoch is a function of the seed and the
epoch), keeps the best checkpoint by dev F1 (greedy-decoded, scored like the benchmark), and can be killed
at any point: it resumes from the last checkpoint in ``state_dir`` when that checkpoint was made from the
same configuration and the same features (a fingerprint of both), and starts afresh otherwise.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import math
import os
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from corpus.labels import LABELS
from embeddings.sources import file_sha256
from embeddings.store import load_split, load_split_words
from models import build_model
from punctuation.scoring import score_labels
from punctuation.windows import make_batch, predict_stream

log = logging.getLogger(__name__)

HISTORY_COLUMNS = ("step", "epoch", "train_loss", "dev_loss", "dev_f1", "lr")
CHECKPOINT_FILE = "checkpoint.pt"


@dataclass
class TrainResult:
    model_dir: Path
    metrics: dict[str, Any]


def choose_device(name: str) -> torch.device:
    """``auto`` = CUDA when available, else CPU. On CUDA, float32 matrix products may use TF32 tensor cores
    (10-bit mantissa inputs, float32 accumulation): several times faster, and well inside the run-to-run noise
    of these models."""
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return device


def transformer_schedule(warmup_steps: int):
    """Linear warm-up to the peak rate, then decay with 1/sqrt(step) (Vaswani et al. 2017).

    Returned as a multiplier of the peak learning rate for ``torch.optim.lr_scheduler.LambdaLR``.
    """
    def multiplier(step: int) -> float:
        step = max(step, 1)
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))

    return multiplier


def epoch_plan(num_tokens: int, seq_len: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The batches of window starts for one epoch: a random offset, then shuffled non-overlapping windows."""
    rng = np.random.default_rng([seed, epoch])
    offset = int(rng.integers(seq_len)) if num_tokens > 2 * seq_len else 0
    starts = np.arange(offset, max(num_tokens - seq_len, 0) + 1, seq_len)
    if len(starts) == 0:
        starts = np.array([0])
    starts = rng.permutation(starts)
    return [starts[i:i + batch_size] for i in range(0, len(starts), batch_size)]


def schedule_steps(num_tokens: int, train_config: dict[str, Any]) -> int:
    """Steps of the full schedule (every epoch's windows), before any ``max_steps`` budget."""
    seq_len, batch_size = int(train_config["seq_len"]), int(train_config["batch_size"])
    seed = int(train_config["seed"])
    return sum(len(epoch_plan(num_tokens, seq_len, batch_size, seed, epoch))
               for epoch in range(int(train_config["epochs"])))


def training_fingerprint(model_config: dict, train_config: dict, features_dir: Path) -> str:
    """Identifies a training run: its configuration and the content of the features it reads."""
    payload = json.dumps(
        {"model": model_config, "train": train_config, "features": file_sha256(features_dir / "manifest.json")},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def to_device(batch: dict, device: torch.device) -> dict:
    return {key: value.to(device, non_blocking=True) if isinstance(value, torch.Tensor) else value
            for key, value in batch.items()}


def _atomic_torch_save(obj: Any, path: Path) -> None:
    """``torch.save`` to a temporary file renamed over ``path``.

    Not :func:`corpus.io.atomic_path`: torch names the folder inside its zip after the file it writes
    (``best_model.pt.tmp`` -> ``best_model.pt/data.pkl``), so a randomly named temporary would make every
    ``model.pt`` (a copy of ``best_model.pt``) differ in bytes from run to run; the fixed name keeps them identical.
    """
    temporary = path.with_suffix(path.suffix + ".tmp")
    torch.save(obj, temporary)
    os.replace(temporary, path)


def evaluate_on_tokens(model, features, *, window: int, stride: int, label_smoothing: float,
                       device: torch.device, batch_size: int) -> dict[str, float]:
    """Dev loss (teacher forced, non-overlapping windows) and greedy-decoded scores (overlapping windows)."""
    model.eval()
    vectors, ids, labels = features.vectors, features.ids, features.labels.astype(np.int64)
    words = features.words
    losses, weights = [], []
    with torch.no_grad():
        starts = list(range(0, len(ids), window))
        for first in range(0, len(starts), batch_size):
            spans = [(s, min(s + window, len(ids))) for s in starts[first:first + batch_size]]
            batch = to_device(make_batch(vectors, ids, spans, window, labels, words), device)
            losses.append(model.loss(batch, label_smoothing).item())
            weights.append(int(batch["mask"].sum()))
    predicted = predict_stream(
        lambda b: model.predict(to_device(b, device)), vectors, ids,
        window=window, stride=stride, batch_size=batch_size, words=words,
    )
    scores = score_labels([LABELS[i] for i in labels], [LABELS[i] for i in predicted])
    model.train()
    return {"loss": float(np.average(losses, weights=weights)), "scores": scores}


class _TokenSlice:
    """The first ``n`` tokens of a split's cached features (the dev subset used for model selection)."""

    def __init__(self, features, n: int | None, words: list[str] | None):
        n = len(features.ids) if n is None else min(n, len(features.ids))
        self.vectors, self.ids, self.labels = features.vectors[:n], features.ids[:n], features.labels[:n]
        self.words = None if words is None else words[:n]


def train_model(
    features_dir: str | Path,
    out_dir: str | Path,
    state_dir: str | Path,
    *,
    model_config: dict[str, Any],
    train_config: dict[str, Any],
    window: int,
    stride: int,
    stop_after_steps: int | None = None,
    pause_at: float | None = None,
    deadline: float | None = None,
) -> TrainResult:
    """Train ``model_config`` on the cached ``train`` split, select on ``dev``; write the best model to ``out_dir``.

    ``stop_after_steps`` time-boxes this call: after that many steps it checkpoints and returns an
    incomplete result (``metrics["completed"] is False``); the next call resumes exactly where it stopped.
    ``pause_at`` (a ``time.monotonic()`` value) does the same at the first step past that time: a long
    schedule split across several fixed slots of machine time (each call of a borrowed GPU is time-limited).
    ``deadline`` (a ``time.monotonic()`` value) ends training for good at the first step past it, as if the
    step budget ended there (final dev evaluation, model directory written; ``metrics["stopped_at_deadline"]``):
    for a fixed slot of machine time. The step count it reached is in the metrics, to repeat the run with
    ``max_steps``.

    ``out_dir`` receives ``model.pt`` (best weights), ``config.json``, ``history.csv``, the token embedder
    (so the model directory is self-contained for ``punctuate``) and ``learning_curves.png``.
    ``state_dir`` holds the resumable checkpoint; it is reused only when its fingerprint matches.
    """
    features_dir, out_dir, state_dir = Path(features_dir), Path(out_dir), Path(state_dir)
    cfg = dict(train_config)
    torch.set_num_threads(int(cfg["threads"]))
    device = choose_device(cfg["device"])
    seed = int(cfg["seed"])
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)

    train = load_split(features_dir, "train")
    vector_dim = int(train.vectors.shape[1])
    vocab_size = sum(1 for _ in open(features_dir / "embedder" / "vocab.txt", encoding="utf-8"))
    model = build_model(model_config, num_labels=len(LABELS), vector_dim=vector_dim, vocab_size=vocab_size)
    train_words = load_split_words(features_dir, "train") if model.reads_words else None
    dev = _TokenSlice(load_split(features_dir, "dev"), cfg["dev_eval_tokens"],
                      load_split_words(features_dir, "dev") if model.reads_words else None)
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=float(cfg["lr"]), betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, transformer_schedule(int(cfg["warmup_steps"])))

    seq_len, batch_size, epochs = int(cfg["seq_len"]), int(cfg["batch_size"]), int(cfg["epochs"])
    num_tokens = len(train.ids)
    total_steps = schedule_steps(num_tokens, cfg)
    if cfg["max_steps"] is not None:  # a step budget, for models too slow for whole epochs on a CPU
        total_steps = min(total_steps, int(cfg["max_steps"]))

    fingerprint = training_fingerprint(model_config, cfg, features_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    checkpoint_path = state_dir / CHECKPOINT_FILE
    state = {"epoch": 0, "batch": 0, "step": 0, "best_f1": -1.0, "best_step": 0, "last_eval_step": -1, "history": [],
             "losses_since_eval": [],
             "train_seconds": 0.0, "train_tokens": 0}
    best_path = state_dir / "best_model.pt"
    if checkpoint_path.exists():
        checkpoint = torch.load(checkpoint_path, map_location=device, weights_only=False)
        if checkpoint.get("fingerprint") == fingerprint:
            model.load_state_dict(checkpoint["model"])
            optimizer.load_state_dict(checkpoint["optimizer"])
            scheduler.load_state_dict(checkpoint["scheduler"])
            # map_location moved every tensor to the device; the CPU generator's state must be a CPU ByteTensor
            torch.set_rng_state(checkpoint["torch_rng"].cpu())
            if device.type == "cuda" and checkpoint.get("cuda_rng") is not None:  # dropout masks drawn on the GPU
                torch.cuda.set_rng_state(checkpoint["cuda_rng"].cpu(), device)
            state = checkpoint["state"]
            log.info("resuming from %s at step %d", checkpoint_path, state["step"])
        else:
            log.info("ignoring %s: it was made from another configuration or other features", checkpoint_path)
            best_path.unlink(missing_ok=True)

    def save_checkpoint() -> None:
        _atomic_torch_save(
            {"fingerprint": fingerprint, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state(),
             "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None, "state": state},
            checkpoint_path,
        )

    def evaluate_dev(epoch: int, train_losses: list[float]) -> None:
        result = evaluate_on_tokens(model, dev, window=window, stride=stride,
                                    label_smoothing=float(cfg["label_smoothing"]), device=device,
                                    batch_size=max(batch_size, 64))
        f1 = result["scores"]["OVERALL"]["f1"]
        state["history"].append({
            "step": state["step"], "epoch": epoch,
            "train_loss": float(np.mean(train_losses)) if train_losses else "",
            "dev_loss": result["loss"], "dev_f1": f1, "lr": scheduler.get_last_lr()[0],
        })
        train_losses.clear()
        state["last_eval_step"] = state["step"]
        if f1 > state["best_f1"]:
            state["best_f1"], state["best_step"] = f1, state["step"]
            _atomic_torch_save(model.state_dict(), best_path)
        save_checkpoint()

    model.train()
    progress = tqdm(total=total_steps, initial=state["step"], desc="train", unit="step", dynamic_ncols=True)
    log_every, eval_every = int(cfg["log_every_steps"]), int(cfg["eval_every_steps"])
    # kept in the checkpointed state, so a resumed run logs the same averages as an uninterrupted one
    train_losses: list[float] = state["losses_since_eval"]
    steps_this_call = 0
    while state["epoch"] < epochs:
        epoch = state["epoch"]
        plan = epoch_plan(num_tokens, seq_len, batch_size, seed, epoch)
        for batch_index in range(state["batch"], len(plan)):
            if deadline is not None and time.monotonic() >= deadline and state["step"] < total_steps:
                total_steps = state["step"]
                state["stopped_at_deadline"] = True
            if state["step"] >= total_steps:
                break
            started = time.perf_counter()
            spans = [(int(s), min(int(s) + seq_len, num_tokens)) for s in plan[batch_index]]
            batch = to_device(make_batch(train.vectors, train.ids, spans, seq_len, train.labels, train_words),
                               device)
            loss = model.loss(batch, float(cfg["label_smoothing"]))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), float(cfg["clip_norm"]))
            optimizer.step()
            scheduler.step()
            state["step"] += 1
            state["batch"] = batch_index + 1
            state["train_seconds"] += time.perf_counter() - started
            state["train_tokens"] += int(batch["mask"].sum())
            train_losses.append(loss.item())
            progress.update(1)
            progress.set_postfix(loss=f"{loss.item():.3f}", best_f1=f"{max(state['best_f1'], 0):.3f}")
            if state["step"] % log_every == 0 and state["step"] % eval_every != 0:
                state["history"].append({"step": state["step"], "epoch": epoch,
                                         "train_loss": float(np.mean(train_losses[-log_every:])),
                                         "dev_loss": "", "dev_f1": "", "lr": scheduler.get_last_lr()[0]})
            if state["step"] % eval_every == 0:
                evaluate_dev(epoch, train_losses)
            steps_this_call += 1
            paused = pause_at is not None and time.monotonic() >= pause_at and state["step"] < total_steps
            if ((stop_after_steps is not None and steps_this_call >= stop_after_steps) or paused) \
                    and state["batch"] < len(plan):
                save_checkpoint()
                progress.close()
                return TrainResult(model_dir=out_dir, metrics={"completed": False, "steps": state["step"]})
        state["epoch"], state["batch"] = (epoch + 1, 0) if state["step"] < total_steps else (epochs, 0)
        if state["last_eval_step"] != state["step"]:
            evaluate_dev(epoch, train_losses)  # every epoch ends with a dev evaluation
        else:
            save_checkpoint()
    progress.close()
    return _write_model_dir(out_dir, features_dir, best_path, model_config, cfg, state,
                            vector_dim=vector_dim, vocab_size=vocab_size, window=window, stride=stride,
                            fingerprint=fingerprint)


def _write_model_dir(out_dir: Path, features_dir: Path, best_path: Path, model_config: dict, cfg: dict,
                     state: dict, **info: Any) -> TrainResult:
    from punctuation.plots import plot_learning_curves  # matplotlib: not on the way of `punctuate`

    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(best_path, out_dir / "model.pt")
    embedder_dir = out_dir / "embedder"
    if embedder_dir.exists():
        shutil.rmtree(embedder_dir)
    shutil.copytree(features_dir / "embedder", embedder_dir)
    with open(out_dir / "history.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=HISTORY_COLUMNS)
        writer.writeheader()
        writer.writerows(state["history"])
    plot_learning_curves(out_dir / "history.csv", out_dir / "learning_curves.png")
    tokens_per_second = state["train_tokens"] / state["train_seconds"] if state["train_seconds"] else 0.0
    metrics = {
        "completed": True,
        "best_dev_f1": state["best_f1"], "best_step": state["best_step"], "steps": state["step"],
        "train_tokens_seen": state["train_tokens"], "train_seconds": round(state["train_seconds"], 1),
        "train_tokens_per_second": round(tokens_per_second, 1),
        "stopped_at_deadline": bool(state.get("stopped_at_deadline", False)),
    }
    config = {"model": model_config, "train": cfg, "labels": list(LABELS), **info, "metrics": metrics}
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return TrainResult(model_dir=out_dir, metrics=metrics)


def load_trained_model(model_dir: str | Path, device: str = "cpu"):
    """Rebuild a model saved by :func:`train_model`; returns ``(model, config)`` in eval mode."""
    model_dir = Path(model_dir)
    config_path = model_dir / "config.json"
    if not config_path.exists():
        raise FileNotFoundError(f"{model_dir}: not a trained model directory (no config.json)")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    model = build_model(config["model"], num_labels=len(config["labels"]), vector_dim=config["vector_dim"],
                        vocab_size=config["vocab_size"])
    model.load_state_dict(torch.load(model_dir / "model.pt", map_location=device, weights_only=True))
    model.to(device).eval()
    return model, config
