"""DVC stage ``evaluate_real``: the default text model and the default speech model on real speech.

    python -m pipeline.evaluate_real [--params params.yaml] [--out reports/real_speech.md]
                                     [--metrics metrics/real_speech.json] [--predictions DIR]
                                     [--model NAME=DIR ...] [--cross-fitted NAME=TALK:DIR,TALK:DIR ...]

Scores ``punctuate.text_model``, ``punctuate.audio_model`` and the models of ``punctuate.compare`` (name ->
model directory) on the real-speech talks ``data.real_speech_talks`` of ``data.real_speech_dir``, each from the
text alone and, for a model that reads timing cues, with the talks' real word timings -- the same call as
``punctuate [--alignment TALK.timings.tsv] TALK.txt`` -- scored per word against ``TALK.ref.tsv``
(:func:`realspeech.evaluate.evaluate_real_speech`). The report puts them beside each model's IWSLT2011
figures -- the metrics file under ``metrics/eval`` or ``metrics/eval_variants`` that names the model directory
(:func:`evaluation.benchmark.find_evaluation`) -- and shows the pause model (``--pause-model``).

``--model NAME=DIR`` replaces the models of the params file (scratch runs); ``--cross-fitted`` adds a model
that scores each talk with a model whose pause model was fitted without that talk
(``python -m pipeline.fit_pauses --talks OTHER``), as ``punctuate.cross_fitted`` (NAME -> {TALK: DIR}) does.

``--earnings22 data/earnings22/calls/test`` (stage ``evaluate_earnings22``) scores the calls of a prepared
Earnings-22 split instead (``text/CALL.txt``, ``timings/CALL.tsv``, ``ref/CALL.tsv``: stage ``prepare_earnings22``),
with the MiniLM chain of ``punctuate`` (text model, speech model, its control): the test split, for reporting only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corpus.io import atomic_write_text
from experiments.params import require
from evaluation.benchmark import find_evaluation
from pipeline.stage import option, read_json, stage_parser, start, write_metrics
from realspeech.earnings22 import prepared_calls, read_prepared_call, timed_call_groups, timed_share
from realspeech.evaluate import evaluate_real_speech, real_speech_markdown

TEXT, AUDIO = "text_model", "audio_model"
#: Where the evaluate stages write the IWSLT2011 scores of each model directory (each file names its model).
IWSLT_METRICS = ("metrics/eval", "metrics/eval_variants")
#: How the report describes the models of the default params (others go by their name).
DESCRIPTIONS = {TEXT: "MiniLM encoder, words", AUDIO: "MiniLM encoder, words + timing cues",
                "audio_control": "MiniLM encoder, words + label-free timing cues",
                "blstm_text": "BLSTM over GloVe, words", "blstm_audio": "BLSTM, words + timing cues",
                "blstm_control": "BLSTM, words + label-free timing cues",
                "transformer_words": "words (the reduced Transformer)",
                "word_speech2vec": "words + type-level Speech2Vec (the reduced Transformer)"}
#: model -> the same architecture on words alone: what the model's extra input adds, named in the notes
SAME_ARCHITECTURE = {AUDIO: TEXT, "audio_control": TEXT, "word_speech2vec": "transformer_words",
                     "blstm_audio": "blstm_text", "blstm_control": "blstm_text"}
#: speech model -> its label-free control (the same inputs with no punctuation cue in them)
CONTROL_OF = {AUDIO: "audio_control", "blstm_audio": "blstm_control"}
EARNINGS22_TITLE = "Earnings-22 {split}: real earnings calls with and without their word times"
EARNINGS22_INTRO = (
    "The {calls} calls of Earnings-22's {split} split ({words:,} words, {timed:.0f} % with a time; Rev.com, Del Rio "
    "et al. 2022, CC BY-SA 4.0){kept}. Each model labels `text/CALL.txt` "
    "exactly as `punctuate` does: from the text alone, and -- for a model that reads timing cues -- with "
    "`--alignment timings/CALL.tsv`, the call's real word times (empty where the aligner placed none); the labels are "
    "scored per word against `ref/CALL.tsv` (F1 in %, overall = COMMA, PERIOD and QUESTION together; SER = slot "
    "error rate).")


def _pairs(values: Sequence[str] | None, flag: str) -> dict[str, str]:
    out = {}
    for value in values or []:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise SystemExit(f"error: {flag} takes NAME=VALUE, got {value!r}")
        out[name] = rest
    return out


def _cross_fitted(values: Sequence[str] | None) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for name, spec in _pairs(values, "--cross-fitted").items():
        folds = {}
        for part in spec.split(","):
            talk, sep, model_dir = part.partition(":")
            if not sep:
                raise SystemExit(f"error: --cross-fitted {name}: expected TALK:DIR pairs, got {part!r}")
            folds[talk] = model_dir
        out[name] = folds
    return out


def _notes(result: dict[str, Any], models: dict[str, Any]) -> list[str]:
    """What the figures say, in words (computed from them)."""
    found = result["models"]
    notes = []

    def f1(name: str, input_name: str, label: str = "OVERALL", group: str | None = None) -> float | None:
        entry = found.get(name, {}).get(input_name)
        if entry is None:
            return None
        return 100 * (entry["all"] if group is None else entry["groups"][group])[label]["f1"]

    for name, control in CONTROL_OF.items():
        base = SAME_ARCHITECTURE[name]
        if f1(name, "timings") is None or f1(base, "text") is None:
            continue
        gain = {label: f1(name, "timings", label) - f1(base, "text", label) for label in ("PERIOD", "COMMA")}
        against_control = "" if f1(control, "timings") is None else (
            f"; against `{control}` with the same timings {f1(name, 'timings') - f1(control, 'timings'):+.1f}")
        notes.append(
            f"- `{name}` with the real timings against `{base}` on the same words: overall F1 "
            f"{f1(name, 'timings') - f1(base, 'text'):+.1f} points, PERIOD {gain['PERIOD']:+.1f}, COMMA "
            f"{gain['COMMA']:+.1f}; without speech (its text-only fallback) {f1(name, 'text') - f1(base, 'text'):+.1f}"
            f"{against_control}.")
    for name, control in CONTROL_OF.items():
        if f1(name, "timings") is None or f1(control, "timings") is None or not result.get("groups"):
            continue
        by_group = [f"{f1(name, 'timings', group=group) - f1(control, 'timings', group=group):+.1f} on the {group}"
                    for group in result["groups"]]
        notes.append(f"- `{name}` against `{control}`, both with the real timings: {'; '.join(by_group)}.")
    for name in found:
        base = SAME_ARCHITECTURE.get(name)
        if name in CONTROL_OF or base is None or f1(name, "timings") is None or f1(base, "text") is None:
            continue
        notes.append(f"- `{name}`: {f1(name, 'timings') - f1(name, 'text'):+.1f} points from the real timings "
                     f"(text only → with timings), against `{base}`: {f1(name, 'timings') - f1(base, 'text'):+.1f}.")
    for name in found:
        base = SAME_ARCHITECTURE.get(name)
        if base is None or f1(name, "timings") is not None or f1(base, "text") is None:
            continue
        notes.append(f"- `{name}` reads no timing of the recording (a type-level speech vector is a function of the "
                     f"word, looked up from the text): on real speech it is one more text model, "
                     f"{f1(name, 'text') - f1(base, 'text'):+.1f} points against `{base}`, the same architecture "
                     "on words alone.")
    notes.append("- Timing cues are simulated for the training text from the pause model below; the IWSLT2011 "
                 "test sets are read without speech (their synthetic audio was read from punctuated text, so its "
                 "pauses give the marks away).")
    return notes


def main(argv: Sequence[str] | None = None) -> int:
    parser = stage_parser("pipeline.evaluate_real", __doc__, out="reports/real_speech.md",
                          metrics="metrics/real_speech.json")
    option(parser, "--pause-model", "data/pauses/model.json", "the fit_pauses stage's pause model (shown)")
    parser.add_argument("--predictions", help="also write every run's word<TAB>LABEL predictions here")
    parser.add_argument("--model", action="append", help="NAME=DIR: score these models instead of the params'")
    parser.add_argument("--cross-fitted", action="append",
                        help="NAME=TALK:DIR,TALK:DIR: each talk scored by the model fitted without it")
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    parser.add_argument("--earnings22", help="a prepared Earnings-22 split's calls (data/earnings22/calls/test)")
    args, params = start(parser, argv)
    data = require(params, "data", "params")
    section = require(params, "punctuate", "params")
    if args.model:
        models: dict[str, Any] = _pairs(args.model, "--model")
    elif args.earnings22:  # the MiniLM chain: a call is long, and the other models are TED's references
        models = {TEXT: require(section, TEXT, "punctuate"), AUDIO: require(section, AUDIO, "punctuate"),
                  "audio_control": require(section.get("compare") or {}, "audio_control", "punctuate.compare")}
    else:
        models = {TEXT: require(section, TEXT, "punctuate"), AUDIO: require(section, AUDIO, "punctuate"),
                  **(section.get("compare") or {}), **(section.get("cross_fitted") or {})}
    models.update(_cross_fitted(args.cross_fitted))
    threads = (params.get("evaluate") or {}).get("threads")
    if args.earnings22:
        calls = prepared_calls(args.earnings22)
        result = evaluate_real_speech(args.earnings22, calls, models, device=args.device,
                                      predictions_dir=args.predictions, read_talk=read_prepared_call, threads=threads,
                                      groups=timed_call_groups(args.earnings22, calls))
    else:
        result = evaluate_real_speech(require(data, "real_speech_dir", "data"),
                                      list(require(data, "real_speech_talks", "data")), models, device=args.device,
                                      predictions_dir=args.predictions, threads=threads)
    iwslt = {}
    for name, model_dir in models.items():
        found = find_evaluation(model_dir, IWSLT_METRICS) if isinstance(model_dir, (str, Path)) else None
        iwslt[name] = found[1] if found else None
        result["models"][name]["iwslt_metrics"] = found[0].as_posix() if found else None
    pause_model = read_json(args.pause_model, missing_ok=True)
    write_metrics(args.metrics, result)
    descriptions = {name: DESCRIPTIONS[name] for name in models if name in DESCRIPTIONS}
    descriptions.update({name: "words + timing cues, pause model fitted without the talk scored"
                         for name, dirs in models.items() if not isinstance(dirs, (str, Path))})
    split = Path(args.earnings22 or ".").name
    earnings22 = {} if not args.earnings22 else {"title": EARNINGS22_TITLE.format(split=split), "per_talk": False,
                                                 "intro": EARNINGS22_INTRO.format(
        split=split, calls=len(result["talks"]), words=sum(t["words"] for t in result["talks"].values()),
        timed=100 * timed_share(Path(args.earnings22), result["talks"]),
        kept=", kept for reporting only: nothing was chosen on it" if split == "test" else "")}
    atomic_write_text(args.out, real_speech_markdown(
        result, iwslt=iwslt, baseline=TEXT if TEXT in models else None, descriptions=descriptions,
        pause_model=None if args.earnings22 else (pause_model or {}).get("summary"), notes=_notes(result, models),
        **earnings22))
    for name, entry in result["models"].items():
        for input_name in ("text", "timings"):
            if input_name in entry:
                scores = entry[input_name]["all"]
                print(f"{name:>24} {input_name:>8}: F1 {100 * scores['OVERALL']['f1']:.1f}  SER "
                      f"{100 * scores['SER']:.1f}  COMMA {100 * scores['COMMA']['f1']:.1f}  PERIOD "
                      f"{100 * scores['PERIOD']['f1']:.1f}  QUESTION {100 * scores['QUESTION']['f1']:.1f}")
    print(f"wrote {args.out} and {args.metrics}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
