"""Build the training set from raw TED transcripts, keeping every talk of the evaluation sets out of it.

The IWSLT2011 benchmark's own training set is not available (see ``../shared/data/README.md``), so
:func:`prepare_data` rebuilds an equivalent one from ``ted_talks.jsonl.gz``:

1. Each evaluation split (``dev2012``, ``test2011``, ``test2011asr``) is read with
   :func:`corpus.iwslt.read_iwslt` and written back as a clean UTF-8/LF copy ``<split>.tsv``.
2. Each TED talk is normalised with :func:`corpus.text.normalize_transcript`.
3. **Overlap exclusion.** The crawl contains the test talks and the talks ``dev2012`` was cut from. A talk is
   excluded when at least ``overlap_min_shared_fraction`` of its distinct word n-grams (``n = overlap_ngram``)
   also occur in an evaluation split. With ``n = 8`` two unrelated talks share almost no n-gram (an 8-word
   sequence recurs across talks only for stock phrases), while a talk that *is* an evaluation talk shares
   most of them, even though its 2018 transcript was re-edited since 2011/2012; the report shows the
   distribution of shared fractions so the gap the threshold sits in can be checked. Benchmark tokens are
   matched without the mangled music notes glued to sung lines (otherwise song performances in ``dev2012``
   go unnoticed) and without its stray ``--``/``/transcript`` tokens. Empty talks (music performances whose
   transcript is only stage notes) and talks shorter than ``n`` words are excluded too, with their reason.
4. **Talks held out by name** (``excluded_talks``: the real-speech talks of ``../shared/data/ted_real``, two
   for development and three kept back as a test) are excluded whatever their overlap, and checked by text:
   their own transcripts and the words of the real-speech talks at hand (``real_speech``: name -> a
   ``word<TAB>LABEL`` file) join the evaluation splits as overlap sources, so a copy of one of them under
   another name is excluded by step 3; the report records how much of each real-speech talk the talks
   excluded by name cover (it is the same talk: nearly all of it). A name that is not in the file is an error.
5. The remaining talks are shuffled with ``random.Random(seed)`` and taken whole until ``train_tokens`` is
   reached; the last one is cut at the budget, at a sentence end when there is one.
"""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from corpus.iwslt import read_iwslt, write_iwslt
from corpus.labels import LABELS, SENTENCE_END_LABELS
from corpus.text import normalize_transcript, tokenize_for_inference
from trainset.report import report_markdown

__all__ = [
    "PUBLISHED_TRAIN_DISTRIBUTION",
    "PreparedData",
    "TedTalksFormatError",
    "prepare_data",
    "read_ted_talks",
    "report_markdown",
]

#: Label shares (%) of the original ``train2012`` as published by its preparer.
PUBLISHED_TRAIN_DISTRIBUTION: dict[str, float] = {"O": 85.7, "COMMA": 7.53, "PERIOD": 6.3, "QUESTION": 0.47}

#: Upper edges of the shared-fraction histogram in the report.
_HISTOGRAM_EDGES: tuple[float, ...] = (0.0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.8, 1.0)

REASON_OVERLAP = "overlaps_eval"
REASON_EMPTY = "empty_after_normalisation"
REASON_SHORT = "too_short_to_check"  # fewer words than the n-gram length: overlap cannot be measured
REASON_NAMED = "held_out_by_name"  # a real-speech talk (development or test), named in data.excluded_talks


class TedTalksFormatError(ValueError):
    """A line of the TED talks file that is not a ``{"talk": str, "text": str}`` JSON object."""

    def __init__(self, path: str | Path, line: int, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        super().__init__(f"{self.path}:{line}: {reason}")


@dataclass
class PreparedData:
    """Where :func:`prepare_data` wrote its files, and its report (JSON-serialisable)."""

    paths: dict[str, Path]
    report: dict[str, Any] = field(default_factory=dict)


def read_ted_talks(path: str | Path) -> Iterator[tuple[int, str, str]]:
    """Yield ``(line_number, talk, text)`` from a JSON-lines file (gzip-compressed if it ends in ``.gz``)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise TedTalksFormatError(path, number, f"malformed JSON: {error.msg} (column {error.colno})") from error
            if not isinstance(record, dict):
                raise TedTalksFormatError(path, number, "expected a JSON object")
            talk, text = record.get("talk"), record.get("text")
            if not isinstance(talk, str) or not talk.strip():
                raise TedTalksFormatError(path, number, "missing or empty string field 'talk'")
            if not isinstance(text, str):
                raise TedTalksFormatError(path, number, f"talk {talk!r}: missing string field 'text'")
            yield number, talk, text


def _ngrams(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return set(zip(*(words[k:] for k in range(n))))


#: Tokens of the distributed benchmark files that the TED text never has: stray dashes and end-of-talk tags.
_BENCHMARK_ARTEFACTS = frozenset({"--", "/transcript", "/seg"})


def _matching_words(words: Sequence[str]) -> list[str]:
    """Benchmark tokens as they are matched against TED talks.

    The distributed files glue mangled music notes (``\ufffd?``) onto the first word of every sung line, which
    would hide whole song performances from n-gram matching; they are removed, as are artefact tokens.
    """
    out = []
    for word in words:
        word = word.replace("\ufffd?", "").replace("\ufffd", "").strip().lower()
        if word and word not in _BENCHMARK_ARTEFACTS:
            out.append(word)
    return out


def _distribution(labels: Sequence[str]) -> dict[str, float]:
    counts = Counter(labels)
    total = len(labels) or 1
    return {label: round(100.0 * counts[label] / total, 2) for label in LABELS}


def _histogram(fractions: Sequence[float]) -> list[dict[str, Any]]:
    """Talk counts per shared-fraction bin: exactly 0, then (0, e1), [e1, e2), ..., [e_last-1, 1]."""
    rows = [{"range": "0", "talks": sum(1 for f in fractions if f == 0.0)}]
    last = len(_HISTOGRAM_EDGES) - 2
    for i, (low, high) in enumerate(zip(_HISTOGRAM_EDGES, _HISTOGRAM_EDGES[1:])):
        above = (lambda f: f > low) if i == 0 else (lambda f: f >= low)
        below = (lambda f: f <= high) if i == last else (lambda f: f < high)
        opening, closing = ("(" if i == 0 else "["), ("]" if i == last else ")")
        rows.append(
            {"range": f"{opening}{low:g}, {high:g}{closing}", "talks": sum(1 for f in fractions if above(f) and below(f))}
        )
    return rows


def _token_coverage(words: Sequence[str], found: set[tuple[str, ...]], n: int) -> dict[str, Any]:
    """Share of a split's tokens inside an n-gram found in an excluded talk, and the longest stretch outside."""
    covered = [False] * len(words)
    for start, gram in enumerate(zip(*(words[k:] for k in range(n)))):
        if gram in found:
            covered[start : start + n] = [True] * n
    longest, longest_start, run_start = 0, 0, None
    for index, flag in enumerate([*covered, True]):
        if not flag and run_start is None:
            run_start = index
        elif flag and run_start is not None:
            if index - run_start > longest:
                longest, longest_start = index - run_start, run_start
            run_start = None
    return {
        "token_coverage_by_excluded_talks": round(sum(covered) / (len(words) or 1), 4),
        "longest_uncovered_run": {
            "tokens": longest,
            "starts_with": " ".join(words[longest_start : longest_start + 12]),
        },
    }


def _cut_at_sentence_end(labels: Sequence[str], budget: int) -> int:
    """Tokens to keep from a talk when only ``budget`` fit: up to the last sentence end within the budget."""
    for index in range(min(budget, len(labels)) - 1, -1, -1):
        if labels[index] in SENTENCE_END_LABELS:
            return index + 1
    return min(budget, len(labels))


def _clean_name(name: str) -> str:
    return " ".join(name.split())


def prepare_data(
    iwslt_dir: str | Path,
    ted_talks: str | Path,
    out_dir: str | Path,
    *,
    eval_splits: Mapping[str, str],
    train_tokens: int,
    overlap_ngram: int,
    overlap_min_shared_fraction: float,
    seed: int,
    excluded_talks: Sequence[str] = (),
    real_speech: Mapping[str, str | Path] | None = None,
) -> PreparedData:
    """Write the evaluation splits and an overlap-free training set under ``out_dir``; see the module doc.

    Files: ``<split>.tsv`` for each evaluation split, ``train.tsv``, ``train_talks.tsv`` (talk, first_token,
    tokens) and ``excluded_talks.tsv`` (talk, splits, shared_fraction, reason).

    ``excluded_talks`` names talks of ``ted_talks`` never to train on; ``real_speech`` maps the name of a
    real-speech talk to its ``word<TAB>LABEL`` file, whose words are an overlap source (step 4).
    """
    if train_tokens <= 0:
        raise ValueError(f"train_tokens must be positive, got {train_tokens}")
    if overlap_ngram < 1:
        raise ValueError(f"overlap_ngram must be at least 1, got {overlap_ngram}")
    if not 0.0 < overlap_min_shared_fraction <= 1.0:
        raise ValueError(f"overlap_min_shared_fraction must be in (0, 1], got {overlap_min_shared_fraction}")
    if not eval_splits:
        raise ValueError("eval_splits is empty")
    reserved = {"train", "train_talks", "excluded_talks"} & set(eval_splits)
    if reserved:
        raise ValueError(f"eval split names {sorted(reserved)} clash with the training files")
    iwslt_dir, ted_talks, out_dir = Path(iwslt_dir), Path(ted_talks), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    split_names = list(eval_splits)
    excluded_names = [_clean_name(name) for name in excluded_talks]
    if len(set(excluded_names)) != len(excluded_names):
        raise ValueError(f"excluded_talks names a talk twice: {excluded_names}")
    real_speech = {str(name): Path(path) for name, path in (real_speech or {}).items()}

    # 1. Evaluation splits, and the n-grams that index them (bit k set = found in split k).
    eval_report: dict[str, Any] = {}
    eval_ngrams: dict[tuple[str, ...], int] = {}
    split_ngram_counts: dict[str, int] = {}
    split_matching_words: dict[str, list[str]] = {}
    for bit, (split, file_name) in enumerate(eval_splits.items()):
        data = read_iwslt(iwslt_dir / file_name, skip_empty_words=True)
        paths[split] = write_iwslt(out_dir / f"{split}.tsv", data.words, data.labels)
        split_matching_words[split] = _matching_words(data.words)
        grams = _ngrams(split_matching_words[split], overlap_ngram)
        split_ngram_counts[split] = len(grams)
        for gram in grams:
            eval_ngrams[gram] = eval_ngrams.get(gram, 0) | (1 << bit)
        eval_report[split] = {
            "file": file_name,
            "tokens": len(data),
            "ngrams": len(grams),
            "replaced_invalid_byte_lines": len(data.replaced_lines),
            "replaced_invalid_byte_line_numbers": list(data.replaced_lines),
            "skipped_empty_word_lines": list(data.skipped_lines),
            "label_distribution": _distribution(data.labels),
        }

    # Further overlap sources (step 4): the real-speech talks at hand and the transcripts of the talks held out
    # by name; a talk that overlaps them is excluded like one that overlaps an evaluation split.
    sources = list(split_names)
    source_ngram_counts: dict[str, int] = dict(split_ngram_counts)

    def add_source(source: str, words: Sequence[str]) -> set[tuple[str, ...]]:
        grams = _ngrams(words, overlap_ngram)
        bit = len(sources)
        sources.append(source)
        source_ngram_counts[source] = len(grams)
        for gram in grams:
            eval_ngrams[gram] = eval_ngrams.get(gram, 0) | (1 << bit)
        return grams

    real_report: dict[str, Any] = {}
    for talk_name, path in real_speech.items():
        data = read_iwslt(path, skip_empty_words=True)
        tokens = tokenize_for_inference(" ".join(data.words))
        add_source(f"real:{talk_name}", tokens)
        real_report[talk_name] = {"file": str(path), "words": len(data), "tokens": len(tokens),
                                  "label_distribution": _distribution(data.labels)}
    lines = list(read_ted_talks(ted_talks))
    named_lines: dict[str, tuple[int, str]] = {}
    for number, name, text in lines:
        if _clean_name(name) in excluded_names and _clean_name(name) not in named_lines:
            named_lines[_clean_name(name)] = (number, text)
    missing_names = [name for name in excluded_names if name not in named_lines]
    if missing_names:
        raise ValueError(f"{ted_talks}: no talk named {', '.join(map(repr, missing_names))} "
                         f"(excluded_talks must name talks of that file)")
    named_bits: dict[str, int] = {}
    for name in excluded_names:
        named_bits[name] = len(sources)
        add_source(f"talk:{name}", normalize_transcript(named_lines[name][1])[0])
    named_report: dict[str, dict[str, Any]] = {}

    # 2-3. Normalise every talk and measure its overlap with the evaluation splits.
    talks: list[dict[str, Any]] = []
    excluded: list[dict[str, Any]] = []
    covered_by_excluded = [set() for _ in sources]  # type: list[set[tuple[str, ...]]]
    covered_by_kept = [set() for _ in sources]  # type: list[set[tuple[str, ...]]]
    all_fractions: list[float] = []
    seen_names: Counter[str] = Counter()
    total_words = 0
    for number, name, text in tqdm(lines, desc="talks", unit="talk", leave=False):
        name = _clean_name(name)
        seen_names[name] += 1
        if seen_names[name] > 1:
            name = f"{name}#{seen_names[name]}"
        words, labels = normalize_transcript(text)
        total_words += len(words)
        if not words:
            excluded.append(
                {"talk": name, "line": number, "splits": [], "shared_fraction": 0.0, "reason": REASON_EMPTY}
            )
            continue
        grams = _ngrams(words, overlap_ngram)
        if not grams:
            excluded.append(
                {"talk": name, "line": number, "splits": [], "shared_fraction": 0.0, "reason": REASON_SHORT}
            )
            continue
        # a talk held out by name is not measured against its own transcript
        own = 1 << named_bits[name] if name in named_bits and named_lines[name][0] == number else 0
        shared = [gram for gram in grams if eval_ngrams.get(gram, 0) & ~own]
        fraction = len(shared) / len(grams)
        per_split = [0] * len(sources)
        for gram in shared:
            mask = eval_ngrams[gram] & ~own
            for bit in range(len(sources)):
                if mask >> bit & 1:
                    per_split[bit] += 1
        split_fractions = {
            split: round(per_split[bit] / len(grams), 4) for bit, split in enumerate(sources) if per_split[bit]
        }
        # The text, not the tokens, is kept (memory); the few talks drawn for training are normalised again.
        talk = {"talk": name, "line": number, "text": text, "shared_fraction": fraction}
        if own:
            excluded.append(
                {
                    "talk": name,
                    "line": number,
                    "splits": [s for s in sources if split_fractions.get(s, 0.0) >= overlap_min_shared_fraction],
                    "shared_fraction": round(fraction, 4),
                    "split_fractions": split_fractions,
                    "tokens": len(words),
                    "reason": REASON_NAMED,
                }
            )
            named_report[name] = {"line": number, "tokens": len(words), "shared_fractions": split_fractions}
            target = covered_by_excluded
        elif fraction >= overlap_min_shared_fraction:
            all_fractions.append(fraction)
            # The splits the talk overlaps on their own; if none reaches the threshold alone, all it touches.
            named = [s for s in sources if split_fractions.get(s, 0.0) >= overlap_min_shared_fraction]
            excluded.append(
                {
                    "talk": name,
                    "line": number,
                    "splits": named or [s for s in sources if s in split_fractions],
                    "shared_fraction": round(fraction, 4),
                    "split_fractions": split_fractions,
                    "tokens": len(words),
                    "reason": REASON_OVERLAP,
                }
            )
            target = covered_by_excluded
        else:
            all_fractions.append(fraction)
            talks.append(talk)
            target = covered_by_kept
        for gram in shared:
            mask = eval_ngrams[gram] & ~own
            for bit in range(len(sources)):
                if mask >> bit & 1:
                    target[bit].add(gram)

    # 4. Seeded order, whole talks until the budget; the last one cut at a sentence end.
    order = list(talks)
    random.Random(seed).shuffle(order)
    train_words: list[str] = []
    train_labels: list[str] = []
    train_rows: list[tuple[str, int, int]] = []
    truncated: dict[str, Any] | None = None
    for talk in order:
        room = train_tokens - len(train_words)
        if room <= 0:
            break
        words, labels = normalize_transcript(talk["text"])
        if len(words) > room:
            keep = _cut_at_sentence_end(labels, room)
            truncated = {"talk": talk["talk"], "tokens_kept": keep, "tokens_in_talk": len(words)}
            words, labels = words[:keep], labels[:keep]
        train_rows.append((talk["talk"], len(train_words), len(words)))
        train_words.extend(words)
        train_labels.extend(labels)
        if truncated:
            break
    paths["train"] = write_iwslt(out_dir / "train.tsv", train_words, train_labels)

    paths["train_talks"] = out_dir / "train_talks.tsv"
    with paths["train_talks"].open("w", encoding="utf-8", newline="\n") as handle:
        handle.write("talk\tfirst_token\ttokens\n")
        handle.writelines(f"{name}\t{first}\t{count}\n" for name, first, count in train_rows)
    paths["excluded_talks"] = out_dir / "excluded_talks.tsv"
    with paths["excluded_talks"].open("w", encoding="utf-8", newline="\n") as handle:
        handle.write("talk\tsplits\tshared_fraction\treason\n")
        for row in sorted(excluded, key=lambda r: (r["reason"], -r["shared_fraction"], r["talk"])):
            handle.write(f"{row['talk']}\t{','.join(row['splits'])}\t{row['shared_fraction']:.4f}\t{row['reason']}\n")

    # Report.
    overlap_rows = [row for row in excluded if row["reason"] == REASON_OVERLAP]
    kept_fractions = sorted((t["shared_fraction"] for t in talks), reverse=True)
    excluded_fractions = sorted(row["shared_fraction"] for row in overlap_rows)
    for bit, split in enumerate(split_names):
        count = split_ngram_counts[split] or 1
        eval_report[split]["ngrams_covered_by_excluded_talks"] = len(covered_by_excluded[bit])
        eval_report[split]["ngram_coverage_by_excluded_talks"] = round(len(covered_by_excluded[bit]) / count, 4)
        eval_report[split]["ngrams_shared_with_kept_talks"] = len(covered_by_kept[bit])
        eval_report[split]["ngram_share_with_kept_talks"] = round(len(covered_by_kept[bit]) / count, 4)
        eval_report[split]["excluded_talks"] = sum(1 for row in overlap_rows if split in row["splits"])
        eval_report[split].update(
            _token_coverage(split_matching_words[split], covered_by_excluded[bit], overlap_ngram)
        )
    train_talk_names = {name for name, _, _ in train_rows}
    largest_kept = kept_fractions[0] if kept_fractions else 0.0
    smallest_excluded = excluded_fractions[0] if excluded_fractions else None
    report: dict[str, Any] = {
        "parameters": {
            "iwslt_dir": str(iwslt_dir),
            "ted_talks": str(ted_talks),
            "eval_splits": dict(eval_splits),
            "train_tokens": train_tokens,
            "overlap_ngram": overlap_ngram,
            "overlap_min_shared_fraction": overlap_min_shared_fraction,
            "seed": seed,
            "excluded_talks": list(excluded_names),
            "real_speech": {name: str(path) for name, path in real_speech.items()},
        },
        "tokens": {"train": len(train_words), **{split: eval_report[split]["tokens"] for split in split_names}},
        "talks": {
            "available": len(lines),
            "words_after_normalisation": total_words,
            "excluded": len(excluded),
            "excluded_by_reason": dict(Counter(row["reason"] for row in excluded)),
            "eligible": len(talks),
            "kept": len(train_rows),
            "truncated": truncated,
            "unused_eligible": len(talks) - len(train_talk_names),
        },
        "label_distribution": {
            "published_train2012": dict(PUBLISHED_TRAIN_DISTRIBUTION),
            "train": _distribution(train_labels),
            **{split: eval_report[split]["label_distribution"] for split in split_names},
        },
        "eval_splits": eval_report,
        "overlap": {
            "ngram": overlap_ngram,
            "min_shared_fraction": overlap_min_shared_fraction,
            "histogram": _histogram(all_fractions),
            "largest_kept_fraction": round(largest_kept, 4),
            "top_kept_fractions": [round(f, 4) for f in kept_fractions[:10]],
            "smallest_excluded_fraction": smallest_excluded,
            "gap_ratio": (
                round(smallest_excluded / largest_kept, 1)
                if smallest_excluded is not None and largest_kept > 0
                else None
            ),
            "threshold_rationale": _threshold_rationale(
                overlap_ngram, overlap_min_shared_fraction, largest_kept, smallest_excluded
            ),
            "excluded_talks": [
                {k: row[k] for k in ("talk", "splits", "shared_fraction", "split_fractions", "tokens")}
                for row in sorted(overlap_rows, key=lambda r: -r["shared_fraction"])
            ],
            "empty_talks": [row["talk"] for row in excluded if row["reason"] == REASON_EMPTY],
            "too_short_talks": [row["talk"] for row in excluded if row["reason"] == REASON_SHORT],
        },
    }
    for talk_name, info in real_report.items():
        bit = sources.index(f"real:{talk_name}")
        count = source_ngram_counts[f"real:{talk_name}"] or 1
        info["ngrams"] = source_ngram_counts[f"real:{talk_name}"]
        info["ngram_coverage_by_excluded_talks"] = round(len(covered_by_excluded[bit]) / count, 4)
        info["ngram_share_with_kept_talks"] = round(len(covered_by_kept[bit]) / count, 4)
    report["real_speech"] = {
        "excluded_by_name": [{"talk": name, **named_report[name]} for name in excluded_names],
        "real_talks": real_report,
        "excluded_by_overlap_with_them": sorted(
            row["talk"] for row in overlap_rows if any(s not in split_names for s in row["splits"])
        ),
    }
    return PreparedData(paths=paths, report=report)


def _threshold_rationale(n: int, threshold: float, largest_kept: float, smallest_excluded: float | None) -> str:
    if smallest_excluded is None:
        return f"No talk shares {threshold:.1%} or more of its {n}-grams with an evaluation split."
    gap = "" if largest_kept <= 0 else f" ({smallest_excluded / largest_kept:.0f}x)"
    verdict = (
        "The threshold sits in the empty gap between chance matches and real overlaps."
        if largest_kept < threshold <= smallest_excluded and smallest_excluded >= 2 * largest_kept
        else "The gap is narrow: inspect the talks on either side of the threshold."
    )
    return (
        f"Talks kept share at most {largest_kept:.2%} of their distinct {n}-grams with the evaluation splits "
        f"(stock phrases); the least-overlapping excluded talk shares {smallest_excluded:.2%}{gap}. {verdict}"
    )
