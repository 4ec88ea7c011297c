"""The training loop: one loop for the CPU, one GPU and several GPUs (the library's only one).

Seeded and deterministic: the window order of every epoch is a function of the seed and the epoch
(:func:`training.batches.epoch_plan`); the best checkpoint by dev F1 (greedy-decoded, scored like the
benchmark) becomes the model, or the last step's weights (``train.keep: last``). A run can be killed at any
point: it resumes from the last checkpoint in ``state_dir`` when that checkpoint was made from the same
configuration and the same features (a fingerprint of both, which leaves out which weights are kept: a finished
run is kept another way without training again) and starts afresh otherwise. Checkpoints are atomic and keep
the previous good one (:mod:`training.checkpoints`); the training folder is locked while a trainer uses it.

On CUDA the loop does no host work per step and waits for the device only where it must read a figure: the
training and dev tokens are resident on the device and batches are cut there by index
(:class:`training.batches.TokenStore`), the step losses stay on the device until a logging step reads
them all at once, the model runs under bf16 autocast (``precision``), Adam is the fused kernel, and
``torch.compile`` is an option (``compile``; off unless measured to win). No step waits for the device: the
models' losses and layers keep every shape fixed and every decision on the device, and the host tells them
what it knows (:func:`training.dev_eval.cut_batch`); docs/method.md lists what was checked, and
tests/test_training_host_syncs.py runs a step of every model with CUDA's sync debug mode set to fail.
``compile: graph`` replays the whole step as one CUDA graph (:mod:`training.graph_step`); where it cannot, the run
trains eagerly (without CUDA, distributed or for a model that reads words: as ``compile: off``), and its metrics
say which mode ran and why (``step_mode``, ``step_mode_reason``).
On the CPU the same seed gives the same weights to the byte: the batches and random draws are the CPU's own,
the thread count is ``train.threads`` and torch's deterministic algorithms are on
(:func:`training.execution.deterministic_on_cpu`; tests/test_training_determinism.py).

Several processes (:mod:`training.execution`) train one model with ``DistributedDataParallel``: each
process's loss is weighted by its share of the global batch's real tokens, so the gradient is that of the
single-process run of the same global batch.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from corpus.labels import LABELS
from embeddings.store import EMBEDDER_DIR, load_split, load_split_words
from models import build_model
from training.batches import TokenStore, asr_noise, epoch_plan, lr_schedule, real_tokens, schedule_steps
from training.checkpoints import TrainingLock, atomic_torch_save, load_checkpoint, previous_path, training_fingerprint
from training.config import UNLIMITED, Budget, TrainConfig
from training.dev_eval import TokenSlice, cut_batch, evaluate_on_tokens
from training.execution import (
    LossOf,
    Processes,
    autocast_for,
    deterministic_on_cpu,
    device_name,
    peak_memory,
    processes_of,
)
from training.graph_step import GRAPH, GraphStep, graph_refusal, note_step_mode, step_counts
from training.model_output import kept_weights, write_model_dir
from training.optimizer import trainer_adam
from training.warm_start import warm_start

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "checkpoint.pt"
BEST_FILE = "best_model.pt"
#: dev-evaluation windows per batch on CUDA when ``eval_batch_size`` is not set
CUDA_EVAL_BATCH = 1024


@dataclass
class TrainResult:
    model_dir: Path
    metrics: dict[str, Any]
    #: False in the processes of a distributed run other than process 0 (which writes the model directory)
    is_main: bool = True
    #: how long the run took (rounded seconds, rates, peak memory): kept out of ``metrics`` and of the model
    #: directory, which are the same whenever the same run is repeated
    timings: dict[str, Any] = field(default_factory=dict)
    #: unrounded seconds of this run so far (all calls): train, eval, checkpoint, wall
    seconds: dict[str, float] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------- training

def train_model(
    features_dir: str | Path,
    out_dir: str | Path,
    state_dir: str | Path,
    *,
    model_config: dict[str, Any],
    train_config: dict[str, Any] | TrainConfig,
    window: int,
    stride: int,
    budget: Budget | None = None,
    init_from: str | Path | None = None,
) -> TrainResult:
    """Train ``model_config`` on the cached ``train`` split, select on ``dev``; write the best model to ``out_dir``.

    ``train_config`` is validated into a :class:`TrainConfig` (an unknown, missing or ill-typed setting is a
    :class:`training.config.ConfigError`). ``budget`` (:class:`Budget`) bounds this call: a paused
    call checkpoints and returns an incomplete result (``metrics["completed"] is False``) that the next call
    resumes exactly; a stopped one ends training for good where it is (``metrics["stopped_at_deadline"]``).

    ``out_dir`` receives ``model.pt`` (the best weights by dev F1, or the last step's: ``train.keep``),
    ``config.json``, ``history.csv``, the token embedder (so the model directory is self-contained for
    ``punctuate``) and ``learning_curves.png``.
    ``state_dir`` holds the resumable checkpoint; it is reused only when its fingerprint matches, and is
    locked while this call runs (:class:`training.checkpoints.TrainingFolderLocked` for a second trainer).

    ``init_from`` (a trained model directory) starts the run from its weights instead of a random initialisation
    (:func:`training.warm_start.warm_start`; a source that does not fit is a ``WarmStartError``).
    """
    started = time.perf_counter()
    config = TrainConfig.from_mapping(train_config)
    torch.set_num_threads(config.threads)
    processes = processes_of(config)
    try:
        lock = TrainingLock(state_dir) if processes.main else None
        failure = None
        if lock is not None:
            try:
                lock.acquire()
            except Exception as error:  # the other processes must hear of it, not wait for process 0
                failure = error
        if processes.all_max([1.0 if failure else 0.0])[0]:
            if failure is not None:
                raise failure
            raise RuntimeError(f"{state_dir}: process 0 of this distributed run could not lock the folder")
        try:
            with deterministic_on_cpu(processes.device):
                return _Run(Path(features_dir), Path(out_dir), Path(state_dir), model_config, config, window, stride,
                            budget or UNLIMITED, processes, started, init_from).run()
        finally:
            if lock is not None:
                lock.release()
    finally:
        if processes.owns_group:
            import torch.distributed as dist

            dist.destroy_process_group()


class _Run:
    """One call of :func:`train_model` (set up, resumed, trained, written)."""

    def __init__(self, features_dir: Path, out_dir: Path, state_dir: Path, model_config: dict, config: TrainConfig,
                 window: int, stride: int, budget: Budget, processes: Processes, started: float,
                 init_from: str | Path | None = None):
        self.features_dir, self.out_dir, self.state_dir = features_dir, out_dir, state_dir
        self.model_config, self.config = model_config, config
        # the model's own decoding windows where it has them, else the caller's (params evaluate.window/stride)
        self.window, self.stride = config.decode_window or window, config.decode_stride or stride
        self.budget, self.processes, self.started = budget, processes, started
        self.device = device = processes.device
        self.autocast = autocast_for(config, device)
        seed = config.seed
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)

        train = load_split(features_dir, "train")
        self.vector_dim = int(train.vectors.shape[1])
        with open(features_dir / EMBEDDER_DIR / "vocab.txt", encoding="utf-8") as handle:
            self.vocab_size = sum(1 for _ in handle)
        self.model = model = build_model(model_config, num_labels=len(LABELS), vector_dim=self.vector_dim,
                                         vocab_size=self.vocab_size)
        # the source's weights (same on every process), before the device move and the optimizer
        self.warm_start = None if init_from is None else warm_start(model, model_config, init_from, features_dir)
        resident = config.resident == "on" or (config.resident == "auto" and device.type == "cuda")
        train_words = load_split_words(features_dir, "train") if model.reads_words else None
        self.train = TokenStore(train.vectors, train.ids, train.labels, words=train_words, device=device,
                                resident=resident, noise=asr_noise(config, features_dir, model))
        dev = TokenSlice(load_split(features_dir, "dev"), config.dev_eval_tokens,
                          load_split_words(features_dir, "dev") if model.reads_words else None)
        self.dev_labels = np.asarray(dev.labels).astype(np.int64)
        self.dev = TokenStore(dev.vectors, dev.ids, self.dev_labels, words=dev.words, device=device, resident=resident)
        self.dev_features = dev
        model.to(device)
        if processes.rank > 0:  # other dropout masks than process 0's (its own seed stays the single-process one)
            torch.manual_seed(seed + 7919 * processes.rank)
        self.graph_refused = graph_refusal(config, processes, model, self.train) if config.compile == GRAPH else None
        # graph mode: training.graph_step; train.encoder_lr: training.optimizer
        self.optimizer = trainer_adam(model, config, device, graph=config.compile == GRAPH and not self.graph_refused)
        self.loss_of = self._loss_function()

        self.num_tokens = self.train.num_tokens
        self.total_steps = schedule_steps(self.num_tokens, config)
        if config.max_steps is not None:  # a step budget, for models too slow for whole epochs on a CPU
            self.total_steps = min(self.total_steps, config.max_steps)
        self.scheduled_steps = self.total_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_schedule(config.lr_schedule, config.warmup_steps, self.scheduled_steps))
        self.fingerprint = training_fingerprint(
            model_config, config, features_dir, None if self.warm_start is None else self.warm_start["weights_sha256"])
        state_dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint_path = state_dir / CHECKPOINT_FILE
        self.best_path = state_dir / BEST_FILE
        self.state: dict[str, Any] = {
            "epoch": 0, "batch": 0, "step": 0, "best_f1": -1.0, "best_step": 0, "last_eval_step": -1, "history": [],
            "losses_since_eval": [], "train_seconds": 0.0, "train_tokens": 0}
        self._resume()
        self.pending: list[torch.Tensor] = []  # step losses not yet read from the device
        self.steps_run = 0  # steps of this call (through _step; graph mode counts its own)
        self.graph_step = None if config.compile != GRAPH or self.graph_refused else GraphStep(
            model, self.optimizer, self.train, config, bf16=self.autocast is not contextlib.nullcontext)
        self.mark = time.perf_counter()  # training time is counted from here to the next figure read

    # -- set-up ------------------------------------------------------------------------------------------------

    def _loss_function(self) -> Callable[[dict, float], torch.Tensor]:
        module: nn.Module = LossOf(self.model)
        wrapped = False
        if self.processes.distributed:
            from torch.nn.parallel import DistributedDataParallel

            module = DistributedDataParallel(
                module, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                find_unused_parameters=self.config.find_unused_parameters)
            wrapped = True
        if self.config.compile not in ("off", GRAPH):
            module = torch.compile(module, mode=None if self.config.compile == "default" else self.config.compile)
            wrapped = True
        return module if wrapped else self.model.loss

    def _resume(self) -> None:
        def check(content: Any) -> None:
            for key in ("fingerprint", "model", "optimizer", "scheduler", "torch_rng", "state"):
                if key not in content:
                    raise KeyError(f"no {key!r}")

        loaded = load_checkpoint(self.checkpoint_path, map_location=self.device, check=check)
        if loaded is None:
            if self.processes.main and (self.best_path.exists() or self.checkpoint_path.exists()):
                log.info("%s: no usable checkpoint; starting afresh", self.state_dir)
            self._forget_best()
            return
        checkpoint, path = loaded
        if checkpoint.get("fingerprint") != self.fingerprint:
            log.info("ignoring %s: it was made from another configuration or other features", path)
            self._forget_best()
            return
        self.model.load_state_dict(checkpoint["model"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        self.scheduler.load_state_dict(checkpoint["scheduler"])
        rank_rngs = checkpoint.get("rank_rngs")
        if self.processes.rank > 0 and rank_rngs and len(rank_rngs) > self.processes.rank:
            torch_rng, cuda_rng = rank_rngs[self.processes.rank]
        else:
            torch_rng, cuda_rng = checkpoint["torch_rng"], checkpoint.get("cuda_rng")
        # map_location moved every tensor to the device; the CPU generator's state must be a CPU ByteTensor
        torch.set_rng_state(torch_rng.cpu())
        if self.device.type == "cuda" and cuda_rng is not None:  # dropout masks drawn on the GPU
            torch.cuda.set_rng_state(cuda_rng.cpu(), self.device)
        self.state = checkpoint["state"]
        log.info("resuming from %s at step %d", path, self.state["step"])

    def _forget_best(self) -> None:
        if self.processes.main:
            self.best_path.unlink(missing_ok=True)
            previous_path(self.best_path).unlink(missing_ok=True)

    # -- bookkeeping -------------------------------------------------------------------------------------------

    def _count_training_time(self) -> None:
        now = time.perf_counter()
        self.state["train_seconds"] += now - self.mark
        self.mark = now

    def _add_time(self, key: str, since: float) -> None:
        now = time.perf_counter()
        self.state[key] = self.state.get(key, 0.0) + now - since
        self.mark = now

    def _flush_losses(self) -> None:
        """Read the step losses kept on the device (one wait for the device for all of them)."""
        if self.graph_step is not None:  # graph mode: the losses are in the step's ring (one process) ...
            self.state["losses_since_eval"].extend(self.graph_step.read_losses())
            if not self.graph_step.bf16:  # ... and its first step may have fallen back to float32: so does dev eval
                self.autocast = contextlib.nullcontext
        elif self.pending:
            values = self.processes.all_sum(torch.stack(self.pending).double())
            self.state["losses_since_eval"].extend(values.cpu().tolist())
            self.pending.clear()
        self._count_training_time()

    def _save_checkpoint(self) -> None:
        self._flush_losses()
        since = time.perf_counter()
        note_step_mode(self.state, self.graph_step, self.graph_refused)  # graph mode: how the steps ran
        if self.graph_step is not None:  # graph mode (one process): a best kept on the device since the last one
            self.graph_step.save_best(self.best_path)
        rngs = self.processes.gather(
            (torch.get_rng_state(), torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None))
        if self.processes.main:
            checkpoint = {
                "fingerprint": self.fingerprint, "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                "torch_rng": rngs[0][0], "cuda_rng": rngs[0][1], "state": self.state}
            if self.processes.distributed:
                checkpoint["rank_rngs"] = rngs
            atomic_torch_save(checkpoint, self.checkpoint_path)
        self._add_time("checkpoint_seconds", since)

    def _evaluate_dev(self, epoch: int) -> None:
        self._flush_losses()
        state, train_losses = self.state, self.state["losses_since_eval"]
        since = time.perf_counter()
        if self.processes.main:
            result = evaluate_on_tokens(
                self.model, self.dev_features, window=self.window, stride=self.stride,
                label_smoothing=self.config.label_smoothing, device=self.device, batch_size=self._eval_batch_size(),
                store=self.dev, autocast=self.autocast, combine=self.config.decode_combine)
            f1 = result["scores"]["OVERALL"]["f1"]
            state["history"].append({
                "step": state["step"], "epoch": epoch,
                "train_loss": float(np.mean(train_losses)) if train_losses else "",
                "dev_loss": result["loss"], "dev_f1": f1, "lr": self._last_lr(),
            })
            if f1 > state["best_f1"]:
                if state["best_f1"] >= 0:
                    state["previous_best"] = [state["best_f1"], state["best_step"]]
                state["best_f1"], state["best_step"] = f1, state["step"]
                if self.graph_step is not None:  # on the device; on disk with the checkpoint that follows
                    self.graph_step.keep_best()
                else:
                    atomic_torch_save(self.model.state_dict(), self.best_path)
        train_losses.clear()
        state["last_eval_step"] = state["step"]
        self._add_time("eval_seconds", since)
        self._save_checkpoint()

    def _last_lr(self) -> float:  # the host's schedule: get_last_lr()'s figure (a graph's rate is a device tensor)
        return self.config.lr * self.scheduler.lr_lambdas[0](self.scheduler.last_epoch)

    def _eval_batch_size(self) -> int:
        if self.config.eval_batch_size is not None:
            return self.config.eval_batch_size
        return CUDA_EVAL_BATCH if self.device.type == "cuda" else max(self.config.batch_size, 64)

    # -- the loop ----------------------------------------------------------------------------------------------

    def _step(self, starts: np.ndarray, on_device: torch.Tensor | None, weight: float | None) -> torch.Tensor:
        config = self.config
        batch = cut_batch(self.train, starts, config.seq_len, device_starts=on_device)
        try:
            with self.autocast():
                loss = self.loss_of(batch, config.label_smoothing)
        except RuntimeError as error:
            if self.autocast is contextlib.nullcontext or config.precision != "auto" or self.steps_run:
                raise
            # bf16 chosen by `auto` and refused by a kernel of this model on this device: float32 instead
            log.warning("bf16 autocast failed on the first step (%s); training in float32",
                        str(error).splitlines()[0])
            self.autocast = contextlib.nullcontext
            loss = self.loss_of(batch, config.label_smoothing)
        self.steps_run += 1
        if weight is not None:  # distributed: DDP averages the gradients over the processes
            loss = loss * (weight * self.processes.world)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), config.clip_norm)
        self.optimizer.step()
        self.scheduler.step()
        loss = loss.detach()
        return loss if weight is None else loss / self.processes.world

    def run(self) -> TrainResult:
        config, state, processes = self.config, self.state, self.processes
        seq_len, batch_size, epochs = config.seq_len, config.batch_size, config.epochs
        self.model.train()
        progress = tqdm(total=self.total_steps, initial=state["step"], desc="train", unit="step", dynamic_ncols=True,
                        disable=not processes.main)
        log_every, eval_every = config.log_every_steps, config.eval_every_steps
        steps_this_call = 0
        while state["epoch"] < epochs:
            epoch = state["epoch"]
            plan = epoch_plan(self.num_tokens, seq_len, batch_size, config.seed, epoch, jitter=config.window_jitter)
            device_plan = None
            if self.train.resident:  # the epoch's window starts go to the device once
                device_plan = torch.as_tensor(np.concatenate(plan).astype(np.int64)).to(self.device,
                                                                                         non_blocking=True)
            for batch_index in range(state["batch"], len(plan)):
                if self._stop_due(steps_this_call) and state["step"] < self.total_steps:
                    self.total_steps = state["step"]
                    state["stopped_at_deadline"] = True
                if state["step"] >= self.total_steps:
                    break
                starts = plan[batch_index]
                mine, on_device, weight = processes.share(starts, batch_index * batch_size, device_plan, seq_len,
                                                          self.num_tokens)
                if self.graph_step is not None:  # its loss stays in the step's ring on the device
                    self.graph_step.step(mine, on_device, self.scheduler)
                else:
                    self.pending.append(self._step(mine, on_device, weight))
                state["step"] += 1
                state["batch"] = batch_index + 1
                state["train_tokens"] += real_tokens(starts, seq_len, self.num_tokens)
                progress.update(1)
                step = state["step"]
                if step % log_every == 0 or step % eval_every == 0:
                    self._flush_losses()
                    losses = state["losses_since_eval"]
                    if losses:
                        progress.set_postfix(loss=f"{losses[-1]:.3f}", best_f1=f"{max(state['best_f1'], 0):.3f}")
                if step % log_every == 0 and step % eval_every != 0:
                    state["history"].append({"step": step, "epoch": epoch,
                                             "train_loss": float(np.mean(state["losses_since_eval"][-log_every:])),
                                             "dev_loss": "", "dev_f1": "", "lr": self._last_lr()})
                if step % eval_every == 0:
                    self._evaluate_dev(epoch)
                steps_this_call += 1
                if self._pause_due(steps_this_call) and state["batch"] < len(plan):
                    self._count_wall()  # before the save: the next call resumes this call's wall time from it
                    self._save_checkpoint()
                    progress.close()
                    return TrainResult(model_dir=self.out_dir, metrics={"completed": False, "steps": state["step"]},
                                       is_main=processes.main)
            state["epoch"], state["batch"] = (epoch + 1, 0) if state["step"] < self.total_steps else (epochs, 0)
            if state["last_eval_step"] != state["step"]:
                self._evaluate_dev(epoch)  # every epoch ends with a dev evaluation
            else:
                self._save_checkpoint()
        progress.close()
        self._count_wall()
        if not processes.main:
            return TrainResult(model_dir=self.out_dir, metrics={"completed": True, "steps": state["step"]},
                               is_main=False)
        return self._write_model_dir()

    def _time_checks_now(self) -> bool:
        """Whether this step may look at the clock: every step alone; at logging steps when distributed (where
        every process looks, and they agree)."""
        return not self.processes.distributed or self.state["step"] % self.config.log_every_steps == 0

    def _stop_due(self, steps_this_call: int) -> bool:
        if self.budget.stop_at is None or not self._time_checks_now():
            return False
        return bool(self.processes.all_max([float(self.budget.stop_due(time.monotonic()))])[0])

    def _pause_due(self, steps_this_call: int) -> bool:
        budget = self.budget
        if budget.steps is not None and steps_this_call >= budget.steps:
            return True
        if budget.pause_at is None or not self._time_checks_now():
            return False
        due = time.monotonic() >= budget.pause_at and self.state["step"] < self.total_steps
        return bool(self.processes.all_max([float(due)])[0])

    def _count_wall(self) -> None:
        self._flush_losses()
        now = time.perf_counter()
        self.state["wall_seconds"] = self.state.get("wall_seconds", 0.0) + now - self.started
        self.started = now

    # -- the model directory -----------------------------------------------------------------------------------

    def _write_model_dir(self) -> TrainResult:
        state = self.state
        source, best, kept = kept_weights(self.best_path, state, self.config.keep)
        seconds = state["train_seconds"]
        # What the run achieved: the same figures whenever the same run is repeated (DVC hashes them) ...
        metrics = {
            "completed": True,
            "best_dev_f1": best["best_f1"], "best_step": best["best_step"], "steps": state["step"],
            "train_tokens_seen": state["train_tokens"],
            "stopped_at_deadline": bool(state.get("stopped_at_deadline", False)),
            "steps_scheduled": self.scheduled_steps,
            "device": device_name(self.device), "processes": self.processes.world, **kept,
        }
        metrics.update(note_step_mode(state, self.graph_step, self.graph_refused))  # graph mode: step_mode and why
        # ... and how long it took (differs at every run: not in the model directory; to the ms: a short run is not 0 s)
        peak, peak_kind = peak_memory(self.device)
        timings = {
            "train_seconds": round(seconds, 3),
            "train_tokens_per_second": round(state["train_tokens"] / seconds if seconds else 0.0, 1),
            "steps_per_second": round(state["step"] / seconds if seconds else 0.0, 2),
            "wall_seconds": round(state.get("wall_seconds", 0.0), 3),
            "eval_seconds": round(state.get("eval_seconds", 0.0), 3),
            "checkpoint_seconds": round(state.get("checkpoint_seconds", 0.0), 3),
            "peak_memory_bytes": peak, "peak_memory_kind": peak_kind,
        }
        timings.update(step_counts(state))  # graph mode: steps replayed and run eagerly
        config = {"model": self.model_config, "train": self.config.as_params(), "labels": list(LABELS),
                  "vector_dim": self.vector_dim, "vocab_size": self.vocab_size, "window": self.window,
                  "stride": self.stride, "fingerprint": self.fingerprint,
                  **({} if self.warm_start is None else {"initialised_from": self.warm_start}), "metrics": metrics}
        write_model_dir(self.out_dir, model=self.model, weights=source, embedder=self.features_dir / EMBEDDER_DIR,
                        history=state["history"], config=config)
        return TrainResult(model_dir=self.out_dir, metrics=metrics, timings=timings, seconds=self._seconds())

    def _seconds(self) -> dict[str, float]:
        return {key: float(self.state.get(f"{key}_seconds", 0.0)) for key in ("train", "eval", "checkpoint", "wall")}
