"""The Earnings-22 data report (``reports/earnings22_report.md``): its splits, and its real timing cues beside TED's.

Three sources of cues, per label (:func:`realspeech.earnings22.cue_summary`):

==============  =================================================================================================
source          what
==============  =================================================================================================
Earnings-22     the calls' real cues, per split (:func:`realspeech.earnings22.prepare_earnings22`)
TED real        the real TED talks the pause model is fitted on (``data.real_speech_talks``), read as
                ``punctuate --alignment`` reads them (:func:`realspeech.cues.talk_cues`)
simulated       the cues the speech models train on: the pause model fitted on those talks as stage
                ``fit_pauses`` fits it, drawn for Earnings-22 train's own tokens and labels with params
                ``pauses``' settings (their dropout included); per label they follow the model's pools
==============  =================================================================================================

The figure draws each label's pause and duration distributions (cumulative shares) of the three.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from corpus.labels import LABELS, PUNCTUATION_CLASSES
from embeddings.timing_features import word_groups
from realspeech.cues import fit_pause_model, read_real_talk, talk_cues
from realspeech.earnings22 import LONG_PAUSE_S, Earnings22Data, SplitCues, cue_summary

__all__ = ["ATTRIBUTION", "compare_cues", "plot_cue_distributions", "report_markdown", "simulated_cues",
           "ted_real_cues", "write_earnings22_report"]

ATTRIBUTION = ("Earnings-22: Rev.com; M. Del Rio et al., \"Earnings-22: A Practical Benchmark for Accents in the "
               "Wild\", 2022; CC BY-SA 4.0.")
TED, SIMULATED = "ted_real", "simulated"
FIGURE_NAME = "cues_by_label.png"


def ted_real_cues(directory: str | Path, talks: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(cues (W, 3), labels)`` of the real TED talks' spoken words, pooled."""
    cues, labels = [], []
    for name in talks:
        _, talk, talk_labels = talk_cues(read_real_talk(directory, name))
        cues.append(talk)
        labels.extend(talk_labels)
    return np.concatenate(cues), np.asarray(labels, dtype=object)


def simulated_cues(directory: str | Path, talks: Sequence[str], tokens: Sequence[str], labels: Sequence[str],
                   pauses: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(cues (W, 3), labels)`` of the words of ``tokens``: the pause model of the real talks (fitted as stage
    ``fit_pauses`` fits it) drawn for them with ``pauses``' seed, missing rate and dropout, as the training text's."""
    model = fit_pause_model(directory, talks, min_pool=int(pauses.get("min_pool", 30)))
    raw = model.simulate(tokens, labels, conditional=True, seed=(int(pauses["seed"]), 0),
                         missing_rate=pauses.get("missing_rate"), dropout_fraction=float(pauses["dropout_fraction"]),
                         dropout_span=int(pauses["dropout_span"]))
    is_last = word_groups(tokens)
    return raw[is_last].astype(np.float64), np.asarray(labels, dtype=object)[is_last]


def compare_cues(earnings: Mapping[str, SplitCues], ted: tuple[np.ndarray, np.ndarray],
                 simulated: tuple[np.ndarray, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Per source (each Earnings-22 split, ``ted_real``, ``simulated``) the per-label summary of its cues."""
    out = {f"earnings22_{split}": cue_summary(cues.cues, cues.labels) for split, cues in earnings.items()}
    out[TED] = cue_summary(*ted)
    out[SIMULATED] = cue_summary(*simulated)
    return out


def plot_cue_distributions(sources: Mapping[str, tuple[np.ndarray, np.ndarray]], path: str | Path) -> Path:
    """Per label, the cumulative share of words with cues by pause (top row, 0-2 s) and by log relative duration
    (bottom row) for each source ``name -> (cues (W, 3), labels)``."""
    from figures.plots import plt, save_figure

    fig, axes = plt.subplots(2, len(LABELS), figsize=(4.0 * len(LABELS), 6.5), sharey=True)
    styles = ({"linestyle": "-"}, {"linestyle": "--", "linewidth": 2.0}, {"linestyle": ":", "linewidth": 2.0})
    for column, label in enumerate(LABELS):
        for index, (name, (cues, labels)) in enumerate(sources.items()):
            rows = (np.asarray(labels, dtype=object) == label) & (cues[:, 2] == 0)
            for row, (values, low, high) in enumerate(((cues[rows, 0], 0.0, 2.0), (cues[rows, 1], -2.0, 2.0))):
                if len(values):
                    ordered = np.sort(np.clip(values, low, high))
                    axes[row, column].step(ordered, np.arange(1, len(ordered) + 1) / len(ordered), where="post",
                                           label=f"{name} ({len(ordered):,})", **styles[index % len(styles)])
        axes[0, column].axvline(LONG_PAUSE_S, color="grey", linewidth=0.8, linestyle=":")
        axes[0, column].set_title(label)
        axes[0, column].set_xlabel("pause after the word (s, clipped at 2)")
        axes[1, column].set_xlabel("log duration relative to a word of its length")
        axes[1, column].legend(fontsize=7, loc="lower right")
    axes[0, 0].set_ylabel("share of words with cues")
    axes[1, 0].set_ylabel("share of words with cues")
    fig.suptitle("Timing cues per label: Earnings-22 (train + dev), TED's real talks, the simulated training cues")
    return save_figure(fig, path)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _number(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows)]


def _split_name(split: str) -> str:
    return f"{split} (for reporting only)" if split == "test" else split


def report_markdown(report: Mapping[str, Any], figure: str) -> str:
    """The data report of :func:`realspeech.earnings22.prepare_earnings22`'s ``report`` with ``sources`` (from
    :func:`compare_cues`) and ``ted_talks`` added; ``figure`` is the figure's path relative to the report."""
    splits = report["splits"]
    sources = report["sources"]
    names = {**{f"earnings22_{split}": f"Earnings-22 {_split_name(split)}" for split in splits},
             TED: f"TED real ({', '.join(report['ted_talks'])})", SIMULATED: "simulated (training cues)"}
    out = ["# Earnings-22: the data and its timing cues", "",
           f"{ATTRIBUTION} Read from `{report['data_dir']}`; written by stage `prepare_earnings22` "
           "(`realspeech/earnings22.py`, `realspeech/earnings22_report.py`). **The test split is for reporting "
           "only**: every setting is chosen on train and dev.", "", "## The splits", ""]
    out += _table(["split", "calls", "words", "timed", "spoken words", "tokens", *PUNCTUATION_CLASSES,
                   *(f"{label} %" for label in LABELS)],
                  [(_split_name(split), s["calls"], f"{s['words']:,}", f"{_percent(s['timed_share'])} %",
                    f"{s['spoken_words']:,}", f"{s['tokens']:,}", *(f"{s['marks'][c]:,}" for c in PUNCTUATION_CLASSES),
                    *(_percent(s["label_shares"][label]) for label in LABELS)) for split, s in splits.items()])
    dropped = ", ".join(f"{split} {s['annotations_dropped']:,}" for split, s in splits.items())
    out += ["", "Words: rows of the `.nlp` files; timed: the share of them with a time. Marks: rows with a mark of "
            "each class (`, : - –` COMMA; `. ! ; …` PERIOD; `?` QUESTION). Spoken words: the words with benchmark "
            f"tokens (the annotations such as `<inaudible>` dropped: {dropped}). The label shares are of the "
            "tokens.", ""]
    measures = (("share_pause_0.2s", f"Share of words with cues followed by a pause of {LONG_PAUSE_S} s or more "
                 "(%)", _percent),
                ("median_pause_s", "Median pause after the word (s)", _number),
                ("median_log_duration", "Median log duration relative to a word of its length", _number),
                ("share_without_cues", "Share of words without cues (%): the word or the next has no time",
                 _percent))
    out += ["## Pauses and durations per label", "", f"![cues per label]({figure})", ""]
    for key, title, fmt in measures:
        out += [f"{title}:", ""]
        out += _table(["label", *names.values()], [(label, *(fmt(sources[source][label][key]) for source in names))
                                                   for label in (*LABELS, "all")])
        out += [""]
    out += [f"Simulated: the pause model fitted on {', '.join(report['ted_talks'])} (as stage `fit_pauses`), drawn "
            "for Earnings-22 train's tokens with params `pauses` (seed, missing rate, dropout of whole stretches). "
            "Its words without cues are the dropout's, not speech's.", "",
            "## Untimed stretches", ""]
    out += _table(["split", "untimed words", "runs", "median", "mean", "90th pct.", "longest",
                   *(f"in runs of {name}" for name in next(iter(splits.values()))["untimed_runs"]["by_length"]),
                   "timed share per call (lowest / median / highest)"],
                  [(_split_name(split), f"{r['untimed_words']:,} ({_percent(r['share_untimed'])} %)", f"{r['runs']:,}",
                    _number(r["median_length"], 0), _number(r["mean_length"], 1), _number(r["p90_length"], 0),
                    f"{r['longest']:,}",
                    *(f"{_percent(b['share_of_untimed_words'])} %" for b in r["by_length"].values()),
                    " / ".join(_percent(v) for v in s["timed_share_per_call"].values()) if s["timed_share_per_call"]
                    else "–")
                   for split, s in splits.items() for r in [s["untimed_runs"]]])
    out += ["", "A run: spoken words without a time one after another within a call. The columns `in runs of N` "
            "give the share of the untimed words that stand in runs of that length.", ""]
    out += _table(["split", "calls mostly untimed (< 50 % timed)", "their words", "their share of the untimed words"],
                  [(_split_name(split), f"{m['calls']} of {s['calls']}", f"{m['words']:,}",
                    f"{_percent(m['untimed_words'] / max(s['words'] - s['timed_words'], 1))} %")
                   for split, s in splits.items() for m in [s["calls_mostly_untimed"]]])
    out += ["", "Most untimed words stand in whole calls the aligner gave up on; `timed_share_by_call` in the metrics "
            "names each call's share.", "", "## Speaker turns", ""]
    out += _table(["split", "turns", "with cues", f"pause ≥ {LONG_PAUSE_S} s at a turn",
                   f"pause ≥ {LONG_PAUSE_S} s elsewhere", "long pauses at turns", *(f"{label} at turns" for label in
                                                                                  LABELS)],
                  [(_split_name(split), f"{t['turns']:,}", f"{_percent(t['share_with_cues'])} %",
                    f"{_percent(t['share_pause_0.2s'])} %", f"{_percent(t['share_pause_0.2s_elsewhere'])} %",
                    f"{_percent(t['share_of_long_pauses_at_turns'])} %",
                    *(f"{_percent(t['labels_at_turns'][label])} %" for label in LABELS))
                   for split, s in splits.items() for t in [s["speaker_turns"]]])
    out += ["", "A turn: the last spoken word before another speaker's. Its pause is kept as it is (the next "
            "speaker's start minus its end); `timing/SPLIT/speaker_turn.npy` flags it. Long pauses at turns: the "
            "share of all pauses of 0.2 s or more that fall at a turn.", "", "## Case and tags", ""]
    cases = sorted({case for s in splits.values() for case in s["case"]})
    out += _table(["split", *cases, "tags (most frequent)"],
                  [(_split_name(split), *(f"{s['case'].get(case, 0):,}" for case in cases),
                    ", ".join(f"{tag} {n:,}" for tag, n in list(s["tags"].items())[:5]))
                   for split, s in splits.items()])
    out += ["", "Case: `UC` first letter upper, `LC` lower, `CA` all upper, `MC` mixed, `N/A` numbers and annotations. "
            "The benchmark tokens are lower case, as IWSLT2011's.", ""]
    if report.get("unassigned_calls"):
        out += [f"Calls in `aligned/` that `splits.tsv` does not name (left out): "
                f"{', '.join(report['unassigned_calls'])}.", ""]
    return "\n".join(out)


def write_earnings22_report(prepared: Earnings22Data, *, real_speech_dir: str | Path, real_speech_talks: Sequence[str],
                            pauses: Mapping[str, Any], report_path: str | Path, figure_dir: str | Path
                            ) -> dict[str, Any]:
    """Compare the prepared splits' cues with TED's real talks and the simulated cues, draw the figure into
    ``figure_dir``, write the Markdown report to ``report_path``; returns the report's figures (the metrics)."""
    import os

    from corpus.io import atomic_write_text
    from corpus.iwslt import read_iwslt

    if "train" not in prepared.paths:
        raise ValueError("the simulated cues are drawn for Earnings-22 train: prepare the train split")
    train = read_iwslt(prepared.paths["train"])
    ted = ted_real_cues(real_speech_dir, real_speech_talks)
    simulated = simulated_cues(real_speech_dir, real_speech_talks, train.words, train.labels, pauses)
    development = [prepared.cues[split] for split in ("train", "dev") if split in prepared.cues]
    pooled = (np.concatenate([c.cues for c in development]), np.concatenate([c.labels for c in development]))
    figure = plot_cue_distributions({"Earnings-22 train + dev": pooled, "TED real": ted, "simulated": simulated},
                                    Path(figure_dir) / FIGURE_NAME)
    report = {**prepared.report, "ted_talks": list(real_speech_talks),
              "sources": compare_cues(prepared.cues, ted, simulated)}
    relative = Path(os.path.relpath(figure, Path(report_path).parent)).as_posix()
    atomic_write_text(report_path, report_markdown(report, relative) + "\n")
    return report
