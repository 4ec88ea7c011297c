"""Running a comparison: both arms trained back to back on one machine, seed by seed, each model scored on the
decision splits, every figure kept in one result file per arm and seed.

:func:`run_comparison` goes seed by seed, A then B (A1, B1, A2, B2, ...). Each arm's params file is
``spec.params`` with its overrides (:func:`comparisons.spec.write_arm_params`); each step of its chain is one
``python -m pipeline.train`` in a fresh process (:func:`train_in_subprocess`: the pipeline's numerics, pinned by
``pipeline/__init__.py``, and the pipeline's own code, so the model is the bytes the pipeline makes with those
params and ``-S train.seed=N``). The runner is an argument: tests give a fake one. A draw an arm adds
(``+draws.NAME=...``, read as ``data/draws/NAME/features``) is made from the arm's params before any training
(:func:`prepare_arms`); a draw of ``spec.params`` is the pipeline's (``dvc repro draw@NAME``).

Minutes are the trainer's own wall clock (``wall_seconds``: training, dev evaluations and checkpoints, summed over
the calls of a resumed run), read from the stage record the step writes (``pipeline.stage.StageRecord``); the
process's seconds are kept beside them. Each result names its machine (CPU model, cores, the trainer's numerics):
:mod:`comparisons.report` compares minutes only between two results of one machine.

The chain's last model is scored on each decision split through :class:`inference.punctuator.Punctuator`, the
decoding path of ``punctuate`` and of the evaluate stage (its embedder, windows and window combination), over the
split's own tokens: dev2012 holds tokens such as ``--`` that ``punctuate``'s text reading takes for marks, so the
words go in as the tokens they are (:meth:`Punctuator.predict_labels`). The predictions are kept in the work folder
(``predictions/<split>.tsv``); the result keeps one confusion matrix per talk (:mod:`comparisons.bootstrap`).

It resumes: a result that exists is not made again; a step whose model exists is not trained again; an interrupted
training resumes from its checkpoint (the trainer's own). It refuses to go on when the spec's decision rule differs
from that of a result already made, or an arm now resolves to other settings than its finished seeds had.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from comparisons.bootstrap import split_talks, talk_confusions, talks_sha256
from comparisons.spec import Arm, Spec, SpecError, chain_settings, write_arm_params
from corpus.io import atomic_write_text, file_sha256
from corpus.iwslt import read_iwslt, write_iwslt
from evaluation.scoring import score_labels
from experiments.numerics import _cpuinfo, cpu_flags, cpu_model, numeric_facts

DEFAULT_WORK = Path("runs/comparisons")
DEFAULT_OUT = Path("reports/comparisons")


class ComparisonError(RuntimeError):
    """A comparison that cannot go on as things stand (the message says what to do)."""


@dataclass(frozen=True)
class TrainCall:
    """One step of one arm's chain for one seed: what ``python -m pipeline.train`` is given."""

    arm: str
    seed: int
    kind: str            # experiment | variant | tuning
    name: str
    experiment: str      # the model it trains (a tuning's ``from``)
    params: Path         # the arm's params file
    features: Path
    work: Path           # the arm's folder for this seed
    source_artifacts: Path | None = None  # a tuning's start, trained before the comparison (else this arm's own)

    @property
    def artifacts(self) -> Path:
        return self.work / ("artifacts" if self.kind == "experiment" else f"variant_artifacts/{self.name}")

    @property
    def model_dir(self) -> Path:
        return self.artifacts / self.experiment / "model"

    @property
    def metrics(self) -> Path:
        return self.work / "metrics" / ("train" if self.kind == "experiment" else f"train_variants/{self.name}")

    @property
    def stage(self) -> str:
        """The stage's name in its record (as DVC would name the stage: ``train@X``, ``tune@X``)."""
        return {"experiment": "train", "variant": "train_variant", "tuning": "tune"}[self.kind] + f"@{self.name}"

    def argv(self) -> list[str]:
        """The command the pipeline's stage runs, on this arm's params, folders and seed."""
        checkpoints = self.work / ("checkpoints" if self.kind == "experiment" else f"checkpoints/variants/{self.name}")
        return [sys.executable, "-m", "pipeline.train", f"--{self.kind}", self.name, "--params", str(self.params),
                "--features", str(self.features), "--artifacts", str(self.artifacts),
                "--checkpoints", str(checkpoints), "--metrics", str(self.metrics),
                *(["--source-artifacts", str(self.source_artifacts or self.work / "artifacts")]
                  if self.kind == "tuning" else []),
                "--set", f"seed={self.seed}"]


#: a trainer: runs one call to its end and returns ``{"process_seconds", "trainer" (the trainer's timings:
#: wall_seconds, ...), "numerics"}``; raises on failure
Runner = Callable[[TrainCall], dict[str, Any]]
#: a scorer: the labels the model directory gives the tokens (one per token), under the evaluate settings, with
#: the tokens' raw timing cues where the split has them (else None)
Scorer = Callable[[Path, Sequence[str], dict[str, Any], Any], list[str]]


def train_in_subprocess(call: TrainCall) -> dict[str, Any]:
    """Run ``call`` as ``python -m pipeline.train`` in a fresh process (its output on this terminal); its stage
    record (written where ``DVC_ROOT`` points, as under ``dvc repro``) gives the trainer's timings and numerics."""
    record_dir = call.work / "logs" / "timings"
    record = record_dir / (re.sub(r"[^\w@.-]+", "_", call.stage) + ".json")  # as StageRecord names it
    record.unlink(missing_ok=True)
    env = {**os.environ, "DVC_STAGE": call.stage, "DVC_ROOT": str(call.work)}
    started = time.monotonic()
    status = subprocess.run(call.argv(), env=env).returncode
    seconds = time.monotonic() - started
    if status != 0:
        raise ComparisonError(f"arm {call.arm}, seed {call.seed}: {call.stage} exited with status {status} "
                              f"({' '.join(call.argv())}); run the comparison again to resume it")
    facts = json.loads(record.read_text(encoding="utf-8"))
    timings = next((value for value in facts.values() if isinstance(value, dict) and "wall_seconds" in value), {})
    return {"process_seconds": round(seconds, 1), "trainer": timings, "numerics": facts.get("numerics")}


def punctuator_labels(model_dir: Path, words: Sequence[str], evaluate: dict[str, Any], timing: Any = None
                      ) -> list[str]:
    """The labels ``punctuate``'s decoding path gives the tokens ``words`` (:meth:`Punctuator.predict_labels`), on
    the evaluate stage's device, batch size and threads (the labels are the same bytes on any thread count); a
    speech model reads ``timing``, the tokens' raw cues (``punctuate --alignment``'s), where the split has them."""
    import torch

    from inference.punctuator import Punctuator

    if evaluate.get("threads"):
        torch.set_num_threads(int(evaluate["threads"]))

    punctuator = Punctuator(model_dir, device=str(evaluate["device"]), batch_size=int(evaluate["batch_size"]))
    return punctuator.predict_labels(list(words), timing if punctuator.reads_timings else None)


def machine() -> dict[str, Any]:
    """What minutes depend on: the CPU, the cores this process may use and whether the CPU has AVX-512. The CPU is
    its model name and, where /proc/cpuinfo gives them, its family and model numbers: a virtual machine's "AMD EPYC"
    names a Zen 2 (family 23, model 49) and a Zen 4 (family 25, model 17) alike, whose minutes differ ~1.5-2x."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    family, model = _cpuinfo("cpu family"), _cpuinfo("model\t")  # "model\t": not the "model name" line
    return {"cpu": cpu_model(), "cores": cores,
            **({"family": int(family), "model": int(model)} if family and model and f"{family}{model}".isdigit()
               else {}),
            "avx512": "avx512f" in (cpu_flags() or set())}


def result_path(out: Path, spec: Spec, arm: str, seed: int) -> Path:
    return out / spec.name / f"{arm}_seed{seed}.json"


def read_results(spec: Spec, out: Path) -> list[dict[str, Any]]:
    """The results made for ``spec`` under ``out``, checked to hold its decision rule (else an error: a rule
    cannot move after a result exists)."""
    results = []
    for path in sorted((out / spec.name).glob("*_seed*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        if result.get("rule_sha256") != spec.rule_sha256:
            raise ComparisonError(
                f"{spec.path}: its decision rule changed after {path} was made (rule {result.get('rule_sha256')}, "
                f"now {spec.rule_sha256}): restore the spec as it was, or write a new spec under a new name")
        results.append(result)
    return results


def arm_sha256(settings: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """What an arm trains and how it is decoded, bar the seed: its chain's settings, the features' manifests and
    the evaluate windows."""
    content = {"chain": [{**step, "features_manifest": _manifest_sha256(Path(step["features"]))} for step in settings],
               "evaluate": {key: params["evaluate"].get(key) for key in ("window", "stride")}}
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


def _manifest_sha256(features: Path) -> str | None:
    manifest = features / "manifest.json"
    return file_sha256(manifest) if manifest.is_file() else None


#: where draw NAME lies (``data/draws/NAME/features``): the folder dvc.yaml's ``draw@NAME`` and ``pipeline.draw`` write
DRAWS = Path("data/draws")

#: a draw maker: draws ``draws.NAME`` of the params into ``DRAWS/NAME`` and returns its metrics
#: (:func:`make_params_draw`)
DrawMaker = Callable[[dict[str, Any], str, Path], dict[str, Any]]


def make_params_draw(params: dict[str, Any], name: str, out: Path) -> dict[str, Any]:
    """Draw ``draws.NAME`` of ``params`` (resolved) into ``out`` as the draw stage does
    (:func:`trainset.draws.draw_from_params`: the words drawn again, the features rebuilt only when they changed);
    returns the draw's metrics (the stage's)."""
    from trainset.draws import DrawSpecError, draw_from_params

    try:
        return draw_from_params(params, name, out)[1]
    except DrawSpecError as error:
        raise SpecError(f"params' {error}") from None


def arm_draws(spec: Spec, label: str, params: dict[str, Any], settings: list[dict[str, Any]],
              base: dict[str, Any]) -> list[str]:
    """The draws arm ``label``'s chain reads (``DRAWS/NAME/features``) that the run itself makes: those its
    overrides add to ``spec.params`` (no DVC stage makes them). A draw of ``spec.params`` the arm reads is the
    pipeline's (``dvc repro draw@NAME``); an arm that changes one is refused, as the pipeline's stage would write the
    other draw into the same folder."""
    read = {Path(step["features"]) for step in settings}
    base_draws, own = base.get("draws") or {}, params.get("draws") or {}
    names = []
    for name, value in own.items():
        if DRAWS / name / "features" not in read:
            continue
        if name in base_draws:
            if base_draws[name] != value:
                raise SpecError(f"{spec.path}: arm {label} changes draws.{name} of {spec.params}, whose stage "
                                f"draw@{name} writes {DRAWS / name}: give the arm's draw a name of its own")
            continue
        names.append(name)
    return names


def prepare_arms(spec: Spec, work: Path, *, draw_maker: DrawMaker | None = make_params_draw,
                 log: Callable[[str], None] = print) -> dict[str, dict[str, Any]]:
    """Each arm's params file written (``work/NAME/ARM/params.yaml``) and resolved, and the draws only an arm
    defines (:func:`arm_draws`) made from its params by ``draw_maker`` (its metrics in ``work/NAME/ARM/draw_D.json``;
    None: not made, as when only reporting): ``{arm: {"params_file", "params", "settings", "sha256"}}``. Two arms
    that define one draw differently are refused: they would write one folder."""
    from experiments.params import load_params

    base, made, arms = load_params(spec.params), {}, {}
    for label, arm in spec.arms.items():
        path = work / spec.name / label / "params.yaml"
        params = write_arm_params(spec, arm, path)
        settings = chain_settings(params, arm)
        for name in arm_draws(spec, label, params, settings, base):
            what = {key: params.get(key) for key in ("data", "embed")} | {"draw": params["draws"][name]}
            if name in made:
                if made[name][1] != what:
                    raise SpecError(f"{spec.path}: arms {made[name][0]} and {label} both read {DRAWS / name}, "
                                    "drawn from other settings: give each arm's draw a name of its own")
                continue
            made[name] = (label, what)
            if draw_maker is not None:
                log(f"   draw {name} for arm {label}: {DRAWS / name}")
                metrics = draw_maker(params, name, DRAWS / name)
                atomic_write_text(path.parent / f"draw_{name}.json", json.dumps(metrics, indent=1) + "\n")
        arms[label] = {"params_file": path, "params": params, "settings": settings,
                       "sha256": arm_sha256(settings, params)}
    return arms


def check_arms_unchanged(spec: Spec, arms: dict[str, dict[str, Any]], results: list[dict[str, Any]]) -> None:
    """An error where an arm's finished seed was trained with other settings than the arm resolves to now."""
    for result in results:
        now = arms[result["arm"]]["sha256"]
        if result.get("arm_sha256") != now:
            raise ComparisonError(
                f"arm {result['arm']} now resolves to other settings or features than its seed {result['seed']} was "
                f"trained with ({spec.params} or a features folder changed since): restore them, or start a new "
                "spec")


def run_comparison(spec: Spec, *, seeds: Sequence[int] | None = None, work: Path = DEFAULT_WORK,
                   out: Path = DEFAULT_OUT, runner: Runner = train_in_subprocess,
                   scorer: Scorer = punctuator_labels, draw_maker: DrawMaker | None = make_params_draw,
                   log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Train and score every arm and seed of ``spec`` not yet done (``seeds``: a subset of the spec's), A then B
    seed by seed, after making the draws an arm defines (:func:`prepare_arms`); returns every result of the spec."""
    seeds = list(spec.seeds if seeds is None else seeds)
    unknown = sorted(set(seeds) - set(spec.seeds))
    if unknown:
        raise SpecError(f"{spec.path}: seeds {unknown} are not the spec's ({list(spec.seeds)})")
    results = read_results(spec, out)
    arms = prepare_arms(spec, work, draw_maker=draw_maker, log=log)
    check_arms_unchanged(spec, arms, results)
    done = {(r["arm"], r["seed"]) for r in results}
    for seed in (s for s in spec.seeds if s in seeds):
        for label, arm in spec.arms.items():
            if (label, seed) in done:
                continue
            log(f"== {spec.name}: arm {label}, seed {seed}")
            result = run_arm(spec, arm, seed, arms[label], work / spec.name / label / f"seed{seed}", runner, scorer,
                             log)
            atomic_write_text(result_path(out, spec, label, seed), json.dumps(result, indent=1) + "\n")
            results.append(result)
    return read_results(spec, out)


def run_arm(spec: Spec, arm: Arm, seed: int, resolved: dict[str, Any], folder: Path, runner: Runner,
            scorer: Scorer, log: Callable[[str], None]) -> dict[str, Any]:
    """Train ``arm``'s chain for ``seed`` (resuming) and score its last model: the arm's result."""
    state_path = folder / "steps.json"
    state = json.loads(state_path.read_text(encoding="utf-8")) if state_path.is_file() else {}
    chain, retrained = [], False
    for index, step in enumerate(resolved["settings"]):
        source = Path(step["source_model"]).parent.parent if "source_model" in step else None
        call = TrainCall(arm.label, seed, step["kind"], step["name"], step["experiment"], resolved["params_file"],
                         Path(step["features"]), folder, source)
        key = f"{index}:{step['kind']}:{step['name']}"
        settings_sha = hashlib.sha256(json.dumps(step, sort_keys=True, default=str).encode()).hexdigest()
        done = state.get(key)
        # a step after one trained again starts from the new model: it is trained again too
        if retrained or not (done and done.get("settings_sha256") == settings_sha
                             and (call.model_dir / "config.json").is_file()):
            shared = shared_step(folder.parents[2], settings_sha, features=Path(step["features"]), seed=seed,
                                 first=not retrained)
            if shared is not None:  # the same training, seed and features, made for another comparison
                log(f"   {call.stage}: the same training as {shared['model_dir']} (seed {seed}): reused")
                shutil.copytree(shared["model_dir"], call.model_dir, dirs_exist_ok=True)
                done = {**shared["done"], "reused_from": shared["model_dir"]}
            else:
                log(f"   {call.stage}: {' '.join(call.argv())}")
                outcome, retrained = runner(call), True
                done = {"settings_sha256": settings_sha, "machine": machine(), **outcome}
                record_shared_step(folder.parents[2], settings_sha, features=Path(step["features"]), seed=seed,
                                   model_dir=call.model_dir, done=done)
            state[key] = done
            atomic_write_text(state_path, json.dumps(state, indent=1) + "\n")
        chain.append({**step, "model_dir": str(call.model_dir),
                      **({"reused_from": done["reused_from"]} if done.get("reused_from") else {}),
                      "features_manifest_sha256":
                      _manifest_sha256(Path(step["features"])), "timings": {
                          **{k: done["trainer"].get(k) for k in ("wall_seconds", "train_seconds", "eval_seconds",
                                                                 "checkpoint_seconds") if k in done["trainer"]},
                          "process_seconds": done["process_seconds"]},
                      "machine": done["machine"], "numerics": done.get("numerics")})
    machines = [step["machine"] for step in chain]
    walls = [step["timings"].get("wall_seconds") for step in chain]
    model_dir = Path(chain[-1]["model_dir"])
    log(f"   scoring {model_dir} on {', '.join(spec.decide_on)}")
    scores = {split: score_split(spec, resolved["params"], split, model_dir, folder / "predictions", scorer)
              for split in spec.decide_on}
    return {
        "comparison": spec.name, "arm": arm.label, "seed": seed, "what": arm.what,
        "spec": str(spec.path), "spec_sha256": spec.sha256, "rule_sha256": spec.rule_sha256,
        "arm_sha256": resolved["sha256"], "params_file": str(resolved["params_file"]),
        "params_sha256": file_sha256(resolved["params_file"]), "chain": chain, "model_dir": str(model_dir),
        # one machine for the whole chain, else none: its minutes then compare with nothing
        "machine": machines[0] if all(m == machines[0] for m in machines) else None,
        "minutes": None if None in walls else round(sum(walls) / 60, 2),
        "scores": scores, "scoring_numerics": numeric_facts(),
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


#: where trainings are filed by what they are (settings, features, seed), across comparisons: ``WORK/_steps/KEY.json``
SHARED_STEPS = "_steps"


def _shared_key(settings_sha: str, features: Path, seed: int) -> str:
    content = {"settings": settings_sha, "features_manifest": _manifest_sha256(features), "seed": seed}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def shared_step(work: Path, settings_sha: str, *, features: Path, seed: int, first: bool) -> dict[str, Any] | None:
    """A training another comparison made with the same settings, features and seed (the same bytes: the numerics
    are pinned), whose model still exists; None where there is none, or where the step follows one trained here
    (``first`` False: it must start from the new model)."""
    if not first:
        return None
    path = work / SHARED_STEPS / f"{_shared_key(settings_sha, features, seed)}.json"
    if not path.is_file():
        return None
    shared = json.loads(path.read_text(encoding="utf-8"))
    return shared if (Path(shared["model_dir"]) / "config.json").is_file() else None


def record_shared_step(work: Path, settings_sha: str, *, features: Path, seed: int, model_dir: Path,
                       done: dict[str, Any]) -> None:
    """File a finished training for :func:`shared_step` (its model folder, timings and machine)."""
    path = work / SHARED_STEPS / f"{_shared_key(settings_sha, features, seed)}.json"
    atomic_write_text(path, json.dumps({"model_dir": str(model_dir), "done": done}, indent=1) + "\n")


def score_split(spec: Spec, params: dict[str, Any], split: str, model_dir: Path, predictions: Path,
                scorer: Scorer) -> dict[str, Any]:
    """The model's scores on ``split`` (its file, :attr:`Spec.split_files`) and one confusion matrix per talk; its
    labels written to ``predictions/<split>.tsv``."""
    path = spec.split_files[split]
    if not path.is_file():
        raise ComparisonError(f"decision split {split!r}: {path} does not exist (the stage that prepares it writes "
                              "it)")
    reference = read_iwslt(path)
    timing = None
    if split in spec.timings:
        import numpy as np

        timing = np.load(spec.timings[split])
        if timing.shape != (len(reference.words), 3):
            raise ComparisonError(f"decision split {split!r}: {spec.timings[split]} holds cues of shape "
                                  f"{timing.shape}, its {len(reference.words)} tokens need ({len(reference.words)}, 3)")
    predicted = scorer(model_dir, list(reference.words), params["evaluate"], timing)
    if len(predicted) != len(reference.words):
        raise ComparisonError(f"{model_dir} gave {len(predicted)} labels for the {len(reference.words)} tokens of "
                              f"{path}")
    write_iwslt(predictions / f"{split}.tsv", reference.words, predicted)
    talks_file = spec.talks.get(split)
    talks = split_talks(path, talks_tsv=talks_file,
                        pseudo_talk_tokens=int(params["audio"]["dev_pseudo_talk_tokens"]))
    return {**score_labels(reference.labels, predicted), "tokens": len(predicted),
            **({"timing_sha256": file_sha256(spec.timings[split])} if split in spec.timings else {}),
            "talks": {"source": talks_file or f"pseudo-talks of {params['audio']['dev_pseudo_talk_tokens']} tokens",
                      "count": len(talks), "sha256": talks_sha256(talks),
                      "confusions": talk_confusions(reference.labels, predicted, talks)},
            "split_sha256": file_sha256(path)}
