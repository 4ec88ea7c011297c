"""``train.compile: graph``: the whole training step replayed as a CUDA graph, checked on the CPU.

Every paper run (:data:`paper_runs.records.PAPER_RUNS` with its ``paper`` profile settings, as ``paper_runs.step_ops``
reads them, at reduced width and on 10-token windows) is checked for what a capture needs, everything but the
capture itself:

* the graph-mode step run eagerly (static buffers, tensor learning rate, loss ring) gives the losses of today's
  step over an epoch's steps, its last, shorter batch included, and of the next epoch's: to the bit against today's
  step on the same optimizer, and within :data:`ADAM_RTOL` against today's run, whose Adam is not ``capturable``
  (its step size is computed on the host in float64; the capturable one computes it on the device in float32);
* a whole step on the ``meta`` device, which has no data: any read of a figure by the host raises;
* the step's loss traced by ``torch._dynamo`` into one graph (``fullgraph``, the ``eager`` backend: no inductor),
  without recompiling across steps. Exempt: FF2 and FFA, which tokenise the batch's words on the host (Python
  strings, data-dependent lengths); graph mode trains them eagerly for the same reason.

and the trainer around it: a run asking for graph mode on the CPU trains eagerly, says "no CUDA" and writes the
bytes of ``compile: off``; a capture that raises or a replay that disagrees with the eager step (simulated by a fake
capture) leaves the run training eagerly from the state it had, with the reason recorded; a faithful fake capture
replays to the same bytes, also across a pause and a resume.
"""

from __future__ import annotations

import csv
import hashlib
import importlib
import math

import numpy as np
import pytest
import torch

from paper_runs import step_ops
from experiments.params import experiment_config, load_params
from models import build_model
from paper_runs.records import PAPER_RUNS
from tests.fixture_corpus import write_cue_caches
from tests.helpers import REPO
from training import Budget, train_model
from training import graph_step as graph_module
from training import loop
from training.batches import TokenStore, epoch_plan, lr_schedule
from training.config import TrainConfig
from training.graph_step import GraphStep
from training.optimizer import graph_optimizer

#: today's Adam against the capturable one (host float64 against device float32 step sizes), over a few steps: at
#: most 2.7e-7 apart over the paper runs (a few float32 roundings), 2e-6 leaves room
ADAM_RTOL = 2e-6
#: every paper run (the Transformers share a model and differ by input: learned embeddings, word vectors, word
#: vectors with speech columns)
RUNS = list(PAPER_RUNS)
#: widths of the reduced models (every paper run's own settings otherwise)
REDUCED = {"d_model": 16, "heads": 2, "ffn": 32, "encoder_layers": 1, "decoder_layers": 1, "hidden": 8,
           "channels": 4, "lstm_hidden": 8, "second_dim": 16, "second_layers": 1, "second_heads": 2,
           "fusion_heads": 2, "fusion_ffn": 32, "max_subwords": 64}
#: models that read words: tokenised on the host every batch, so neither traced by dynamo nor captured
READS_WORDS = {"ff2", "ffa"}
SEQ_LEN = 10


def reduced(name: str) -> tuple[dict, dict, str]:
    """(model config, train config, input cache name) of paper run ``name`` at reduced width, on the CPU."""
    spec = PAPER_RUNS[name]
    model, train = experiment_config(load_params(REPO / "params.yaml", profile="paper"), spec.experiment)
    model = {key: REDUCED.get(key, value) for key, value in model.items()}
    if "blocks" in model:
        model["blocks"] = min(model["blocks"], 2)
    if model["name"] in READS_WORDS:
        model["layers"] = 1  # of the pretrained encoder
    # resident: the tokens as tensors on the device, every batch gathered there (graph mode's store; on CUDA the
    # default, on the CPU the same tensors as the host-cut batches)
    # (compile: off, as today; a test turns graph mode on where it means to)
    train = {**train, "device": "cpu", "threads": 1, "resident": "on", "compile": "off", "seq_len": SEQ_LEN,
             "epochs": 2, "warmup_steps": 3, "eval_every_steps": 1000, "log_every_steps": 1, "dev_eval_tokens": 60,
             "decode_window": None, "decode_stride": None}
    inputs = {"learned": "ids", "speech": "cues", "word_speech": "cues"}.get(spec.feature_set, "vectors")
    return model, train, inputs


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    """A tiny corpus as word vectors, as token ids alone (learned embeddings) and as word vectors with two
    timing-cue-like columns concatenated (the speech inputs' layout)."""
    return write_cue_caches(tmp_path_factory.mktemp("graph"), sentences_per_talk=10, train_tokens=360,
                            words_name="vectors", ids_name="ids")


def with_short_last_batch(features, train: dict) -> dict:
    """``train`` with a batch size that ends the first epoch with a shorter batch, and ``max_steps`` two steps into
    the second epoch."""
    from embeddings.store import load_split

    tokens = len(load_split(features, "train").ids)
    for batch_size in range(5, 12):
        plan = epoch_plan(tokens, SEQ_LEN, batch_size, train["seed"], 0)
        if len(plan[-1]) < batch_size and len(plan) >= 3:
            return {**train, "batch_size": batch_size, "max_steps": len(plan) + 2}
    raise AssertionError("no batch size leaves a shorter last batch")


@pytest.fixture
def graph_on_cpu(monkeypatch):
    """Graph mode as on CUDA, on the CPU: the refusal lifted, capturable Adam allowed on the CPU (and on meta)."""
    adam = importlib.import_module("torch.optim.adam")
    supported = adam._get_capturable_supported_devices
    monkeypatch.setattr(adam, "_get_capturable_supported_devices",
                        lambda supports_xla=True: [*supported(supports_xla), "cpu", "meta"])
    monkeypatch.setattr(loop, "graph_refusal", lambda *args: None)
    return monkeypatch


class FakeGraph:
    """What the CPU has of a captured graph: the captured function, run at every replay."""

    captures = 0

    def __init__(self, body):
        FakeGraph.captures += 1
        self.body = body

    def replay(self):
        self.body()


class IdleGraph(FakeGraph):
    """A graph that replays nothing (as one whose kernels write elsewhere): the self-check must catch it."""

    def replay(self):
        pass


def raising_capture(body):
    raise RuntimeError("operation not permitted when stream is capturing (simulated)")


def train(features, folder, model, train_config, **options):
    result = train_model(features, folder / "model", folder / "state", model_config=model, train_config=train_config,
                         window=30, stride=15, **options)
    with open(folder / "model" / "history.csv", encoding="utf-8") as handle:
        history = list(csv.DictReader(handle))
    digest = hashlib.sha256((folder / "model" / "model.pt").read_bytes()).hexdigest()
    return result, history, digest


def losses(history) -> list[float]:
    return [float(row["train_loss"]) for row in history if row["dev_f1"] == ""]


@pytest.mark.parametrize("name", RUNS)
def test_the_graph_step_run_eagerly_gives_todays_losses(name, caches, tmp_path, graph_on_cpu):
    model, train_config, inputs = reduced(name)
    features = caches / inputs
    train_config = with_short_last_batch(features, train_config)
    graph = {**train_config, "compile": "graph"}
    with graph_on_cpu.context() as patch:  # today's step on the graph's optimizer: capturable, a tensor rate
        patch.setattr(loop, "GraphStep", lambda *args, **kwargs: None)
        _, same_optimizer, same_optimizer_digest = train(features, tmp_path / "optimizer", model, graph)
    with graph_on_cpu.context() as patch:  # the graph-mode step, never captured
        patch.setattr(graph_module, "WARMUP_STEPS", 10 ** 9)
        result, graph_history, graph_digest = train(features, tmp_path / "graph", model, graph)
    # today's CPU run cuts its batches on the host (resident: auto)
    _, today, _ = train(features, tmp_path / "today", model, {**train_config, "resident": "auto"})

    steps = train_config["max_steps"]
    assert result.metrics["steps"] == steps and result.timings["steps_eager_this_run"] == steps
    assert result.timings["steps_replayed_this_run"] == 0
    # static buffers and the loss ring: today's step to the bit, the epoch's shorter last batch included
    assert graph_history == same_optimizer and graph_digest == same_optimizer_digest
    assert len(losses(graph_history)) == steps
    # capturable Adam against today's: the first step's loss to the bit (no update before it), then within a hair
    ours, theirs = losses(graph_history), losses(today)
    assert ours[0] == theirs[0]
    assert all(math.isclose(a, b, rel_tol=ADAM_RTOL) for a, b in zip(ours, theirs)), (ours, theirs)
    # the history's learning rate is the host's schedule, as today's
    assert [row["lr"] for row in graph_history] == [row["lr"] for row in today]


@pytest.mark.parametrize("name", RUNS)
def test_a_graph_step_on_the_meta_device_reads_no_figure_on_the_host(name, graph_on_cpu):
    model_config, train_config, inputs = reduced(name)
    learned = inputs == "ids"
    device = torch.device("meta")
    torch.manual_seed(0)
    model = build_model(model_config, num_labels=4, vector_dim=0 if learned else step_ops.VECTOR_DIM,
                        vocab_size=50).to(device).train()
    rows, tokens = 4, 4 * SEQ_LEN * 3
    rng = np.random.default_rng(0)
    store = TokenStore(rng.normal(size=(tokens, 0 if learned else step_ops.VECTOR_DIM)).astype(np.float32),
                       rng.integers(2, 50, tokens), rng.integers(0, 4, tokens),
                       words=["word"] * tokens if model.reads_words else None, device=device, resident=True)
    optimizer = graph_optimizer(model.parameters(), train_config["lr"], device)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule("rsqrt", 3, 10))
    config = TrainConfig.from_mapping({**train_config, "batch_size": rows, "log_every_steps": 3})
    step = GraphStep(model, optimizer, store, config, bf16=False, warmup_steps=10 ** 9)
    for first in (0, 7, 3):  # whole batches, then the shorter one
        starts = np.arange(rows - (first == 3)) * SEQ_LEN + first
        step.step(starts, torch.as_tensor(starts).to(device), scheduler)
    assert step.eager_steps == 3 and step.ring.device.type == "meta"


@pytest.mark.parametrize("name", [name for name in RUNS if PAPER_RUNS[name].experiment not in READS_WORDS])
def test_the_graph_steps_loss_traces_into_one_graph_that_is_not_recompiled(name, graph_on_cpu):
    """(FF2 and FFA are exempt: see the module docstring.)"""
    from torch._dynamo.utils import counters

    model_config, train_config, inputs = reduced(name)
    learned = inputs == "ids"
    torch.manual_seed(0)
    model = build_model(model_config, num_labels=4, vector_dim=0 if learned else step_ops.VECTOR_DIM,
                        vocab_size=50).train()
    rows, tokens = 4, 4 * SEQ_LEN * 3
    rng = np.random.default_rng(0)
    store = TokenStore(rng.normal(size=(tokens, 0 if learned else step_ops.VECTOR_DIM)).astype(np.float32),
                       rng.integers(2, 50, tokens), rng.integers(0, 4, tokens), words=None,
                       device=torch.device("cpu"), resident=True)
    optimizer = graph_optimizer(model.parameters(), train_config["lr"], torch.device("cpu"))
    config = TrainConfig.from_mapping({**train_config, "batch_size": rows, "log_every_steps": 3})
    step = GraphStep(model, optimizer, store, config, bf16=False, warmup_steps=10 ** 9)
    host = np.arange(rows) * SEQ_LEN
    torch._dynamo.reset()
    counters.clear()
    # recurrent layers (nn.LSTM, nn.GRU) are traced with dynamo's allow_rnn (off by default)
    with torch._dynamo.config.patch(error_on_recompile=True, allow_rnn=True):
        loss_of = torch.compile(lambda: step._loss(host, rows, True), backend="eager", fullgraph=True)
        for first in (0, 7, 3):  # other windows, other weights: the same graph
            step.starts.copy_(torch.as_tensor(host + first))
            loss = loss_of()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    graphs, breaks = counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())
    torch._dynamo.reset()
    assert graphs == 1 and breaks == 0


def test_the_installed_torch_schedules_a_graph_optimizers_tensor_learning_rate_in_place():
    """LambdaLR fills the optimizer's own rate tensor (what the captured Adam reads) with the schedule's value."""
    assert graph_module.tensor_lr_problem(torch.device("cpu")) is None


WRN_BLSTM = "wrn_blstm"  # BatchNorm (running statistics), a BLSTM and dropout: all a check must restore


def test_graph_mode_on_the_cpu_trains_eagerly_to_the_bytes_of_compile_off_and_says_why(caches, tmp_path):
    model, train_config, inputs = reduced(WRN_BLSTM)
    features = caches / inputs
    train_config = with_short_last_batch(features, train_config)
    result, history, digest = train(features, tmp_path / "graph", model, {**train_config, "compile": "graph"})
    off, off_history, off_digest = train(features, tmp_path / "off", model, train_config)
    assert result.metrics["step_mode"] == "eager" and "no CUDA" in result.metrics["step_mode_reason"]
    assert "step_mode" not in off.metrics  # compile: off records nothing new
    assert digest == off_digest and history == off_history
    assert {k: v for k, v in result.metrics.items() if not k.startswith("step_mode")} == off.metrics


@pytest.mark.parametrize("capture", [raising_capture, IdleGraph], ids=["capture_raises", "replay_disagrees"])
def test_a_failed_graph_capture_or_self_check_trains_eagerly_from_where_it_was(capture, caches, tmp_path,
                                                                              graph_on_cpu):
    model, train_config, inputs = reduced(WRN_BLSTM)
    features = caches / inputs
    train_config = {**with_short_last_batch(features, train_config), "compile": "graph"}
    with graph_on_cpu.context() as patch:
        patch.setattr(graph_module, "WARMUP_STEPS", 10 ** 9)
        _, eager_history, eager_digest = train(features, tmp_path / "eager", model, train_config)
    graph_on_cpu.setattr(graph_module, "cuda_capture", capture)
    graph_on_cpu.setattr(graph_module, "WARMUP_STEPS", 2)
    result, history, digest = train(features, tmp_path / "failed", model, train_config)
    reason = result.metrics["step_mode_reason"]
    assert result.metrics["step_mode"] == "eager" and reason.endswith("trained eagerly")
    if capture is raising_capture:
        assert reason.startswith("capture failed: RuntimeError: operation not permitted")
    else:
        assert reason.startswith("self-check failed: GraphCheckFailed: weights after the step")
    assert result.timings["steps_replayed_this_run"] == 0
    # the check's steps were undone in place: the run trained on as if no capture had been tried
    assert history == eager_history and digest == eager_digest


def test_a_faithful_capture_replays_to_the_same_bytes_also_across_a_pause(caches, tmp_path, graph_on_cpu):
    model, train_config, inputs = reduced(WRN_BLSTM)
    features = caches / inputs
    train_config = {**with_short_last_batch(features, train_config), "compile": "graph"}
    train_config["max_steps"] += 4
    with graph_on_cpu.context() as patch:
        patch.setattr(graph_module, "WARMUP_STEPS", 10 ** 9)
        _, eager_history, eager_digest = train(features, tmp_path / "eager", model, train_config)
    graph_on_cpu.setattr(graph_module, "cuda_capture", FakeGraph)
    graph_on_cpu.setattr(graph_module, "WARMUP_STEPS", 2)
    FakeGraph.captures = 0
    result, history, digest = train(features, tmp_path / "graph", model, train_config)
    assert result.metrics["step_mode"] == "graph"
    assert result.metrics["step_mode_reason"] == "captured after 2 eager warm-up steps; the self-check passed"
    assert FakeGraph.captures == 2  # the training step's and the self-check's
    replays, eager = result.timings["steps_replayed_this_run"], result.timings["steps_eager_this_run"]
    assert replays + eager == train_config["max_steps"] and eager >= 3  # warm-up and the shorter batches
    assert history == eager_history and digest == eager_digest
    # paused after 4 steps and resumed: warm-up and capture again, the same bytes
    paused = train_model(features, tmp_path / "resumed" / "model", tmp_path / "resumed" / "state", model_config=model,
                         train_config=train_config, window=30, stride=15, budget=Budget(steps=4))
    assert not paused.metrics["completed"] and paused.metrics["steps"] < train_config["max_steps"]
    resumed, resumed_history, resumed_digest = train(features, tmp_path / "resumed", model, train_config)
    assert resumed.metrics["step_mode"] == "graph" and resumed_digest == eager_digest
    assert resumed_history == eager_history


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@needs_cuda
@pytest.mark.parametrize("name", RUNS)
def test_on_cuda_every_paper_run_replays_its_graph_without_waiting_for_the_gpu(name, caches, tmp_path, monkeypatch):
    """On a GPU (the lease's check): each paper run at reduced width captures its step, passes the self-check and
    replays it with CUDA's sync debug mode set to fail; FF2 and FFA train eagerly and say why."""
    model, train_config, inputs = reduced(name)
    features = caches / inputs
    train_config = with_short_last_batch(features, train_config)
    train_config = {**train_config, "device": "cuda", "resident": "auto", "compile": "graph", "epochs": 4,
                    "max_steps": None}
    step = GraphStep.step
    checked = []

    def step_failing_on_a_sync(self, *args):
        if self.graph is None:  # warm-up, capture and self-check may wait
            return step(self, *args)
        torch.cuda.set_sync_debug_mode("error")  # a synchronizing call raises instead of waiting
        try:
            return step(self, *args)  # with the scheduler's step
        finally:
            torch.cuda.set_sync_debug_mode("default")
            checked.append(self.replays)

    monkeypatch.setattr(GraphStep, "step", step_failing_on_a_sync)
    result, history, _ = train(features, tmp_path, model, train_config)
    assert all(math.isfinite(loss) for loss in losses(history))
    if PAPER_RUNS[name].experiment in READS_WORDS:
        assert result.metrics["step_mode"] == "eager" and "reads words" in result.metrics["step_mode_reason"]
        return
    assert result.metrics["step_mode"] == "graph", result.metrics["step_mode_reason"]
    assert result.timings["steps_replayed_this_run"] >= 5 and checked
