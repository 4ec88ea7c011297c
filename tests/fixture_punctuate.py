"""A corpus for ``punctuate`` over folders: tiny model directories (one reading timing cues) and transcripts with
their word times in the formats ASR systems write (TSV, a per-transcript CTM, a Whisper JSON, a corpus CTM)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from tests.fixture_corpus import TINY_BLSTM, TINY_MODEL, TINY_TRAIN
from tests.fixture_real_speech import TIMING_FEATURES, talk_words, timed_feature_caches

FEATURES = TIMING_FEATURES


def train_models(root: Path) -> dict[str, Path]:
    """``timing``: a BLSTM that reads timing cues (as punctuate's audio model); ``transformer``: the reduced
    Transformer over words (decodes label by label). A few steps each: their marks are arbitrary."""
    from training import train_model

    caches = timed_feature_caches(root)
    train = {**TINY_TRAIN, "max_steps": 4, "eval_every_steps": 4, "dev_eval_tokens": 100}
    train_model(caches["fs_timed"], root / "timing", root / "state_timing", model_config=TINY_BLSTM,
                train_config=train, window=30, stride=15)
    train_model(caches["features"], root / "transformer", root / "state_transformer", model_config=TINY_MODEL,
                train_config=train, window=30, stride=15)
    return {"timing": root / "timing", "transformer": root / "transformer"}


def _times(words: list[str], labels: list[str], rng: random.Random) -> list[tuple[str, float, float]]:
    clock, rows = 0.5, []
    for word, label in zip(words, labels):
        duration = 0.08 + 0.05 * len(word)
        rows.append((word, round(clock, 3), round(clock + duration, 3)))
        clock += duration + (rng.uniform(0.3, 1.0) if label in ("PERIOD", "QUESTION") else rng.choice([0.0, 0.05]))
    return rows


def write_corpus(root: Path, count: int = 8) -> dict[str, Path]:
    """``count`` transcripts in ``root/texts`` (two in a sub-folder), their word times in ``root/times``:
    ``NAME.tsv``, ``NAME.json`` (Whisper's layout, words with their marks), ``NAME.ctm`` holding another utterance
    too, or the utterance ``NAME`` of the corpus CTM ``all.ctm``. Returns the folders and, per transcript name,
    its timings file (what ``--alignment`` takes for it)."""
    texts, times = root / "texts", root / "times"
    rng = random.Random(11)
    corpus_ctm: list[str] = []
    alignment: dict[str, Path] = {}
    for index in range(count):
        name = f"sub/talk{index}" if index >= count - 2 else f"talk{index}"
        words, labels = talk_words(seed=900 + index, sentences=3 + index % 4)
        text = "".join(" ".join(words[i:i + 12]) + "\n" for i in range(0, len(words), 12))
        (texts / name).parent.mkdir(parents=True, exist_ok=True)
        (texts / f"{name}.txt").write_text(text, encoding="utf-8")
        rows = _times(words, labels, rng)
        (times / name).parent.mkdir(parents=True, exist_ok=True)
        stem = Path(name).name
        kind = index % 4
        if kind == 0:
            path = times / f"{name}.tsv"
            path.write_text("word\tstart\tend\n" + "".join(f"{w}\t{a}\t{b}\n" for w, a, b in rows), encoding="utf-8")
        elif kind == 1:
            marks = {"COMMA": ",", "PERIOD": ".", "QUESTION": "?"}
            segment = [{"word": f" {w}{marks.get(label, '')}", "start": a, "end": b, "probability": 0.9}
                       for (w, a, b), label in zip(rows, labels)]
            path = times / f"{name}.json"
            path.write_text(json.dumps({"text": text, "segments": [{"id": 0, "words": segment}], "language": "en"}),
                            encoding="utf-8")
        elif kind == 2:
            path = times / f"{name}.ctm"
            path.write_text(";; two utterances: the transcript's, and another\n"
                            + "".join(f"{stem} 1 {a:.3f} {b - a:.3f} {w} 0.9\n" for w, a, b in rows)
                            + f"{stem}-other 1 0.000 0.200 hello 1.0\n", encoding="utf-8")
        else:
            path = times / "all.ctm"
            corpus_ctm.extend(f"{stem} A {a:.2f} {b - a:.2f} {w}\n" for w, a, b in rows)
        alignment[f"{name}.txt"] = path
    (times / "all.ctm").write_text("".join(corpus_ctm), encoding="utf-8")
    return {"texts": texts, "times": times, "alignment": alignment}


def encoder_model(root: Path, words_model: Path) -> Path:
    """A model over a pretrained encoder (a tiny random BERT, as punctuate's default MiniLM model is built), with
    the token embedder of ``words_model``; written as training writes it (the encoder's trace included)."""
    import torch

    from corpus.labels import LABELS
    from models import build_model
    from tests.fixture_checkpoints import make_checkpoint
    from training.model_output import write_model_dir

    config = json.loads((words_model / "config.json").read_text(encoding="utf-8"))
    encoder = {"name": "encoder_tagger", "pretrained": str(make_checkpoint(root / "bert", "bert")), "layers": 1,
               "freeze_layers": 0, "label_subword": "last", "dropout": 0.0, "max_subwords": 64, "head": "blstm",
               "head_hidden": 8}
    torch.manual_seed(0)
    model = build_model(encoder, num_labels=len(LABELS), vector_dim=config["vector_dim"],
                        vocab_size=config["vocab_size"])
    return write_model_dir(root / "encoder_model", model=model, weights=None, embedder=words_model / "embedder",
                           history=[], config={**config, "model": encoder})
