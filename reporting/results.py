"""The comparison report: every experiment x test split, next to the published figures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from corpus.labels import LABELS, PUNCTUATION_CLASSES
from embeddings.store import load_split, load_split_words
from evaluation.benchmark import split_scores

PUBLISHED_PATH = Path(__file__).with_name("published.yaml")
SPLIT_NAMES = {"ref": "Ref", "asr": "ASR", "ref_segmented": "Ref, cut at gold sentence ends",
               "asr_segmented": "ASR, cut at gold sentence ends"}


def load_published(path: Path = PUBLISHED_PATH) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def published_figures(reference: str | None, published: dict[str, Any]) -> dict[str, Any] | None:
    """Look up ``"paper_key/variant"`` (e.g. ``yi_tao_2019/word``) in the published figures."""
    if not reference:
        return None
    paper, _, variant = reference.partition("/")
    try:
        return published[paper]["variants"][variant]
    except KeyError as error:
        raise ValueError(f"unknown published reference {reference!r}; see {PUBLISHED_PATH}") from error


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def results_markdown(profile: str, experiments: dict[str, dict[str, Any]], published: dict[str, Any],
                     title: str | None = None, figures_link: str = "figures") -> str:
    """``experiments`` maps name -> {"eval": {split: scores}, "train": train metrics, "published": ref}."""
    reduced = profile != "paper"
    lines = [f"# {title or 'Results'} (profile `{profile}`)", ""]
    if reduced:
        lines += ["Our figures come from the reduced CPU profile, not the papers' configurations "
                  "(`dvc exp run -S profile=paper` runs those).", ""]
    header = ["experiment", "test"] + [f"{c} P/R/F1" for c in PUNCTUATION_CLASSES] + \
             ["overall P/R/F1", "SER", "published F1", "published SER"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, experiment in experiments.items():
        reference = published_figures(experiment.get("published"), published) or {}
        for split, scores in experiment["eval"].items():
            cells = [name + (" (reduced)" if reduced else ""), SPLIT_NAMES.get(split, split)]
            for cls in (*PUNCTUATION_CLASSES, "OVERALL"):
                s = scores[cls]
                cells.append(f"{_pct(s['precision'])} / {_pct(s['recall'])} / **{_pct(s['f1'])}**"
                             if cls == "OVERALL" else f"{_pct(s['precision'])} / {_pct(s['recall'])} / {_pct(s['f1'])}")
            cells.append(_pct(scores["SER"]))
            paper = reference.get(split, {})
            cells += [str(paper.get("f1", "–")), str(paper.get("ser", "–"))]
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "All figures in %. P/R/F1 per class and micro-averaged overall over COMMA/PERIOD/QUESTION; "
              "SER = (substitutions + deletions + insertions) / reference marks.", ""]
    lines += ["## Training", "",
              "A model whose best dev F1 came in the last tenth of its steps was still improving when its "
              "step budget ended (*still improving*): more steps would likely change its figures.", "",
              "| experiment | best dev F1 | best at step | steps |",
              "|---|---|---|---|"]
    for name, experiment in experiments.items():
        t = experiment.get("train") or {}
        best_step, steps = t.get("best_step"), t.get("steps")
        best = "–" if best_step is None else str(best_step)
        if best_step is not None and steps and best_step >= 0.9 * steps:
            best += " (*still improving*)"
        kept = t.get("kept")  # a model of the last step's weights (train.keep: last), not the best evaluation's
        total = "–" if steps is None else str(steps)
        total += f" (the model: step {kept['step']}'s weights)" if kept else ""
        lines.append(f"| {name} | {_pct(t.get('best_dev_f1'))} | {best} | {total} |")
    lines += ["", "## Plots", ""]
    for name, experiment in experiments.items():
        figures = experiment.get("figures") or []
        if figures:
            lines += [f"### {name}", ""] + [f"![{Path(f).stem}]({figures_link}/{Path(f).name})" for f in figures] + [""]
    if any(e.get("published") for e in experiments.values()):
        lines += ["", "Published figures: " + "; ".join(
            sorted({published[e["published"].split("/")[0]]["citation"] for e in experiments.values()
                    if e.get("published")}))]
    return "\n".join(lines) + "\n"


def collect_figures(name: str, artifacts_dir: Path, figures_dir: Path) -> list[Path]:
    """Copy an experiment's plots (learning curves, confusion matrices) next to the report."""
    figures_dir.mkdir(parents=True, exist_ok=True)
    sources = [artifacts_dir / name / "model" / "learning_curves.png",
               *sorted((artifacts_dir / name / "predictions").glob("confusion_*.png"))]
    copied = []
    for source in sources:
        if source.exists():
            target = figures_dir / f"{name}_{source.name}"
            shutil.copyfile(source, target)
            copied.append(target)
    return copied


def collect_experiments(names: list[str], settings: dict[str, Any], eval_dir: Path,
                        train_dir: Path) -> dict[str, dict[str, Any]]:
    """Read each experiment's metrics files; a missing one is an error naming the file."""
    collected = {}
    for name in names:
        eval_path, train_path = eval_dir / f"{name}.json", train_dir / f"{name}.json"
        for path in (eval_path, train_path):
            if not path.exists():
                raise FileNotFoundError(f"{path}: missing; run `dvc repro` to train and evaluate {name!r}")
        scores = json.loads(eval_path.read_text(encoding="utf-8"))
        collected[name] = {
            "eval": split_scores(scores),
            "train": json.loads(train_path.read_text(encoding="utf-8")),
            "published": (settings.get(name) or {}).get("published"),
        }
    return collected


def example_window(labels: list[str], after_token: int, before: int = 14, after: int = 5) -> tuple[int, int, int]:
    """``(start, end, target)``: a window around the first PERIOD at or after ``after_token``."""
    for target in range(max(after_token, before), len(labels) - after):
        if labels[target] == "PERIOD":
            return target - before, target + after + 1, before
    raise ValueError(f"no PERIOD after token {after_token} with room for a window")


def analysis_figures(name: str, model_dir: Path, features_dir: Path, split: str, after_token: int,
                     figures_dir: Path) -> list[Path]:
    """The papers' analysis plots for one trained model on one example sentence of ``split``.

    Every model gets the WRN paper's word-cancellation plot (how P(PERIOD) at the target moves when each
    input word is zeroed; teacher-forced decoders are fed the reference labels); models with attention
    maps (DRNN-LWMA) also get the per-layer attention maps of the same sentence.
    """
    # torch and matplotlib only where a model is analysed: the tables above need neither
    import torch

    from figures.analysis import plot_attention_maps, plot_word_cancellation
    from inference.model_dir import load_trained_model
    from inference.windows import make_batch
    from models.analysis import word_cancellation_scores

    model, _ = load_trained_model(model_dir)
    features = load_split(features_dir, split)
    words = load_split_words(features_dir, split)
    labels = [LABELS[i] for i in features.labels]
    start, end, target = example_window(labels, after_token)
    batch = make_batch(features.vectors, features.ids, [(start, end)], end - start, features.labels.astype("int64"),
                       words if model.reads_words else None)
    window_words = words[start:end]
    figures_dir.mkdir(parents=True, exist_ok=True)
    made = []
    if not model.reads_words:  # cancelling a word of a subword model means another tokenisation: not comparable
        deltas = word_cancellation_scores(model, batch, target, label="PERIOD")
        made.append(plot_word_cancellation(window_words, deltas, target,
                                           figures_dir / f"{name}_word_cancellation.png"))
    if hasattr(model, "attention_maps") and not model.reads_words:
        with torch.no_grad():
            maps = {layer: weights[0] for layer, weights in model.attention_maps(batch).items()}
        made.append(plot_attention_maps(window_words, maps, figures_dir / f"{name}_attention.png"))
    return made


#: The paper whose figures by input kind (learned / word / speech / word_speech) the variants report shows.
SPEECH_PAPER = "yi_tao_2019"

#: Feature set name -> how the report names it (the word-only run is the experiment itself).
FEATURE_SET_TITLES = {"learned": "learned embeddings", "word": "word (GloVe)", "speech": "speech (Speech2Vec)",
                      "word_speech": "word + speech (sum)", "word_occurrence": "word + speech per occurrence (sum)",
                      "word_acoustic": "word ⊕ acoustic features (concat)",
                      "word_pauses": "word ⊕ timing cues (concat)",
                      "word_pauses_control": "word ⊕ label-free timing cues (control)",
                      "word_pauses_mix": "word ⊕ timing cues, TED + Earnings-22 (concat)",
                      "word_pauses_mix_control": "word ⊕ label-free timing cues, TED + Earnings-22 (control)"}


def collect_variants(variants: dict[str, dict[str, Any]], experiments: dict[str, Any], eval_dir: Path,
                     train_dir: Path, variant_eval_dir: Path, variant_train_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Per architecture, its runs on each feature set: the word-only experiment first (when it was run)."""
    by_experiment: dict[str, list[dict[str, Any]]] = {}
    for run, entry in variants.items():
        experiment = entry["experiment"]
        rows = by_experiment.setdefault(experiment, [])
        if not rows and (eval_dir / f"{experiment}.json").exists():
            word = collect_experiments([experiment], experiments, eval_dir, train_dir)[experiment]
            rows.append({"run": experiment, "features": "word", **word})
        found = collect_experiments([experiment], {experiment: entry}, variant_eval_dir / run, variant_train_dir / run)
        rows.append({"run": run, "features": entry["features"], **found[experiment]})
    return by_experiment


def variants_markdown(profile: str, by_experiment: dict[str, list[dict[str, Any]]], published: dict[str, Any],
                      coverage: dict[str, dict[str, Any]], speech2vec: dict[str, Any] | None, audio_text: str) -> str:
    """The word/speech variants side by side: overall F1 and SER on Ref and ASR, next to the published F1."""
    lines = [f"# Word and speech inputs (profile `{profile}`)", "",
             f"Speech comes from the talk audio of the audio stages (`audio.text: {audio_text}`); "
             "figures in %, overall = micro-average over COMMA/PERIOD/QUESTION.", ""]
    if profile != "paper":
        lines += ["Our runs use the reduced CPU profile, not the papers' configurations.", ""]
    lines += ["Published: the row's own reference where params give one; otherwise, marked †, Yi & Tao's "
              "Transformer on the same kind of input (the only paper with a word/speech comparison), so the "
              "columns compare *gains over the word-only input* across architectures, not absolute figures. "
              "Δ = F1 minus the word-only row's F1 (points).", ""]
    header = ["model", "input", "Ref F1", "Ref SER", "ASR F1", "ASR SER", "Δ Ref F1", "Δ ASR F1",
              "published Ref F1", "published ASR F1", "published Δ Ref", "train tokens with speech",
              "Ref tokens with speech"]
    same_input = published.get(SPEECH_PAPER, {}).get("variants", {})
    for experiment, rows in by_experiment.items():
        lines += [f"## {experiment}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        word_row = next((row for row in rows if row["features"] == "word"), None)
        paper_word = same_input.get("word", {})
        for row in rows:
            paper, mark = published_figures(row.get("published"), published) or {}, ""
            if not paper and row["features"] in same_input:
                paper, mark = same_input[row["features"]], "†"
            cov = coverage.get(row["features"], {})
            cells = [row["run"], FEATURE_SET_TITLES.get(row["features"], row["features"])]
            for split in ("ref", "asr"):
                scores = row["eval"].get(split)
                cells += ["–", "–"] if scores is None else [f"**{_pct(scores['OVERALL']['f1'])}**", _pct(scores["SER"])]
            for split in ("ref", "asr"):
                ours = row["eval"].get(split)
                base = None if word_row is None else word_row["eval"].get(split)
                cells.append("–" if ours is None or base is None
                             else f"{100 * (ours['OVERALL']['f1'] - base['OVERALL']['f1']):+.1f}")
            cells += [f"{paper['ref']['f1']}{mark}" if "ref" in paper else "–",
                      f"{paper['asr']['f1']}{mark}" if "asr" in paper else "–"]
            paper_ref, word_ref = paper.get("ref", {}).get("f1"), paper_word.get("ref", {}).get("f1")
            cells.append("–" if paper_ref is None or word_ref is None else f"{paper_ref - word_ref:+.1f}")
            for split in ("train", "ref"):
                value = (cov.get(split) or {}).get("coverage_speech_tokens")
                cells.append("–" if value is None else f"{value:.1f}")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if speech2vec:
        lines += ["## Speech2Vec", "",
                  f"{speech2vec['training_segments']:,} training segments, {speech2vec['vocabulary']:,} type-level "
                  "vectors (see `reports/speech2vec_report.md`).", ""]
        sim = speech2vec.get("word_similarity", {})
        if sim:
            lines += ["| source | WordSim-353 pairs covered | Spearman ρ (own pairs) | ρ (pairs both cover) |",
                      "|---|---|---|---|"]
            for name, row in sim["sources"].items():
                lines.append(f"| {name} | {row['covered_pairs']} | {row['spearman_own']} | {row['spearman_common']} |")
            lines.append("")
        homophones = speech2vec.get("homophones", {})
        if homophones:
            lines += ["| source | homophone pairs covered | mean cosine | random-pair cosine | median rank |",
                      "|---|---|---|---|---|"]
            for name, row in homophones.items():
                lines.append(f"| {name} | {row['covered_pairs']} | {row['mean_cosine']} | "
                             f"{row['random_pair_mean_cosine']} | {row['median_rank']} |")
            lines.append("")
    cites = {published[r["published"].split("/")[0]]["citation"] for rows in by_experiment.values() for r in rows
             if r.get("published")}
    if cites:
        lines += ["Published figures: " + "; ".join(sorted(cites))]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------
# The summary the README shows (reports/summary.md, and the README's marked region): generated, never typed.

#: The README region the summary is written into, between these two lines (each on a line of its own).
README_START = "<!-- results:start -->"
README_END = "<!-- results:end -->"


#: The README region that shows the real-speech table (``evaluate_real``'s report, its "All talks" table).
REAL_SPEECH_START = "<!-- real-speech:start -->"
REAL_SPEECH_END = "<!-- real-speech:end -->"
#: The heading of that table in ``evaluate_real``'s report (``realspeech.evaluate.real_speech_markdown``).
REAL_SPEECH_HEADING = "## All talks"
#: The README region of the same table on Earnings-22's test calls (stage ``evaluate_earnings22``'s report).
EARNINGS22_START = "<!-- earnings22:start -->"
EARNINGS22_END = "<!-- earnings22:end -->"


def markdown_table_after(text: str, heading: str, *, where: str = "the report") -> str:
    """The first markdown table after the line ``heading`` in ``text`` (its ``|`` lines, no trailing newline);
    ``ValueError`` naming ``where`` when the heading or a table after it is missing."""
    lines = text.splitlines()
    try:
        rest = lines[next(i for i, line in enumerate(lines) if line.strip() == heading) + 1:]
        first = next(i for i, line in enumerate(rest) if line.startswith("|"))
    except StopIteration:
        raise ValueError(f"{where}: no table after a line {heading!r}") from None
    table = []
    for line in rest[first:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return "\n".join(table)


def summary_rows(experiments: list[str], variants: dict[str, dict[str, Any]], settings: dict[str, Any],
                 metrics_dir: Path) -> list[dict[str, Any]]:
    """One row per experiment (word input) and per variant, from the pipeline's metrics files under
    ``metrics_dir`` (``eval/``, ``train/``, ``eval_variants/RUN/``, ``train_variants/RUN/``); a missing file is
    an error naming it. ``settings``: each experiment's active settings (for its published reference)."""
    rows = []
    for name in experiments:
        found = collect_experiments([name], settings, metrics_dir / "eval", metrics_dir / "train")[name]
        rows.append({"run": name, "experiment": name, "features": "word", **found})
    for run, entry in variants.items():
        experiment = entry["experiment"]
        found = collect_experiments([experiment], {experiment: entry}, metrics_dir / "eval_variants" / run,
                                    metrics_dir / "train_variants" / run)[experiment]
        rows.append({"run": run, "experiment": experiment, "features": entry["features"], **found})
    return rows


def summary_markdown(profile: str, rows: list[dict[str, Any]], published: dict[str, Any]) -> str:
    """The default pipeline's results in one table: overall F1 and SER on Ref and ASR and the published Ref F1
    beside them, as the metrics files hold them (no wall time: the table must be the same after every rerun)."""
    lines = [f"Overall F1 / SER in % on IWSLT2011, profile `{profile}` (micro-average over COMMA/PERIOD/QUESTION; "
             "per class: `reports/results.md`, `reports/variants.md`). Written by the `report` stage from `metrics/`.",
             "",
             "| run | model | input | Ref F1 | Ref SER | ASR F1 | ASR SER | published Ref F1 |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        reference = published_figures(row.get("published"), published) or {}
        cells = [row["run"], row["experiment"], FEATURE_SET_TITLES.get(row["features"], row["features"])]
        for split in ("ref", "asr"):
            scores = row["eval"].get(split)
            cells += ["–", "–"] if scores is None else [_pct(scores["OVERALL"]["f1"]), _pct(scores["SER"])]
        cells.append(str(reference.get("ref", {}).get("f1", "–")))
        lines.append("| " + " | ".join(cells) + " |")
    cites = sorted({published[r["published"].split("/")[0]]["citation"] for r in rows if r.get("published")})
    if cites:
        lines += ["", "Published: " + "; ".join(cites) + "."]
    return "\n".join(lines) + "\n"


def _region(lines: list[str], where: str, start: str, end: str) -> tuple[int, int]:
    """Indices of the marker lines; ``ValueError`` naming ``where`` unless each is there once, in order."""
    starts = [i for i, line in enumerate(lines) if line.strip() == start]
    ends = [i for i, line in enumerate(lines) if line.strip() == end]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise ValueError(f"{where}: needs one line {start} and, after it, one line {end} "
                         f"(found {len(starts)} and {len(ends)})")
    return starts[0], ends[0]


def replace_marked_region(text: str, content: str, *, where: str = "README.md", start: str = README_START,
                          end: str = README_END) -> str:
    """``text`` with the lines between the ``start`` and ``end`` marker lines replaced by ``content``."""
    lines = text.splitlines(keepends=True)
    first, last = _region(lines, where, start, end)
    body = content if content.endswith("\n") else content + "\n"
    return "".join(lines[: first + 1]) + body + "".join(lines[last:])


def marked_region(text: str, *, where: str = "README.md", start: str = README_START, end: str = README_END) -> str:
    """The lines between the two markers (see :func:`replace_marked_region`)."""
    lines = text.splitlines(keepends=True)
    first, last = _region(lines, where, start, end)
    return "".join(lines[first + 1: last])
