"""Operators one training step dispatches, per paper run: what a GPU launches, and what would make it wait.

    python -m paper_runs.step_ops                       # the twelve paper runs (CPU, about a minute)
    python -m paper_runs.step_ops --runs wrn,wrn_blstm --json
    python -m paper_runs.step_ops --dev-eval            # one dev evaluation of each run instead (CPU, ~2 minutes)

The paper runs on a shared GPU are bound by kernel launches and by waits for the device, not by arithmetic
(paper_runs/README.md), so how many operators a step dispatches is the lever on their steps/s that a CPU
can measure. One step is what the trainer does (``training.loop``): the batch cut by
:func:`training.dev_eval.cut_batch` (32 whole windows, so no padding), forward and loss, backward, gradient
clipping and Adam, as on CUDA (the multi-tensor clipping, the fused Adam), counted by a ``TorchDispatchMode``
after a first, unmeasured step. A recurrent layer (``nn.LSTM``, ``nn.GRU``) is one cuDNN call on a GPU, forward and
backward, however many layers, directions and time steps it has, while a CPU runs its own kernels (a GRU's
decomposes into operators per time step): each call's CPU operators (counted again on the layer alone) are
replaced by those two. Each line gives:

* ``ops``: every aten operator dispatched; ``views`` of them only re-describe memory (no kernel on a GPU), so
  ``kernels = ops - views`` is about what the GPU launches (in float32; bf16 autocast adds its casts);
* ``waits``: operators whose result the host reads (``_local_scalar_dense``: ``.item()``, ``if tensor``;
  ``nonzero`` and boolean-mask indexing, whose result's size it needs), each a wait for the device on a GPU.
  ``.cpu()`` of a CPU tensor dispatches nothing, so tests/test_training_host_syncs.py (CUDA's sync debug mode) is
  the authority on waits; this counts the ones a CPU can see.

With ``--dev-eval`` a line counts one **dev evaluation** as the trainer runs it on CUDA
(:func:`training.dev_eval.evaluate_on_tokens` over ``dev_eval_tokens`` tokens in the run's decoding windows, at
:data:`training.loop.CUDA_EVAL_BATCH` windows a batch; a recurrent call is one cuDNN kernel) and its arithmetic
(``gflop``, :class:`torch.utils.flop_counter.FlopCounterMode`: matmuls and convolutions; a recurrent layer's
own is left out). An evaluation runs eagerly, so on a GPU its kernels cost their launch's host time: the lease
plan derives its seconds from these counts (:func:`paper_runs.plan.dev_eval_s`).

Nothing is asserted; the counts do not depend on the machine.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from corpus.labels import LABELS
from experiments.params import experiment_config, load_params
from inference.windows import window_starts
from models import build_model
from paper_runs.records import PAPER_RUNS, run_config
from training.batches import TokenStore
from training.config import TrainConfig
from training.dev_eval import cut_batch, evaluate_on_tokens
from training.loop import CUDA_EVAL_BATCH
from training.optimizer import ADAM_SETTINGS

#: operators whose result the host reads (and boolean-mask indexing, whose size it must know)
WAITS = ("_local_scalar_dense", "nonzero", "item", "is_nonzero", "masked_select")
#: input width of the synthetic vectors (GloVe 50d, Speech2Vec 50d, summed); learned inputs read ids only
VECTOR_DIM = 50
VOCAB_SIZE = 20_000


class OperatorCount(TorchDispatchMode):
    """Counts the aten operators dispatched while active, by name, views apart."""

    def __init__(self):
        super().__init__()
        self.by_name: collections.Counter[str] = collections.Counter()
        self.views = self.waits = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.by_name[name] += 1
        self.views += bool(func.is_view)
        # a CPU indexes by a boolean mask without the nonzero() a GPU waits for
        indices = args[1] if name in ("index", "index_put", "index_put_") and len(args) > 1 else ()
        self.waits += name in WAITS or any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)
        return func(*args, **(kwargs or {}))

    @property
    def ops(self) -> int:
        return sum(self.by_name.values())


def _recurrent_calls(model: torch.nn.Module) -> tuple[list[tuple[torch.nn.Module, torch.Size]], list]:
    """(the list each call of a recurrent layer of ``model`` appends (layer, input shape) to, the hook handles)."""
    calls: list[tuple[torch.nn.Module, torch.Size]] = []

    def record(layer: torch.nn.Module, args: tuple, _output: Any) -> None:
        x = args[0]
        if isinstance(x, torch.nn.utils.rnn.PackedSequence):  # a padded batch: replayed as its padded shape
            x = torch.empty(int(x.batch_sizes[0]), len(x.batch_sizes), x.data.shape[-1])
        calls.append((layer, x.shape))

    handles = [module.register_forward_hook(record) for module in model.modules()
               if isinstance(module, torch.nn.RNNBase)]
    return calls, handles


def _recurrent_cpu_ops(layer: torch.nn.Module, shape: torch.Size, *, backward: bool = True) -> tuple[int, int]:
    """(operators, views) of ``layer``'s forward (and backward) on its own, for an input of ``shape``."""
    x = torch.randn(shape, requires_grad=backward)
    if not backward:
        with torch.no_grad(), OperatorCount() as counter:
            layer(x)
        return counter.ops, counter.views
    with torch.no_grad():
        seed = torch.ones_like(layer(x)[0])
    with OperatorCount() as counter:
        torch.autograd.backward(layer(x)[0], seed)
    return counter.ops, counter.views


def _count_as_cuda(model: torch.nn.Module, run, *, backward: bool) -> tuple[OperatorCount, int, int, int]:
    """(the counter, operators, views, recurrent calls) of ``run()``, each call of a recurrent layer of ``model``
    counted as cuDNN runs it: one kernel forward, and one backward when ``backward``."""
    calls, handles = _recurrent_calls(model)
    with OperatorCount() as counter:
        run()
    for handle in handles:
        handle.remove()
    ops, views = counter.ops, counter.views
    for layer, shape in calls:
        cpu_ops, cpu_views = _recurrent_cpu_ops(layer, shape, backward=backward)
        ops, views = ops - cpu_ops + (2 if backward else 1), views - cpu_views
    return counter, ops, views, len(calls)


def count_step(model_config: dict[str, Any], train: dict[str, Any], *, learned: bool = False) -> dict[str, Any]:
    """The operators of one training step of ``model_config`` with ``train``'s batch (see the module docstring)."""
    config = TrainConfig.from_mapping(train)
    torch.manual_seed(0)
    model = build_model(model_config, num_labels=len(LABELS), vector_dim=0 if learned else VECTOR_DIM,
                        vocab_size=VOCAB_SIZE).train()
    rows, length = config.batch_size, config.seq_len
    tokens = rows * length * 2
    rng = np.random.default_rng(0)
    store = TokenStore(rng.normal(size=(tokens, VECTOR_DIM)).astype(np.float32),
                       rng.integers(2, VOCAB_SIZE, tokens), rng.integers(0, len(LABELS), tokens),
                       words=["word"] * tokens if model.reads_words else None, device=torch.device("cpu"),
                       resident=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, **ADAM_SETTINGS, fused=True)

    def step() -> None:
        batch = cut_batch(store, np.arange(rows) * length, length)
        loss = model.loss(batch, config.label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm, foreach=True)
        optimizer.step()

    step()  # optimizer state and lazy set-up outside the count
    counter, ops, views, recurrent_calls = _count_as_cuda(model, step, backward=True)
    return {"ops": ops, "views": views, "kernels": ops - views, "recurrent_calls": recurrent_calls,
            "waits": counter.waits, "batch": rows, "seq_len": length,
            "parameters": sum(1 for _ in model.parameters()), "by_name": dict(counter.by_name.most_common())}


def count_dev_eval(model_config: dict[str, Any], train: dict[str, Any], *, window: int, stride: int,
                   learned: bool = False, batch_size: int = CUDA_EVAL_BATCH, scale: int = 10) -> dict[str, Any]:
    """The operators and arithmetic of one dev evaluation of ``model_config`` (see the module docstring).

    ``scale``: counted on ``dev_eval_tokens / scale`` tokens at ``batch_size / scale`` windows a batch, which makes
    as many batches (checked: else counted at full size), so the same kernels, and a ``scale``-th of the
    arithmetic (multiplied back): a CPU decodes a Transformer's 60k tokens in minutes."""
    from torch.utils.flop_counter import FlopCounterMode

    config = TrainConfig.from_mapping(train)
    tokens = int(config.dev_eval_tokens or 60_000)
    window, stride = config.decode_window or window, config.decode_stride or stride

    def batches(n: int, size: int) -> tuple[int, int]:  # (loss batches, decoding batches)
        loss_windows, decoding_windows = math.ceil(n / window), len(window_starts(n, window, stride))
        return math.ceil(loss_windows / size), math.ceil(decoding_windows / size)

    if scale > 1 and batches(tokens // scale, batch_size // scale) != batches(tokens, batch_size):
        scale = 1
    n, size = tokens // scale, batch_size // scale
    torch.manual_seed(0)
    model = build_model(model_config, num_labels=len(LABELS), vector_dim=0 if learned else VECTOR_DIM,
                        vocab_size=VOCAB_SIZE)
    rng = np.random.default_rng(0)
    features = SimpleNamespace(vectors=rng.normal(size=(n, VECTOR_DIM)).astype(np.float32),
                               ids=rng.integers(2, VOCAB_SIZE, n), labels=rng.integers(0, len(LABELS), n),
                               words=["word"] * n if model.reads_words else None)

    flop_count = FlopCounterMode(display=False)

    def evaluate() -> None:  # its operators and its arithmetic counted in one pass
        with flop_count:
            evaluate_on_tokens(model, features, window=window, stride=stride, label_smoothing=config.label_smoothing,
                               device=torch.device("cpu"), batch_size=size)

    counter, ops, views, recurrent_calls = _count_as_cuda(model, evaluate, backward=False)
    loss_batches, decoding_batches = batches(tokens, batch_size)
    gflop = round(flop_count.get_total_flops() * scale / 1e9, 1)
    return {"kernels": ops - views, "waits": counter.waits, "gflop": gflop,
            "recurrent_calls": recurrent_calls, "tokens": tokens, "window": window, "stride": stride,
            "batch": batch_size, "loss_batches": loss_batches, "decoding_batches": decoding_batches}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--runs", help="comma-separated paper runs (default: all twelve)")
    parser.add_argument("--json", action="store_true", help="one JSON line per run instead of a table")
    parser.add_argument("--dev-eval", action="store_true",
                        help="count one dev evaluation of each run (as on CUDA) instead of one training step")
    args = parser.parse_args(argv)
    params = load_params(args.params, profile=args.profile)
    names = args.runs.split(",") if args.runs else list(PAPER_RUNS)
    unknown = [name for name in names if name not in PAPER_RUNS]
    if unknown:
        parser.error(f"not paper runs: {', '.join(unknown)}")
    torch.set_num_threads(1)
    if args.dev_eval:
        return _print_dev_evals(params, names, as_json=args.json)
    if not args.json:
        print("| run | batch x tokens | operators | views | kernels | host waits |\n|---|---|---:|---:|---:|---:|")
    counted: dict[tuple[str, bool], dict[str, Any]] = {}
    for name in names:
        spec = PAPER_RUNS[name]
        key = (spec.experiment, spec.feature_set == "learned")
        if key not in counted:  # the four Transformers differ by input only
            model_config, train = experiment_config(params, spec.experiment)
            counted[key] = count_step(model_config, train, learned=key[1])
        row = counted[key]
        if args.json:
            print(json.dumps({"run": name, **row}), flush=True)
        else:
            print(f"| {name} | {row['batch']} x {row['seq_len']} | {row['ops']:,} | {row['views']:,} | "
                  f"{row['kernels']:,} | {row['waits']} |", flush=True)
    return 0


def _print_dev_evals(params: dict[str, Any], names: list[str], *, as_json: bool) -> int:
    if not as_json:
        print("| run | tokens | window / stride | batches (loss, decoding) | kernels | host waits | GFLOP |\n"
              "|---|---:|---|---|---:|---:|---:|")
    window, stride = int(params["evaluate"]["window"]), int(params["evaluate"]["stride"])
    counted: dict[str, dict[str, Any]] = {}
    for name in names:
        model_config, train = run_config(params, name)
        learned = PAPER_RUNS[name].feature_set == "learned"
        key = json.dumps([model_config, train, learned], sort_keys=True, default=str)
        if key not in counted:  # the Transformers of one reading differ by input only
            counted[key] = count_dev_eval(model_config, train, window=window, stride=stride, learned=learned)
        row = counted[key]
        if as_json:
            print(json.dumps({"run": name, **row}), flush=True)
        else:
            print(f"| {name} | {row['tokens']:,} | {row['window']} / {row['stride']} | {row['loss_batches']}, "
                  f"{row['decoding_batches']} | {row['kernels']:,} | {row['waits']} | {row['gflop']:,.0f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
