"""A comparison's spec: the question, two arms, the seeds, the decision splits and the keep rule, fixed before the run.

A spec is a YAML file (``comparisons/specs/NAME.yaml``)::

    question: Does ... beat ...?           # free text
    notes: ...                              # free text (what the arms cannot reproduce, ...)
    params: params.yaml                     # both arms start from this file (default params.yaml)
    prepared: data/prepared                 # where a split's tokens are by default: <prepared>/<split>.tsv
    arms:
      A:
        what: b4842e6's text model          # free text
        overrides:                          # DVC's -S strings, or one YAML mapping (see below)
          - profiles.small.experiments.minilm.train.max_steps=1000
          - "+tunings.minilm_words={from: minilm, features: word}"
        train:                              # the chain, in order; the last step's model is scored
          - {experiment: minilm, features: data/features}
          - {tuning: minilm_words, features: data/features}
      B: {what: today's text model, overrides: [], train: [{experiment: minilm}]}
      # an arm of tunings alone starts them from models trained already (<source_artifacts>/<experiment>/model):
      # C: {what: ..., source_artifacts: artifacts, train: [{tuning: minilm_word_pauses}]}
    seeds: [1, 2, 3]
    decide_on: [dev, earnings22_dev]        # dev splits only: a test split is refused
    splits:                                 # where a split is not <prepared>/<split>.tsv cut into pseudo-talks
      earnings22_dev: {file: data/earnings22/dev.tsv, talks: data/earnings22/dev_talks.tsv}
      # the same tokens with their real word timings (raw cues, embeddings.timing_features), for speech models
      earnings22_dev_timed: {file: data/earnings22/dev.tsv, talks: data/earnings22/dev_talks.tsv,
                             timing: data/earnings22/timing/dev/timing.npy}
    bootstrap: {resamples: 10000, seed: 59, level: 0.95}
    keep_rule:
      min_effect: 0.5                       # F1 points: B's mean gain over the seeds, on every decision split;
                                            # or per split ({earnings22_dev: 0.5, dev: -0.3}): a negative one
                                            # bounds a loss (B at most 0.3 below A), see report.verdict
      interval_above_zero: true             # the bootstrap interval's lower bound above 0
      every_seed: true                      # B above A on every seed
      max_extra_minutes: 5                  # B's training at most this many minutes over A's (null: no time rule)

An override is what ``dvc exp run -S`` takes, read by the grammar DVC reads it with (Hydra's): ``key.path=value``
changes a key that exists, ``+key.path=value`` adds one, ``++key.path=value`` sets or adds, ``~key.path`` removes.
A mapping of overrides is the same, nested: each leaf changes its key; a key written ``+name`` (``++name``) adds the
whole value under it. They apply to the params file as loaded (:func:`apply_overrides`): DVC's own writer loses
quoting that the params file needs (it writes ``compile: "off"`` back unquoted, which YAML 1.1 reads as false).

A decision split is a ``word<TAB>LABEL`` file of tokens (``file``, default ``<prepared>/<split>.tsv``) and the talks
its bootstrap draws (``talks``: a ``talk first_token tokens`` file, as ``train_talks.tsv``; without one, the
pseudo-talks the audio half cuts dev2012 into); with ``timing``, the tokens' raw timing cues (an ``(N, 3)`` array of
:mod:`embeddings.timing_features`), which a speech model reads as ``punctuate --alignment`` gives them. A split named, or read from a file named, like a test split is
refused (:func:`is_test_split`).

A step's ``features`` defaults to what the pipeline trains it on: an experiment's ``experiments.NAME.features``, a
variant's or tuning's ``data/feature_sets/<its features>``. A tuning starts from the experiment an earlier step of
its arm trains, or, in an arm with ``source_artifacts``, from ``<source_artifacts>/<experiment>/model`` (a model
trained already, the same for both arms: its weights' SHA-256 is part of the arm's settings).

:attr:`Spec.rule_sha256` hashes everything but the free text (``question``, ``notes``, each arm's ``what``): what
decides. Every result records it, and a run refuses a spec whose rule moved after a result exists.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from corpus.io import file_sha256
from experiments.params import ParamsError, experiment_config, load_params, tuning_config, variant_config

#: the splits that are never decision splits (and any split whose name says test)
TEST_SPLITS = ("ref", "asr")
ARMS = ("A", "B")
STEP_KINDS = ("experiment", "variant", "tuning")
SPEC_KEYS = {"question", "notes", "params", "prepared", "arms", "seeds", "decide_on", "splits", "bootstrap",
             "keep_rule"}
SPLIT_KEYS = {"file", "talks", "timing"}
ARM_KEYS = {"what", "overrides", "train", "source_artifacts"}
BOOTSTRAP_DEFAULTS = {"resamples": 10000, "seed": 59, "level": 0.95}
KEEP_KEYS = {"min_effect", "interval_above_zero", "every_seed", "max_extra_minutes"}
#: free text: neither trains nor decides, so it is left out of the rule's hash
FREE_TEXT = ("question", "notes")


class SpecError(ValueError):
    """A spec that cannot be run as written (the message names the file and the entry)."""


@dataclass(frozen=True)
class Override:
    """One change to the params file: ``op`` is set (the key exists), add (it does not), force (either) or delete."""

    op: str
    key: str
    value: Any = None


@dataclass(frozen=True)
class Step:
    """One training of an arm's chain: ``kind`` (experiment, variant or tuning) ``name`` on ``features``."""

    kind: str
    name: str
    features: str | None = None

    def label(self) -> str:
        return f"{self.name} ({self.features})" if self.features else self.name


@dataclass(frozen=True)
class Arm:
    label: str
    what: str
    overrides: tuple[Override, ...]
    written: tuple[str, ...]  # the overrides as the spec writes them, for the report
    chain: tuple[Step, ...]
    source_artifacts: str | None = None  # where tunings of experiments no step trains find them


@dataclass(frozen=True)
class KeepRule:
    min_effect: dict[str, float]  # per decision split: the least mean gain (a negative one: the most loss)
    interval_above_zero: bool
    every_seed: bool
    max_extra_minutes: float | None


@dataclass(frozen=True)
class Spec:
    name: str
    path: Path
    question: str
    notes: str
    params: Path
    prepared: Path
    arms: dict[str, Arm]
    seeds: tuple[int, ...]
    decide_on: tuple[str, ...]
    split_files: dict[str, Path]    # each decision split's tokens
    talks: dict[str, str]           # a split's talks file, where it has one (else pseudo-talks)
    timings: dict[str, Path]        # a split's raw timing cues, where a speech model reads them
    resamples: int
    bootstrap_seed: int
    level: float
    keep: KeepRule
    sha256: str
    rule_sha256: str


def is_test_split(split: str, params: dict[str, Any] | None = None) -> bool:
    """Whether ``split`` is a test split: Ref, ASR, the params' ``evaluate.test_splits``, or named ``*test*``."""
    named = set(TEST_SPLITS) | set(((params or {}).get("evaluate") or {}).get("test_splits") or [])
    return split in named or "test" in split.lower()


def load_spec(path: str | Path) -> Spec:
    """The spec at ``path``, checked: an unknown key, a test split in ``decide_on`` or a missing rule is an error."""
    path = Path(path)
    text = path.read_bytes()
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SpecError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: expected a mapping")
    where = str(path)
    _known(raw, SPEC_KEYS, where)
    arms_raw = _mapping(raw.get("arms"), f"{where}: arms")
    if sorted(arms_raw) != list(ARMS):
        raise SpecError(f"{where}: arms must be exactly A and B, got {sorted(arms_raw)}")
    arms = {label: _arm(label, arms_raw[label], f"{where}: arms.{label}") for label in ARMS}
    seeds = raw.get("seeds")
    if (not isinstance(seeds, list) or not seeds or len(set(seeds)) != len(seeds)
            or not all(isinstance(seed, int) and not isinstance(seed, bool) for seed in seeds)):
        raise SpecError(f"{where}: seeds must be a list of distinct integers, got {seeds!r}")
    decide_on = raw.get("decide_on")
    if not isinstance(decide_on, list) or not decide_on or not all(isinstance(s, str) for s in decide_on):
        raise SpecError(f"{where}: decide_on must be a list of split names, got {decide_on!r}")
    prepared = Path(raw.get("prepared") or "data/prepared")
    entries = _mapping(raw.get("splits"), f"{where}: splits")
    unused = sorted(set(entries) - set(decide_on))
    if unused:
        raise SpecError(f"{where}: splits names {', '.join(unused)}, which decide_on does not")
    split_files, talks, timings = {}, {}, {}
    for split in decide_on:
        entry = _mapping(entries.get(split), f"{where}: splits.{split}")
        _known(entry, SPLIT_KEYS, f"{where}: splits.{split}")
        split_files[split] = Path(entry.get("file") or prepared / f"{split}.tsv")
        if entry.get("talks"):
            talks[split] = str(entry["talks"])
        if entry.get("timing"):
            timings[split] = Path(entry["timing"])
        if is_test_split(split) or is_test_split(split_files[split].stem):
            raise SpecError(f"{where}: decide_on names {split!r} ({split_files[split]}), a test split: a test split "
                            "never chooses (score it after the verdict: report --report-test)")
    bootstrap = {**BOOTSTRAP_DEFAULTS, **_mapping(raw.get("bootstrap"), f"{where}: bootstrap")}
    _known(bootstrap, set(BOOTSTRAP_DEFAULTS), f"{where}: bootstrap")
    if not (isinstance(bootstrap["resamples"], int) and bootstrap["resamples"] >= 100):
        raise SpecError(f"{where}: bootstrap.resamples must be an integer of at least 100")
    if not 0 < float(bootstrap["level"]) < 1:
        raise SpecError(f"{where}: bootstrap.level must be in (0, 1)")
    return Spec(name=path.stem, path=path, question=str(raw.get("question") or "").strip(),
                notes=str(raw.get("notes") or "").strip(),
                params=Path(raw.get("params") or "params.yaml"), prepared=prepared, arms=arms, seeds=tuple(seeds),
                decide_on=tuple(decide_on), split_files=split_files, talks=talks, timings=timings,
                resamples=int(bootstrap["resamples"]), bootstrap_seed=int(bootstrap["seed"]),
                level=float(bootstrap["level"]),
                keep=_keep_rule(raw.get("keep_rule"), tuple(decide_on), f"{where}: keep_rule"),
                sha256=hashlib.sha256(text).hexdigest(), rule_sha256=rule_sha256({**raw, "bootstrap": bootstrap}))


def rule_sha256(raw: dict[str, Any]) -> str:
    """The SHA-256 of what decides: the spec without its free text (canonical JSON; the bootstrap's settings with
    their defaults, so a default moved in the code moves the rule too)."""
    rule = {key: value for key, value in raw.items() if key not in FREE_TEXT}
    rule["arms"] = {label: {k: v for k, v in (arm or {}).items() if k != "what"}
                    for label, arm in (raw.get("arms") or {}).items()}
    return hashlib.sha256(json.dumps(rule, sort_keys=True, default=str).encode()).hexdigest()


def _arm(label: str, raw: Any, where: str) -> Arm:
    raw = _mapping(raw, where)
    _known(raw, ARM_KEYS, where)
    overrides_raw = raw.get("overrides") or []
    if isinstance(overrides_raw, dict):
        overrides = mapping_overrides(overrides_raw)
        prefix = {"set": "", "add": "+", "force": "++", "delete": "~"}
        written = tuple(prefix[o.op] + o.key + ("" if o.op == "delete" else f"={json.dumps(o.value)}")
                        for o in overrides)
    elif isinstance(overrides_raw, list) and all(isinstance(text, str) for text in overrides_raw):
        overrides = [parse_override(text, where) for text in overrides_raw]
        written = tuple(overrides_raw)
    else:
        raise SpecError(f"{where}.overrides: a list of -S strings or a mapping, got {overrides_raw!r}")
    chain = []
    for index, entry in enumerate(raw.get("train") or []):
        entry = _mapping(entry, f"{where}.train[{index}]")
        kinds = [kind for kind in STEP_KINDS if kind in entry]
        if len(kinds) != 1 or set(entry) - {*STEP_KINDS, "features"}:
            raise SpecError(f"{where}.train[{index}]: one of {', '.join(STEP_KINDS)} and optionally features, "
                            f"got {sorted(entry)}")
        chain.append(Step(kinds[0], str(entry[kinds[0]]), None if entry.get("features") is None
                          else str(entry["features"])))
    if not chain:
        raise SpecError(f"{where}.train: the arm trains nothing")
    source = raw.get("source_artifacts")
    if source is not None and not isinstance(source, str):
        raise SpecError(f"{where}.source_artifacts: a folder holding EXPERIMENT/model, got {source!r}")
    return Arm(label, str(raw.get("what") or "").strip(), tuple(overrides), written, tuple(chain), source)


def _keep_rule(raw: Any, decide_on: tuple[str, ...], where: str) -> KeepRule:
    raw = _mapping(raw, where)
    _known(raw, KEEP_KEYS, where)
    missing = sorted(KEEP_KEYS - set(raw))
    if missing:  # every part of the rule is stated before the run, none left to a default
        raise SpecError(f"{where}: state {', '.join(missing)} (null for no time rule)")
    effect = raw["min_effect"]
    if isinstance(effect, dict):
        if sorted(effect) != sorted(decide_on):
            raise SpecError(f"{where}.min_effect: one figure per decision split ({', '.join(decide_on)}), got "
                            f"{sorted(effect)}")
        effects = effect
    elif isinstance(effect, (int, float)) and not isinstance(effect, bool) and effect >= 0:
        effects = {split: effect for split in decide_on}
    else:
        raise SpecError(f"{where}.min_effect: F1 points, at least 0, or one figure per decision split")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in effects.values()):
        raise SpecError(f"{where}.min_effect: F1 points per split, got {effect!r}")
    if all(v < 0 for v in effects.values()):
        raise SpecError(f"{where}.min_effect: at least one split must ask for a gain (a figure >= 0)")
    extra = raw["max_extra_minutes"]
    if extra is not None and not isinstance(extra, (int, float)):
        raise SpecError(f"{where}.max_extra_minutes: minutes or null")
    return KeepRule({split: float(effects[split]) for split in decide_on}, bool(raw["interval_above_zero"]),
                    bool(raw["every_seed"]), None if extra is None else float(extra))


def _known(raw: dict, keys: set[str], where: str) -> None:
    unknown = sorted(set(raw) - keys)
    if unknown:
        raise SpecError(f"{where}: unknown {', '.join(map(str, unknown))} (known: {', '.join(sorted(keys))})")


def _mapping(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(f"{where}: expected a mapping, got {value!r}")
    return value


# -------------------------------------------------------------------------------------------- overrides


def parse_override(text: str, where: str = "override") -> Override:
    """One ``-S`` string read by Hydra's override grammar, as ``dvc exp run -S`` reads it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        (parsed,) = OverridesParser.create().parse_overrides(overrides=[text])
    except HydraException as error:
        raise SpecError(f"{where}: {text!r} is not an override: {error}") from error
    if parsed.is_sweep_override() or parsed.package is not None:
        raise SpecError(f"{where}: {text!r}: one value for one key (no sweeps, no config groups)")
    op = "delete" if parsed.is_delete() else "add" if parsed.is_add() else "force" if parsed.is_force_add() else "set"
    return Override(op, parsed.key_or_group, _plain(parsed.value()))


def mapping_overrides(mapping: dict[str, Any], prefix: str = "") -> list[Override]:
    """A nested mapping as overrides: a leaf (or a mapping under ``+name``/``++name``) per key path."""
    found = []
    for key, value in mapping.items():
        key = str(key)
        for marker, op in (("++", "force"), ("+", "add"), ("~", "delete")):
            if key.startswith(marker):
                found.append(Override(op, prefix + key[len(marker):], copy.deepcopy(value)))
                break
        else:
            if isinstance(value, dict) and value:
                found.extend(mapping_overrides(value, f"{prefix}{key}."))
            else:
                found.append(Override("set", prefix + key, copy.deepcopy(value)))
    return found


def apply_overrides(params: dict[str, Any], overrides: list[Override] | tuple[Override, ...]) -> dict[str, Any]:
    """``params`` (as loaded from YAML) with ``overrides`` applied in order, as Hydra applies them for DVC: a set
    needs the key to exist and merges a mapping into a mapping; an add needs it absent (a mapping may merge into
    one); a force does either; a delete needs it. A copy: ``params`` is not changed."""
    result = copy.deepcopy(params)
    for override in overrides:
        *parents, last = override.key.split(".")
        node = result
        for depth, part in enumerate(parents):
            if not isinstance(node.get(part), dict):  # an add creates the mappings it goes into, as Hydra's does
                if override.op in ("set", "delete") or node.get(part) is not None:
                    raise SpecError(f"override {override.key}: {'.'.join(parents[:depth + 1])} is not a mapping "
                                    "of the params file")
                node[part] = {}
            node = node[part]
        exists = last in node
        if override.op == "delete":
            if not exists:
                raise SpecError(f"override ~{override.key}: no such key to remove")
            del node[last]
        elif override.op == "set" and not exists:
            raise SpecError(f"override {override.key}: not a key of the params file (add one with +{override.key})")
        elif override.op == "add" and node.get(last) is not None and not isinstance(override.value, (dict, list)):
            raise SpecError(f"override +{override.key}: the key exists (change it without +, or ++ to set it)")
        elif exists and isinstance(node[last], dict) and isinstance(override.value, dict):
            node[last] = _merged(node[last], override.value, override.key, strict=override.op == "set")
        else:
            node[last] = copy.deepcopy(override.value)
    return result


def _merged(base: dict, value: dict, where: str, *, strict: bool) -> dict:
    merged = copy.deepcopy(base)
    for key, item in value.items():
        if strict and key not in base:
            raise SpecError(f"override {where}.{key}: not a key of the params file")
        if isinstance(merged.get(key), dict) and isinstance(item, dict):
            merged[key] = _merged(merged[key], item, f"{where}.{key}", strict=strict)
        else:
            merged[key] = copy.deepcopy(item)
    return merged


def _plain(value: Any) -> Any:
    """Hydra's parsed value as plain YAML types."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


# ------------------------------------------------------------------------------------ an arm's params


def write_arm_params(spec: Spec, arm: Arm, path: str | Path) -> dict[str, Any]:
    """Write ``spec.params`` with ``arm``'s overrides to ``path`` (what ``pipeline.train --params`` reads) and
    return it resolved (:func:`experiments.params.load_params`): an override it cannot resolve is an error."""
    from corpus.io import atomic_write_text

    base = yaml.safe_load(Path(spec.params).read_text(encoding="utf-8"))
    changed = apply_overrides(base, arm.overrides)
    header = (f"# {spec.params} with arm {arm.label}'s overrides of {spec.path} (written by python -m comparisons; "
              "do not edit)\n")
    atomic_write_text(path, header + yaml.safe_dump(changed, sort_keys=False, allow_unicode=True, width=120))
    try:
        return load_params(path)
    except ParamsError as error:
        raise SpecError(f"{spec.path}: arm {arm.label}'s params do not resolve: {error}") from error


def chain_settings(params: dict[str, Any], arm: Arm) -> list[dict[str, Any]]:
    """Each step of ``arm``'s chain as the pipeline would train it under ``params`` (resolved): its kind, name,
    the experiment it trains (a tuning's ``from``), features, model and train settings (the seed left out: each
    run sets its own)."""
    steps, trained = [], set()
    for index, step in enumerate(arm.chain):
        where = f"arm {arm.label}, train[{index}] ({step.kind} {step.name})"
        try:
            if step.kind == "experiment":
                experiment = step.name
                model, train = experiment_config(params, step.name)
                entry = (params.get("experiments") or {}).get(step.name) if isinstance(
                    params.get("experiments"), dict) else None
                default = (entry or {}).get("features")
            else:
                section = "variants" if step.kind == "variant" else "tunings"
                entry = (params.get(section) or {}).get(step.name) or {}
                resolve = variant_config if step.kind == "variant" else tuning_config
                experiment, model, train = resolve(params, step.name)
                default = f"data/feature_sets/{entry['features']}" if entry.get("features") else None
        except ParamsError as error:
            raise SpecError(f"{where}: {error}") from error
        source: dict[str, Any] = {}
        if step.kind == "tuning" and experiment not in trained:
            if arm.source_artifacts is None:
                raise SpecError(f"{where}: tunes {experiment!r}, which no earlier step of the arm trains (or give "
                                "the arm source_artifacts: a folder holding it)")
            source_model = Path(arm.source_artifacts) / experiment / "model"
            weights = source_model / "model.pt"
            if not weights.is_file():
                raise SpecError(f"{where}: starts from {source_model}, which holds no trained model (model.pt)")
            source = {"source_model": str(source_model), "source_model_sha256": file_sha256(weights)}
        features = step.features or default
        if not features:
            raise SpecError(f"{where}: give its features (the params name none)")
        trained.add(experiment)
        train.pop("seed", None)
        steps.append({"kind": step.kind, "name": step.name, "experiment": experiment, "features": features,
                      **({"pipeline_features": default} if default and default != features else {}),
                      **source, "model": model, "train": train})
    return steps
