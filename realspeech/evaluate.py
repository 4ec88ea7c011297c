"""Models scored on real speech exactly as ``punctuate`` runs them, and the report of it.

* :func:`evaluate_real_speech` -- the models of the comparison on each talk of :mod:`realspeech.cues`
  (``TALK.txt``, with ``TALK.timings.tsv`` for a model that reads timing cues), scored per word against
  ``TALK.ref.tsv``; also all talks pooled, and any groups of talks pooled (Earnings-22's calls by their timed share);
* :func:`real_speech_markdown` -- its report, beside the models' IWSLT2011 figures and the pause model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from corpus.labels import LABELS, PUNCTUATION_CLASSES
from evaluation.scoring import score_labels
from realspeech.cues import RealTalk, read_real_talk

__all__ = ["evaluate_real_speech", "real_speech_markdown"]

TED_TITLE = "Real speech: punctuation with and without the words' real timings"
#: How the reports name each input a model is scored on.
INPUT_LABELS = {"text": "text only", "timings": "text + real timings"}


def _scores(reference: Sequence[str], predicted: Sequence[str]) -> dict[str, Any]:
    return {**score_labels(list(reference), list(predicted)), "words": len(reference)}


def _pooled(reference: Mapping[str, Sequence[str]], predicted: Mapping[str, Sequence[str]],
            talks: Sequence[str]) -> dict[str, Any]:
    """The scores of ``talks`` taken together: their labels joined in that order."""
    return _scores([label for talk in talks for label in reference[talk]],
                   [label for talk in talks for label in predicted[talk]])


def evaluate_real_speech(directory: str | Path, talks: Sequence[str],
                         models: Mapping[str, str | Path | Mapping[str, str | Path]], *, device: str = "cpu",
                         predictions_dir: str | Path | None = None,
                         read_talk: Callable[[str | Path, str], RealTalk] = read_real_talk,
                         threads: int | None = None,
                         groups: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """Score each model on each talk, from its text alone and (for a model that reads timing cues) with the
    talk's real word timings, exactly as ``punctuate [--alignment TALK.timings.tsv] TALK.txt`` would label the
    words; also all talks pooled, and each of ``groups`` (name -> talks) pooled (``[input]["groups"][name]``).

    ``models``: name -> model directory, or name -> {talk: model directory} for a **cross-fitted** model (each
    talk scored by a model whose pause model was fitted without it). With ``predictions_dir``, each run's
    labels are written there as ``<model>.<input>.<talk>.tsv`` (``word<TAB>LABEL``). ``read_talk`` reads a talk of
    ``directory`` by name (a prepared Earnings-22 split: :func:`realspeech.earnings22.read_prepared_call`);
    ``threads``: torch's thread count (params ``evaluate.threads``; the labels are the same bytes on any)."""
    if threads is not None:
        import torch

        torch.set_num_threads(int(threads))
    from inference.punctuator import Punctuator
    from inference.speech_input import read_timing_rows

    real = [read_talk(directory, name) for name in talks]
    groups = dict(groups or {})
    strays = {name: sorted(set(members) - set(talks)) for name, members in groups.items()}
    if any(strays.values()):
        raise ValueError(f"groups name talks that are not scored: {({k: v for k, v in strays.items() if v})}")
    timings = {talk.name: read_timing_rows(talk.timings_path) for talk in real}
    reference = {talk.name: talk.labels for talk in real}
    result: dict[str, Any] = {"talks": {talk.name: {"words": len(talk.words)} for talk in real}, "models": {}}
    if groups:
        result["groups"] = {name: {"talks": list(members), "words": sum(result["talks"][t]["words"] for t in members)}
                            for name, members in groups.items()}
    for model_name, model_dirs in models.items():
        if isinstance(model_dirs, Mapping):
            unknown = set(model_dirs) - {talk.name for talk in real}
            if unknown or len(model_dirs) != len(real):
                raise ValueError(f"cross-fitted model {model_name!r} needs one model directory per talk "
                                 f"{[talk.name for talk in real]}, has {sorted(model_dirs)}")
            dirs = {talk.name: Path(model_dirs[talk.name]) for talk in real}
        else:
            dirs = {talk.name: Path(model_dirs) for talk in real}
        loaded: dict[Path, Any] = {}
        punctuators = {}
        for talk_name, model_dir in dirs.items():
            if model_dir not in loaded:
                loaded[model_dir] = Punctuator(model_dir, device=device)
            punctuators[talk_name] = loaded[model_dir]
        reads_timings = all(p.reads_timings for p in loaded.values())
        inputs = ["text", "timings"] if reads_timings else ["text"]
        entry: dict[str, Any] = {"model_dir": {t: str(d) for t, d in dirs.items()} if isinstance(model_dirs, Mapping)
                                 else str(model_dirs), "reads_timings": reads_timings}
        for input_name in inputs:
            per_talk: dict[str, Any] = {}
            talk_labels: dict[str, list[str]] = {}
            for talk in real:
                punctuator = punctuators[talk.name]
                user_text, labels, _ = punctuator.punctuate_text(
                    talk.text, timings=timings[talk.name] if input_name == "timings" else None,
                    transcript=str(talk.text_path))
                if [word.text for word in user_text.words] != list(talk.words):
                    raise AssertionError(f"{talk.name}: punctuate changed the words")  # cannot happen
                per_talk[talk.name] = _scores(talk.labels, labels)
                talk_labels[talk.name] = labels
                if predictions_dir is not None:
                    path = Path(predictions_dir) / f"{model_name}.{input_name}.{talk.name}.tsv"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text("".join(f"{w}\t{l}\n" for w, l in zip(talk.words, labels)), encoding="utf-8")
            entry[input_name] = {"talks": per_talk,
                                 "all": _pooled(reference, talk_labels, [talk.name for talk in real])}
            if groups:
                entry[input_name]["groups"] = {name: _pooled(reference, talk_labels, members)
                                               for name, members in groups.items()}
        result["models"][model_name] = entry
    return result


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _row_cells(scores: Mapping[str, Any]) -> list[str]:
    return ([_pct(scores["OVERALL"]["f1"]), _pct(scores["SER"])]
            + [_pct(scores[label]["f1"]) for label in PUNCTUATION_CLASSES])


def real_speech_markdown(result: Mapping[str, Any], *, descriptions: Mapping[str, str] | None = None,
                         iwslt: Mapping[str, Mapping[str, Any] | None] | None = None,
                         pause_model: Mapping[str, Any] | None = None, baseline: str | None = None,
                         notes: Sequence[str] = (), title: str | None = None, intro: str | None = None,
                         per_talk: bool = True) -> str:
    """The real-speech report: every model and input on each talk and pooled (F1 overall and per class, SER),
    Δ against ``baseline``'s text-only row, beside the models' IWSLT2011 figures (``iwslt``: model -> the
    evaluate stage's metrics, with ``ref``/``asr``). ``title`` and ``intro`` replace the TED talks' heading and
    paragraph; without ``per_talk``, one table of overall F1 per talk replaces a full table per talk (a corpus of
    many calls)."""
    descriptions = descriptions or {}
    iwslt = iwslt or {}
    talks = list(result["talks"])
    out = [f"# {title or TED_TITLE}", ""]
    out += [
        intro or (
            f"Real TED recordings with the time of every word ({', '.join(f'`{t}`' for t in talks)}: "
            f"{sum(info['words'] for info in result['talks'].values()):,} words, development talks of "
            "`../shared/data/ted_real`). Each model labels `TALK.txt` exactly as `punctuate` does: from the text "
            "alone, and -- for a model that reads timing cues -- with `--alignment TALK.timings.tsv`; the labels "
            "are scored per word against `TALK.ref.tsv` (F1 in %, overall = COMMA, PERIOD and QUESTION together; "
            "SER = slot error rate)."),
        "",
    ]
    base = None
    if baseline and baseline in result["models"]:
        base = result["models"][baseline]["text"]["all"]["OVERALL"]["f1"]
    header = ["model", "input", "F1", "SER", "COMMA", "PERIOD", "QUESTION", "Δ F1"]
    for scope in ["all", *(talks if per_talk else [])]:
        title = "All talks" if scope == "all" else f"`{scope}`"
        out += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for model_name, entry in result["models"].items():
            for input_name in ("text", "timings"):
                if input_name not in entry:
                    continue
                scores = entry[input_name]["all"] if scope == "all" else entry[input_name]["talks"][scope]
                reference = None
                if baseline and baseline in result["models"]:
                    ref_entry = result["models"][baseline]["text"]
                    reference = (ref_entry["all"] if scope == "all" else ref_entry["talks"][scope])["OVERALL"]["f1"]
                delta = "–" if reference is None else f"{100 * (scores['OVERALL']['f1'] - reference):+.1f}"
                label = f"{model_name}" + (f" ({descriptions[model_name]})" if model_name in descriptions else "")
                out.append("| " + " | ".join([label, INPUT_LABELS[input_name], *_row_cells(scores), delta]) + " |")
        out.append("")
    if base is not None:
        out += [f"Δ F1: overall F1 minus `{baseline}`'s on the text alone (points).", ""]
    if result.get("groups"):
        names = list(result["groups"])
        out += ["## By group of talks", "",
                "Overall F1 of each model and input, pooled over each group's talks.", "",
                "| model | input | " + " | ".join(
                    f"{name} ({len(info['talks'])} talks, {info['words']:,} words)"
                    for name, info in result["groups"].items()) + " |",
                "|" + "---|" * (2 + len(names))]
        for model_name, entry in result["models"].items():
            for input_name in ("text", "timings"):
                if input_name in entry:
                    cells = [_pct(entry[input_name]["groups"][name]["OVERALL"]["f1"]) for name in names]
                    out.append(f"| {model_name} | {INPUT_LABELS[input_name]} | " + " | ".join(cells) + " |")
        out.append("")
    if not per_talk:
        runs = [(name, input_name) for name, entry in result["models"].items()
                for input_name in ("text", "timings") if input_name in entry]
        out += ["## Per talk", "", "Overall F1 of each model and input on each talk.", "",
                "| talk | words | " + " | ".join(f"{name} ({'timings' if i == 'timings' else 'text'})"
                                                for name, i in runs) + " |",
                "|" + "---|" * (2 + len(runs))]
        for talk in talks:
            cells = [_pct(result["models"][name][i]["talks"][talk]["OVERALL"]["f1"]) for name, i in runs]
            out.append(f"| `{talk}` | {result['talks'][talk]['words']:,} | " + " | ".join(cells) + " |")
        out.append("")
    if iwslt:
        out += ["## Beside IWSLT2011", "",
                "The same models on the IWSLT2011 test sets (`evaluate` stages). These have no real recordings: "
                "a timing model reads them without speech (every cue missing), so its IWSLT figures are its "
                "text-only fallback.", "",
                "| model | Ref F1 | Ref SER | ASR F1 | ASR SER | real speech F1 (text only) "
                "| real speech F1 (timings) |",
                "|---|---|---|---|---|---|---|"]
        for model_name, entry in result["models"].items():
            metrics = iwslt.get(model_name)
            ref = metrics.get("ref") if metrics else None
            asr = metrics.get("asr") if metrics else None
            real_text = entry["text"]["all"]["OVERALL"]["f1"]
            real_timed = entry["timings"]["all"]["OVERALL"]["f1"] if "timings" in entry else None
            out.append("| " + " | ".join([
                model_name,
                _pct(ref["OVERALL"]["f1"]) if ref else "–", _pct(ref["SER"]) if ref else "–",
                _pct(asr["OVERALL"]["f1"]) if asr else "–", _pct(asr["SER"]) if asr else "–",
                _pct(real_text), _pct(real_timed)]) + " |")
        out.append("")
    if pause_model:
        out += ["## The pause model", "",
                f"Fitted on {', '.join(f'`{t}`' for t in pause_model.get('talks', []))} "
                f"({pause_model.get('words', 0):,} words, {100 * pause_model.get('missing_rate', 0):.1f} % without "
                "a pause: untimed words and the last word). Per label: the real words with a pause, the median pause "
                "and the share followed by 0.2 s or more; median log duration relative to a word of its length.", "",
                "| label | timed words | median pause (s) | pause ≥ 0.2 s | median log rel. duration |",
                "|---|---|---|---|---|"]
        for label in LABELS:
            info = pause_model.get(label) or {}
            share = info.get("share_pause_0.2s")
            out.append(f"| {label} | {info.get('timed_words', 0)} | {info.get('median_pause_s')} | "
                       f"{'–' if share is None else f'{100 * share:.0f} %'} | {info.get('median_log_duration')} |")
        out.append("")
    if notes:
        out += ["## Notes", "", *notes, ""]
    return "\n".join(out)
