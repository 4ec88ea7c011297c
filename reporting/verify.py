"""Does a run's metrics match the committed ones? Exactly on the pinned machine, within the seed spread elsewhere.

Two regimes (:func:`numerics_regime`):

* **exact** -- where the run computed the committed bytes: under Linux, this machine and every stage record at the
  committed floor (:data:`COMMITTED_FLOOR`, :mod:`experiments.numerics`) and on MKL's committed branch
  (:data:`COMMITTED_MKL_BRANCH`: an AMD CPU), every model trained on the CPU. Every metrics file the pipeline
  writes must hold the committed values, value for value.
* **spread** -- anywhere else (an Intel CPU, another floor or architecture, macOS, a GPU,
  ``PUNCTUATION_NATIVE_NUMERICS=1``): the bytes are the machine's own, so each figure the README shows must lie
  within its tolerance of the committed one. The tolerances are ``reports/seed_spread.json``
  (:func:`seed_spread_table` writes it from the measured seeds); a figure without a measured spread of its own is
  compared with a borrowed or default tolerance and named as such.

The committed files are read through a :data:`Reader` (``pipeline/verify.py`` gives one over ``git show``), so
everything here is testable on plain dicts and folders.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from corpus.io import atomic_write_text
from experiments.numerics import FLOOR

#: A repository path -> its text at the committed revision (None: the revision has no such file).
Reader = Callable[[str], "str | None"]

EXACT, SPREAD = "exact", "spread"
#: The floor the committed bytes were computed at: only a run at this floor can match them byte for byte.
COMMITTED_FLOOR = FLOOR
#: MKL's code branch of the committed bytes (:func:`experiments.numerics.mkl_branch`): they were computed on AMD
#: CPUs, where MKL takes its AUTO branch whatever MKL_CBWR asks. On an Intel CPU it takes AVX2: other bytes.
COMMITTED_MKL_BRANCH = "AUTO"

SPREAD_FILE = "reports/seed_spread.json"
REAL_SPEECH = "metrics/real_speech.json"
#: The README's figures of an IWSLT2011 scores file (metrics/eval, metrics/eval_variants) and of each model and
#: input of the real-speech metrics (its "All talks" table).
IWSLT_FIGURES = ("ref.OVERALL.f1", "ref.SER", "asr.OVERALL.f1", "asr.SER")
REAL_SPEECH_FIGURES = ("all.OVERALL.f1", "all.SER", "all.COMMA.f1", "all.PERIOD.f1", "all.QUESTION.f1")

#: The rule: tolerance = max(MIN_TOLERANCE, MULTIPLIER x (largest - smallest value over the seeds)), in points.
#: Twice the range, because the range alone is too tight: a fresh draw falls outside the range of three earlier
#: ones half the time (it is the lowest or highest of four with probability 2/4), outside that of two with 2/3.
MULTIPLIER = 2.0
MIN_TOLERANCE = 1.0

#: Runs of one model, one seed each, whose ``scores`` hold IWSLT2011 scores as the metrics file does:
#: (file pattern, the metrics file they measure, what they are).
RUN_SOURCES = (
    ("reports/history/asr_levers/runs/steps_for_words_arm_seed*.json", "metrics/eval/minilm.json",
     "the text model (minilm) at the pipeline's settings over seeds (seed 1 is the pipeline's model byte for byte)"),
)
#: The seed-spread script's summary: per model of evaluate_real and seed, figures in %.
SUMMARY_SOURCE = ("reports/history/seed_spread_summary.json",
                  "the BLSTM chain and the reduced Transformer over three seeds (2026-11-24, earlier configurations)")
#: The first seed-spread script's row names -> evaluate_real's model names.
SUMMARY_NAMES = {"text": "blstm_text", "blstm_word_pauses": "blstm_audio", "blstm_word_pauses_control": "blstm_control",
                 "words": "transformer_words", "ws": "word_speech2vec"}


# --------------------------------------------------------------------------------------------- the regime


def numerics_regime(facts: Mapping[str, Any], records: Iterable[tuple[str, Mapping[str, Any]]] = (), *,
                    system: str = "linux", devices: Iterable[str] = ()) -> tuple[str, str]:
    """(:data:`EXACT` or :data:`SPREAD`, why): exact only under Linux (``system``: :data:`sys.platform`), where
    this machine's numerics (``facts``: :func:`experiments.numerics.numeric_facts`) and every stage record's are
    at :data:`COMMITTED_FLOOR` and on MKL's :data:`COMMITTED_MKL_BRANCH`, and every model trained on the CPU
    (``devices``: :func:`training_devices`). A record without numerics facts (or without the MKL branch, written
    before it was recorded) says nothing either way."""
    why = _off_committed(facts)
    if why:
        return SPREAD, f"this machine runs {why}"
    if system != "linux":  # the committed bytes were computed with glibc's maths, not the system's own
        return SPREAD, f"the committed bytes were computed under Linux, this is {system}"
    for stage, record in records:
        numerics = record.get("numerics")
        why = _off_committed(numerics) if isinstance(numerics, Mapping) else None
        if why:
            return SPREAD, f"stage {stage} ran {why}"
    accelerators = sorted({device for device in devices if device and device != "cpu"})
    if accelerators:  # docs/method.md, "Same seed, same bytes: CPU yes, CUDA no"
        return SPREAD, f"models were trained on {', '.join(accelerators)}, whose kernels are not bit-reproducible"
    return EXACT, f"this machine and the run's stage records are at the committed floor {COMMITTED_FLOOR}"


def _off_committed(numerics: Mapping[str, Any]) -> str | None:
    """How a process's numerics (a machine's facts, or a stage record's) are off the committed bytes: off
    :data:`COMMITTED_FLOOR`, or on another MKL branch than :data:`COMMITTED_MKL_BRANCH`; None where they are on
    both (a branch not recorded says nothing)."""
    # "regime" is the floor only where the pinned switches are in force ("floor" names what the CPU could pin)
    floor = numerics.get("regime", numerics.get("floor"))
    if floor != COMMITTED_FLOOR:
        why = numerics.get("unpinned") or f"pinned at {floor}, whose bytes are its own"
        return f"off the committed floor {COMMITTED_FLOOR}: {why}"
    branch = numerics.get("mkl_branch", COMMITTED_MKL_BRANCH)
    if branch != COMMITTED_MKL_BRANCH:
        return (f"on MKL's {branch} branch ({numerics.get('cpu_vendor') or 'its CPU'}), not the committed "
                f"{COMMITTED_MKL_BRANCH} branch (AMD CPUs)")
    return None


def training_devices(metrics: Path) -> set[str]:
    """The devices the run's models trained on (``device`` of each training metrics file under ``metrics``)."""
    devices = set()
    for path in sorted(metrics.glob("train*/**/*.json")):
        try:
            device = json.loads(path.read_text(encoding="utf-8")).get("device")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(device, str):
            devices.add(device)
    return devices


# --------------------------------------------------------------------------------------------- the figures


def pipeline_metrics(dvc_lock: str, tracked: Iterable[str]) -> list[str]:
    """The metrics files the pipeline writes (outputs under metrics/ in ``dvc_lock``'s text) that the revision
    holds (``tracked``): a stale lock entry of a stage since removed is left out."""
    lock = yaml.safe_load(dvc_lock) or {}
    outs = {out["path"] for stage in (lock.get("stages") or {}).values() for out in stage.get("outs") or []
            if str(out.get("path", "")).startswith("metrics/") and str(out["path"]).endswith(".json")}
    return sorted(outs & set(tracked))


def is_iwslt_scores(path: str) -> bool:
    return path.startswith(("metrics/eval/", "metrics/eval_variants/"))


def readme_figures(path: str, data: Mapping[str, Any]) -> list[str]:
    """The key paths (dotted) of the figures the README shows from metrics file ``path`` (``data``: its content)."""
    if is_iwslt_scores(path):
        return [key for key in IWSLT_FIGURES if _has(data, key)]
    if path == REAL_SPEECH:
        return [f"models.{model}.{name}.{figure}" for model, entry in (data.get("models") or {}).items()
                for name, scores in entry.items() if isinstance(scores, Mapping) and "all" in scores
                for figure in REAL_SPEECH_FIGURES if _has(scores, figure)]
    return []


def measure_of(path: str, key: str) -> str:
    """What a figure measures with its model left out: figures of one measure may lend each other a spread."""
    if path == REAL_SPEECH:
        return "real speech " + key.split(".", 2)[2]
    return "IWSLT2011 " + key


def leaf(data: Any, key: str) -> Any:
    """The value at dotted ``key`` (KeyError: none)."""
    for part in key.split("."):
        if not isinstance(data, Mapping) or part not in data:
            raise KeyError(key)
        data = data[part]
    return data


def _has(data: Any, key: str) -> bool:
    try:
        leaf(data, key)
    except KeyError:
        return False
    return True


def leaves(data: Any, prefix: str = "") -> dict[str, Any]:
    """Every value of ``data`` by its dotted key path (list items by index)."""
    if isinstance(data, Mapping):
        items = data.items()
    elif isinstance(data, list):
        items = ((str(i), value) for i, value in enumerate(data))
    else:
        return {prefix: data}
    out: dict[str, Any] = {}
    for name, value in items:
        out.update(leaves(value, f"{prefix}.{name}" if prefix else str(name)))
    return out


# --------------------------------------------------------------------------------------------- tolerances


@dataclass(frozen=True)
class Tolerance:
    points: float
    basis: str  # measured | borrowed | default
    source: str


def tolerance_of(spread: Mapping[str, Any], path: str, key: str) -> Tolerance:
    """The figure's tolerance in ``spread`` (the content of :data:`SPREAD_FILE`); its default where not listed."""
    entry = ((spread.get("figures") or {}).get(path) or {}).get(key)
    if entry:
        return Tolerance(float(entry["tolerance"]), entry["basis"], entry["source"])
    return Tolerance(float(spread["default"]["tolerance"]), "default",
                     f"not listed in {SPREAD_FILE} (rewrite it: python -m pipeline.verify --write-spread)")


def values_from_runs(runs: Iterable[Mapping[str, Any]], target: str) -> dict[tuple[str, str], list[float]]:
    """Per figure of ``target`` (an IWSLT2011 scores file), its value in % in each run's ``scores``."""
    values: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        scores = {split: run["scores"][split] for split in ("ref", "asr") if split in run.get("scores", {})}
        for key in IWSLT_FIGURES:
            if _has(scores, key):
                values.setdefault((target, key), []).append(100 * leaf(scores, key))
    return values


def values_from_summary(summary: Mapping[str, Any],
                        real_speech: Mapping[str, Any]) -> dict[tuple[str, str], list[float]]:
    """Per figure, its values over the seeds of the seed-spread summary: ``{seed: {model: row}}`` as the script
    writes it, or the first script's ``{NAME_SEED: row}``. A row's ``ref``/``asr`` are IWSLT2011 F1 of the
    model's scores file (``iwslt_metrics`` in ``real_speech``), ``text``/``timings`` (and ``_period``) its
    real-speech F1."""
    rows: list[tuple[str, Mapping[str, float]]] = []
    for name, content in summary.items():
        if name.isdigit():
            rows += list(content.items())
        else:
            model, _seed = name.rsplit("_", 1)
            rows.append((SUMMARY_NAMES.get(model, model), content))
    models = real_speech.get("models") or {}
    values: dict[tuple[str, str], list[float]] = {}
    for model, row in rows:
        iwslt = (models.get(model) or {}).get("iwslt_metrics")
        for name, value in row.items():
            figure = {"ref": (iwslt, "ref.OVERALL.f1"), "asr": (iwslt, "asr.OVERALL.f1")}.get(name)
            for input_name in ("text", "timings"):
                if name in (input_name, f"{input_name}_period"):
                    measure = "PERIOD.f1" if name.endswith("_period") else "OVERALL.f1"
                    figure = (REAL_SPEECH, f"models.{model}.{input_name}.all.{measure}")
            if figure and figure[0] and model in models:
                values.setdefault(figure, []).append(float(value))
    return values


def seed_spread_table(figures: Mapping[str, list[str]], measured: Mapping[tuple[str, str], tuple[list[float], str]],
                      sources: Mapping[str, str]) -> dict[str, Any]:
    """The content of :data:`SPREAD_FILE`: a tolerance for every README figure (``figures``: key paths per
    metrics file), from ``measured`` (per figure: its values over the seeds, in %, and their source).

    Measured: :data:`MULTIPLIER` x the range over the seeds, at least :data:`MIN_TOLERANCE`. A figure without
    values of its own borrows the widest measured tolerance of the same measure (:func:`measure_of`) of another
    model; where no model's was measured, the default: the widest measured tolerance of all."""
    table: dict[str, dict[str, Any]] = {}
    widest: dict[str, tuple[float, str]] = {}
    for (path, key), (values, source) in sorted(measured.items()):
        if key not in figures.get(path, ()) or len(values) < 2:
            continue
        spread = max(values) - min(values)
        tolerance = round(max(MIN_TOLERANCE, MULTIPLIER * spread), 2)
        table.setdefault(path, {})[key] = {"tolerance": tolerance, "basis": "measured", "seeds": len(values),
                                           "spread": round(spread, 2), "source": source}
        measure = measure_of(path, key)
        if tolerance > widest.get(measure, (-1.0, ""))[0]:
            widest[measure] = (tolerance, f"{path} {key}")
    default = max((tolerance for tolerance, _ in widest.values()), default=MIN_TOLERANCE)
    for path, keys in sorted(figures.items()):
        for key in keys:
            if key in table.get(path, {}):
                continue
            borrowed = widest.get(measure_of(path, key))
            entry = ({"tolerance": borrowed[0], "basis": "borrowed",
                      "source": f"no spread of its own: the widest measured of {measure_of(path, key)} ({borrowed[1]})"}
                     if borrowed else {"tolerance": default, "basis": "default",
                                       "source": "nothing of this measure measured: the default"})
            table.setdefault(path, {})[key] = entry
    return {
        "about": "Per-figure tolerances of `python -m pipeline.verify` off the pinned machine: how far a README "
                 "figure may lie from the committed one. Written by `python -m pipeline.verify --write-spread` "
                 "from the sources below; not edited by hand.",
        "units": "percentage points (100 x the metrics' fractions, as the README shows them)",
        "rule": f"measured: max({MIN_TOLERANCE}, {MULTIPLIER} x (largest - smallest value over the seeds)); "
                "without a measured spread of its own: the widest measured tolerance of the same measure on "
                "another model (borrowed), else the default",
        "default": {"tolerance": default, "rule": "the widest measured tolerance of all"},
        "sources": dict(sources),
        "figures": table,
    }


def readme_figure_table(root: Path, files: Iterable[str]) -> dict[str, list[str]]:
    """The README's figures (key paths per metrics file) among ``files`` under ``root``."""
    table = {}
    for path in files:
        if (root / path).is_file():
            keys = readme_figures(path, json.loads((root / path).read_text(encoding="utf-8")))
            if keys:
                table[path] = keys
    return table


def write_seed_spread(root: Path, files: Iterable[str], out: Path) -> dict[str, Any]:
    """Write :data:`SPREAD_FILE` (``out``) for the README figures of ``files`` under ``root``, from the sources
    there (:func:`measured_values`); returns its content."""
    real_speech_path = root / REAL_SPEECH
    real_speech = json.loads(real_speech_path.read_text(encoding="utf-8")) if real_speech_path.is_file() else {}
    measured, sources = measured_values(root, real_speech)
    content = seed_spread_table(readme_figure_table(root, files), measured, sources)
    atomic_write_text(out, json.dumps(content, indent=2, ensure_ascii=False) + "\n")
    return content


def measured_values(root: Path, real_speech: Mapping[str, Any]) -> tuple[dict[tuple[str, str], tuple[list[float], str]],
                                                                           dict[str, str]]:
    """Every measured figure under ``root`` (:data:`RUN_SOURCES`, :data:`SUMMARY_SOURCE`) and the sources read."""
    measured: dict[tuple[str, str], tuple[list[float], str]] = {}
    sources: dict[str, str] = {}
    for pattern, target, what in RUN_SOURCES:
        paths = sorted(root.glob(pattern))
        if not paths:  # a source moved or lost: its figures would pass as unmeasured without a word
            raise FileNotFoundError(f"no seed-spread source {pattern} under {root} (RUN_SOURCES, reporting/verify.py)")
        sources[pattern] = f"{what}: {', '.join(p.name for p in paths)}"
        runs = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
        measured.update({figure: (values, pattern) for figure, values in values_from_runs(runs, target).items()})
    summary_path, what = SUMMARY_SOURCE
    if not (root / summary_path).is_file():
        raise FileNotFoundError(f"no seed-spread source {summary_path} under {root} (SUMMARY_SOURCE, "
                                "reporting/verify.py)")
    sources[summary_path] = what
    summary = json.loads((root / summary_path).read_text(encoding="utf-8"))
    for figure, values in values_from_summary(summary, real_speech).items():
        measured.setdefault(figure, (values, summary_path))
    return measured, sources


# --------------------------------------------------------------------------------------------- the comparison


@dataclass(frozen=True)
class Difference:
    path: str
    key: str
    committed: Any
    run: Any
    tolerance: Tolerance | None = None  # None: exact

    def line(self) -> str:
        if self.tolerance is None or not all(isinstance(v, (int, float)) for v in (self.run, self.committed)):
            return f"  {self.path} {self.key}: committed {self.committed!r}, run {self.run!r} (exact)"
        gap = abs(self.run - self.committed) * 100
        return (f"  {self.path} {self.key}: committed {100 * self.committed:.2f}, run {100 * self.run:.2f}, "
                f"|diff| {gap:.2f} > tolerance {self.tolerance.points:.2f} points ({self.tolerance.basis})")


@dataclass
class VerifyReport:
    regime: str
    why: str
    against: str
    compared: int = 0
    differences: list[Difference] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unmeasured: dict[str, list[tuple[str, Tolerance]]] = field(default_factory=dict)
    not_compared: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences and not self.missing

    def text(self) -> str:
        what = ("every value of every metrics file the pipeline writes" if self.regime == EXACT else
                f"each README figure within its seed spread ({SPREAD_FILE})")
        lines = [f"verify: {self.regime} regime ({self.why}); the run's metrics against {self.against}: {what}"]
        if self.regime == SPREAD:
            lines.append(f"  other bytes than the committed ones are expected here; {len(self.not_compared)} "
                         "metrics files without README figures are compared only on the pinned machine")
        lines.append(f"{self.compared} {'values' if self.regime == EXACT else 'figures'} compared, "
                     f"{len(self.differences)} {'differ' if self.regime == EXACT else 'outside their tolerance'}, "
                     f"{len(self.missing)} missing from the run")
        lines += [difference.line() for difference in self.differences]
        lines += [f"  missing: {missing}" for missing in self.missing]
        if self.unmeasured:
            count = sum(len(keys) for keys in self.unmeasured.values())
            lines.append(f"{count} figures have no measured seed spread of their own (compared with a borrowed or "
                         "the default tolerance, points):")
            for path, keys in sorted(self.unmeasured.items()):
                groups: dict[str, list[str]] = {}
                for key, tol in keys:  # the real-speech figures one line per model and input
                    head, _, tail = key.rpartition(".all.") if path == REAL_SPEECH else ("", "", key)
                    groups.setdefault(f"{path} {head}".rstrip(), []).append(f"{tail} ±{tol.points:.2f} {tol.basis}")
                lines += [f"  {where}: " + ", ".join(items) for where, items in groups.items()]
        outside = "values differ" if self.regime == EXACT else "figures outside their seed spread"
        lines.append("verify: OK" if self.ok else
                     f"verify: FAILED ({len(self.differences)} {outside}, {len(self.missing)} missing)")
        return "\n".join(lines)


def verify_metrics(committed: Reader, files: Iterable[str], run_root: Path, regime: str,
                   spread: Mapping[str, Any] | None = None, *, why: str = "", against: str = "HEAD") -> VerifyReport:
    """Compare each metrics file of ``files`` under ``run_root`` with its committed content (``committed``):
    every value exactly in :data:`EXACT`; each README figure within its tolerance in ``spread`` otherwise."""
    if regime not in (EXACT, SPREAD):
        raise ValueError(f"regime must be {EXACT!r} or {SPREAD!r}, not {regime!r}")
    if regime == SPREAD and spread is None:
        raise ValueError(f"the spread regime needs the tolerances ({SPREAD_FILE})")
    report = VerifyReport(regime, why, against)
    for path in files:
        text = committed(path)
        if text is None:
            continue
        expected = json.loads(text)
        keys = list(leaves(expected)) if regime == EXACT else readme_figures(path, expected)
        if not keys:
            report.not_compared.append(path)
            continue
        run_file = run_root / path
        if not run_file.is_file():
            report.missing.append(path)
            continue
        run = json.loads(run_file.read_text(encoding="utf-8"))
        if regime == EXACT:
            _compare_exactly(report, path, expected, run)
        else:
            _compare_within(report, path, expected, run, keys, spread)
    return report


def _compare_exactly(report: VerifyReport, path: str, expected: Any, run: Any) -> None:
    want, got = leaves(expected), leaves(run)
    report.compared += len(want)
    for key in sorted(want.keys() | got.keys()):
        if key not in got:
            report.missing.append(f"{path} {key}")
        elif key not in want or got[key] != want[key] or type(got[key]) is not type(want[key]):
            report.differences.append(Difference(path, key, want.get(key, "(absent)"), got[key]))


def _compare_within(report: VerifyReport, path: str, expected: Any, run: Any, keys: list[str],
                    spread: Mapping[str, Any]) -> None:
    for key in keys:
        try:
            value = leaf(run, key)
        except KeyError:
            report.missing.append(f"{path} {key}")
            continue
        report.compared += 1
        tolerance = tolerance_of(spread, path, key)
        if tolerance.basis != "measured":
            report.unmeasured.setdefault(path, []).append((key, tolerance))
        want = leaf(expected, key)
        if not _within(want, value, tolerance.points):
            report.differences.append(Difference(path, key, want, value, tolerance))


def _within(committed: Any, run: Any, points: float) -> bool:
    """Whether ``run`` lies within ``points`` (percentage points) of ``committed`` (both fractions)."""
    if not isinstance(run, (int, float)) or not isinstance(committed, (int, float)) or math.isnan(run):
        return False
    return abs(run - committed) * 100 <= points + 1e-9
