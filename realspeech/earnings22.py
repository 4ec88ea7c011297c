"""Earnings-22 prepared as the repository's splits, with the real timing cues of every token and each call's files
as a user gives them to ``punctuate``.

Earnings-22: Rev.com's earnings calls (Del Rio et al., "Earnings-22: A Practical Benchmark for Accents in the
Wild", 2022), CC BY-SA 4.0; read from ``data.earnings22_dir`` (:mod:`corpus.earnings22`), never copied into git.

What :func:`prepare_earnings22` writes under ``out_dir``, per split ``SPLIT`` of ``splits.tsv`` (train, dev,
test; the test split is for reporting only):

=====================================  ===========================================================================
file                                   what
=====================================  ===========================================================================
``SPLIT.tsv``                          benchmark tokens, ``word<TAB>LABEL`` (:func:`corpus.iwslt.write_iwslt`), the
                                       split's calls one after another in the order of ``splits.tsv``
``SPLIT_talks.tsv``                    ``talk<TAB>first_token<TAB>tokens``: each call's span of ``SPLIT.tsv`` (as
                                       ``data/prepared/train_talks.tsv``), for scores per call
``timing/SPLIT/timing.npy``            float32 ``(tokens, 3)``: the real cues of each token, ``pause``,
                                       ``log_duration``, ``missing`` (:data:`embeddings.timing_features.RAW_COLUMNS`;
                                       the ``pauses`` speech source reads ``timing/``)
``timing/SPLIT/speaker_turn.npy``      bool ``(tokens,)``: on a word's last token, the next spoken word is another
                                       speaker's
``calls/SPLIT/text/CALL.txt``          the call's spoken words, lower case, no marks, one speaker turn a line
``calls/SPLIT/timings/CALL.tsv``       its word TSV (:func:`corpus.timings.write_word_tsv`; empty cells: no time)
``calls/SPLIT/ref/CALL.tsv``           ``word<TAB>LABEL``, one line per word of ``CALL.txt``
=====================================  ===========================================================================

So ``punctuate calls/test/text -o OUT --timings-dir calls/test/timings --format iwslt`` runs on the test calls as
a user runs it, and ``OUT/CALL.tsv`` scores against ``calls/test/ref/CALL.tsv``.

The cues of a call are those ``punctuate --alignment`` computes from its two files, by the same functions
(:func:`inference.speech_input.user_text_cues`, :func:`inference.speech_input.timing_raw`): per spoken word the
pause to the next spoken word, the log relative duration, and missing when the word or the next has no time (and
for the call's last word), spread over the tokens. A pause across a speaker turn
is kept as it is (the next speaker's start minus this word's end; an overlap reads 0), as ``punctuate`` reads it
from a diarised recording's times; the turn is recorded beside it (``speaker_turn.npy``) so that it can be told
apart. No pause runs across two calls: each call's last word has none.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from corpus.earnings22 import (
    ALIGNED_DIR,
    ALIGNED_SUFFIX,
    SPLITS,
    Call,
    Earnings22FormatError,
    SpokenWord,
    call_path,
    read_call,
    read_splits,
    spoken_words,
    token_labels,
)
from corpus.io import atomic_write_text
from corpus.iwslt import write_iwslt
from corpus.labels import LABELS, PUNCTUATION_CLASSES
from corpus.timings import WordTiming, write_word_tsv
from corpus.user_text import model_tokens, split_user_text
from embeddings.speech_sources import PAUSES_FILE

__all__ = ["CallCues", "Earnings22Data", "LONG_PAUSE_S", "SplitCues", "call_cues", "cue_summary",
           "prepare_earnings22", "split_totals", "timed_call_groups", "untimed_runs"]

#: The pause the reports count as long (docs/real_speech.md: 0.2 s or more follows most periods in TED speech).
LONG_PAUSE_S = 0.2
SPEAKER_TURN_FILE = "speaker_turn.npy"
TIMING_DIR, CALLS_DIR = "timing", "calls"
#: A call with a smaller share of timed words counts as mostly untimed (the aligner gave up on most of it).
MOSTLY_UNTIMED = 0.5
#: Untimed runs are counted in these length bins (words): ``(low, high)``, high None for no upper bound.
RUN_BINS: tuple[tuple[int, int | None], ...] = ((1, 1), (2, 4), (5, 9), (10, 49), (50, 99), (100, None))


@dataclass(frozen=True)
class CallCues:
    """A call as benchmark words with its real cues: the spoken words, its transcript (one speaker turn a line),
    the cues of each word ``(W, 3)``, whether the next spoken word is another speaker's ``(W,)``, and the same per
    token (``tokens``, ``labels``, ``raw`` ``(N, 3)``, ``turn`` ``(N,)``)."""

    name: str
    words: tuple[SpokenWord, ...]
    text: str
    cues: np.ndarray
    word_turn: np.ndarray
    tokens: tuple[str, ...]
    labels: tuple[str, ...]
    raw: np.ndarray
    turn: np.ndarray


def _turn_lines(words: Sequence[SpokenWord], word_turn: np.ndarray) -> str:
    lines, line = [], []
    for word, turn in zip(words, word_turn):
        line.append(word.text)
        if turn:
            lines.append(" ".join(line))
            line = []
    if line:
        lines.append(" ".join(line))
    return "\n".join(lines) + "\n"


def call_cues(call: Call) -> CallCues:
    """The benchmark words, tokens and real cues of one call, computed by ``punctuate``'s own functions from the
    call's transcript and word times (module docstring)."""
    from inference.speech_input import timing_raw, user_text_cues

    words = spoken_words(call)
    if not words:
        raise Earnings22FormatError(call.path, 1, "no spoken word in the call (only annotations)")
    speakers = np.asarray([w.speaker for w in words])
    word_turn = np.append(speakers[1:] != speakers[:-1], False)
    text = _turn_lines(words, word_turn)
    user_text = split_user_text(text)
    tokens, labels = token_labels(words)
    # each word was read alone as split_user_text reads it (corpus.earnings22.word_tokens): the transcript must read
    # as the same words and tokens, or the written files would not be the prepared tokens
    if [w.text for w in user_text.words] != [w.text for w in words] or model_tokens(user_text) != tokens:
        raise AssertionError(f"{call.path}: the transcript written does not read as the call's words")
    starts, ends = np.asarray([w.start for w in words]), np.asarray([w.end for w in words])
    is_last = np.asarray([i == len(w.tokens) - 1 for w in words for i in range(len(w.tokens))], dtype=bool)
    turn = np.zeros(len(tokens), dtype=bool)
    turn[is_last] = word_turn
    return CallCues(call.name, tuple(words), text, user_text_cues(user_text, starts, ends), word_turn, tuple(tokens),
                    tuple(labels), timing_raw(user_text, starts, ends).astype(np.float32), turn)


@dataclass
class SplitCues:
    """One split's spoken words, pooled over its calls: cues ``(W, 3)``, labels, turn flags, whether each word has
    a time, and the lengths of its runs of untimed words (within a call)."""

    cues: np.ndarray
    labels: np.ndarray
    turn: np.ndarray
    timed: np.ndarray
    runs: np.ndarray

    @classmethod
    def of(cls, calls: Sequence[CallCues]) -> "SplitCues":
        timed = [np.asarray([w.timed for w in call.words], dtype=bool) for call in calls]
        return cls(np.concatenate([c.cues for c in calls]) if calls else np.zeros((0, 3)),
                   np.asarray([w.label for c in calls for w in c.words], dtype=object),
                   np.concatenate([c.word_turn for c in calls]) if calls else np.zeros(0, dtype=bool),
                   np.concatenate(timed) if calls else np.zeros(0, dtype=bool),
                   np.concatenate([untimed_runs(t) for t in timed]) if calls else np.zeros(0, dtype=np.int64))


@dataclass
class Earnings22Data:
    """What :func:`prepare_earnings22` wrote (``paths``: name -> file), its figures (``report``, JSON) and each
    split's pooled cues (``cues``, for the comparison with TED speech)."""

    paths: dict[str, Path]
    report: dict[str, Any] = field(default_factory=dict)
    cues: dict[str, SplitCues] = field(default_factory=dict)


def untimed_runs(timed: np.ndarray) -> np.ndarray:
    """The lengths of the runs of ``False`` in ``timed`` (words without a time, one after another)."""
    padded = np.concatenate([[True], np.asarray(timed, dtype=bool), [True]])
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    return (edges[1::2] - edges[::2]).astype(np.int64)


def _share(part: float, whole: float) -> float | None:
    return round(float(part) / whole, 4) if whole else None


def cue_summary(cues: np.ndarray, labels: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per label (and ``all``): words, the share without cues, and over the words with cues the median pause, the
    share of pauses of :data:`LONG_PAUSE_S` or more and the median log relative duration."""
    cues, labels = np.asarray(cues, dtype=np.float64).reshape(-1, 3), np.asarray(labels, dtype=object)
    out: dict[str, dict[str, Any]] = {}
    for label in (*LABELS, "all"):
        rows = np.ones(len(labels), dtype=bool) if label == "all" else labels == label
        with_cues = rows & (cues[:, 2] == 0)
        pauses, durations = cues[with_cues, 0], cues[with_cues, 1]
        out[label] = {
            "words": int(rows.sum()),
            "share_without_cues": _share(rows.sum() - with_cues.sum(), rows.sum()),
            "median_pause_s": round(float(np.median(pauses)), 3) if len(pauses) else None,
            "share_pause_0.2s": _share(np.sum(pauses >= LONG_PAUSE_S), len(pauses)),
            "median_log_duration": round(float(np.median(durations)), 3) if len(durations) else None,
        }
    return out


def _run_summary(runs: np.ndarray, words: int) -> dict[str, Any]:
    untimed = int(runs.sum())
    bins = {}
    for low, high in RUN_BINS:
        inside = (runs >= low) & (runs <= (high if high is not None else np.inf))
        name = f"{low}" if low == high else (f"{low}+" if high is None else f"{low}-{high}")
        bins[name] = {"runs": int(inside.sum()), "share_of_untimed_words": _share(runs[inside].sum(), untimed)}
    return {
        "untimed_words": untimed, "share_untimed": _share(untimed, words), "runs": len(runs),
        "mean_length": round(float(runs.mean()), 1) if len(runs) else None,
        "median_length": float(np.median(runs)) if len(runs) else None,
        "p90_length": round(float(np.percentile(runs, 90)), 1) if len(runs) else None,
        "longest": int(runs.max()) if len(runs) else 0,
        "by_length": bins,
    }


def _turn_summary(split: SplitCues) -> dict[str, Any]:
    with_cues = split.cues[:, 2] == 0
    long = with_cues & (split.cues[:, 0] >= LONG_PAUSE_S)
    turns, elsewhere = split.turn, ~split.turn
    return {
        "turns": int(turns.sum()),
        "share_with_cues": _share(np.sum(turns & with_cues), turns.sum()),
        "share_pause_0.2s": _share(np.sum(turns & long), np.sum(turns & with_cues)),
        "share_pause_0.2s_elsewhere": _share(np.sum(elsewhere & long), np.sum(elsewhere & with_cues)),
        "share_of_long_pauses_at_turns": _share(np.sum(turns & long), long.sum()),
        "labels_at_turns": {label: _share(np.sum(turns & (split.labels == label)), turns.sum()) for label in LABELS},
    }


def _split_report(calls: Sequence[Call], prepared: Sequence[CallCues], split: SplitCues) -> dict[str, Any]:
    rows = [word for call in calls for word in call.words]
    timed_rows = sum(word.timed for word in rows)
    labels = [label for call in prepared for label in call.labels]
    label_counts = Counter(labels)
    per_call = [sum(w.timed for w in call.words) / len(call.words) for call in calls]
    mostly_untimed = [call for call, share in zip(calls, per_call) if share < MOSTLY_UNTIMED]
    return {
        "calls": len(calls),
        "words": len(rows),
        "timed_words": timed_rows,
        "timed_share": _share(timed_rows, len(rows)),
        "timed_share_per_call": {"lowest": round(min(per_call), 4), "median": round(float(np.median(per_call)), 4),
                                 "highest": round(max(per_call), 4)} if per_call else None,
        "calls_mostly_untimed": {"calls": len(mostly_untimed),
                                 "words": sum(len(call.words) for call in mostly_untimed),
                                 "untimed_words": sum(not w.timed for call in mostly_untimed for w in call.words)},
        "timed_share_by_call": {call.name: round(share, 4) for call, share in zip(calls, per_call)},
        "marks": {label: sum(w.label == label for w in rows) for label in PUNCTUATION_CLASSES},
        "annotations_dropped": sum(len(call.words) for call in calls) - sum(len(c.words) for c in prepared),
        "spoken_words": sum(len(c.words) for c in prepared),
        "tokens": len(labels),
        "labels": {label: label_counts[label] for label in LABELS},
        "label_shares": {label: _share(label_counts[label], len(labels)) for label in LABELS},
        "case": {case: count for case, count in sorted(Counter(w.case for w in rows).items())},
        "tags": dict(Counter(tag for w in rows for tag in w.tags).most_common()),
        "cues": cue_summary(split.cues, split.labels),
        "untimed_runs": _run_summary(split.runs, len(split.timed)),
        "speaker_turns": _turn_summary(split),
    }


def _write_call_files(call: CallCues, folder: Path) -> None:
    atomic_write_text(folder / "text" / f"{call.name}.txt", call.text)
    (folder / "timings").mkdir(parents=True, exist_ok=True)
    write_word_tsv([WordTiming(w.text, w.start, w.end, w.timed) for w in call.words],
                   folder / "timings" / f"{call.name}.tsv")
    write_iwslt(folder / "ref" / f"{call.name}.tsv", [w.text for w in call.words], [w.label for w in call.words])


def prepare_earnings22(data_dir: str | Path, out_dir: str | Path, *, splits: Sequence[str] = SPLITS,
                       progress: bool = True) -> Earnings22Data:
    """Write the Earnings-22 splits ``splits`` of ``data_dir`` under ``out_dir`` (module docstring) and return
    their figures. A call of ``splits.tsv`` without its ``.nlp`` file is an error naming the line; a ``.nlp`` file
    no split names is left out and listed (``unassigned_calls``)."""
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    splits_path = data_dir / "splits.tsv"
    rows = read_splits(splits_path)
    for row in rows:
        if not call_path(data_dir, row.call).is_file():
            raise Earnings22FormatError(splits_path, row.line, f"call {row.call!r} has no file "
                                                               f"{call_path(data_dir, row.call)}")
    assigned = {row.call for row in rows}
    on_disk = sorted(path.name.removesuffix(ALIGNED_SUFFIX) for path in (data_dir / ALIGNED_DIR).glob(
        f"*{ALIGNED_SUFFIX}"))
    for folder in (TIMING_DIR, CALLS_DIR):
        shutil.rmtree(out_dir / folder, ignore_errors=True)
    paths: dict[str, Path] = {}
    report: dict[str, Any] = {"data_dir": str(data_dir), "splits": {},
                              "unassigned_calls": [call for call in on_disk if call not in assigned]}
    pooled: dict[str, SplitCues] = {}
    bar = tqdm(total=sum(row.split in splits for row in rows), desc="earnings22 calls", unit="call",
               disable=not progress, leave=False)
    for split in splits:
        calls, prepared = [], []
        for row in rows:
            if row.split != split:
                continue
            calls.append(read_call(call_path(data_dir, row.call), row.call))
            prepared.append(call_cues(calls[-1]))
            _write_call_files(prepared[-1], out_dir / CALLS_DIR / split)
            bar.update()
        tokens = [t for c in prepared for t in c.tokens]
        labels = [label for c in prepared for label in c.labels]
        paths[split] = write_iwslt(out_dir / f"{split}.tsv", tokens, labels)
        spans, first = ["talk\tfirst_token\ttokens"], 0
        for call in prepared:
            spans.append(f"{call.name}\t{first}\t{len(call.tokens)}")
            first += len(call.tokens)
        paths[f"{split}_talks"] = atomic_write_text(out_dir / f"{split}_talks.tsv", "\n".join(spans) + "\n")
        timing = out_dir / TIMING_DIR / split
        timing.mkdir(parents=True, exist_ok=True)
        raw = np.concatenate([c.raw for c in prepared]) if prepared else np.zeros((0, 3), dtype=np.float32)
        np.save(timing / PAUSES_FILE, raw.astype(np.float32))
        np.save(timing / SPEAKER_TURN_FILE, np.concatenate([c.turn for c in prepared]) if prepared
                else np.zeros(0, dtype=bool))
        paths[f"{split}_timing"] = timing / PAUSES_FILE
        pooled[split] = SplitCues.of(prepared)
        report["splits"][split] = _split_report(calls, prepared, pooled[split])
    bar.close()
    return Earnings22Data(paths, report, pooled)


def split_totals(report: Mapping[str, Any]) -> dict[str, int]:
    """Calls, words and tokens summed over the splits of a :func:`prepare_earnings22` report."""
    splits = report["splits"].values()
    return {key: sum(split[key] for split in splits) for key in ("calls", "words", "timed_words", "tokens")}


def read_prepared_call(calls_dir: str | Path, name: str):
    """One prepared call of a split (``calls_dir`` = ``OUT/calls/SPLIT``) as a real talk
    (:class:`realspeech.cues.RealTalk`): its transcript, reference labels and word TSV, as ``punctuate`` reads them."""
    from realspeech.cues import read_talk_files

    calls_dir = Path(calls_dir)
    return read_talk_files(name, calls_dir / "text" / f"{name}.txt", calls_dir / "ref" / f"{name}.tsv",
                           calls_dir / "timings" / f"{name}.tsv")


def prepared_calls(calls_dir: str | Path) -> list[str]:
    """The calls of a prepared split (``OUT/calls/SPLIT``), by name, sorted; an error where there is none."""
    names = sorted(path.stem for path in (Path(calls_dir) / "text").glob("*.txt"))
    if not names:
        raise FileNotFoundError(f"{calls_dir}: no prepared calls (text/CALL.txt); run stage prepare_earnings22")
    return names


def timed_share(calls_dir: str | Path, names: Sequence[str]) -> float:
    """The share of the words of the calls ``names`` of a prepared split (``OUT/calls/SPLIT``) with a time."""
    from corpus.timings import read_word_tsv

    rows = [row for name in names for row in read_word_tsv(Path(calls_dir) / "timings" / f"{name}.tsv")]
    return sum(row.has_time for row in rows) / max(len(rows), 1)


def timed_call_groups(calls_dir: str | Path, names: Sequence[str]) -> dict[str, list[str]]:
    """The calls ``names`` of a prepared split in two groups: those with at least :data:`MOSTLY_UNTIMED` of their
    words timed, and the mostly untimed rest (the aligner gave up on most of them). Why: a timing cue can only help
    where a word has a time, and the calls' timed shares are far apart (a few percent, or most words)."""
    timed = [name for name in names if timed_share(calls_dir, [name]) >= MOSTLY_UNTIMED]
    percent = f"{100 * MOSTLY_UNTIMED:.0f} %"
    return {f"calls timed ≥ {percent}": timed,
            f"calls timed < {percent}": [name for name in names if name not in timed]}
