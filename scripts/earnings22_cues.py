"""Why the speech model's timing cues did not help on Earnings-22: one measurement per hypothesis, on Earnings-22 dev
(never its test split) and IWSLT2011 dev.

    python scripts/earnings22_cues.py --model text=artifacts/minilm/model --model speech_ted=DIR
        [--model control_ted=DIR --model speech_mix=DIR --model control_mix=DIR]
        [--earnings22 data/earnings22] [--prepared data/prepared] [--real-speech ../shared/data/ted_real]
        [--out reports/earnings22_cues]

Every model decodes the split's tokens through ``punctuate``'s decoding path (:meth:`Punctuator.predict_labels`), a
speech model with the tokens' real cues as ``punctuate --alignment`` computes them (``data/earnings22/timing``,
written by stage ``prepare_earnings22`` from the calls' word TSVs). The hypotheses and what measures each:

* **untimed** -- a third of dev's words have no time (whole calls the aligner gave up on): a cue can only help
  where there is one. The speech model's gain from its cues (with timings minus from the words alone), on the
  tokens with cues and on those without, and on the calls timed at least half.
* **scale** -- the cues the model learned are TED's (simulated from two real talks); Earnings-22's speakers pause
  and hold words differently (the data report). The same model with Earnings-22's cues mapped onto the TED talks'
  distribution (quantile mapping of the pause and of the log duration, fitted on Earnings-22 train's timed words
  against the TED talks'), against the raw cues.
* **domain** -- the speech model's head was tuned on TED text: its words-alone skill on earnings calls, against the
  text model's, on Earnings-22 dev and on IWSLT2011 dev.
* **real cues** -- trained on Earnings-22 train's real cues (``speech_mix``), the gain from cues against the
  label-free control trained on the same words (``control_mix``): what real cues teach that simulated ones do not.

Writes ``OUT.md`` and ``OUT.json``. Choose nothing on a test split: this script reads none.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.numerics import pin_numerics  # noqa: E402

pin_numerics()  # the pipeline's numerics, before numpy or torch loads (experiments/numerics.py)

import numpy as np  # noqa: E402

from corpus.io import atomic_write_text  # noqa: E402
from corpus.iwslt import read_iwslt  # noqa: E402
from corpus.talks import train_talks  # noqa: E402
from embeddings.timing_features import word_groups  # noqa: E402
from evaluation.scoring import score_labels  # noqa: E402

#: a call counts as timed when at least this share of its tokens has cues
TIMED_CALL = 0.5
QUANTILES = np.linspace(0.0, 1.0, 1001)


def f1(reference, predicted, mask=None) -> float:
    """Micro-averaged F1 in points over the tokens of ``mask`` (all without one)."""
    if mask is not None:
        reference = [label for label, keep in zip(reference, mask) if keep]
        predicted = [label for label, keep in zip(predicted, mask) if keep]
    return round(100 * score_labels(reference, predicted)["OVERALL"]["f1"], 2)


def timed_values(tokens, raw: np.ndarray) -> np.ndarray:
    """The (pause, log_duration) of the timed words of a token stream (their last tokens carry them)."""
    rows = word_groups(tokens) & (raw[:, 2] == 0)
    return raw[rows, :2]


def ted_values(real_speech: Path, talks) -> np.ndarray:
    from realspeech.cues import read_real_talk, talk_cues

    values = []
    for name in talks:
        _, cues, _ = talk_cues(read_real_talk(real_speech, name))
        values.append(cues[cues[:, 2] == 0, :2])
    return np.concatenate(values)


def quantile_map(source: np.ndarray, target: np.ndarray):
    """A function taking values of ``source``'s distribution to ``target``'s, column by column (rank to rank)."""
    source_q = np.quantile(source, QUANTILES, axis=0)
    target_q = np.quantile(target, QUANTILES, axis=0)

    def mapped(raw: np.ndarray, tokens) -> np.ndarray:
        out = raw.copy()
        rows = word_groups(tokens) & (raw[:, 2] == 0)
        for column in range(2):
            # equal source quantiles (a point mass, pauses of 0) map to the middle of their target range
            xs, index = np.unique(source_q[:, column], return_index=True)
            ys = [target_q[source_q[:, column] == x, column].mean() for x in xs]
            out[rows, column] = np.interp(raw[rows, column], xs, ys)
        return out
    return mapped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", required=True, metavar="NAME=DIR",
                        help="text, speech_ted (required), control_ted, speech_mix, control_mix")
    parser.add_argument("--earnings22", type=Path, default=Path("data/earnings22"))
    parser.add_argument("--prepared", type=Path, default=Path("data/prepared"))
    parser.add_argument("--real-speech", type=Path, default=Path("../shared/data/ted_real"))
    parser.add_argument("--talks", nargs="+", default=["AlGore_2006", "AmySmith_2006"])
    parser.add_argument("--out", type=Path, default=Path("reports/earnings22_cues"))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    import torch

    from inference.punctuator import Punctuator

    torch.set_num_threads(args.threads)
    models = dict(entry.split("=", 1) for entry in args.model)
    missing = {"text", "speech_ted"} - set(models)
    if missing:
        parser.error(f"--model {', '.join(sorted(missing))}=DIR needed")

    dev = read_iwslt(args.earnings22 / "dev.tsv")
    raw = np.load(args.earnings22 / "timing" / "dev" / "timing.npy")
    train = read_iwslt(args.earnings22 / "train.tsv")
    train_raw = np.load(args.earnings22 / "timing" / "train" / "timing.npy")
    iwslt_dev = read_iwslt(args.prepared / "dev.tsv")
    has_cue = raw[:, 2] == 0
    calls = train_talks(args.earnings22 / "dev.tsv", args.earnings22 / "dev_talks.tsv")
    timed_call = np.zeros(len(dev), dtype=bool)
    for call in calls:
        span = slice(call.first_token, call.first_token + call.tokens)
        timed_call[span] = has_cue[span].mean() >= TIMED_CALL
    to_ted = quantile_map(timed_values(train.words, train_raw), ted_values(args.real_speech, args.talks))
    ted_scaled = to_ted(raw, dev.words)

    labels: dict[str, dict[str, list[str]]] = {}
    for name, directory in models.items():
        punctuator = Punctuator(Path(directory), device="cpu", batch_size=64)
        print(f"{name}: {directory}", flush=True)
        runs = {"text": (dev.words, None), "iwslt_dev_text": (iwslt_dev.words, None)}
        if punctuator.reads_timings:
            runs["timings"] = (dev.words, raw)
            if name == "speech_ted":
                runs["timings_ted_scale"] = (dev.words, ted_scaled)
        labels[name] = {run: punctuator.predict_labels(list(words), timing) for run, (words, timing) in runs.items()}

    ref = dev.labels
    figures: dict[str, Any] = {"tokens": len(dev), "share_with_cues": round(float(has_cue.mean()), 4),
                               "share_in_timed_calls": round(float(timed_call.mean()), 4), "models": models,
                               "f1": {name: {run: f1(iwslt_dev.labels if run.startswith("iwslt") else ref, predicted)
                                             for run, predicted in runs.items()} for name, runs in labels.items()}}
    speech = labels["speech_ted"]
    figures["untimed"] = {subset: {"text": f1(ref, speech["text"], mask), "timings": f1(ref, speech["timings"], mask)}
                          for subset, mask in (("tokens with cues", has_cue), ("tokens without cues", ~has_cue),
                                               ("calls timed >= 50 %", timed_call),
                                               ("calls timed < 50 %", ~timed_call))}
    for name in ("speech_mix", "control_mix", "control_ted"):
        if name in labels and "timings" in labels[name]:
            figures.setdefault("untimed_" + name, {
                subset: {"text": f1(ref, labels[name]["text"], mask), "timings": f1(ref, labels[name]["timings"], mask)}
                for subset, mask in (("tokens with cues", has_cue), ("calls timed >= 50 %", timed_call))})
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(figures, indent=1) + "\n")
    atomic_write_text(args.out.with_suffix(".md"), markdown(figures))
    print(args.out.with_suffix(".md").read_text(encoding="utf-8"))
    return 0


def markdown(figures: dict[str, Any]) -> str:
    f = figures["f1"]
    lines = ["# Timing cues on Earnings-22: one measurement per hypothesis", "",
             "Written by `python scripts/earnings22_cues.py` on Earnings-22 dev "
             f"({figures['tokens']:,} tokens, {100 * figures['share_with_cues']:.0f} % with cues; "
             f"{100 * figures['share_in_timed_calls']:.0f} % in calls timed at least half) and IWSLT2011 dev. "
             "F1 in points, micro-averaged over COMMA, PERIOD, QUESTION. No test split is read.", "",
             "| model | Earnings-22 dev, words alone | with real timings | IWSLT2011 dev, words alone |",
             "|---|---|---|---|"]
    for name, runs in f.items():
        lines.append(f"| {name} | {runs['text']:.1f} | {runs.get('timings', float('nan')):.1f} | "
                     f"{runs['iwslt_dev_text']:.1f} |")
    lines += ["", "## Untimed words: the cue's gain where there is a cue", "",
              "| model | tokens | words alone | with timings | gain |", "|---|---|---|---|---|"]
    for key, name in (("untimed", "speech_ted"), ("untimed_control_ted", "control_ted"),
                      ("untimed_speech_mix", "speech_mix"), ("untimed_control_mix", "control_mix")):
        for subset, pair in figures.get(key, {}).items():
            lines.append(f"| {name} | {subset} | {pair['text']:.1f} | {pair['timings']:.1f} | "
                         f"{pair['timings'] - pair['text']:+.1f} |")
    ted = f["speech_ted"]
    lines += ["", "## Scale: Earnings-22's cues mapped onto the TED talks' distribution", "",
              f"speech_ted with Earnings-22's raw cues {ted['timings']:.1f}; with them mapped onto the TED talks' "
              f"(quantile mapping fitted on Earnings-22 train) {ted['timings_ted_scale']:.1f} "
              f"({ted['timings_ted_scale'] - ted['timings']:+.1f}).", "",
              "## Domain: the words-alone skill of the head tuned on TED", "",
              f"speech_ted from the words alone {ted['text']:.1f} against the text model's {f['text']['text']:.1f} on "
              f"Earnings-22 dev ({ted['text'] - f['text']['text']:+.1f}); on IWSLT2011 dev {ted['iwslt_dev_text']:.1f} "
              f"against {f['text']['iwslt_dev_text']:.1f} ({ted['iwslt_dev_text'] - f['text']['iwslt_dev_text']:+.1f})."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
