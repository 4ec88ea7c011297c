"""Training speed of the library's trainer, one JSON line per experiment.

    python -m benchmarks.train_speed --tiny                                     # CPU, seconds (what CI runs)
    python -m benchmarks.train_speed --profile paper --full                     # a GPU, every paper schedule
    python -m benchmarks.train_speed --profile paper --experiments transformer --steps 2000
    python -m benchmarks.train_speed --experiments minilm --steps 60 --model-set dropout=0.0   # a model setting

Each experiment is trained by :func:`training.train_model` exactly as ``pipeline.train`` does (the
same loop, dev evaluations, checkpoints and model directory), on ``--features`` (the pipeline's cache) or, with
``--tiny``, on a small synthetic cache with every model shrunk. ``--full`` runs the whole schedule; otherwise
``--steps`` steps (``max_steps``) with the experiment's own dev-evaluation interval, and the full schedule's time
is projected from the measured rates (``projected_schedule_s``).

Each line: ``steps_per_s`` and ``tokens_per_s`` (real tokens; training time only, warm-up included),
``flops_per_token`` (training = forward + backward, per real token: matrix products, convolutions and
attention counted by ``torch.utils.flop_counter`` on one training step of the experiment's batch, plus
2 x gates x hidden x (input + hidden) x 3 per token, direction and layer for the recurrent layers, which the
counter does not see), ``achieved_tflops`` (flops_per_token x tokens_per_s), ``mfu`` (that over
``peak_tflops``: the device's dense bf16 peak when known, e.g. 989 for an H100 SXM; ``--peak-tflops`` to give
one; null on a CPU unless given), ``peak_memory_bytes`` (CUDA: max allocated; CPU: the process's peak RSS,
which covers every experiment run so far in this process) and the shares of the wall time spent in dev
evaluation and in checkpointing; ``model_set`` / ``train_set``, the settings measured, ``model`` the model settings
they resolved to (a line keeps its meaning when params' defaults change), and ``machine`` (CPU model, cores,
AVX-512 or not: compare wall times of one machine only). Nothing is asserted: targets (an H100: the paper
Transformer >= 60 steps/s and its 13,140-step schedule with dev evaluations in <= 5 min; every other paper
experiment's schedule in <= 10 min) are read off these lines. It runs under the stages' pinned numerics
(experiments/numerics.py): on a CPU, the kernels the pipeline trains with.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy or torch loads (experiments/numerics.py)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from benchmarks.machine import this_machine  # noqa: E402
from corpus.labels import LABELS  # noqa: E402
from embeddings.store import CACHE_FORMAT, EMBEDDER_DIR, MANIFEST, WORDS_FILE  # noqa: E402
from experiments.params import experiment_config, load_params, merged  # noqa: E402
from models import build_model  # noqa: E402
from training import choose_device, train_model  # noqa: E402
from training.batches import schedule_steps  # noqa: E402
from training.config import TrainConfig, parse_setting  # noqa: E402
from training.model_output import HISTORY_FILE, dev_evaluations  # noqa: E402

#: dense bf16 peak TFLOP/s by device name (substring, first match)
PEAK_TFLOPS = (("H100 PCIe", 756.0), ("H100", 989.4), ("H200", 989.4), ("GH200", 989.4), ("A100", 312.0),
               ("L40S", 362.0), ("A10G", 70.0), ("L4", 121.0))
TINY_EXPERIMENTS = ("transformer", "drnn_lwma", "wrn", "wrn_blstm", "conv", "blstm", "lstm")
#: model settings of ``--tiny`` over each experiment's own (small enough for a CPU in seconds)
TINY_MODELS = {
    "transformer": {"d_model": 32, "heads": 4, "ffn": 64, "encoder_layers": 1, "decoder_layers": 1},
    "drnn_lwma": {"hidden": 16, "layers": 2, "heads": 2},
    "drnn_lwma_top_only": {"hidden": 16, "layers": 2, "heads": 2},
    "wrn": {"channels": 8, "widen": 2, "blocks": 1},
    "wrn_blstm": {"channels": 8, "widen": 2, "blocks": 1, "lstm_hidden": 16},
    "conv": {"channels": 16, "blocks": 1},
    "blstm": {"hidden": 16, "layers": 1},
    "lstm": {"hidden": 16, "layers": 1},
}
TINY_TRAIN = {"threads": 1, "batch_size": 8, "seq_len": 32, "epochs": 1, "warmup_steps": 10, "eval_every_steps": 20,
              "log_every_steps": 10, "dev_eval_tokens": 512, "device": "cpu"}
FLOP_COUNT = ("training (fwd+bwd) per token: torch.utils.flop_counter on one step, "
              "+ 6*gates*hidden*(input+hidden) per recurrent layer and direction")


def synthetic_cache(root: Path, *, tokens: int = 4000, dim: int = 16, seed: int = 0) -> Path:
    """A feature cache of random vectors whose labels follow from them (a learnable toy), in the cache layout
    :mod:`embeddings.store` reads (train, dev, ref, asr)."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i}" for i in range(50)]
    splits = {"train": tokens, "dev": tokens // 4, "ref": tokens // 8, "asr": tokens // 8}
    for split, n in splits.items():
        folder = root / split
        folder.mkdir(parents=True, exist_ok=True)
        vectors = rng.normal(size=(n, dim)).astype(np.float32)
        labels = np.zeros(n, dtype=np.int8)
        labels[:-1][vectors[1:, 0] > 1.0] = 2  # PERIOD before a word with a large first feature
        labels[vectors[:, 1] > 1.2] = 1  # COMMA on a word with a large second feature
        labels[(vectors[:, 2] > 1.8) & (labels == 2)] = 3
        ids = rng.integers(2, len(vocabulary), size=n).astype(np.int32)
        np.save(folder / "vectors.npy", vectors)
        np.save(folder / "ids.npy", ids)
        np.save(folder / "labels.npy", labels)
        np.save(folder / "oov.npy", np.zeros(n, dtype=bool))
        (folder / WORDS_FILE).write_text("".join(vocabulary[i] + "\n" for i in ids), encoding="utf-8")
    (root / EMBEDDER_DIR).mkdir(exist_ok=True)
    (root / EMBEDDER_DIR / "vocab.txt").write_text("".join(w + "\n" for w in ["<pad>", "<unk>", *vocabulary[2:]]),
                                                  encoding="utf-8")
    manifest = {"cache_format": CACHE_FORMAT, "dim": dim, "synthetic": True,
                "splits": {split: {"tokens": n} for split, n in splits.items()}}
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return root


def flops_per_token(model_config: dict, config: TrainConfig, *, vector_dim: int, vocab_size: int,
                    device: torch.device) -> float:
    """Training FLOPs per real token (see the module's docstring for what is counted)."""
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    model = build_model(model_config, num_labels=len(LABELS), vector_dim=vector_dim, vocab_size=vocab_size)
    model.to(device).train()
    rows, length = min(config.batch_size, 4), config.seq_len
    batch = {"vectors": torch.randn(rows, length, vector_dim, device=device),
             "ids": torch.randint(2, max(vocab_size, 3), (rows, length), device=device),
             "mask": torch.ones(rows, length, dtype=torch.bool, device=device),
             "labels": torch.randint(0, len(LABELS), (rows, length), device=device)}
    if model.reads_words:
        batch["words"] = [["word"] * length for _ in range(rows)]
    with FlopCounterMode(display=False) as counter:
        model.loss(batch, config.label_smoothing).backward()
    counted = counter.get_total_flops() / (rows * length)
    return float(counted + recurrent_flops_per_token(model))


def recurrent_flops_per_token(model: nn.Module) -> float:
    """Training FLOPs per token of the model's ``nn.LSTM``/``nn.GRU``/``nn.RNN`` layers (not seen by the
    flop counter): 2 x gates x hidden x (input + hidden) per direction and layer, x 3 for forward + backward."""
    gates = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
    total = 0.0
    for module in model.modules():
        if isinstance(module, nn.RNNBase):
            directions = 2 if module.bidirectional else 1
            for layer in range(module.num_layers):
                inputs = module.input_size if layer == 0 else module.hidden_size * directions
                total += directions * 2 * gates[module.mode] * module.hidden_size * (inputs + module.hidden_size)
    return 3 * total


def peak_tflops(device: torch.device, given: float | None) -> float | None:
    if given is not None:
        return given
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in PEAK_TFLOPS if key in name), None)


def measure(name: str, model_config: dict, train_settings: dict, features: Path, work: Path, *, window: int,
            stride: int, steps: int | None, peak: float | None, profile: str) -> dict[str, Any]:
    """Train one experiment (``steps`` steps, or its whole schedule) and return its figures."""
    config = TrainConfig.from_mapping(train_settings)
    manifest = json.loads((features / MANIFEST).read_text(encoding="utf-8"))
    train_tokens, vector_dim = int(manifest["splits"]["train"]["tokens"]), int(manifest["dim"])
    with open(features / EMBEDDER_DIR / "vocab.txt", encoding="utf-8") as handle:
        vocab_size = sum(1 for _ in handle)
    schedule = schedule_steps(train_tokens, config)
    if config.max_steps is not None:
        schedule = min(schedule, config.max_steps)
    run_config = config if steps is None else config.replace(max_steps=min(steps, schedule))
    device = choose_device(config.device)
    per_token = flops_per_token(model_config, config, vector_dim=vector_dim, vocab_size=vocab_size, device=device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    shutil.rmtree(work, ignore_errors=True)
    result = train_model(features, work / "model", work / "state", model_config=model_config,
                         train_config=run_config.as_params(full=True), window=window, stride=stride)
    metrics, seconds = result.metrics, result.seconds
    train_s, wall_s, eval_s, checkpoint_s = (seconds[key] for key in ("train", "wall", "eval", "checkpoint"))
    steps_done = metrics["steps"]
    steps_per_s = steps_done / train_s if train_s else 0.0
    tokens_per_s = metrics["train_tokens_seen"] / train_s if train_s else 0.0
    achieved = per_token * tokens_per_s / 1e12
    evals = dev_evaluations(work / "model" / HISTORY_FILE)
    # the full schedule at these rates: its steps, one dev evaluation every eval_every_steps and at each epoch's end
    full_evals = schedule // config.eval_every_steps + config.epochs
    projected = (schedule / steps_per_s if steps_per_s else None)
    if projected is not None and evals:
        projected += full_evals * (eval_s + checkpoint_s) / evals
    return {
        "experiment": name, "profile": profile, "device": metrics["device"], "precision": run_config.precision,
        "compile": run_config.compile, "resident": run_config.resident,
        "batch_size": config.batch_size, "seq_len": config.seq_len,
        "steps": steps_done, "steps_scheduled": schedule,
        "steps_per_s": round(steps_per_s, 2), "tokens_per_s": round(tokens_per_s, 1),
        "flops_per_token": round(per_token), "flop_count": FLOP_COUNT,
        "achieved_tflops": float(f"{achieved:.4g}"), "peak_tflops": peak,
        "mfu": None if not peak else float(f"{achieved / peak:.4g}"),
        "peak_memory_bytes": result.timings["peak_memory_bytes"], "peak_memory_kind": result.timings["peak_memory_kind"],
        "wall_s": round(wall_s, 2), "train_s": round(train_s, 2), "eval_s": round(eval_s, 2),
        "checkpoint_s": round(checkpoint_s, 2), "dev_evaluations": evals,
        "eval_share": round(eval_s / wall_s, 3) if wall_s else None,
        "checkpoint_share": round(checkpoint_s / wall_s, 3) if wall_s else None,
        "projected_schedule_s": None if projected is None else round(projected, 1),
        "best_dev_f1": metrics["best_dev_f1"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.train_speed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--profile", default=None, help="profile of the params file (default: the file's own)")
    parser.add_argument("--experiments", nargs="+", help="names under experiment_defs (default: the params' "
                        f"experiments; with --tiny: {' '.join(TINY_EXPERIMENTS)})")
    parser.add_argument("--features", default="data/features", help="feature cache (ignored with --tiny)")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int, default=None, help="steps per experiment (default: 200; 30 with --tiny)")
    length.add_argument("--full", action="store_true", help="each experiment's whole schedule")
    parser.add_argument("--tiny", action="store_true", help="a synthetic cache and shrunk models, on the CPU")
    parser.add_argument("--device", default=None, help="auto, cpu, cuda (default: the profile's; cpu with --tiny)")
    parser.add_argument("--set", type=parse_setting, action="append", default=[], metavar="KEY=VALUE",
                        help="override a train setting of every experiment (e.g. compile=default)")
    parser.add_argument("--model-set", type=parse_setting, action="append", default=[], metavar="KEY=VALUE",
                        help="override a model setting of every experiment (e.g. dropout=0.0)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the device's peak, for the MFU")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    args = parser.parse_args(argv)

    params = load_params(args.params, profile=args.profile)
    names = args.experiments or (list(TINY_EXPERIMENTS) if args.tiny else list(params["experiments"]))
    steps = None if args.full else (args.steps if args.steps is not None else (30 if args.tiny else 200))
    overrides, model_overrides = dict(args.set), dict(args.model_set)
    window, stride = int(params["evaluate"]["window"]), int(params["evaluate"]["stride"])
    scratch = tempfile.TemporaryDirectory(prefix="train_speed_") if args.work is None else None
    work = Path(scratch.name) if scratch else args.work
    try:
        features = synthetic_cache(work / "features", tokens=8000) if args.tiny else Path(args.features)
        if args.tiny:
            window, stride = 32, 16
        for name in names:
            model_config, train_settings = experiment_config(params, name)
            if args.tiny:
                model_config = merged(model_config, TINY_MODELS.get(name, {}), f"--tiny {name}", "model")
                train_settings.update({**TINY_TRAIN, "max_steps": None})
            train_settings.update(overrides)
            model_config = merged(model_config, model_overrides, "--model-set", "model")
            if args.device:
                train_settings["device"] = args.device
            device = choose_device(str(train_settings["device"]))
            torch.set_num_threads(int(train_settings["threads"]))
            started = time.perf_counter()
            line = measure(name, model_config, train_settings, features, work / "runs" / name, window=window,
                           stride=stride, steps=steps, peak=peak_tflops(device, args.peak_tflops),
                           profile="tiny" if args.tiny else params["profile"])
            line["benchmark_s"] = round(time.perf_counter() - started, 1)
            line["model_set"], line["train_set"] = model_overrides, overrides  # what the figures were measured with
            line["model"] = model_config  # the settings resolved: model_set {} means whatever params held that day
            line["machine"] = this_machine()  # what the wall times depend on: compare lines of one machine only
            print(json.dumps(line), flush=True)
    finally:
        if scratch is not None:
            scratch.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
