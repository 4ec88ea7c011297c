"""The whole training step as one CUDA graph (``train.compile: graph``).

A paper run on a GPU is bound by the ~1,650 small kernels a step launches from Python, not by arithmetic. Here the
step -- the batch gathered from the resident :class:`training.batches.TokenStore`, forward, loss, backward, gradient
clipping and Adam -- is captured once with ``torch.cuda.graph`` and replayed at every later step: one launch.

**Which runs.** One process on CUDA, a model that does not read words, the training split resident on the device
and no ASR noise (:func:`graph_refusal` names what stands in the way). Any other run trains eagerly through the
trainer's ordinary step (``training.loop._Run._step``, the bytes of ``compile: off``), and the run records why in its
metrics (``step_mode``: ``graph`` or ``eager``; ``step_mode_reason``). FF2/FFA and the pretrained encoders read
words: they tokenise every batch on the host, which a graph would replay as the captured batch's subwords.

**What the graph needs, and how the step provides it** (:class:`GraphStep`; the same code runs eagerly):

* static buffers: the window starts are copied into a static device tensor (from the epoch's plan, already on the
  device) and the batch is gathered from them inside the step (:meth:`training.batches.TokenStore.batch`, marked
  whole or not as :func:`training.dev_eval.cut_batch` marks it, from what the host knows);
* Adam with ``capturable=True`` (and ``fused=True`` on CUDA) whose learning rate is a float32 device tensor
  (:func:`training.optimizer.graph_optimizer`), driven by the run's ``LambdaLR``: torch's LRScheduler fills a
  tensor rate in place
  (``torch.optim.lr_scheduler._update_param_group_val``: ``param_group["lr"].fill_(...)``, checked in torch 2.13's
  source; :func:`tensor_lr_problem` checks the installed torch at set-up, and a step refuses to replay a graph
  whose rate tensor was replaced). The history's ``lr`` is the host's schedule, never read off the device;
* gradients: set to None before the capture, so that the captured backward makes them in the graph's pool and
  every replay overwrites them; after the capture they are never set to None again (an eager step zeroes them in
  place and accumulates into them: the same values);
* the step loss goes into a device ring buffer (one slot a step, the slot index a device counter), read at the
  trainer's logging points (:meth:`GraphStep.read_losses`); the trainer reads it before it can wrap around;
* bf16 autocast (without its weight cache, which a capture cannot keep) is decided before the capture: the first
  eager step falls back to float32 if a kernel refuses bf16, as the ordinary step does;
* clipping with ``clip_grad_norm_`` (its multi-tensor path, no host sync).

**Warm-up, capture, self-check.** The first :data:`WARMUP_STEPS` whole batches of a call train eagerly on a side
stream (real steps, counted, with their real batches: what CUDA's lazy set-up and Adam's state need before a
capture); the next whole batch is captured, then checked (:meth:`GraphStep._self_check`): one step run eagerly and
one replayed from a second capture, on the same batch from the same weights and optimizer state, must agree on the
loss (relative :data:`CHECK_LOSS_RTOL`), the gradient norm (:data:`CHECK_NORM_RTOL`) and the weights after the step
(their difference at most :data:`CHECK_UPDATE_RTOL` of the eager update). Dropout masks differ between an eager step
and a replay, so both run with every dropout off (probabilities set to 0 for the check, the model in training mode:
eval mode would change BatchNorm and refuse cuDNN's recurrent backward): the check's graph is the training graph
less its dropout kernels, captured the same way from the same buffers, optimizer and rate tensor. Weights,
buffers, optimizer state and the ring's slot are then copied back in place (``copy_`` into the same tensors: the
graph holds their addresses) and the check's graph is dropped. On any failure -- the capture raising, a mismatch --
the reason is logged and recorded, and the run trains on eagerly through the same code (same optimizer, same tensor
rate): one run's problem never stops it.

**Batches the graph cannot take** run eagerly through the same static-buffer code, on the same optimizer and
rate: the epoch's last, shorter batch (another shape), and a whole batch holding the split's padded last window
(``ALL_REAL`` false: a recurrent encoder packs it, another computation). A second graph for them was not worth
its capture and memory: the first is one step an epoch, the second at most one step an epoch and none with the
trainer's window plan, whose windows all end inside the split.

How many steps were replayed and how many ran eagerly are run facts (a resumed run warms up again), kept beside
the timings, not in the metrics.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import OrderedDict
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from models.encoders import ALL_REAL
from training.batches import TokenStore, real_tokens
from training.checkpoints import atomic_torch_save
from training.optimizer import graph_optimizer

log = logging.getLogger(__name__)

#: ``train.compile`` value of this step
GRAPH = "graph"
#: eager steps on a side stream before the capture (torch's documentation warms up with 3)
WARMUP_STEPS = 3
#: self-check: eager and replayed loss may differ by this share of the loss (plus 1e-6). The two run the same
#: kernels on the same inputs; they may differ only where a kernel's reduction order is not fixed (atomics)
CHECK_LOSS_RTOL = 1e-3
#: ... the gradient norm by this share (backward kernels accumulate with atomics: a little more room)
CHECK_NORM_RTOL = 1e-2
#: ... and the weights after the step by this share of the eager step's update (Adam divides by the square root of
#: its second moment, which magnifies tiny gradient differences where that moment is near zero)
CHECK_UPDATE_RTOL = 0.1


class GraphCheckFailed(RuntimeError):
    """The replayed step does not compute what the eager step computes."""


def graph_refusal(config, processes, model: nn.Module, store: TokenStore) -> str | None:
    """Why this run cannot train with CUDA graphs (None: it can try; logged). ``config``: the run's
    :class:`training.config.TrainConfig`; ``processes``: its :class:`training.execution.Processes`."""
    reason = _refusal(processes, model, store)
    if reason is not None:
        log.info("train.compile graph: %s", reason)
    return reason


def _refusal(processes, model: nn.Module, store: TokenStore) -> str | None:
    device = processes.device
    if device.type != "cuda":
        return f"no CUDA (device {device.type}): graph mode needs a CUDA device; trained eagerly"
    if processes.distributed:
        return (f"a distributed run ({processes.world} processes) trains eagerly (DistributedDataParallel is not "
                "captured)")
    if getattr(model, "reads_words", False):
        return ("the model reads words: it tokenises every batch on the host, which a graph would replay as the "
                "captured batch's subwords; trained eagerly")
    if not store.resident:
        return "the training split is not resident on the device (train.resident: off); trained eagerly"
    if getattr(store, "noise", None) is not None:
        return "ASR noise draws every batch's alterations on the host; trained eagerly"
    return tensor_lr_problem(device)


def tensor_lr_problem(device: torch.device) -> str | None:
    """What is wrong with how the installed torch schedules a tensor learning rate on ``device`` (None: it fills
    the optimizer's own tensor in place with the schedule's value, as a graph needs)."""
    weight = torch.zeros(1, device=device, requires_grad=True)
    optimizer = graph_optimizer([weight], 1.0, device)
    rate = optimizer.param_groups[0]["lr"]
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 ** step)
    for _ in range(2):
        optimizer.step()  # no gradient: nothing to update, but the scheduler sees the usual order
        scheduler.step()
    if optimizer.param_groups[0]["lr"] is not rate:
        return f"torch {torch.__version__}'s LRScheduler replaces a tensor learning rate instead of filling it in place"
    value = float(rate)
    if abs(value - 0.25) > 1e-6:
        return f"torch {torch.__version__}'s LRScheduler drives a tensor learning rate to {value} instead of 0.25"
    return None


def cuda_capture(body: Callable[[], None]) -> torch.cuda.CUDAGraph:
    """``body`` captured as a CUDA graph (in a private memory pool)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    return graph


@contextlib.contextmanager
def dropout_off(model: nn.Module):
    """Every dropout of ``model`` at probability 0 (its ``nn.Dropout`` modules and the recurrent layers' own), the
    model still in training mode; restored after."""
    changed: list[tuple[nn.Module, str, float]] = []
    for module in model.modules():
        if isinstance(module, nn.modules.dropout._DropoutNd):
            changed.append((module, "p", module.p))
        elif isinstance(module, nn.RNNBase):
            changed.append((module, "dropout", module.dropout))
    for module, name, _ in changed:
        setattr(module, name, 0.0)
    try:
        yield
    finally:
        for module, name, value in changed:
            setattr(module, name, value)


class GraphStep:
    """The trainer's step over static device buffers: replayed from a CUDA graph when it can be, else eager.

    ``config``: the run's :class:`training.config.TrainConfig` (batch, window, smoothing, clipping, precision; the
    loss ring holds ``log_every_steps`` + 1 steps: the trainer reads it at every logging step). ``capture(body)``
    makes a graph-like object with ``replay()`` from a function (default :func:`cuda_capture`; the CPU tests pass
    their own).

    It also keeps the run's best weights on the device (:meth:`keep_best`), for the trainer to write with its next
    checkpoint (:meth:`save_best`).
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, store: TokenStore, config, *, bf16: bool,
                 capture: Callable[[Callable[[], None]], Any] | None = None, warmup_steps: int | None = None):
        if not store.resident or getattr(store, "noise", None) is not None:
            raise ValueError("GraphStep gathers every batch on the device: it needs a resident store without noise")
        self.model, self.optimizer, self.store = model, optimizer, store
        self.batch_size = batch_size = config.batch_size
        self.seq_len = config.seq_len
        self.label_smoothing, self.clip_norm = config.label_smoothing, config.clip_norm
        self.bf16, self.precision_auto = bf16, config.precision == "auto"
        self.capture = capture or cuda_capture
        self.warmup_steps = WARMUP_STEPS if warmup_steps is None else warmup_steps
        self.device = device = store.device
        self.ring_size = ring_size = config.log_every_steps + 1
        self.starts = torch.zeros(batch_size, dtype=torch.int64, device=device)
        self.ring = torch.zeros(ring_size, dtype=torch.float32, device=device)
        self.slot = torch.zeros(1, dtype=torch.int64, device=device)
        self.last = torch.zeros(2, dtype=torch.float32, device=device)  # the last step's loss and gradient norm
        self.position = 0  # the ring's next slot, as the host counts it (the device's counter holds the same)
        self.unread = 0  # step losses in the ring not yet read
        self.spilled: list[float] = []  # losses read early because the ring was full (the trainer reads it sooner)
        self.graph: Any = None
        self.captured = False  # the gradients belong to the graph: never set to None again
        self.captured_lr: torch.Tensor | None = None
        self.wanted = True  # False once a capture or its check failed (or the rate tensor was replaced)
        self.failed = False
        self.warmups = 0
        self.first = True  # the first step of this call decides bf16
        self.replays = self.eager_steps = 0
        self.reason = f"the call ended within the eager warm-up ({self.warmup_steps} steps) before any capture"
        self.counted: tuple[int, int] | None = None  # replays and eager steps of the run's earlier calls
        self._side: Any = None
        self.best = device_copy(model)  # preallocated: the best weights are copied into it, on the device
        self.best_unsaved = False

    # -- the best weights --------------------------------------------------------------------------------------

    def keep_best(self) -> None:
        """The model's weights are the best so far: copy them on the device (no wait, no file)."""
        copy_into(self.best, self.model)
        self.best_unsaved = True

    def save_best(self, path) -> None:
        """Write the best weights kept since the last call to ``path`` (as ``model.state_dict()`` saves)."""
        if self.best_unsaved:
            atomic_torch_save(self.best, path)
            self.best_unsaved = False

    # -- what the run records ----------------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        return GRAPH if self.graph is not None else "eager"

    def read_losses(self) -> list[float]:
        """The step losses since the last read, oldest first (one wait for the device)."""
        losses, self.spilled = self.spilled, []
        if self.unread:
            values = self.ring.double().cpu().tolist()
            first = (self.position - self.unread) % self.ring_size
            losses += [values[(first + k) % self.ring_size] for k in range(self.unread)]
            self.unread = 0
        return losses

    # -- the step ----------------------------------------------------------------------------------------------

    def whole_windows(self, host_starts: np.ndarray) -> bool:
        """Whether no window at ``host_starts`` is padded (as :func:`training.dev_eval.cut_batch` decides)."""
        rows = len(host_starts)
        return rows > 0 and real_tokens(host_starts, self.seq_len, self.store.num_tokens) == rows * self.seq_len

    def step(self, host_starts: np.ndarray, device_starts: torch.Tensor | None, scheduler=None) -> None:
        """One training step on the windows at ``host_starts`` (``device_starts``: the same on the device), then a
        step of the learning-rate ``scheduler`` (which fills the optimizer's rate tensor in place)."""
        self._step(host_starts, device_starts)
        if scheduler is not None:
            scheduler.step()

    def _step(self, host_starts: np.ndarray, device_starts: torch.Tensor | None) -> None:
        if self.unread == self.ring_size:  # the next loss would overwrite one not yet read
            self.spilled = self.read_losses()
        rows = len(host_starts)
        if device_starts is None:
            device_starts = torch.as_tensor(np.asarray(host_starts, dtype=np.int64)).to(self.device)
        self.starts[:rows].copy_(device_starts)
        whole = rows == self.batch_size and self.whole_windows(host_starts)  # a batch the graph takes
        if whole and self.wanted and self.graph is None and self.warmups >= self.warmup_steps:
            self._capture_and_check(host_starts)
        if whole and self.graph is not None:
            if self.optimizer.param_groups[0]["lr"] is self.captured_lr:
                self.graph.replay()
                self.replays += 1
                self._advance()
                return
            self._give_up("the optimizer's learning-rate tensor was replaced after the capture")
        warm_up = whole and self.wanted and self.graph is None
        self._eager(host_starts, rows, side_stream=warm_up, whole_windows=whole or self.whole_windows(host_starts))
        self.warmups += warm_up
        self.eager_steps += 1
        self._advance()

    def _advance(self) -> None:
        self.position = (self.position + 1) % self.ring_size
        self.unread += 1

    def _autocast(self):
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, cache_enabled=False)

    def _loss(self, host_starts: np.ndarray, rows: int, whole_windows: bool) -> torch.Tensor:
        """The step's loss on the windows in the static starts buffer (``host_starts``: the same on the host, for a
        model that reads words; ``whole_windows``: whether none is padded, :func:`training.dev_eval.cut_batch`'s
        ``ALL_REAL``, which the host knows)."""
        batch = self.store.batch(host_starts, self.seq_len, device_starts=self.starts[:rows])
        batch[ALL_REAL] = whole_windows
        with self._autocast():
            return self.model.loss(batch, self.label_smoothing)

    def _finish(self, loss: torch.Tensor) -> None:
        """Backward, clipping, Adam, and the loss into the ring: all on the device."""
        self.optimizer.zero_grad(set_to_none=not self.captured)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
        self.optimizer.step()
        loss = loss.detach()
        self.ring.index_copy_(0, self.slot, loss.reshape(1).to(self.ring.dtype))
        self.slot.add_(1).remainder_(self.ring_size)
        self.last[0].copy_(loss)
        self.last[1].copy_(norm)

    def _body(self, host_starts: np.ndarray) -> None:
        """The step the graph captures: a whole batch."""
        self._finish(self._loss(host_starts, self.batch_size, True))

    def _eager(self, host_starts: np.ndarray, rows: int, *, side_stream: bool, whole_windows: bool) -> None:
        if side_stream and self.device.type == "cuda":
            if self._side is None:
                self._side = torch.cuda.Stream(self.device)
            current = torch.cuda.current_stream(self.device)
            self._side.wait_stream(current)
            with torch.cuda.stream(self._side):
                self._eager_step(host_starts, rows, whole_windows)
            current.wait_stream(self._side)
        else:
            self._eager_step(host_starts, rows, whole_windows)

    def _eager_step(self, host_starts: np.ndarray, rows: int, whole_windows: bool) -> None:
        try:
            loss = self._loss(host_starts, rows, whole_windows)
        except RuntimeError as error:
            if not (self.bf16 and self.precision_auto and self.first):
                raise
            # bf16 chosen by `auto` and refused by a kernel of this model on this device: float32 instead
            log.warning("bf16 autocast failed on the first step (%s); training in float32", str(error).splitlines()[0])
            self.bf16 = False
            loss = self._loss(host_starts, rows, whole_windows)
        self.first = False
        self._finish(loss)

    # -- capture and self-check --------------------------------------------------------------------------------

    def _capture_and_check(self, host_starts: np.ndarray) -> None:
        try:
            # the captured backward makes the gradients in the graph's pool; every replay overwrites them
            self.optimizer.zero_grad(set_to_none=True)
            self.captured_lr = self.optimizer.param_groups[0]["lr"]
            self.graph = self.capture(lambda: self._body(host_starts))
            self.captured = True
            self._self_check(host_starts)
        except Exception as error:  # noqa: BLE001 - any failure: train on eagerly, say why
            what = "self-check failed" if isinstance(error, GraphCheckFailed) else "capture failed"
            self._give_up(f"{what}: {type(error).__name__}: {(str(error).splitlines() or [''])[0]}")
            return
        self.reason = f"captured after {self.warmups} eager warm-up steps; the self-check passed"
        log.info("training step captured as a CUDA graph (%s)", self.reason)

    def _give_up(self, reason: str) -> None:
        log.warning("CUDA graph step: %s; training eagerly", reason)
        self.graph = None
        self.wanted, self.failed = False, True
        # gradients made in a graph's pool (also by a capture that failed half-way): eager steps make their own again
        self.optimizer.zero_grad(set_to_none=True)
        self.captured = False
        self.reason = f"{reason}; trained eagerly"

    def _state_tensors(self) -> list[torch.Tensor]:
        """Every tensor a step changes: weights, buffers, Adam's state, the ring's slot."""
        tensors: dict[int, torch.Tensor] = {}
        for tensor in [*self.model.parameters(), *self.model.buffers(), self.slot]:
            tensors.setdefault(id(tensor), tensor)
        for state in self.optimizer.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    tensors.setdefault(id(value), value)
        return list(tensors.values())

    def _self_check(self, host_starts: np.ndarray) -> None:
        """One eager step and one replayed step (a capture of its own) from the same state on the same batch,
        every dropout off; raises :class:`GraphCheckFailed` where they disagree. Restores the state in place."""
        tensors = self._state_tensors()
        saved = [tensor.detach().clone() for tensor in tensors]
        parameters = list(self.model.parameters())
        before = [p.detach().clone() for p in parameters]

        def restore() -> None:
            with torch.no_grad():
                for tensor, value in zip(tensors, saved):
                    tensor.copy_(value)

        check = None
        try:
            with dropout_off(self.model):
                self._eager(host_starts, self.batch_size, side_stream=True, whole_windows=True)
                eager_last = self.last.clone()
                eager_after = [p.detach().clone() for p in parameters]
                restore()
                check = self.capture(lambda: self._body(host_starts))
                check.replay()
            replay_last = self.last.clone()
            with torch.no_grad():
                update = torch.stack([(a - b).double().pow(2).sum() for a, b in zip(eager_after, before)]).sum().sqrt()
                gap = torch.stack([(p.detach() - a).double().pow(2).sum()
                                   for p, a in zip(parameters, eager_after)]).sum().sqrt()
                figures = torch.cat([eager_last.double(), replay_last.double(), update.reshape(1), gap.reshape(1)])
            loss_e, norm_e, loss_g, norm_g, update_v, gap_v = figures.cpu().tolist()
        finally:
            restore()
            del check
        log.info("CUDA graph self-check: loss %.6g eager / %.6g replayed, gradient norm %.6g / %.6g, weights apart "
                 "by %.3g of an update of %.3g", loss_e, loss_g, norm_e, norm_g, gap_v / update_v if update_v else 0.0,
                 update_v)
        problems = []
        if not (math.isfinite(loss_e) and abs(loss_g - loss_e) <= CHECK_LOSS_RTOL * abs(loss_e) + 1e-6):
            problems.append(f"loss {loss_g:.6g} replayed vs {loss_e:.6g} eager")
        if not (math.isfinite(norm_e) and abs(norm_g - norm_e) <= CHECK_NORM_RTOL * abs(norm_e) + 1e-6):
            problems.append(f"gradient norm {norm_g:.6g} replayed vs {norm_e:.6g} eager")
        if not (math.isfinite(gap_v) and gap_v <= CHECK_UPDATE_RTOL * update_v + 1e-12):
            problems.append(f"weights after the step {gap_v:.3g} apart, the eager update {update_v:.3g}")
        if problems:
            raise GraphCheckFailed("; ".join(problems))


def device_copy(model: nn.Module) -> OrderedDict:
    """A preallocated copy of ``model``'s state dict on its device (``_metadata`` kept, so that it saves as
    ``model.state_dict()`` does); :func:`copy_into` refreshes it."""
    state = model.state_dict()
    copy = OrderedDict((key, value.detach().clone()) for key, value in state.items())
    copy._metadata = getattr(state, "_metadata", None)  # type: ignore[attr-defined]
    return copy


def copy_into(copy: OrderedDict, model: nn.Module) -> None:
    """``model``'s current weights into ``copy`` (:func:`device_copy`), on the device, without a host wait."""
    with torch.no_grad():
        for key, value in model.state_dict().items():
            copy[key].copy_(value)


def note_step_mode(state: dict[str, Any], step: GraphStep | None, refused: str | None) -> dict[str, str]:
    """Record how a graph-mode run's steps ran in its ``state`` (kept across calls): the mode and its reason
    (a failed capture or check stays recorded; a call that ended within the warm-up gives way to the next), and the
    steps replayed and run eagerly. Returns the metrics ``step_mode`` and ``step_mode_reason`` (nothing, and
    records nothing, for a run that did not ask for graph mode: no step and no refusal)."""
    if step is None and refused is None:
        return {}
    if not state.get("step_mode_failed"):
        state["step_mode"] = "eager" if step is None else step.mode
        state["step_mode_reason"] = refused if step is None else step.reason
        state["step_mode_failed"] = step is not None and step.failed
    if step is not None:
        if step.counted is None:  # this call's first note: what the earlier calls ran
            step.counted = (int(state.get("graph_replays", 0)), int(state.get("graph_eager_steps", 0)))
        state["graph_replays"] = step.counted[0] + step.replays
        state["graph_eager_steps"] = step.counted[1] + step.eager_steps
    return {"step_mode": state["step_mode"], "step_mode_reason": state["step_mode_reason"]}


def step_counts(state: dict[str, Any]) -> dict[str, int]:
    """The steps a graph-mode run replayed and ran eagerly: run facts (a resumed run warms up again), not metrics."""
    if "graph_replays" not in state:
        return {}
    return {"steps_replayed_this_run": state["graph_replays"], "steps_eager_this_run": state["graph_eager_steps"]}
