"""DVC stage ``evaluate_real``: the default text model and the default speech model on real speech.

    python -m pipeline.evaluate_real [--params params.yaml] [--out reports/real_speech.md]
                                     [--metrics metrics/real_speech.json] [--predictions DIR]
                                     [--model NAME=DIR ...] [--cross-fitted NAME=TALK:DIR,TALK:DIR ...]

Scores ``punctuate.text_model``, ``punctuate.audio_model`` and the models of ``punctuate.compare`` (name ->
model directory) on the real-speech talks ``data.real_speech_talks`` of ``data.real_speech_dir``, each from the
text alone and, for a model that reads timing cues, with the talks' real word timings -- the same call as
``punctuate [--alignment TALK.timings.tsv] TALK.txt`` -- scored per word against ``TALK.ref.tsv``
(:func:`punctuation.real_speech.evaluate_real_speech`). The report puts them beside each model's IWSLT2011
figures (``metrics/eval/EXPERIMENT.json`` for ``artifacts/EXPERIMENT/model``,
``metrics/eval_variants/RUN/EXPERIMENT.json`` for ``variant_artifacts/RUN/EXPERIMENT/model``) and shows the
pause model (``--pause-model``).

``--model NAME=DIR`` replaces the models of the params file (scratch runs); ``--cross-fitted`` adds a model
that scores each talk with a model whose pause model was fitted without that talk
(``python -m pipeline.fit_pauses --talks OTHER``), as ``punctuate.cross_fitted`` (NAME -> {TALK: DIR}) does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corpus.io import atomic_write_text
from pipeline.stage import option, read_json, stage_parser, start, write_json
from punctuation.params import require
from punctuation.real_speech import evaluate_real_speech, real_speech_markdown

TEXT, AUDIO = "text_model", "audio_model"
#: How the report describes the models of the default params (others go by their name).
DESCRIPTIONS = {TEXT: "words", AUDIO: "words + timing cues", "audio_control": "words + label-free timing cues",
                "transformer_words": "words (the reduced Transformer)",
                "word_speech2vec": "words + type-level Speech2Vec (the reduced Transformer)"}
#: (model, the same architecture on words alone): what the model's extra input adds, named in the notes
SAME_ARCHITECTURE = {"word_speech2vec": "transformer_words"}


def iwslt_metrics(model_dir: str | Path) -> Path | None:
    """Where the evaluate stages put the IWSLT2011 scores of a model directory of the pipeline's layout."""
    parts = Path(model_dir).parts
    if len(parts) >= 3 and parts[-1] == "model" and parts[-3] == "artifacts":
        return Path("metrics/eval") / f"{parts[-2]}.json"
    if len(parts) >= 4 and parts[-1] == "model" and parts[-4] == "variant_artifacts":
        return Path("metrics/eval_variants") / parts[-3] / f"{parts[-2]}.json"
    return None


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

    def f1(name: str, input_name: str, label: str = "OVERALL") -> float | None:
        entry = found.get(name, {}).get(input_name)
        return None if entry is None else 100 * entry["all"][label]["f1"]

    text = f1(TEXT, "text")
    if text is not None and f1(AUDIO, "timings") is not None:
        gain = {label: f1(AUDIO, "timings", label) - f1(TEXT, "text", label) for label in ("PERIOD", "COMMA")}
        notes.append(
            f"- `{AUDIO}` with the real timings against `{TEXT}` on the same words: overall F1 "
            f"{f1(AUDIO, 'timings') - text:+.1f} points, PERIOD {gain['PERIOD']:+.1f}, COMMA {gain['COMMA']:+.1f}; "
            f"without speech (its text-only fallback) {f1(AUDIO, 'text') - text:+.1f}.")
    for name in found:
        if name in (TEXT, AUDIO) or f1(name, "timings") is None:
            continue
        notes.append(f"- `{name}`: {f1(name, 'timings') - f1(name, 'text'):+.1f} points from the real timings "
                     f"(text only → with timings), against `{TEXT}`: {f1(name, 'timings') - text:+.1f}.")
    for name in found:
        if name in (TEXT, AUDIO) or name in SAME_ARCHITECTURE.values() or f1(name, "timings") is not None \
                or text is None:
            continue
        words_only = SAME_ARCHITECTURE.get(name)
        against = (f"{f1(name, 'text') - f1(words_only, 'text'):+.1f} points against `{words_only}`, the same "
                   f"architecture on words alone" if f1(words_only, "text") is not None
                   else f"{f1(name, 'text') - text:+.1f} points against `{TEXT}`")
        notes.append(f"- `{name}` reads no timing of the recording (a type-level speech vector is a function of the "
                     f"word, looked up from the text): on real speech it is one more text model, {against}.")
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
    args, params = start(parser, argv)
    data = require(params, "data", "params")
    if args.model:
        models: dict[str, Any] = _pairs(args.model, "--model")
    else:
        section = require(params, "punctuate", "params")
        models = {TEXT: require(section, TEXT, "punctuate"), AUDIO: require(section, AUDIO, "punctuate"),
                  **(section.get("compare") or {}), **(section.get("cross_fitted") or {})}
    models.update(_cross_fitted(args.cross_fitted))
    result = evaluate_real_speech(require(data, "real_speech_dir", "data"), list(require(data, "real_speech_talks",
                                                                                         "data")),
                                  models, device=args.device, predictions_dir=args.predictions)
    iwslt = {}
    for name, model_dir in models.items():
        path = iwslt_metrics(model_dir) if isinstance(model_dir, (str, Path)) else None
        iwslt[name] = read_json(path, missing_ok=True) if path else None
        result["models"][name]["iwslt_metrics"] = str(path) if path else None
    pause_model = read_json(args.pause_model, missing_ok=True)
    write_json(args.metrics, result)
    descriptions = {name: DESCRIPTIONS[name] for name in models if name in DESCRIPTIONS}
    descriptions.update({name: "words + timing cues, pause model fitted without the talk scored"
                         for name, dirs in models.items() if not isinstance(dirs, (str, Path))})
    atomic_write_text(args.out, real_speech_markdown(
        result, iwslt=iwslt, baseline=TEXT if TEXT in models else None, descriptions=descriptions,
        pause_model=(pause_model or {}).get("summary"), notes=_notes(result, models)))
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
