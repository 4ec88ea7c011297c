"""Tiny real-speech talks in the layout of ``../shared/data/ted_real`` (TALK.txt, TALK.ref.tsv, TALK.timings.tsv),
made from the fixture corpus's sentences with pauses like real speech: long after sentence ends, often after
commas, rarely elsewhere; a few words without a time."""

from __future__ import annotations

import random
from pathlib import Path

from corpus.labels import LABELS
from tests.fixture_corpus import sentence

MARK_LABELS = {",": "COMMA", ".": "PERIOD", "?": "QUESTION"}


def talk_words(seed: int, sentences: int) -> tuple[list[str], list[str]]:
    """Whole lower-case words (``don't`` stays one) and the mark after each."""
    rng = random.Random(seed)
    words, labels = [], []
    for index in range(sentences):
        pieces = sentence(rng).split()
        if index % 4 == 1:
            pieces.insert(1, "don't")
        for piece in pieces:
            mark = piece[-1] if piece[-1] in MARK_LABELS else ""
            words.append(piece.rstrip(",.?").lower())
            labels.append(MARK_LABELS.get(mark, "O"))
    assert set(labels) <= set(LABELS)
    return words, labels


def write_real_talk(directory: Path, name: str, seed: int, sentences: int = 40) -> tuple[list[str], list[str]]:
    directory.mkdir(parents=True, exist_ok=True)
    words, labels = talk_words(seed, sentences)
    rng = random.Random(seed + 1)
    rows, clock = ["word\tstart\tend"], 1.0
    for index, (word, label) in enumerate(zip(words, labels)):
        duration = 0.08 + 0.05 * len(word) + (0.1 if label != "O" else 0.0)
        if index % 37 == 5:  # the aligner could not place this one
            rows.append(f"{word}\t\t")
        else:
            rows.append(f"{word}\t{clock:.3f}\t{clock + duration:.3f}")
        pause = {"PERIOD": rng.uniform(0.3, 1.2), "QUESTION": rng.uniform(0.4, 1.0),
                 "COMMA": rng.choice([0.0, 0.25, 0.4]), "O": 0.0 if rng.random() < 0.95 else 0.2}[label]
        clock += duration + pause
    (directory / f"{name}.txt").write_text(" ".join(words) + "\n", encoding="utf-8")
    (directory / f"{name}.ref.tsv").write_text("".join(f"{w}\t{l}\n" for w, l in zip(words, labels)),
                                               encoding="utf-8")
    (directory / f"{name}.timings.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return words, labels


def write_real_talks(directory: Path, names: tuple[str, ...] = ("TalkA_2006", "TalkB_2006")) -> list[str]:
    for index, name in enumerate(names):
        write_real_talk(directory, name, seed=500 + index)
    return list(names)


#: the timing cues the tiny speech models read
TIMING_FEATURES = ["pause", "duration"]


def timed_feature_caches(root: Path) -> dict:
    """A tiny prepared corpus, two real talks, the pause model fitted on them, its simulated cues and two feature
    caches: ``features`` (word vectors) and ``fs_timed`` (word vectors + timing cues), as the pipeline builds them."""
    from embeddings.cache import SPLITS, build_feature_cache
    from realspeech.cues import fit_pause_model, simulate_split_cues
    from tests.fixture_corpus import write_prepared_corpus

    corpus = write_prepared_corpus(root / "corpus", root / "prepared", talks=8, sentences_per_talk=10,
                                   train_tokens=800)
    real = root / "ted_real"
    talks = write_real_talks(real)
    model = fit_pause_model(real, talks, min_pool=5)
    stats = simulate_split_cues(model, root / "prepared", root / "pauses", splits=SPLITS, simulate=["train", "dev"],
                                seed=3, dropout_fraction=0.25, dropout_span=20)
    word_source = {"type": "word2vec-text", "path": str(corpus["vectors"])}
    build_feature_cache(root / "prepared", root / "features", word_source=word_source, oov="random")
    build_feature_cache(root / "prepared", root / "fs_timed", word_source=word_source, oov="random",
                        speech_source={"type": "pauses", "path": str(root / "pauses" / "timed"),
                                       "features": TIMING_FEATURES}, combine="concat")
    return {"corpus": corpus, "real": real, "talks": talks, "model": model, "stats": stats,
            "features": root / "features", "fs_timed": root / "fs_timed"}
