"""``python -m paper_runs.step_ops``: the operators of one training step of a paper run, as a GPU would launch them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from paper_runs import step_ops
from tests.fixture_corpus import TINY_MODEL, TINY_TRAIN

REPO = Path(__file__).resolve().parents[1]


def test_one_json_line_per_run_without_waits_and_recurrent_layers_as_one_call(capsys):
    assert step_ops.main(["--params", str(REPO / "params.yaml"), "--runs", "wrn,blstm,conv", "--json"]) == 0
    lines = {line["run"]: line for line in map(json.loads, capsys.readouterr().out.splitlines())}
    assert list(lines) == ["wrn", "blstm", "conv"]
    for line in lines.values():
        assert line["batch"] == 32 and line["seq_len"] == 100 and line["waits"] == 0
        assert line["kernels"] == line["ops"] - line["views"] > 0
    assert lines["blstm"]["recurrent_calls"] == 1 and lines["wrn"]["recurrent_calls"] == 0
    # whole windows: fused BatchNorm, one kernel forward a layer (four blocks of two, one at the end)
    assert lines["wrn"]["by_name"]["native_batch_norm"] == 9


def test_a_recurrent_layer_is_replaced_by_its_two_cudnn_calls():
    layer = torch.nn.GRU(4, 3, num_layers=2, batch_first=True, bidirectional=True)
    cpu_ops, _ = step_ops._recurrent_cpu_ops(layer, torch.Size([2, 7, 4]))
    assert cpu_ops > 2 * 7  # a CPU's GRU runs operators per time step; cuDNN's is two calls
    model = torch.nn.Sequential(layer)
    calls, handles = step_ops._recurrent_calls(model)
    model(torch.randn(2, 7, 4))
    assert calls == [(layer, torch.Size([2, 7, 4]))]
    for handle in handles:
        handle.remove()


def test_waits_are_counted():
    with step_ops.OperatorCount() as counter:
        x = torch.arange(5.0)
        float(x.sum())  # the host reads a figure
        x[x > 2]  # boolean-mask indexing: the host needs the count
        x[:, None][x > 2]  # the mask beside a slice
        x[1:3]  # a view, no wait
    assert counter.waits == 3


def test_a_dev_evaluation_is_counted_in_the_run_s_decoding_windows_at_the_cuda_batch():
    tiny = {**TINY_MODEL, "aligned_memory": False}  # the paper's reading: the decoder attends over all of memory
    train = {**TINY_TRAIN, "seq_len": 10, "dev_eval_tokens": 600, "decode_window": 10, "decode_stride": 5}
    whole = step_ops.count_dev_eval(tiny, train, window=100, stride=50, batch_size=40, scale=1)
    assert (whole["window"], whole["stride"], whole["tokens"]) == (10, 5, 600)  # the run's own windows
    assert (whole["loss_batches"], whole["decoding_batches"]) == (2, 3)  # 60 windows, 119 decoding windows, 40 a batch
    assert whole["waits"] == 0 and whole["kernels"] > 0 and whole["gflop"] > 0
    # a tenth of the tokens at a tenth of the batch: the same batches, the same kernels, the arithmetic scaled back
    scaled = step_ops.count_dev_eval(tiny, train, window=100, stride=50, batch_size=40, scale=10)
    assert scaled["kernels"] == whole["kernels"]
    assert scaled["gflop"] == pytest.approx(whole["gflop"], rel=0.1)
    # greedy decoding: a step a position, so ten times the window, many times the kernels
    longer = step_ops.count_dev_eval(tiny, {**train, "decode_window": 100, "decode_stride": 50}, window=100,
                                     stride=50, batch_size=40, scale=1)
    assert longer["kernels"] > 3 * whole["kernels"] / whole["decoding_batches"] * longer["decoding_batches"]
