"""Speech2Vec that covers the training vocabulary: synthetic audio of sentences chosen for their word types.

The default pipeline's Speech2Vec learns from the audio of the first few talks of the training split (params
``audio.split_tokens``), ~1,200 word types: most training tokens then have no speech vector. The paper profile's
``speech`` and ``word_speech`` inputs need one for (nearly) every word, so here the sentences are chosen for the
words they hold, and only those are read aloud (``python -m paper_runs speech2vec`` wraps it).

:func:`covering_sentences`
    Cuts the training token stream into sentences (after PERIOD/QUESTION, at most ``max_sentence_tokens``
    tokens), takes the most frequent word types that together make ``coverage`` of the training tokens (the
    *targeted* types), and chooses sentences greedily -- most still-needed occurrences per token first, ties to
    the earlier sentence -- until every targeted type occurs ``min_count`` times in the chosen ones (Speech2Vec
    drops rarer words), or the ``max_tokens`` budget ends it. A targeted type seen fewer than ``min_count`` times in
    the whole split cannot be covered (*unreachable*) and is not chased.

:func:`build_coverage_speech2vec` -> ``<work_dir>/``
    ``prepared/`` (the chosen sentences, in training order, as the ``train`` split cut into pseudo-talks of about
    ``talk_tokens`` tokens: ``train.tsv``, ``train_talks.tsv``), then the audio stages on it with the params'
    settings -- ``audio/`` (synthesize, flite voices whatever ``audio.source`` says), ``alignments/``,
    ``acoustic/`` (train only) -- and ``speech2vec/`` (``speech2vec.train_splits: [train]``; the layout of
    ``data/speech2vec`` without per-occurrence vectors, whose token positions would be the pseudo-split's, not
    the real splits'). ``coverage.json``: the selection's figures, the vocabulary and the share of training
    tokens whose type has a vector. Resumable: each step writes ``steps/<step>.json`` with the fingerprint of
    what it was made from (the chosen sentences' SHA-256, its settings, the previous step's fingerprint) and is
    skipped when that matches and its outputs are there; align and features also keep finished talks on their
    own (content fingerprints), so an interrupted step goes on where it stopped.
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audio.stage_common import read_json, sha256_json, write_json
from corpus.io import atomic_write_text
from corpus.iwslt import read_iwslt, write_iwslt
from corpus.labels import SENTENCE_END_LABELS

__all__ = ["COVERAGE_FILE", "STEPS", "CoverageSelection", "build_coverage_speech2vec", "covering_sentences",
           "sentence_spans"]

#: The report of a build, in its work folder.
COVERAGE_FILE = "coverage.json"
#: The steps of a build, in order (each one's marker is ``steps/<step>.json``).
STEPS: tuple[str, ...] = ("synthesize", "align", "features", "speech2vec")
#: Bumped whenever a build's outputs would change for the same inputs (part of every step's fingerprint).
FORMAT_VERSION = 1


@dataclass(frozen=True)
class CoverageSelection:
    """The chosen sentences (``(first_token, tokens)`` spans of the training stream, in training order) and the
    figures of the selection (``report``, JSON-serialisable)."""

    sentences: list[tuple[int, int]]
    report: dict[str, Any] = field(default_factory=dict)
    #: the word types targeted, most frequent first
    targeted: list[str] = field(default_factory=list)


def sentence_spans(labels: Sequence[str], *, max_sentence_tokens: int = 40) -> list[tuple[int, int]]:
    """``(first_token, tokens)`` of each sentence: a cut after PERIOD/QUESTION, and after ``max_sentence_tokens``
    tokens without one (a run-on stretch of talk is read in pieces of that length)."""
    if max_sentence_tokens < 1:
        raise ValueError(f"max_sentence_tokens must be >= 1, not {max_sentence_tokens}")
    spans, start = [], 0
    for index, label in enumerate(labels):
        if label in SENTENCE_END_LABELS or index + 1 - start >= max_sentence_tokens:
            spans.append((start, index + 1 - start))
            start = index + 1
    if start < len(labels):
        spans.append((start, len(labels) - start))
    return spans


def covering_sentences(words: Sequence[str], labels: Sequence[str], *, coverage: float, min_count: int,
                       max_tokens: int | None = None, max_sentence_tokens: int = 40) -> CoverageSelection:
    """Sentences of the training stream in which the word types making ``coverage`` of its tokens each occur
    ``min_count`` times (see the module docstring). Deterministic: the same stream gives the same selection."""
    if len(words) != len(labels):
        raise ValueError(f"{len(words)} words but {len(labels)} labels")
    if not 0.0 < coverage <= 1.0:
        raise ValueError(f"coverage must lie in (0, 1], not {coverage}")
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, not {min_count}")
    total = len(words)
    counts = Counter(words)
    by_frequency = sorted(counts, key=lambda word: (-counts[word], word))
    targeted: list[str] = []
    reached = 0
    for word in by_frequency:
        if total and reached >= coverage * total:
            break
        targeted.append(word)
        reached += counts[word]
    # a type the whole split holds fewer than min_count times never gets a vector: not chased
    need = {word: min_count for word in targeted if counts[word] >= min_count}
    unreachable = [word for word in targeted if counts[word] < min_count]

    spans = sentence_spans(labels, max_sentence_tokens=max_sentence_tokens)
    holds = [Counter(word for word in words[first:first + size] if word in need) for first, size in spans]

    def gain(index: int) -> int:
        return sum(min(number, need[word]) for word, number in holds[index].items() if need[word] > 0)

    # Lazy greedy: a sentence's gain only falls as others are chosen, so a popped entry whose gain is still the
    # stored one is the best (ties: the lower sentence index, the heap's second key).
    heap = [(-gain(i) / spans[i][1], i) for i in range(len(spans)) if holds[i]]
    heapq.heapify(heap)
    chosen: list[int] = []
    chosen_tokens = 0
    budget_reached = False
    still_needed = sum(need.values())
    while heap and still_needed > 0:
        stored, index = heapq.heappop(heap)
        current = gain(index)
        if current == 0:
            continue
        if -current / spans[index][1] != stored:
            heapq.heappush(heap, (-current / spans[index][1], index))
            continue
        if max_tokens is not None and chosen_tokens + spans[index][1] > max_tokens:
            budget_reached = True
            break
        chosen.append(index)
        chosen_tokens += spans[index][1]
        for word, number in holds[index].items():
            taken = min(number, need[word])
            need[word] -= taken
            still_needed -= taken

    sentences = sorted(spans[i] for i in chosen)
    in_chosen = Counter(word for first, size in sentences for word in words[first:first + size])
    covered = [word for word in targeted if in_chosen[word] >= min_count]
    covered_any = [word for word in counts if in_chosen[word] >= min_count]
    report = {
        "training_tokens": total,
        "training_types": len(counts),
        "training_sentences": len(spans),
        "coverage_goal": coverage,
        "min_count": min_count,
        "max_tokens": max_tokens,
        "max_sentence_tokens": max_sentence_tokens,
        "types_targeted": len(targeted),
        "share_of_tokens_targeted": round(reached / total, 4) if total else None,
        "types_unreachable": len(unreachable),
        "types_covered": len(covered),
        # every type the chosen sentences hold min_count times, targeted or not: what can get a vector
        "types_with_min_count": len(covered_any),
        "share_of_tokens_covered": round(sum(counts[w] for w in covered) / total, 4) if total else None,
        "share_of_tokens_with_min_count": round(sum(counts[w] for w in covered_any) / total, 4) if total else None,
        "chosen_sentences": len(sentences),
        "chosen_tokens": chosen_tokens,
        "budget_reached": budget_reached,
    }
    return CoverageSelection(sentences, report, targeted)


# ---------------------------------------------------------------------------------------------------- the build


def _pseudo_talks(sentences: Sequence[tuple[int, int]], talk_tokens: int) -> list[tuple[str, int, int]]:
    """``(talk, first_token, tokens)`` of the pseudo-talks: whole sentences, a new talk once ``talk_tokens`` are
    reached (positions in the written ``train.tsv``)."""
    talks, first, size = [], 0, 0
    for _, tokens in sentences:
        size += tokens
        if size >= talk_tokens:
            talks.append((f"cover-{len(talks) + 1:04d}", first, size))
            first, size = first + size, 0
    if size:
        talks.append((f"cover-{len(talks) + 1:04d}", first, size))
    return talks


def _write_if_changed(path: Path, text: str) -> None:
    """Leave a file that already holds ``text`` alone (its mtime too)."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except OSError:
        pass
    atomic_write_text(path, text)


def write_selection(selection: CoverageSelection, words: Sequence[str], labels: Sequence[str],
                    prepared_dir: Path, *, talk_tokens: int) -> str:
    """The chosen sentences as a prepared ``train`` split (``train.tsv``, ``train_talks.tsv``) and where each came
    from (``sentences.tsv``); returns the SHA-256 of what was written (the build's fingerprints start from it)."""
    chosen_words = [w for first, size in selection.sentences for w in words[first:first + size]]
    chosen_labels = [lab for first, size in selection.sentences for lab in labels[first:first + size]]
    talks = _pseudo_talks(selection.sentences, talk_tokens)
    prepared_dir.mkdir(parents=True, exist_ok=True)
    scratch = prepared_dir / "train.tsv.new"
    write_iwslt(scratch, chosen_words, chosen_labels)
    _write_if_changed(prepared_dir / "train.tsv", scratch.read_text(encoding="utf-8"))
    scratch.unlink()
    _write_if_changed(prepared_dir / "train_talks.tsv",
                      "\n".join(["talk\tfirst_token\ttokens", *(f"{t}\t{f}\t{n}" for t, f, n in talks)]) + "\n")
    _write_if_changed(prepared_dir / "sentences.tsv",
                      "\n".join(["first_token\ttokens", *(f"{f}\t{n}" for f, n in selection.sentences)]) + "\n")
    return sha256_json({"words": chosen_words, "labels": chosen_labels, "talks": talks})


class _Steps:
    """The done-markers of a build: ``<work_dir>/steps/<step>.json`` = ``{"fingerprint", "report"}``."""

    def __init__(self, work_dir: Path, log: Callable[[str], None]) -> None:
        self.folder, self.log = work_dir / "steps", log
        self.skipped: list[str] = []
        self.ran: list[str] = []

    def run(self, step: str, fingerprint: str, outputs: Sequence[Path], make: Callable[[], dict[str, Any]],
            *, failed: Callable[[dict[str, Any]], list[Any]] = lambda report: []) -> tuple[dict[str, Any], bool]:
        """(the step's report, whether it is complete): from its marker when the fingerprint matches and the
        outputs are there, else made now (the marker written only when nothing failed)."""
        marker = self.folder / f"{step}.json"
        done = read_json(marker)
        if done is not None and done.get("fingerprint") == fingerprint and all(p.exists() for p in outputs):
            self.log(f"{step}: done before (same inputs and settings), skipped")
            self.skipped.append(step)
            return done["report"], True
        marker.unlink(missing_ok=True)  # no stale marker passes for this run's
        report = make()
        self.ran.append(step)
        failures = failed(report)
        if not failures:
            write_json(marker, {"fingerprint": fingerprint, "report": report})
        return report, not failures


def _synthesis_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    audio = params["audio"]
    return {"text": audio["text"], "voices": list(audio["voices"]),
            "rate_range": [float(x) for x in audio["rate_range"]],
            "pitch_range": [float(x) for x in audio["pitch_range"]], "seed": int(audio["seed"]),
            "max_chunk_tokens": int(audio["max_chunk_tokens"])}


def _vocabulary(vectors_file: Path) -> list[str]:
    """The words of a word2vec text file (its first column after the header line)."""
    with vectors_file.open(encoding="utf-8") as handle:
        next(handle, None)
        return [line.split(" ", 1)[0] for line in handle if line.strip()]


def build_coverage_speech2vec(
    prepared_dir: str | Path,
    iwslt_dir: str | Path,
    work_dir: str | Path,
    *,
    params: Mapping[str, Any],
    workers: int | None = None,
    coverage: float = 0.95,
    max_tokens: int | None = None,
    talk_tokens: int = 2000,
    max_sentence_tokens: int = 40,
    progress: bool = False,
    log: Callable[[str], None] = lambda message: None,
) -> dict[str, Any]:
    """Synthesize, align, featurise and learn Speech2Vec from the sentences that cover the training vocabulary
    (see the module docstring); returns the summary written to ``<work_dir>/coverage.json`` (plus ``failed``:
    the talks that failed in any step, and ``steps_skipped``/``steps_run`` of this call).

    ``params``: the params file's sections ``data``, ``audio``, ``align``, ``features`` and ``speech2vec`` (as
    the default pipeline's stages read them); ``workers``: local processes of align and features (None: every
    core); ``coverage``/``max_tokens``/``max_sentence_tokens``: :func:`covering_sentences`, ``min_count`` is
    Speech2Vec's.
    """
    from audio.align_stage import align_talks
    from audio.features import FeatureConfig
    from audio.features_stage import token_features
    from audio.synthesize_stage import make_talk_audio
    from corpus.talks_table import TALKS_TABLE
    from embeddings.speech2vec import MODEL_FILE, SUMMARY_FILE, VECTORS_FILE, Speech2VecConfig, train_speech2vec

    started = time.perf_counter()
    prepared_dir, work_dir = Path(prepared_dir), Path(work_dir)
    config = Speech2VecConfig.from_dict({**dict(params["speech2vec"]), "train_splits": ["train"]})
    feature_config = FeatureConfig(**dict(params["features"].get("config") or {}))
    align_section = params["align"]

    training = read_iwslt(prepared_dir / "train.tsv")
    selection = covering_sentences(training.words, training.labels, coverage=coverage, min_count=config.min_count,
                                   max_tokens=max_tokens, max_sentence_tokens=max_sentence_tokens)
    log(f"selection: {selection.report['chosen_sentences']:,} sentences, {selection.report['chosen_tokens']:,} "
        f"tokens; {selection.report['types_covered']:,} of {selection.report['types_targeted']:,} targeted types "
        f"occur >= {config.min_count} times")
    prepared = work_dir / "prepared"
    selection_sha = write_selection(selection, training.words, training.labels, prepared, talk_tokens=talk_tokens)
    audio_dir, alignments, acoustic, vectors = (work_dir / name for name in
                                                ("audio", "alignments", "acoustic", "speech2vec"))
    steps = _Steps(work_dir, log)
    failed: list[dict[str, Any]] = []

    synthesis = _synthesis_settings(params)
    fingerprint = sha256_json({"version": FORMAT_VERSION, "selection": selection_sha, "synthesize": synthesis})
    report, complete = steps.run("synthesize", fingerprint, [audio_dir / TALKS_TABLE], lambda: make_talk_audio(
        prepared, iwslt_dir, audio_dir, source="synthesize", real_audio_dir=None, dev_pseudo_talk_tokens=1500,
        split_tokens={"train": None}, talk_sources=dict(params["audio"].get("talk_sources") or {}),
        progress=progress, **synthesis), failed=lambda r: r["failed"])
    failed += [{**f, "step": "synthesize"} for f in report["failed"]]
    synthesized = {"hours": report["hours_total"], "talks": report["splits"]["train"]["talks_with_audio"]}

    fingerprint = sha256_json({"after": fingerprint, "complete": complete, "backend": align_section["backend"],
                               "config": dict(align_section.get("config") or {})})
    report, complete = steps.run("align", fingerprint, [alignments / "alignment_report.json"], lambda: align_talks(
        audio_dir, prepared, alignments, backend=align_section["backend"],
        backend_config=dict(align_section.get("config") or {}), workers=workers, progress=progress),
        failed=lambda r: r["failed"])
    failed += [{**f, "step": "align"} for f in report["failed"]]
    aligned = {"share_aligned": report["splits"]["train"]["share_aligned"]}

    fingerprint = sha256_json({"after": fingerprint, "complete": complete,
                               "config": dataclasses.asdict(feature_config)})
    report, complete = steps.run(
        "features", fingerprint, [acoustic / "train" / "mfcc.npy"],
        lambda: token_features(alignments, audio_dir, prepared, acoustic, splits=["train"], config=feature_config,
                               workers=workers, progress=progress),
        failed=lambda r: r["splits"]["train"]["failed"])
    failed += [{**f, "split": "train", "step": "features"} for f in report["splits"]["train"]["failed"]]
    featurised = {"tokens_timed": report["splits"]["train"]["tokens_timed"]}

    fingerprint = sha256_json({"after": fingerprint, "complete": complete, "config": dataclasses.asdict(config)})

    def learn() -> dict[str, Any]:
        summary = train_speech2vec(acoustic, prepared, vectors, config=config, embed_splits=(),
                                   talks_table=audio_dir / TALKS_TABLE)
        return {key: summary[key] for key in ("training_segments", "training_words", "vocabulary", "epoch_losses")}

    learned, _ = steps.run("speech2vec", fingerprint,
                           [vectors / VECTORS_FILE, vectors / MODEL_FILE, vectors / SUMMARY_FILE], learn)

    counts = Counter(training.words)
    vocabulary = set(_vocabulary(vectors / VECTORS_FILE))
    total = len(training.words)
    targeted_with_vector = sum(word in vocabulary for word in selection.targeted)
    summary = {
        "selection": selection.report,
        "selection_sha256": selection_sha,
        "work_dir": str(work_dir),
        "speech2vec_dir": str(vectors),
        "pseudo_talks": synthesized["talks"],
        "audio_hours": synthesized["hours"],
        "share_aligned": aligned["share_aligned"],
        "tokens_timed": featurised["tokens_timed"],
        "speech2vec": learned,
        "vocabulary": len(vocabulary),
        "targeted_types_with_vector": targeted_with_vector,
        "training_types_with_vector": sum(word in vocabulary for word in counts),
        "share_of_training_tokens_with_vector": (round(sum(counts[w] for w in vocabulary) / total, 4)
                                                 if total else None),
    }
    write_json(work_dir / COVERAGE_FILE, summary)
    return {**summary, "failed": failed, "steps_skipped": steps.skipped, "steps_run": steps.ran,
            "seconds": round(time.perf_counter() - started, 1)}
