"""A longer draw of training text: the prepare stage's seeded draw of talks run on to more tokens, and its word
features (stage ``draw@NAME``, params ``draws``).

:func:`trainset.prepare.prepare_data` takes talks in one seeded order until ``train_tokens``; drawn on to twice as
many, the first talks are the default set's (its last one, cut at a sentence end there, whole here) and the rest
follow, with the same exclusions (overlap with dev, the test sets and the real-speech talks; the held-out talks).
The evaluation splits are the same words. A model that reads such a draw sees more text in the same steps instead
of the same text twice (reports/history/asr_levers/levers.md, ``fresh_data``).

A draw's entry in params ``draws`` (:func:`draw_spec`) is either its training tokens or a mapping:

=========================================================  =======================================================
entry                                                      the draw
=========================================================  =======================================================
``long: 5100000``                                          the TED talks drawn to 5,100,000 training tokens
``long: {tokens: 5100000}``                                the same draw, the same bytes
``NAME: {tokens: N, extra_corpora: [earnings22_train]}``   the TED talks drawn to N tokens, then Earnings-22
                                                           train's calls appended
=========================================================  =======================================================

An extra corpus (:data:`EXTRA_CORPORA`) is appended after the drawn talks: ``earnings22_train`` is Earnings-22's
train split (Rev.com; Del Rio et al. 2022; CC BY-SA 4.0; read from ``data.earnings22_dir``), its calls in an
order shuffled with ``data.seed``, each as :mod:`corpus.earnings22` makes its benchmark tokens. Each appended call
is a row ``earnings22:CALL`` of ``train_talks.tsv``. A draw with an extra corpus reads ``data.earnings22_dir``:
its stage must then depend on that folder too.

The draw's metrics (:func:`draw_metrics`) record what it left out, by the reasons of :mod:`trainset.prepare`, each
reason with its count and talks, an empty one said so (``none``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainset.from_params import prepare_from_params
from trainset.prepare import REASON_EMPTY, REASON_NAMED, REASON_OVERLAP, REASON_SHORT

#: the folders of a draw under its directory: the prepared words (as ``data/prepared``) and their word features
#: (as ``data/features``)
PREPARED_DIR, FEATURES_DIR = "prepared", "features"
#: The corpora a draw may append to its training split.
EARNINGS22_TRAIN = "earnings22_train"
EXTRA_CORPORA: tuple[str, ...] = (EARNINGS22_TRAIN,)
#: How the metrics name each reason a talk was left out of the draw (trainset.prepare's reasons).
EXCLUSION_REASONS = {
    REASON_OVERLAP: "overlaps dev, the test sets or a real-speech talk (shared word n-grams)",
    REASON_NAMED: "held out by name (data.excluded_talks)",
    REASON_EMPTY: "no words after normalisation",
    REASON_SHORT: "too short to check for overlap",
}


class DrawSpecError(ValueError):
    """A ``draws`` entry that is neither a count of tokens nor ``{tokens, extra_corpora}``; names the entry."""


@dataclass(frozen=True)
class DrawSpec:
    """A draw's training tokens (the TED talks') and the corpora appended after them."""

    tokens: int
    extra_corpora: tuple[str, ...] = ()


@dataclass
class Draw:
    """Where a draw is (``prepared``, ``features``), the prepare report of its talks and the extra corpora appended
    (name -> calls and tokens)."""

    spec: DrawSpec
    prepared: Path
    features: Path
    report: dict[str, Any]
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)


def _tokens(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise DrawSpecError(f"{where} is {value!r}: give the draw's training tokens, a positive whole number")
    return value


def draw_spec(value: Any, name: str) -> DrawSpec:
    """Params' ``draws.NAME``: a positive whole number of training tokens, or a mapping with ``tokens`` and
    optionally ``extra_corpora`` (names of :data:`EXTRA_CORPORA`). A ``foreach`` over ``draws`` in dvc.yaml hands
    either to the stage."""
    where = f"draws.{name}"
    if not isinstance(value, Mapping):
        return DrawSpec(_tokens(value, where))
    unknown = sorted(set(value) - {"tokens", "extra_corpora"})
    if unknown or "tokens" not in value:
        raise DrawSpecError(f"{where} is {dict(value)!r}: give {{tokens: N}} and optionally {{extra_corpora: [...]}}"
                            + (f" (unknown keys: {', '.join(map(str, unknown))})" if unknown else ""))
    extra = value.get("extra_corpora") or []
    if isinstance(extra, str) or not isinstance(extra, Sequence) or any(name not in EXTRA_CORPORA for name in extra) \
            or len(set(extra)) != len(extra):
        raise DrawSpecError(f"{where}.extra_corpora is {extra!r}: a list of distinct names of {list(EXTRA_CORPORA)}")
    return DrawSpec(_tokens(value["tokens"], f"{where}.tokens"), tuple(extra))


def append_earnings22_train(data_dir: str | Path, prepared: str | Path, seed: int) -> dict[str, Any]:
    """Append Earnings-22 train's calls, in an order shuffled with ``seed``, to ``prepared/train.tsv`` and
    ``prepared/train_talks.tsv`` (rows ``earnings22:CALL``); returns the calls and tokens appended."""
    from corpus.earnings22 import call_path, read_call, read_splits, spoken_words, token_labels

    prepared = Path(prepared)
    calls = sorted(row.call for row in read_splits(Path(data_dir) / "splits.tsv") if row.split == "train")
    random.Random(seed).shuffle(calls)
    talks_lines = (prepared / "train_talks.tsv").read_text(encoding="utf-8").splitlines()
    first = sum(int(line.split("\t")[2]) for line in talks_lines[1:])
    appended = 0
    with (prepared / "train.tsv").open("a", encoding="utf-8", newline="\n") as words, \
            (prepared / "train_talks.tsv").open("a", encoding="utf-8", newline="\n") as talks:
        for call in calls:
            tokens, labels = token_labels(spoken_words(read_call(call_path(data_dir, call), call)))
            words.writelines(f"{token}\t{label}\n" for token, label in zip(tokens, labels))
            talks.write(f"earnings22:{call}\t{first + appended}\t{len(tokens)}\n")
            appended += len(tokens)
    return {"calls": len(calls), "tokens": appended, "first_token": first}


def make_draw(data: Mapping[str, Any], embed: Mapping[str, Any], spec: DrawSpec | int, out_dir: str | Path) -> Draw:
    """The draw ``spec`` of params' ``data``, with the word source of params' ``embed`` (its ``word_source``,
    ``oov``, ``vocab_min_count``): the words in ``out_dir/prepared``, their features in ``out_dir/features``. The
    words are drawn every time (half a minute for 4M tokens: no stale draw is ever read); the features are rebuilt
    only when those words or the word source changed (their content is the cache's key:
    :func:`embeddings.cache.build_feature_cache`)."""
    from embeddings.cache import build_feature_cache
    from experiments.params import require

    spec = spec if isinstance(spec, DrawSpec) else DrawSpec(_tokens(spec, "train_tokens"))
    out_dir = Path(out_dir)
    prepared = prepare_from_params(data, out_dir / PREPARED_DIR, train_tokens=spec.tokens)
    extra = {}
    for corpus in spec.extra_corpora:  # EXTRA_CORPORA has one entry: draw_spec accepts no other
        extra[corpus] = append_earnings22_train(require(data, "earnings22_dir", "data"), out_dir / PREPARED_DIR,
                                                int(require(data, "seed", "data")))
    features = Path(build_feature_cache(out_dir / PREPARED_DIR, out_dir / FEATURES_DIR,
                                        word_source=embed["word_source"], oov=embed["oov"],
                                        vocab_min_count=int(embed.get("vocab_min_count", 1))).root)
    return Draw(spec, out_dir / PREPARED_DIR, features, prepared.report, extra)


def draw_from_params(params: Mapping[str, Any], name: str, out_dir: str | Path) -> tuple[Draw, dict[str, Any]]:
    """Params' draw ``draws.NAME`` (params resolved: their ``data`` and ``embed`` sections read) made into
    ``out_dir`` (:func:`make_draw`), and its metrics (:func:`draw_metrics`): what the draw stage writes. A draw the
    params lack, or one that is no count of tokens, is a :class:`DrawSpecError`."""
    from embeddings.cache import read_manifest
    from experiments.params import require

    draws = params.get("draws") or {}
    if name not in draws:
        raise DrawSpecError(f"draws has no entry {name!r} (has {sorted(draws)})")
    spec = draw_spec(draws[name], name)
    draw = make_draw(require(params, "data", "params"), require(params, "embed", "params"), spec, out_dir)
    return draw, draw_metrics(draw, read_manifest(draw.features))


def draw_features(data: Mapping[str, Any], embed: Mapping[str, Any], train_tokens: int, out_dir: str | Path) -> Path:
    """The word features of params' ``data`` drawn to ``train_tokens`` training tokens (:func:`make_draw`):
    ``out_dir/features``, the words in ``out_dir/prepared``."""
    return make_draw(data, embed, train_tokens, out_dir).features


def draw_exclusions(report: Mapping[str, Any]) -> dict[str, Any]:
    """What the draw left out, from the prepare report of its talks: per reason (:data:`EXCLUSION_REASONS`) its
    count and talks (sorted; an empty reason has count 0 and no talks), the talks overlapping a real-speech talk
    among the overlaps, and a one-line ``summary`` that says ``none`` for an empty reason."""
    overlap = report["overlap"]
    talks = {
        REASON_OVERLAP: [row["talk"] for row in overlap["excluded_talks"]],
        REASON_NAMED: [row["talk"] for row in report["real_speech"]["excluded_by_name"]],
        REASON_EMPTY: list(overlap["empty_talks"]),
        REASON_SHORT: list(overlap.get("too_short_talks", [])),
    }
    out: dict[str, Any] = {reason: {"what": EXCLUSION_REASONS[reason], "count": len(names), "talks": sorted(names)}
                           for reason, names in talks.items()}
    out[REASON_OVERLAP]["overlapping_real_speech"] = sorted(report["real_speech"]["excluded_by_overlap_with_them"])
    out["summary"] = "; ".join(f"{EXCLUSION_REASONS[reason]}: {len(names) or 'none'}"
                               for reason, names in talks.items())
    return out


def draw_metrics(draw: Draw, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The draw's metrics: the tokens asked, the TED talks drawn, the tokens and vocabulary of its feature cache
    (``manifest``), what it left out (:func:`draw_exclusions`) and the corpora appended."""
    return {"train_tokens_asked": draw.spec.tokens, "talks": int(draw.report["talks"]["kept"]),
            "tokens": {split: stats["tokens"] for split, stats in manifest["splits"].items()},
            "vocab_size": manifest["vocab_size"], "exclusions": draw_exclusions(draw.report),
            "extra_corpora": {name: dict(figures) for name, figures in draw.extra.items()}}
