"""What the trainer reads: a typed, validated training configuration and the run's budget.

:class:`TrainConfig` is built from the ``train`` settings of an experiment (``params.yaml``: the shared
``train`` merged with the experiment's and the profile's, :func:`experiments.params.experiment_config`).
Every key of ``params.yaml``'s ``train`` is a required field; a key the trainer does not know is refused (a
typo must not pass as a setting), and so is a value of the wrong type or out of range, with a message naming
the key. The *execution* fields (``precision``, ``compile``, ``resident``, ``eval_batch_size``,
``find_unused_parameters``) say how the same computation runs on a device; they have defaults, need not be in
``params.yaml``, and are part of the recorded settings (and of the checkpoint fingerprint) only when set to
something else than their default, so every existing checkpoint and model directory stays valid.

:class:`Budget` is how much of the schedule one call of the trainer may run: a step count, a time at which it
checkpoints and returns to be resumed (``pause``), and a time at which training ends for good (``stop``). The
schedule itself (epochs, ``max_steps``) belongs to the configuration.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import time
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

import yaml

#: ``device`` values: auto (CUDA when available), cpu, cuda, cuda:N
DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
PRECISIONS = ("auto", "fp32", "bf16")
#: ``compile`` values: off, torch.compile's modes, and graph (the whole step replayed as a CUDA graph:
#: training.graph_step; eager, and recorded as such, where it cannot be)
COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune", "graph")
RESIDENT_MODES = ("auto", "on", "off")
#: ``lr_schedule`` values (training.batches.lr_schedule): the rate after warm-up
LR_SCHEDULES = ("rsqrt", "linear", "exponential", "constant")
#: ``decode_combine`` values (inference.windows.COMBINE_RULES): a token's label from the window it is most central
#: in, or the arg-max of its logits summed over every window covering it
DECODE_COMBINE = ("centre", "sum")
#: ``keep`` values: which weights the model directory gets -- those of the best dev evaluation, or the last step's
KEEP_RULES = ("best", "last")


class ConfigError(ValueError):
    """A training setting that is missing, unknown, of the wrong type or out of range."""


@dataclass(frozen=True)
class TrainConfig:
    """The training settings of one run (see ``params.yaml``, section ``train``, for their meaning)."""

    seed: int
    device: str
    threads: int
    batch_size: int
    seq_len: int
    epochs: int
    lr: float
    warmup_steps: int
    label_smoothing: float
    clip_norm: float
    eval_every_steps: int
    log_every_steps: int
    dev_eval_tokens: int | None
    max_steps: int | None
    # -- decoding: the overlapping windows of dev evaluation, the evaluate stage and punctuate (recorded in the
    #    model directory); null = the evaluate section's window and stride, for models that want their own --
    decode_window: int | None = field(default=None, metadata={"recorded_when_set": True})
    decode_stride: int | None = field(default=None, metadata={"recorded_when_set": True})
    #: centre = each token labelled by the window it is most central in; sum = by the arg-max of its logits (its
    #: log-probabilities up to a constant) summed over every window covering it (Courtland et al. 2020; models
    #: with a decoder of their own, the Transformer, keep centre)
    decode_combine: str = field(default="centre", metadata={"recorded_when_set": True})
    # -- the ASR-robustness levers (off by default; recorded only when set, so older runs keep their fingerprints) --
    #: each epoch's windows start at their own random offsets: the gap after a window is seq_len +- up to this many
    #: tokens (0: one random offset per epoch, then windows edge to edge; training.batches.epoch_plan)
    window_jitter: int = field(default=0, metadata={"recorded_when_set": True})
    #: ASR-style noise (Alam et al. 2020): each training token is altered with this probability (0: off) -- replaced
    #: by the unknown token with probability augment_substitute, deleted with augment_delete, else an unknown token
    #: is inserted before it (training.batches.AsrNoise)
    augment_rate: float = field(default=0.0, metadata={"recorded_when_set": True})
    augment_substitute: float = field(default=0.4, metadata={"recorded_when_set": True})
    augment_delete: float = field(default=0.4, metadata={"recorded_when_set": True})
    # -- the learning rate after warm-up: rsqrt = 1/sqrt(step) (Vaswani et al., the papers' schedule), linear =
    #    down to zero at the schedule's last step, exponential = down to a tenth of the peak at the last step,
    #    constant = the peak to the end (recorded only when not rsqrt, so older runs keep their fingerprints) --
    lr_schedule: str = field(default="rsqrt", metadata={"recorded_when_set": True})
    #: the peak rate of a pretrained encoder's own weights (a model's ``pretrained_encoder``: encoder_tagger's), on
    #: the same schedule; the other weights (a head, a new cue input) keep ``lr``. None: ``lr`` for every weight
    #: (training.optimizer.optimizer_groups)
    encoder_lr: float | None = field(default=None, metadata={"recorded_when_set": True})
    # -- which weights the run keeps, not which it trains: outside the checkpoint fingerprint (SELECTION_FIELDS),
    #    so a finished run is kept another way by running it again, without training it again --
    #: best = the weights of the best dev F1 among the evaluations (every eval_every_steps on dev_eval_tokens);
    #: last = the weights at the schedule's end (with a rate annealed to zero, a small dev slice's best of many
    #: evaluations is a noisy choice: reports/asr_levers/levers.md, ``keep_last``)
    keep: str = field(default="best", metadata={"recorded_when_set": True, "selection": True})
    # -- execution: how the computation runs, not what it computes (defaults: today's behaviour) --
    #: auto = bf16 autocast on CUDA, float32 on the CPU
    precision: str = field(default="auto", metadata={"execution": True})
    #: torch.compile of the model's loss (off by default: measure before turning it on), or graph: the whole
    #: training step captured once as a CUDA graph and replayed (training.graph_step)
    compile: str = field(default="off", metadata={"execution": True})
    #: training and dev tokens held as tensors on the device, batches cut by index (auto = on CUDA only)
    resident: str = field(default="auto", metadata={"execution": True})
    #: windows per dev-evaluation batch (None: max(batch_size, 64) on the CPU, 1024 on CUDA)
    eval_batch_size: int | None = field(default=None, metadata={"execution": True})
    #: DistributedDataParallel's find_unused_parameters (a model with parameters a batch may not reach)
    find_unused_parameters: bool = field(default=False, metadata={"execution": True})

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any] | TrainConfig) -> TrainConfig:
        """Validate ``settings`` (a ``train`` section of params) into a :class:`TrainConfig`."""
        if isinstance(settings, TrainConfig):
            return settings
        if not isinstance(settings, Mapping):
            raise ConfigError(f"train settings: expected a mapping, got {settings!r}")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise ConfigError(f"train settings: unknown {', '.join(unknown)} (the trainer reads: {', '.join(known)})")
        missing = [name for name, f in known.items() if _required(f) and name not in settings]
        if missing:
            raise ConfigError(f"train settings: missing {', '.join(missing)}")
        values = {name: _coerce(name, settings[name], known[name].type) for name in settings}
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        def need(ok: bool, key: str, what: str) -> None:
            if not ok:
                raise ConfigError(f"train.{key}: {what}, got {getattr(self, key)!r}")

        for key in ("threads", "batch_size", "seq_len", "warmup_steps", "eval_every_steps", "log_every_steps"):
            need(getattr(self, key) >= 1, key, "must be at least 1")
        need(self.epochs >= 0, "epochs", "must be at least 0")
        need(math.isfinite(self.lr) and self.lr > 0, "lr", "must be a positive number")
        need(0 <= self.label_smoothing < 1, "label_smoothing", "must be in [0, 1)")
        need(math.isfinite(self.clip_norm) and self.clip_norm > 0, "clip_norm", "must be a positive number")
        need(self.dev_eval_tokens is None or self.dev_eval_tokens >= 1, "dev_eval_tokens", "must be null or >= 1")
        need(self.max_steps is None or self.max_steps >= 0, "max_steps", "must be null or >= 0")
        need(self.encoder_lr is None or (math.isfinite(self.encoder_lr) and self.encoder_lr > 0), "encoder_lr",
             "must be null or a positive number")
        need(self.decode_window is None or self.decode_window >= 1, "decode_window", "must be null or >= 1")
        need(self.decode_stride is None or self.decode_stride >= 1, "decode_stride", "must be null or >= 1")
        need(self.eval_batch_size is None or self.eval_batch_size >= 1, "eval_batch_size", "must be null or >= 1")
        need(self.lr_schedule in LR_SCHEDULES, "lr_schedule", f"must be one of {', '.join(LR_SCHEDULES)}")
        need(self.keep in KEEP_RULES, "keep", f"must be one of {', '.join(KEEP_RULES)}")
        need(self.decode_combine in DECODE_COMBINE, "decode_combine", f"must be one of {', '.join(DECODE_COMBINE)}")
        need(0 <= self.window_jitter < self.seq_len, "window_jitter", "must be in [0, seq_len)")
        need(0 <= self.augment_rate < 1, "augment_rate", "must be in [0, 1)")
        for key in ("augment_substitute", "augment_delete"):
            need(0 <= getattr(self, key) <= 1, key, "must be in [0, 1]")
        need(self.augment_substitute + self.augment_delete <= 1 + 1e-9, "augment_delete",
             "must be at most 1 - augment_substitute (the rest is the insertions' share)")
        need(bool(DEVICE_PATTERN.match(self.device)), "device", "must be auto, cpu, cuda or cuda:N")
        need(self.precision in PRECISIONS, "precision", f"must be one of {', '.join(PRECISIONS)}")
        need(self.compile in COMPILE_MODES, "compile", f"must be one of {', '.join(COMPILE_MODES)}")
        need(self.resident in RESIDENT_MODES, "resident", f"must be one of {', '.join(RESIDENT_MODES)}")

    def fingerprinted(self) -> dict[str, Any]:
        """:meth:`as_params` without the settings that only choose which weights are kept (:data:`SELECTION_FIELDS`):
        what the checkpoint fingerprint covers."""
        return {key: value for key, value in self.as_params().items() if key not in SELECTION_FIELDS}

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes`` (validated)."""
        return TrainConfig.from_mapping({**self.as_params(full=True), **changes})

    def as_params(self, *, full: bool = False) -> dict[str, Any]:
        """The settings as a plain mapping: the ``params.yaml`` keys, and the execution and decoding fields that
        differ from their defaults (every field when ``full``). This is what a model directory records and what the
        checkpoint fingerprint covers."""
        settings = {}
        for f in fields(self):
            value = getattr(self, f.name)
            optional = f.metadata.get("execution") or f.metadata.get("recorded_when_set")
            if full or not optional or value != f.default:
                settings[f.name] = value
        return settings


#: settings that choose which of a run's weights its model directory gets, not how it trains (outside its fingerprint)
SELECTION_FIELDS = tuple(f.name for f in fields(TrainConfig) if f.metadata.get("selection"))


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING


def _coerce(name: str, value: Any, annotation: str) -> Any:
    """``value`` checked against the field's annotation (a string: ``from __future__ import annotations``)."""
    optional = annotation.endswith("| None")
    kind = annotation.replace("| None", "").strip()
    if value is None:
        if optional:
            return None
        raise ConfigError(f"train.{name}: must not be null")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        raise ConfigError(f"train.{name}: must be true or false, got {value!r}")
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"train.{name}: must be an integer, got {value!r}")
        return value
    if kind == "float":
        if isinstance(value, bool):
            raise ConfigError(f"train.{name}: must be a number, got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 1e-4 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"train.{name}: must be a number, got {value!r}")
    if kind == "str":
        if name == "compile" and isinstance(value, bool):  # compile: true/false in YAML
            return "default" if value else "off"
        if name == "resident" and isinstance(value, bool):
            return "on" if value else "off"
        if not isinstance(value, str):
            raise ConfigError(f"train.{name}: must be a string, got {value!r}")
        return value
    raise AssertionError(f"unhandled annotation {annotation!r} of train.{name}")  # pragma: no cover


@dataclass(frozen=True)
class Budget:
    """How far one call of the trainer may go through its schedule (all optional; none = to the end).

    ``steps``: after this many steps of this call, checkpoint and return an incomplete result (the next call
    resumes exactly there). ``pause_at``: the same at the first step past this ``time.monotonic()`` value: a
    long schedule split across fixed slots of machine time. ``stop_at``: at the first step past this
    ``time.monotonic()`` value, end training for good as if the schedule ended there (final dev evaluation,
    complete model directory, ``metrics["stopped_at_deadline"]``).

    In a distributed run the time limits are checked at every logging step (``log_every_steps``), where the
    processes agree on them.
    """

    steps: int | None = None
    pause_at: float | None = None
    stop_at: float | None = None

    def __post_init__(self) -> None:
        if self.steps is not None and self.steps < 1:
            raise ConfigError(f"budget: steps must be at least 1, got {self.steps}")

    @classmethod
    def seconds(cls, *, pause_after: float | None = None, stop_after: float | None = None,
                steps: int | None = None, now: float | None = None) -> Budget:
        """A budget counted from ``now`` (default: this moment) in seconds."""
        now = time.monotonic() if now is None else now
        return cls(steps=steps, pause_at=None if pause_after is None else now + pause_after,
                   stop_at=None if stop_after is None else now + stop_after)

    def pause_due(self, steps_this_call: int, now: float) -> bool:
        return ((self.steps is not None and steps_this_call >= self.steps)
                or (self.pause_at is not None and now >= self.pause_at))

    def stop_due(self, now: float) -> bool:
        return self.stop_at is not None and now >= self.stop_at


UNLIMITED = Budget()


#: the exit status of a training call that paused (checkpointed) before the end of its schedule
PAUSED_EXIT_STATUS = 3


def parse_setting(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` of a ``--set`` option, the value read as YAML (``max_steps=100``, ``device=cuda``)."""
    key, separator, value = text.partition("=")
    if not key or not separator:
        raise argparse.ArgumentTypeError(f"--set wants KEY=VALUE, got {text!r}")
    return key, yaml.safe_load(value)
