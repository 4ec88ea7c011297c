"""How much of a comparison is the seed's luck: the default pipeline repeated with other seeds, as DVC experiments.

    python scripts/seed_spread.py run --seeds 2 3        # one `dvc exp run -S train.seed=S -n seed-S` per seed
    python scripts/seed_spread.py report [--reports reports]

``run``: each seed is a DVC experiment of the whole default pipeline with ``train.seed=S``: every training stage
reruns with that seed (data, audio and feature stages are unchanged and come from DVC's run cache), and DVC keeps
the result as experiment ``seed-S`` (``dvc exp show``, ``dvc exp apply seed-S``). The experiments run one after
the other in this workspace, which must have no uncommitted change to tracked files; afterwards it is restored to
its commit (``git checkout HEAD -- .`` and ``dvc checkout``). A seed whose experiment exists is not run again. On
2 CPU cores a seed takes about as long as the training stages of ``dvc repro``.

``report``: the metrics of the commit (seed 1, the pipeline's own run) and of every ``seed-S`` experiment, from
``dvc exp show --json``, into

* ``REPORTS/real_speech_seeds.md``: each speech model of the default (the MiniLM encoder's and the BLSTM's) with
  the real timings of the development talks, against its own text model and against its label-free control
  with the same timings, seed by seed;
* ``REPORTS/transformer_speech2vec_seeds.md``: the reduced Transformer on words against words + type-level
  Speech2Vec (IWSLT2011 Ref/ASR and real speech);
* ``REPORTS/seed_spread_summary.json``: the figures of both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The experiments run as DVC stages, which pin their own numerics; pinned here too, as every entry point is.
from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy or torch loads (experiments/numerics.py)

#: The chains `punctuate` offers (evaluate_real's model names): (text model, speech model, its control, title)
CHAINS = (("text_model", "audio_model", "audio_control", "MiniLM encoder"),
          ("blstm_text", "blstm_audio", "blstm_control", "BLSTM over GloVe"))
#: Yi & Tao's comparison at the reduced size: (words, words + type-level Speech2Vec)
SPEECH2VEC_PAIR = ("transformer_words", "word_speech2vec")
REAL_SPEECH_METRICS = "metrics/real_speech.json"


def experiment_name(seed: int) -> str:
    return f"seed-{seed}"


def run_command(command: Sequence[str], **options: Any) -> subprocess.CompletedProcess:
    print("+", " ".join(command), flush=True)
    return subprocess.run(list(command), check=True, **options)


def metrics_by_name(show: list[dict]) -> dict[str, dict[str, Any]]:
    """``{name: {metrics path: content}}`` from ``dvc exp show --json``: the commit's row as ``"baseline"``, each
    experiment by its name (the workspace row is left out: it may hold anything)."""
    found: dict[str, dict[str, Any]] = {}

    def metrics_of(data: Mapping[str, Any] | None) -> dict[str, Any]:
        return {path: (entry or {}).get("data") for path, entry in ((data or {}).get("metrics") or {}).items()}

    for row in show:
        if row.get("rev") == "workspace":
            continue
        if "baseline" not in found:
            found["baseline"] = metrics_of(row.get("data"))
        for experiment in row.get("experiments") or []:
            for rev in experiment.get("revs") or []:
                if rev.get("name"):
                    found[rev["name"]] = metrics_of(rev.get("data"))
    return found


def show_experiments(dvc: str = "dvc") -> dict[str, dict[str, Any]]:
    result = subprocess.run([dvc, "exp", "show", "--json"], check=True, capture_output=True, text=True)
    return metrics_by_name(json.loads(result.stdout))


def run_seeds(seeds: Sequence[int], *, dvc: str = "dvc") -> None:
    """Run every seed's experiment that does not exist yet, then restore the workspace to its commit."""
    if 1 in seeds:
        raise SystemExit("error: seed 1 is the pipeline's own run (the commit's metrics): give other seeds")
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], check=True,
                             capture_output=True, text=True).stdout
    if changed.strip():
        raise SystemExit("error: the workspace has uncommitted changes to tracked files; each seed runs in this "
                         f"workspace, which is restored to its commit afterwards. Commit or stash them first:\n{changed}")
    existing = show_experiments(dvc)
    try:
        for seed in seeds:
            if experiment_name(seed) in existing:
                print(f"{experiment_name(seed)}: already an experiment", flush=True)
                continue
            run_command([dvc, "exp", "run", "-S", f"train.seed={seed}", "-n", experiment_name(seed)])
    finally:
        run_command(["git", "checkout", "HEAD", "--", "."])
        run_command([dvc, "checkout", "--force"])


def rows_of(metrics: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Per model of the real-speech metrics: IWSLT2011 Ref/ASR overall F1 (from the evaluate metrics the
    real-speech metrics name) and real-speech overall, PERIOD and per-talk F1 from text alone and with the real
    timings; in %."""
    real = metrics.get(REAL_SPEECH_METRICS)
    if not real:
        raise ValueError(f"no {REAL_SPEECH_METRICS} in these metrics: run the default pipeline first")
    rows = {}
    for name, entry in real["models"].items():
        row: dict[str, float] = {}
        iwslt = metrics.get(entry.get("iwslt_metrics") or "")
        if iwslt:
            row.update(ref=100 * iwslt["ref"]["OVERALL"]["f1"], asr=100 * iwslt["asr"]["OVERALL"]["f1"])
        for input_name in ("text", "timings"):
            if input_name not in entry:
                continue
            scores = entry[input_name]
            row[input_name] = 100 * scores["all"]["OVERALL"]["f1"]
            row[f"{input_name}_period"] = 100 * scores["all"]["PERIOD"]["f1"]
            for talk, talk_scores in scores["talks"].items():
                row[f"{input_name}_{talk}"] = 100 * talk_scores["OVERALL"]["f1"]
        rows[name] = row
    return rows


def seed_rows(by_name: Mapping[str, Mapping[str, Any]], seeds: Sequence[int]) -> dict[int, dict[str, dict]]:
    """``{seed: rows}``, seed 1 from the commit's metrics; a seed without its experiment is an error naming it."""
    out = {}
    for seed in seeds:
        name = "baseline" if seed == 1 else experiment_name(seed)
        if name not in by_name:
            raise SystemExit(f"error: no experiment {name!r} (dvc exp show): run `scripts/seed_spread.py run "
                             f"--seeds {seed}` first")
        out[seed] = rows_of(by_name[name])
    return out


def _mean(values: Sequence[float]) -> float:
    return statistics.mean(values)


def real_speech_seeds_markdown(rows: Mapping[int, Mapping[str, Mapping[str, float]]], talks: Sequence[str],
                               notes: Sequence[str] = ()) -> str:
    """Each chain of :data:`CHAINS`, seed by seed: the speech model with real timings against its own text model
    and against the control with the same timings."""
    seeds = sorted(rows)
    lines = ["# Real speech over seeds: text model, speech model and control", "",
             "Written by `python scripts/seed_spread.py report`. Seed 1 is the default pipeline's own run; every "
             "other seed S is the DVC experiment `seed-S` of the whole default pipeline with `train.seed=S` (the "
             "speech models and controls start from that seed's text models). Real speech: the development talks "
             "of `ted_real`, labelled as `punctuate` labels them; IWSLT2011 Ref read without speech. Overall F1 "
             "in %.", "", *[line for note in notes for line in (note, "")]]
    for text_name, speech_name, control_name, title in CHAINS:
        if any(text_name not in rows[seed] or speech_name not in rows[seed] or control_name not in rows[seed]
               for seed in seeds):
            continue
        lines += [f"## {title}", "",
                  "| seed | text model | speech model, text only | speech model + real timings | control + real "
                  "timings | Δ vs text model | Δ PERIOD | Δ vs control | " + " | ".join(f"{t} Δ" for t in talks)
                  + " | IWSLT Ref: text / speech / control |",
                  "|---|---|---|---|---|---|---|---|" + "---|" * len(talks) + "---|"]
        columns: dict[str, list[float]] = {}

        def add(key: str, value: float) -> float:
            columns.setdefault(key, []).append(value)
            return value

        for seed in seeds:
            text, speech, control = (rows[seed][name] for name in (text_name, speech_name, control_name))
            cells = [add("text", text["text"]), add("speech_text", speech["text"]), add("speech", speech["timings"]),
                     add("control", control["timings"])]
            gains = [add("gain", speech["timings"] - text["text"]),
                     add("gain_period", speech["timings_period"] - text["text_period"]),
                     add("gain_control", speech["timings"] - control["timings"])]
            gains += [add(f"gain_{t}", speech[f"timings_{t}"] - text[f"text_{t}"]) for t in talks]
            ref = [add("ref_text", text.get("ref", float("nan"))), add("ref_speech", speech.get("ref", float("nan"))),
                   add("ref_control", control.get("ref", float("nan")))]
            lines.append(f"| {seed} | " + " | ".join(f"{c:.1f}" for c in cells) + " | "
                         + " | ".join(f"{g:+.1f}" for g in gains) + " | " + " / ".join(f"{r:.1f}" for r in ref) + " |")
        mean = {key: _mean(values) for key, values in columns.items()}
        lines.append("| mean | " + " | ".join(f"{mean[k]:.1f}" for k in ("text", "speech_text", "speech", "control"))
                     + " | " + " | ".join(f"{mean[k]:+.1f}" for k in ["gain", "gain_period", "gain_control"]
                                          + [f"gain_{t}" for t in talks])
                     + " | " + " / ".join(f"{mean[k]:.1f}" for k in ("ref_text", "ref_speech", "ref_control")) + " |")
        lines += ["", f"Over these seeds the speech model with real timings gains {min(columns['gain']):+.1f} to "
                  f"{max(columns['gain']):+.1f} F1 over its own text model (PERIOD {min(columns['gain_period']):+.1f} "
                  f"to {max(columns['gain_period']):+.1f}) and {min(columns['gain_control']):+.1f} to "
                  f"{max(columns['gain_control']):+.1f} over the control with the same timings.", ""]
    return "\n".join(lines)


def speech2vec_markdown(rows: Mapping[int, Mapping[str, Mapping[str, float]]], notes: Sequence[str] = ()) -> str:
    """The reduced Transformer on words against words + type-level Speech2Vec, seed by seed."""
    words_name, both_name = SPEECH2VEC_PAIR
    seeds = sorted(rows)
    lines = ["# Reduced Transformer: words vs words + type-level Speech2Vec, over seeds", "",
             "Written by `python scripts/seed_spread.py report` from the default pipeline's run (seed 1) and the DVC "
             "experiments `seed-S`. Real speech: the development talks of `ted_real` from text alone, as "
             "`punctuate` labels them. Overall F1 in %.", "", *[line for note in notes for line in (note, "")],
             "| seed | words: Ref | ASR | real speech | + Speech2Vec: Ref | ASR | real speech | Δ Ref | Δ ASR | Δ real |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    deltas: dict[str, list[float]] = {"ref": [], "asr": [], "text": []}
    for seed in seeds:
        words, both = rows[seed][words_name], rows[seed][both_name]
        for key in deltas:
            deltas[key].append(both[key] - words[key])
        lines.append(f"| {seed} | {words['ref']:.1f} | {words['asr']:.1f} | {words['text']:.1f} | {both['ref']:.1f} | "
                     f"{both['asr']:.1f} | {both['text']:.1f} | {deltas['ref'][-1]:+.1f} | {deltas['asr'][-1]:+.1f} | "
                     f"{deltas['text'][-1]:+.1f} |")
    cells = []
    for name in SPEECH2VEC_PAIR:
        for key in ("ref", "asr", "text"):
            values = [rows[seed][name][key] for seed in seeds]
            sd = f"{statistics.stdev(values):.1f}" if len(values) > 1 else "–"
            cells.append(f"{_mean(values):.1f} ({sd})")
    lines.append(f"| mean (sd) | {' | '.join(cells)} | "
                 + " | ".join(f"{_mean(deltas[key]):+.1f}" for key in ("ref", "asr", "text")) + " |")
    lines += ["", "Yi & Tao report +3.5 Ref and +3.5 ASR for word + speech over word.", ""]
    return "\n".join(lines)


def write_reports(rows: Mapping[int, Mapping[str, Mapping[str, float]]], talks: Sequence[str], reports: Path,
                  notes: Sequence[str] = ()) -> list[Path]:
    reports.mkdir(parents=True, exist_ok=True)
    written = [reports / "seed_spread_summary.json", reports / "real_speech_seeds.md"]
    written[0].write_text(json.dumps({str(seed): seed_rows for seed, seed_rows in sorted(rows.items())}, indent=1,
                                     sort_keys=True) + "\n", encoding="utf-8")
    written[1].write_text(real_speech_seeds_markdown(rows, talks, notes), encoding="utf-8")
    if all(name in rows[seed] for seed in rows for name in SPEECH2VEC_PAIR):
        written.append(reports / "transformer_speech2vec_seeds.md")
        written[-1].write_text(speech2vec_markdown(rows, notes), encoding="utf-8")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/seed_spread.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dvc", default=str(Path(sys.executable).with_name("dvc")), help="the dvc command")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run each seed's experiment (resumable)")
    run.add_argument("--seeds", type=int, nargs="+", default=[2, 3])
    report = commands.add_parser("report", help="write the reports from the experiments' metrics")
    report.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    report.add_argument("--reports", type=Path, default=Path("reports"))
    report.add_argument("--note", action="append", default=[], help="a paragraph under each title (repeatable)")
    args = parser.parse_args(argv)
    if args.command == "run":
        run_seeds(args.seeds, dvc=args.dvc)
        return 0
    rows = seed_rows(show_experiments(args.dvc), args.seeds)
    first = rows[min(rows)]
    talks = sorted({key.split("_", 1)[1] for row in first.values() for key in row
                    if key.startswith("timings_") and key != "timings_period"})
    for path in write_reports(rows, talks, args.reports, args.note):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
