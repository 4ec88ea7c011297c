"""The paper-profile runs: every published configuration trained to its full schedule on a GPU, one record each.

A record is ``metrics/paper/NAME.json``: ``ref`` and ``asr`` as the evaluate stage writes them
(:func:`evaluation.benchmark.evaluate_model`) and ``run``, the provenance: steps completed and scheduled,
device, wall time, step rate, git commit, the numeric environment (:func:`experiments.numerics.numeric_facts`),
hashes of the settings and of the feature cache, and the settings themselves. Beside it, ``NAME.history.csv`` is
the run's learning curve. :func:`paper_markdown` renders the records beside the published figures
(``reporting/published.yaml``) and beside the small-profile CPU figures (``metrics/eval/EXPERIMENT.json``,
``metrics/eval_variants/NAME/EXPERIMENT.json``), Ref and ASR, overall and per class, with SER, and says plainly
which records are missing.

``python -m paper_runs run NAME`` makes one; the GPU kit (``pack`` here, ``launch``/``collect`` there, ``import``
here: paper_runs/README.md) makes them on borrowed GPU machines, lease by lease.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from corpus.labels import PUNCTUATION_CLASSES
from embeddings.sources import file_sha256
from experiments.numerics import numeric_facts
from experiments.params import experiment_config
from reporting.results import SPLIT_NAMES, published_figures

RECORD_SPLITS = ("ref", "asr")


@dataclass(frozen=True)
class PaperRun:
    """One paper-profile run: an experiment of ``experiment_defs`` on a feature set."""

    experiment: str
    #: ``None``: the pipeline's word vectors (``data/features``); else ``data/feature_sets/NAME``
    #: (a set of ``embed.feature_sets``)
    feature_set: str | None = None
    #: the published row beside it (``None``: the experiment's own ``published``)
    published: str | None = None
    #: train settings over the experiment's (its ``--set``s): another reading of the same paper
    train: dict[str, Any] = field(default_factory=dict)
    #: how the report names the reading (``None``: the experiment's as params define it)
    reading: str | None = None

    def features(self, features_dir: str | Path, feature_sets_dir: str | Path) -> Path:
        return Path(features_dir) if self.feature_set is None else Path(feature_sets_dir) / self.feature_set

    def settings(self) -> list[str]:
        """The run's own train settings as ``KEY=VALUE`` (YAML values, as ``--set`` reads them)."""
        return [f"{key}={json.dumps(value)}" for key, value in self.train.items()]


#: Yi & Tao read literally: a batch of 32 windows of 100 tokens and the paper's warm-up of 4,000 steps
#: to its peak of 1e-4, 20 epochs (13,140 steps), decoded in the evaluate section's windows. On an H100 it left the
#: all-O plateau late but reached dev F1 54.1, Ref 56.3 / ASR 51.2 at 55 % of that schedule
#: (metrics/gpu/h100_transformer_variants/paper_word.json). It runs to the end of its schedule beside the 10-token
#: reading of params; the paper profile keeps whichever ends with the higher dev F1.
LITERAL_READING = {"seq_len": 100, "warmup_steps": 4000, "lr": 0.0001, "epochs": 20, "decode_window": None,
                   "decode_stride": None}

#: NAME -> what it runs, in the order of the report and of the GPU kit's priority (the Transformers first)
PAPER_RUNS: dict[str, PaperRun] = {
    "transformer_learned": PaperRun("transformer", "learned", "yi_tao_2019/learned"),
    "transformer_word": PaperRun("transformer", None, "yi_tao_2019/word"),
    "transformer_word_literal": PaperRun("transformer", None, "yi_tao_2019/word", train=LITERAL_READING,
                                         reading="32 x 100 tokens, warm-up 4,000 to 1e-4, 20 epochs"),
    "transformer_speech": PaperRun("transformer", "speech", "yi_tao_2019/speech"),
    "transformer_word_speech": PaperRun("transformer", "word_speech", "yi_tao_2019/word_speech"),
    **{name: PaperRun(name) for name in ("drnn_lwma", "wrn", "wrn_blstm", "conv", "blstm", "lstm", "ff2", "ffa")},
}


#: the 10-token reading of params and the literal one: the report sets them side by side
READINGS = ("transformer_word", "transformer_word_literal")


def run_config(params: dict[str, Any], name: str, settings: Sequence[str] = ()) -> tuple[dict, dict]:
    """The ``(model, train)`` settings paper run ``name`` trains with: its experiment's in the active profile, its
    own :attr:`PaperRun.train` over them, then ``settings`` (``KEY=VALUE``, YAML values; a rehearsal's)."""
    spec = PAPER_RUNS[name]
    model, train = experiment_config(params, spec.experiment)
    for setting in [*spec.settings(), *settings]:
        key, _, value = setting.partition("=")
        train[key] = yaml.safe_load(value)
    return model, train


def record_path(records_dir: str | Path, name: str) -> Path:
    return Path(records_dir) / f"{name}.json"


def complete(record: dict[str, Any] | None) -> bool:
    """Whether ``record`` ends its schedule (``full_schedule``): such a record is never replaced or rerun."""
    return bool(record and (record.get("run") or {}).get("full_schedule"))


def missing_records(records_dir: str | Path, names: list[str] | None = None) -> list[str]:
    """The runs of ``names`` (default: every one of :data:`PAPER_RUNS`) that have no record yet, in order."""
    return [name for name in names or PAPER_RUNS if not record_path(records_dir, name).is_file()]


def settings_sha256(model_config: dict, train_config: dict, window: int, stride: int) -> str:
    """The hash of what a run's result depends on besides the features (model, training, evaluation windows)."""
    payload = json.dumps({"model": model_config, "train": train_config, "window": window, "stride": stride},
                         sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def coverage_summary(summary: dict[str, Any], coverage_file: str | Path) -> str:
    """What ``python -m paper_runs speech2vec`` prints of its run (``summary``: what
    :func:`audio.coverage.build_coverage_speech2vec` returns; ``coverage_file``: where it wrote it)."""
    selection = summary["selection"]
    return "\n".join([
        f"speech2vec (paper): {summary['speech2vec_dir']}, {summary['seconds']:.1f} s "
        f"(skipped: {', '.join(summary['steps_skipped']) or '-'}; ran: {', '.join(summary['steps_run']) or '-'})",
        f"  selection: {selection['chosen_sentences']:,} of {selection['training_sentences']:,} sentences, "
        f"{selection['chosen_tokens']:,} of {selection['training_tokens']:,} tokens; "
        f"{selection['types_targeted']:,} types targeted ({selection['share_of_tokens_targeted']:.1%} of the "
        f"training tokens), {selection['types_covered']:,} covered >= {selection['min_count']} times "
        f"({selection['share_of_tokens_covered']:.1%}), {selection['types_unreachable']:,} unreachable"
        + ("; the --max-tokens budget ended it" if selection["budget_reached"] else ""),
        f"  audio: {summary['pseudo_talks']} pseudo-talks, {summary['audio_hours']:.2f} h; "
        f"{summary['tokens_timed']:,} tokens timed",
        f"  vectors: {summary['vocabulary']:,} word types; {summary['targeted_types_with_vector']:,} of the "
        f"{selection['types_targeted']:,} targeted; {summary['share_of_training_tokens_with_vector']:.1%} of the "
        f"training tokens have a vector  ->  {coverage_file}"])


def software_versions() -> dict[str, str | None]:
    """The Python, torch and transformers a record was made with (a GPU machine's differ from the project's pins)."""
    import platform
    from importlib import metadata

    def version(package: str) -> str | None:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None

    return {"python": platform.python_version(), "torch": version("torch"), "transformers": version("transformers")}


def git_commit(repo: str | Path = ".") -> dict[str, Any]:
    """``{"commit", "dirty"}`` of the working tree at ``repo``; ``PAPER_GIT_COMMIT`` in the environment stands in
    where there is no ``.git`` (a copy of the tree on another machine). Unknown = ``None``."""
    given = os.environ.get("PAPER_GIT_COMMIT")
    if given:
        return {"commit": given, "dirty": None}
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10,
                                check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                                capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(status.strip())}


def run_code(info: dict[str, Any]) -> dict[str, Any]:
    """The commit a record's code came from: for a run through the GPU kit, the commit the kit was packed at (the
    device machine's copy of ``.git`` may lag the tree it was sent, so its own ``git`` reads an older commit,
    modified); else the run's own."""
    return ((info.get("kit") or {}).get("git") or {}) or (info.get("git") or {})


def paper_record(name: str, *, scores: dict[str, Any], train_metrics: dict[str, Any], model_config: dict,
                 train_config: dict, features_dir: str | Path, window: int, stride: int, profile: str,
                 published: str | None, repo: str | Path = ".", kit: dict[str, Any] | None = None) -> dict[str, Any]:
    """The record of run ``name``: ``scores`` (the evaluate stage's ``{split: scores}``) and its provenance.

    ``train_metrics`` is what :func:`training.train_model` returned for the finished run; ``kit``: how the GPU kit
    that carried the inputs was made (its commit, the encoder's rounding), for a run made through it."""
    missing = [split for split in RECORD_SPLITS if split not in scores]
    if missing:
        raise ValueError(f"{name}: no scores for {', '.join(missing)} (evaluate.test_splits must include ref and asr)")
    steps, scheduled = int(train_metrics["steps"]), int(train_metrics["steps_scheduled"])
    seconds = float(train_metrics.get("train_seconds") or 0.0)
    run = {
        "name": name, "experiment": PAPER_RUNS[name].experiment if name in PAPER_RUNS else None,
        "profile": profile, "features": str(features_dir), "published": published,
        "steps_completed": steps, "steps_scheduled": scheduled,
        "full_schedule": steps >= scheduled and not train_metrics.get("stopped_at_deadline", False),
        "device": train_metrics.get("device"), "processes": train_metrics.get("processes", 1),
        "wall_s": train_metrics.get("wall_seconds"), "train_s": train_metrics.get("train_seconds"),
        "eval_s": train_metrics.get("eval_seconds"), "checkpoint_s": train_metrics.get("checkpoint_seconds"),
        "steps_per_s": round(steps / seconds, 2) if seconds else None,
        "best_dev_f1": train_metrics.get("best_dev_f1"), "best_step": train_metrics.get("best_step"),
        # graph (the whole step replayed as one CUDA graph) or eager, and why (the trainer's; absent: not recorded)
        "step_mode": train_metrics.get("step_mode"), "step_mode_reason": train_metrics.get("step_mode_reason"),
        "git": git_commit(repo), "software": software_versions(),
        # the numeric environment it ran under: the floor and switches, the CPU, OpenBLAS's and torch's kernels
        "numerics": numeric_facts(),
        "params_sha256": settings_sha256(model_config, train_config, window, stride),
        "features_sha256": file_sha256(Path(features_dir) / "manifest.json"),
        "model": model_config, "train": train_config,
    }
    if kit is not None:
        run["kit"] = kit
    return {"ref": scores["ref"], "asr": scores["asr"], "run": run}


def record_problems(name: str, record: Any) -> list[str]:
    """What is wrong with ``record`` as the record of run ``name`` (empty: a well-formed record)."""
    if not isinstance(record, dict):
        return [f"{name}: not a JSON object"]
    problems = [f"{name}: no {key!r}" for key in (*RECORD_SPLITS, "run") if not isinstance(record.get(key), dict)]
    if problems:
        return problems
    for split in RECORD_SPLITS:
        scores = record[split]
        for key in ("OVERALL", *PUNCTUATION_CLASSES):
            if not isinstance(scores.get(key), dict) or not all(
                    isinstance(scores[key].get(m), (int, float)) for m in ("precision", "recall", "f1")):
                problems.append(f"{name}: {split}.{key} lacks precision/recall/f1")
        if not isinstance(scores.get("SER"), (int, float)):
            problems.append(f"{name}: {split}.SER missing")
    run = record["run"]
    if run.get("name") != name:
        problems.append(f"{name}: run.name is {run.get('name')!r}")
    for key in ("steps_completed", "steps_scheduled"):
        if not isinstance(run.get(key), int) or run[key] < 0:
            problems.append(f"{name}: run.{key} is {run.get(key)!r}")
    if not isinstance(run.get("full_schedule"), bool):
        problems.append(f"{name}: run.full_schedule missing")
    return problems


def load_records(records_dir: str | Path, names: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """The records present, by name (a record that is not valid JSON is an error naming it)."""
    records = {}
    for name in names or PAPER_RUNS:
        path = record_path(records_dir, name)
        if path.is_file():
            try:
                records[name] = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as error:
                raise ValueError(f"{path}: not valid JSON: {error}") from error
    return records


def small_profile_scores(name: str, eval_dir: str | Path = "metrics/eval",
                         variants_dir: str | Path = "metrics/eval_variants") -> dict[str, Any] | None:
    """The small-profile CPU scores of the same experiment and input, where the pipeline has them."""
    run = PAPER_RUNS.get(name, PaperRun(name))
    if run.train:  # another reading than the small profile's
        return None
    path = (Path(eval_dir) / f"{run.experiment}.json" if run.feature_set is None
            else Path(variants_dir) / name / f"{run.experiment}.json")
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _reference(name: str, default_published: dict[str, str | None]) -> str | None:
    """The published row of run ``name``: its own, else its experiment's."""
    run = PAPER_RUNS.get(name, PaperRun(name))
    return run.published or default_published.get(run.experiment)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _prf(scores: dict[str, Any]) -> str:
    return f"{_pct(scores['precision'])} / {_pct(scores['recall'])} / {_pct(scores['f1'])}"


def paper_markdown(records: dict[str, dict[str, Any]], published: dict[str, Any], *,
                   small: dict[str, dict[str, Any] | None], default_published: dict[str, str | None],
                   names: list[str] | None = None, records_dir: str = "metrics/paper",
                   gap_groups: list[dict[str, Any]] = (), gaps_file: str = "reports/paper_gaps.yaml",
                   figure: str | None = None) -> str:
    """The paper-profile records beside the published and the small-profile figures, and the hypotheses for every
    gap over :data:`GAP_F1` (``gap_groups``: :func:`load_gaps`); ``figure``: the runs' dev F1 curves, beside the
    report (:func:`plot_records`).

    ``small``: NAME -> small-profile scores (or ``None``); ``default_published``: experiment -> its
    ``published`` reference (from params), for runs that do not name their own."""
    names = names or list(PAPER_RUNS)
    missing = [name for name in names if name not in records]
    lines = ["# The papers' configurations, full schedules on a GPU", ""]
    if missing:
        lines += [f"**Missing records ({len(missing)} of {len(names)}): {', '.join(missing)}.** No result is shown for "
                  f"these: `{records_dir}/NAME.json` does not exist yet. The GPU kit makes them on a borrowed GPU "
                  "machine (paper_runs/README.md).", ""]
    else:
        lines += [f"All {len(names)} records present.", ""]
    partial = [name for name in names if name in records and not records[name]["run"].get("full_schedule")]
    if partial:
        lines += [f"**Not a full schedule**: {', '.join(partial)} (see *steps*).", ""]

    header = ["run", "steps (of schedule)", "device", "train min", "test", "overall P / R / F1", "SER",
              "published F1", "published SER", "small profile F1", "small profile SER"]
    lines += ["## Overall", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in names:
        record = records.get(name)
        reference = published_figures(_reference(name, default_published), published) or {}
        small_scores = small.get(name) or {}
        for split in RECORD_SPLITS:
            paper = reference.get(split, {})
            ours_small = small_scores.get(split)
            cells = [name]
            if record is None:
                cells += ["**missing**", "–", "–", SPLIT_NAMES[split], "–", "–"]
            else:
                info, scores = record["run"], record[split]
                steps = f"{info['steps_completed']} (of {info['steps_scheduled']})"
                train_s = info.get("train_s")
                cells += [steps, str(info.get("device") or "–"), "–" if train_s is None else f"{train_s / 60:.1f}",
                          SPLIT_NAMES[split], _prf(scores["OVERALL"]), _pct(scores["SER"])]
            cells += [str(paper.get("f1", "–")), str(paper.get("ser", "–")),
                      _pct(ours_small["OVERALL"]["f1"]) if ours_small else "–",
                      _pct(ours_small["SER"]) if ours_small else "–"]
            lines.append("| " + " | ".join(cells) + " |")

    if figure:
        lines += ["", f"![Dev F1 of each complete record against its training step]({figure})"]
    lines += ["", *gaps_markdown(gaps(records, published, default_published), list(gap_groups), gaps_file)]
    lines += ["", *readings_markdown(records)]
    header = ["run", "test"] + [f"{c} P / R / F1" for c in PUNCTUATION_CLASSES] + \
             [f"small {c} F1" for c in PUNCTUATION_CLASSES]
    lines += ["", "## Per class", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in names:
        record, small_scores = records.get(name), small.get(name) or {}
        for split in RECORD_SPLITS:
            cells = [name, SPLIT_NAMES[split]]
            if record is None:
                cells += ["**missing**"] + ["–"] * (len(PUNCTUATION_CLASSES) - 1)
            else:
                cells += [_prf(record[split][c]) for c in PUNCTUATION_CLASSES]
            ours_small = small_scores.get(split)
            cells += [_pct(ours_small[c]["f1"]) if ours_small else "–" for c in PUNCTUATION_CLASSES]
            lines.append("| " + " | ".join(cells) + " |")

    lines += ["", "## Runs", "", "| run | steps/s | step mode (why) | torch | wall min | dev eval share | "
              "best dev F1 (step) | code commit | settings sha256 | features sha256 |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        if name not in records:
            lines.append(f"| {name} | **missing** | – | – | – | – | – | – | – | – |")
            continue
        info = records[name]["run"]
        wall, evals = info.get("wall_s"), info.get("eval_s")
        share = "–" if not wall or evals is None else f"{100 * evals / wall:.0f} %"
        code = run_code(info)
        commit, dirty = code.get("commit"), " (modified)" if code.get("dirty") else ""
        minutes = "–" if wall is None else f"{wall / 60:.1f}"
        mode = info.get("step_mode") or "not recorded"
        mode += f" ({info['step_mode_reason']})" if info.get("step_mode_reason") else ""
        lines.append(f"| {name} | {info.get('steps_per_s') or '–'} | {mode} | "
                     f"{(info.get('software') or {}).get('torch') or '–'} | {minutes} | "
                     f"{share} | {_pct(info.get('best_dev_f1'))} ({info.get('best_step', '–')}) | "
                     f"{(commit or 'unknown')[:12]}{dirty} | {info['params_sha256'][:12]} | "
                     f"{info['features_sha256'][:12]} |")
    references = [_reference(name, default_published) for name in names]
    cites = sorted({published[key.split("/")[0]]["citation"] for key in references if key})
    lines += ["", "All figures in %. P/R/F1 per class and micro-averaged overall over COMMA/PERIOD/QUESTION; SER = "
              "(substitutions + deletions + insertions) / reference marks. *small profile*: the reduced models of the "
              "default pipeline on 2 CPU cores (`metrics/eval`, `metrics/eval_variants`); – where not run. "
              "Published figures give overall F1 (and SER where the paper does) only. *code commit*: the commit the "
              "GPU kit was packed at (the record's `run.kit.git`; the device machine's own copy of `.git`, in "
              "`run.git`, may lag the tree it was sent)."]
    if cites:
        lines += ["", "Published figures: " + "; ".join(cites)]
    return "\n".join(lines) + "\n"


#: a record this far (F1 points, overall, Ref or ASR) under its published figure needs its hypotheses
GAP_F1 = 3.0
#: how many hypotheses, each with the measurement that tests it, a gap needs
GAP_HYPOTHESES = 3
#: the hypotheses for the gaps (lab notebook content, not configuration)
GAPS_FILE = Path(__file__).resolve().parents[1] / "reports" / "paper_gaps.yaml"


def load_gaps(path: str | Path = GAPS_FILE) -> list[dict[str, Any]]:
    """The groups of ``reports/paper_gaps.yaml``: ``{title, runs, hypotheses: [{claim, test, seen}]}``; a group
    or hypothesis missing a field is an error naming it."""
    path = Path(path)
    if not path.is_file():
        return []
    groups = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("groups") or []
    for number, group in enumerate(groups, 1):
        lacking = [key for key in ("title", "runs", "hypotheses") if not group.get(key)]
        lacking += [f"hypothesis {i} {key}" for i, hypothesis in enumerate(group.get("hypotheses") or [], 1)
                    for key in ("claim", "test", "seen") if not (hypothesis or {}).get(key)]
        if lacking:
            raise ValueError(f"{path}: group {number} ({group.get('title', 'untitled')}) lacks {', '.join(lacking)}")
    return groups


def gaps(records: dict[str, dict[str, Any]], published: dict[str, Any],
         default_published: dict[str, str | None]) -> list[dict[str, Any]]:
    """Every complete record's overall F1 more than :data:`GAP_F1` points under its published figure:
    ``{name, split, ours, published, gap}`` (F1 in %)."""
    found = []
    for name in sorted(records, key=_run_order):
        record = records[name]
        if not complete(record):
            continue
        reference = published_figures(_reference(name, default_published), published) or {}
        for split in RECORD_SPLITS:
            figure = (reference.get(split) or {}).get("f1")
            ours = 100 * record[split]["OVERALL"]["f1"]
            if figure is not None and float(figure) - ours > GAP_F1:
                found.append({"name": name, "split": split, "ours": ours, "published": float(figure),
                              "gap": float(figure) - ours})
    return found


def unexplained(found: list[dict[str, Any]], groups: list[dict[str, Any]]) -> list[str]:
    """The runs of ``found`` without a group of at least :data:`GAP_HYPOTHESES` hypotheses."""
    explained = {name for group in groups if len(group["hypotheses"]) >= GAP_HYPOTHESES for name in group["runs"]}
    return sorted({gap["name"] for gap in found} - explained, key=_run_order)


def _run_order(name: str) -> tuple[int, str]:
    return (list(PAPER_RUNS).index(name) if name in PAPER_RUNS else len(PAPER_RUNS), name)


def gaps_markdown(found: list[dict[str, Any]], groups: list[dict[str, Any]], gaps_file: str) -> list[str]:
    """The section of the report: each gap beside its figures, then each group's hypotheses, each with the
    measurement that tests it and what it has shown."""
    if not found:
        return [f"## Gaps over {GAP_F1:g} F1", "", "No complete record is more than "
                f"{GAP_F1:g} F1 under its published figure."]
    lines = [f"## Gaps over {GAP_F1:g} F1", "",
             f"Each complete record more than {GAP_F1:g} F1 under its published figure, and the hypotheses for it "
             f"(`{gaps_file}`), each with the measurement that tests it.", "",
             "| run | test | F1 | published F1 | gap |", "|---|---|---:|---:|---:|"]
    lines += [f"| {gap['name']} | {SPLIT_NAMES[gap['split']]} | {gap['ours']:.1f} | {gap['published']:.1f} | "
              f"{gap['gap']:.1f} |" for gap in found]
    missing = unexplained(found, groups)
    if missing:
        lines += ["", f"**Not yet explained** (fewer than {GAP_HYPOTHESES} hypotheses in `{gaps_file}`): "
                  f"{', '.join(missing)}."]
    named = {gap["name"] for gap in found}
    for group in groups:
        if not named & set(group["runs"]):
            continue
        lines += ["", f"### {group['title']}", "", f"Runs: {', '.join(group['runs'])}.", "",
                  "| # | hypothesis | the measurement that tests it | what it has shown |", "|---|---|---|---|"]
        lines += [f"| {number} | {h['claim'].strip()} | {h['test'].strip()} | {h['seen'].strip()} |"
                  for number, h in enumerate(group["hypotheses"], 1)]
    return lines


def plot_records(records: dict[str, dict[str, Any]], records_dir: str | Path, path: str | Path) -> Path | None:
    """The dev F1 curves of the complete records (``NAME.history.csv`` beside each) in one panel; None: none yet."""
    from figures.plots import plot_dev_f1_curves

    curves = {name: Path(records_dir) / f"{name}.history.csv" for name in sorted(records, key=_run_order)
              if complete(records[name]) and (Path(records_dir) / f"{name}.history.csv").is_file()}
    if not curves:
        return None
    return plot_dev_f1_curves(curves, path, title="Paper runs: dev F1 against the step (complete records)")


def readings_markdown(records: dict[str, dict[str, Any]]) -> list[str]:
    """Yi & Tao's Transformer under its two readings (:data:`READINGS`) on Ref and ASR, and which one the paper
    profile keeps: the one that ends its schedule with the higher dev F1 (never early dev F1, never a test score)."""
    lines = ["## Yi & Tao's Transformer: two readings of the paper", "",
             "| run | reading | steps (of schedule) | best dev F1 (step) | Ref F1 | Ref SER | ASR F1 | ASR SER |",
             "|---|---|---|---|---|---|---|---|"]
    for name in READINGS:
        record, reading = records.get(name), PAPER_RUNS[name].reading or "the paper profile's (params)"
        train = ((record or {}).get("run") or {}).get("train") or {}
        if all(key in train for key in ("batch_size", "seq_len", "warmup_steps", "lr", "epochs")):
            reading = (f"{train['batch_size']} x {train['seq_len']} tokens, warm-up {train['warmup_steps']:,} to "
                       f"{train['lr']:g}, {train['epochs']} epochs")
        if record is None:
            lines.append(f"| {name} | {reading} | **missing** | – | – | – | – | – |")
            continue
        info = record["run"]
        lines.append(f"| {name} | {reading} | {info['steps_completed']} (of {info['steps_scheduled']}) | "
                     f"{_pct(info.get('best_dev_f1'))} ({info.get('best_step', '–')}) | "
                     + " | ".join(f"{_pct(record[split]['OVERALL']['f1'])} | {_pct(record[split]['SER'])}"
                                  for split in RECORD_SPLITS) + " |")
    done = [name for name in READINGS if complete(records.get(name)) and records[name]["run"].get("best_dev_f1")
            is not None]
    if len(done) == len(READINGS):
        keep = max(done, key=lambda name: records[name]["run"]["best_dev_f1"])
        reading = PAPER_RUNS[keep].reading or "the 10-token reading of params"
        scores = " vs ".join(_pct(records[name]["run"]["best_dev_f1"]) for name in READINGS)
        lines += ["", f"Both end their schedules; the paper profile keeps **{keep}** ({reading}), the higher dev F1 "
                  f"({scores})."]
    else:
        lines += ["", "The paper profile keeps whichever reading ends its schedule with the higher **dev** F1; until "
                  "both records are complete (full schedule), it keeps the 10-token reading of params."]
    return lines
