"""Tiny, learnable fixture corpora for end-to-end tests (written by the tests; no shared data needed).

Marks are predictable from words, so a few training steps must beat chance: a sentence ends with
"done." or "finished." (PERIOD), "right?" (QUESTION), and "however," / "well," carry a COMMA.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np

FILLER = ("time people way year day thing man world life hand part child eye woman place work week case "
          "point number group problem fact idea water story house money river tree stone light music").split()
SPLIT_FILES = {"dev": "dev2012", "ref": "test2011", "asr": "test2011asr"}


def sentence(rng: random.Random) -> str:
    words = [rng.choice(FILLER) for _ in range(rng.randint(3, 8))]
    if rng.random() < 0.4:
        words.insert(rng.randint(1, len(words) - 1), rng.choice(["however,", "well,"]))
    kind = rng.random()
    ending = "right?" if kind < 0.2 else rng.choice(["done.", "finished."])
    return " ".join(words + [ending]).capitalize()


def talk_text(seed: int, sentences: int) -> str:
    rng = random.Random(seed)
    return "\n".join(sentence(rng) for _ in range(sentences))


def write_corpus(root: Path, *, talks: int = 40, sentences_per_talk: int = 30) -> dict[str, Path]:
    """An IWSLT-style directory (CRLF files), a TED jsonl.gz and a word2vec text file under ``root``."""
    from corpus.text import normalize_transcript

    iwslt = root / "iwslt"
    iwslt.mkdir(parents=True)
    for offset, (split, name) in enumerate(SPLIT_FILES.items()):
        words, labels = normalize_transcript(talk_text(1000 + offset, 60))
        (iwslt / name).write_bytes("".join(f"{w}\t{l}\r\n" for w, l in zip(words, labels)).encode())
    ted = root / "ted_talks.jsonl.gz"
    with gzip.open(ted, "wt", encoding="utf-8") as handle:
        for index in range(talks):
            handle.write(json.dumps({"talk": f"Talk_{index}", "text": talk_text(index, sentences_per_talk)}) + "\n")
    vocabulary = sorted(set(FILLER) | {"however", "well", "done", "finished", "right"})
    rng = np.random.default_rng(0)
    vectors = root / "vectors.txt"
    vectors.write_text(
        f"{len(vocabulary)} 8\n"
        + "".join(w + " " + " ".join(f"{x:.4f}" for x in rng.normal(size=8)) + "\n" for w in vocabulary),
        encoding="utf-8",
    )
    return {"iwslt": iwslt, "ted": ted, "vectors": vectors}


def draw_settings(root: Path) -> tuple[dict, dict]:
    """params' ``data`` and ``embed`` for a draw of a tiny corpus written under ``root`` (30 talks of 20 sentences;
    ``Talk_4`` held out by name; a default draw of 1,000 training tokens)."""
    corpus = write_corpus(root / "corpus", talks=30, sentences_per_talk=20)
    data = {"iwslt_dir": str(corpus["iwslt"]), "ted_talks": str(corpus["ted"]),
            "eval_splits": {"dev": "dev2012", "ref": "test2011", "asr": "test2011asr"}, "overlap_ngram": 8,
            "overlap_min_shared_fraction": 0.02, "seed": 3, "excluded_talks": ["Talk_4"], "train_tokens": 1000,
            "real_speech_dir": str(root), "real_speech_talks": []}
    embed = {"word_source": {"type": "word2vec-text", "path": str(corpus["vectors"])}, "oov": "random",
             "vocab_min_count": 1}
    return data, embed


def write_prepared_corpus(corpus_dir: Path, prepared_dir: Path, *, talks: int, sentences_per_talk: int,
                          train_tokens: int) -> dict[str, Path]:
    """A tiny corpus in ``corpus_dir``, prepared into ``prepared_dir``; returns :func:`write_corpus`'s paths."""
    from trainset.prepare import prepare_data

    corpus = write_corpus(corpus_dir, talks=talks, sentences_per_talk=sentences_per_talk)
    prepare_data(corpus["iwslt"], corpus["ted"], prepared_dir, eval_splits=SPLIT_FILES, train_tokens=train_tokens,
                 overlap_ngram=8, overlap_min_shared_fraction=0.02, seed=1)
    return corpus


def write_feature_cache(root: Path, *, talks: int, sentences_per_talk: int, train_tokens: int) -> Path:
    """A tiny corpus under ``root``, prepared and cached with its word2vec vectors; returns the cache folder."""
    from embeddings.cache import build_feature_cache

    corpus = write_prepared_corpus(root, root / "prepared", talks=talks, sentences_per_talk=sentences_per_talk,
                                   train_tokens=train_tokens)
    build_feature_cache(root / "prepared", root / "features",
                        word_source={"type": "word2vec-text", "path": str(corpus["vectors"])}, oov="random")
    return root / "features"


TINY_MODEL = {"name": "transformer", "d_model": 32, "heads": 4, "ffn": 64, "encoder_layers": 1,
              "decoder_layers": 1, "dropout": 0.1, "aligned_memory": True, "input_scale": 1.0,
              "relative_window": 0}
TINY_BLSTM = {"name": "blstm", "hidden": 16, "layers": 1, "dropout": 0.1}
TINY_TRAIN = {"seed": 3, "device": "cpu", "threads": 1, "batch_size": 8, "seq_len": 30, "epochs": 3,
              "lr": 0.003, "warmup_steps": 10, "label_smoothing": 0.1, "clip_norm": 1.0, "eval_every_steps": 20,
              "log_every_steps": 5, "dev_eval_tokens": 300, "max_steps": None}


def write_train_talks(prepared: Path, talks: dict[str, str]) -> None:
    """``train.tsv`` and ``train_talks.tsv`` as the prepare stage writes them, from punctuated talk texts."""
    from corpus.iwslt import write_iwslt
    from corpus.text import normalize_transcript

    words, labels, lines = [], [], ["talk\tfirst_token\ttokens"]
    for talk, text in talks.items():
        w, l = normalize_transcript(text)
        lines.append(f"{talk}\t{len(words)}\t{len(w)}")
        words += w
        labels += l
    write_iwslt(prepared / "train.tsv", words, labels)
    (prepared / "train_talks.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_cue_caches(root: Path, *, sentences_per_talk: int, train_tokens: int, words_name: str,
                     ids_name: str | None = None) -> Path:
    """A tiny corpus's feature caches under ``root``: word vectors (``words_name``), optionally token ids alone
    (``ids_name``: learned embeddings), and word vectors with two timing-cue-like columns concatenated (``cues``:
    the speech inputs' layout).

    The two vector files are read here, without gensim (:func:`tests.helpers.read_word2vec_text`: the vectors
    gensim loads from them), and handed to the builds: a GPU machine without gensim builds these caches too."""
    from embeddings.cache import build_feature_cache
    from tests.helpers import read_word2vec_text, write_word2vec_text

    corpus = write_prepared_corpus(root / "corpus", root / "prepared", talks=8, sentences_per_talk=sentences_per_talk,
                                   train_tokens=train_tokens)
    word_vectors = read_word2vec_text(corpus["vectors"])
    cues = write_word2vec_text(root / "cues.txt",
                               {w: list(np.random.default_rng(0).random(2)) for w in word_vectors.index_to_key})
    word_source = {"type": "word2vec-text", "path": str(corpus["vectors"])}
    build_feature_cache(root / "prepared", root / words_name, word_source=word_source, oov="random",
                        word_vectors=word_vectors)
    if ids_name is not None:
        build_feature_cache(root / "prepared", root / ids_name, word_source={"type": "none"}, oov="random")
    build_feature_cache(root / "prepared", root / "cues", word_source=word_source, oov="random",
                        word_vectors=word_vectors, speech_source={"type": "word2vec-text", "path": str(cues)},
                        combine="concat", speech_vectors=read_word2vec_text(cues))
    return root
