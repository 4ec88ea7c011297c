"""The segmented protocol batched across sentences: the evaluate stage labels every reference sentence
as a text of its own, with the windows of all sentences filling the model's batches together; each sentence's
labels must be those it gets alone (``Punctuator.punctuate_words`` of its words, what the stage ran sentence by
sentence before), on models whose outputs depend on the padding around a sentence's tokens (a Transformer that
decodes label by label, a BLSTM), with sentences of one window, of several, and shorter than a window."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from corpus.iwslt import read_iwslt, write_iwslt
from corpus.labels import LABELS
from embeddings.embedder import TokenEmbedder
from embeddings.vocab import build_vocab
from evaluation.benchmark import (
    SEGMENTED_SUFFIX,
    evaluate_model,
    label_segments,
    label_vector_segments,
    sentence_spans,
)
from inference.punctuator import Punctuator, WordsChangedError
from inference.windows import window_starts
from models import build_model
from tests.helpers import write_word2vec_text

VOCABULARY = "so i do n't think it 's well here today the a river was cold never say goodbye we 're going".split()
MODELS = {
    "transformer": {"name": "transformer", "d_model": 16, "heads": 2, "ffn": 32, "encoder_layers": 1,
                    "decoder_layers": 2, "dropout": 0.0, "aligned_memory": True, "input_scale": 1.0,
                    "relative_window": 2},
    "blstm": {"name": "blstm", "hidden": 8, "layers": 1, "dropout": 0.0},
}
WINDOW, STRIDE = 8, 4


def make_model_dir(root: Path, name: str, vectors_file: Path) -> Path:
    """A model directory as training writes it, with random weights (the classifier's scaled up, so that the
    labels vary from word to word)."""
    embedder = TokenEmbedder({"type": "word2vec-text", "path": str(vectors_file)}, "random",
                             build_vocab(VOCABULARY))
    directory = root / name
    embedder.restricted(VOCABULARY).save(directory / "embedder")
    torch.manual_seed(3)
    model = build_model(MODELS[name], num_labels=len(LABELS), vector_dim=embedder.dim, vocab_size=len(embedder.vocab))
    with torch.no_grad():
        model.classifier.linear.weight.mul_(6.0)
    torch.save(model.state_dict(), directory / "model.pt")
    config = {"model": MODELS[name], "train": {}, "labels": list(LABELS), "vector_dim": embedder.dim,
              "vocab_size": len(embedder.vocab), "window": WINDOW, "stride": STRIDE}
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("batched")
    rng = random.Random(5)
    vectors = write_word2vec_text(root / "vectors.txt",
                                  {word: [rng.uniform(-1, 1) for _ in range(6)] for word in VOCABULARY})
    words, labels = [], []
    for length in [1, 2, 3, 5, 8, 9, 13, 17, 4, 1, 6, 25, 7, 2, 11] * 2:  # shorter than, one, several windows
        words += [rng.choice(VOCABULARY) for _ in range(length)]
        labels += [rng.choice(["O", "O", "COMMA"]) for _ in range(length - 1)] + [rng.choice(["PERIOD", "QUESTION"])]
    words += ["so", "we", "say"]  # words after the last sentence end: a last span of their own
    labels += ["O", "COMMA", "O"]
    prepared = root / "prepared"
    write_iwslt(prepared / "ref.tsv", words, labels)
    return {"root": root, "prepared": prepared, "words": words, "labels": labels,
            "models": {name: make_model_dir(root, name, vectors) for name in MODELS}}


def one_sentence_at_a_time(punctuator: Punctuator, words: list[str], spans) -> list[str]:
    """The segmented protocol as the evaluate stage ran it before: one `punctuate_words` call per sentence."""
    return [label for start, end in spans for label in punctuator.punctuate_words(words[start:end])]


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("batch_size", [64, 3, 1])
def test_sentences_batched_together_get_the_labels_they_get_alone(setup, name, batch_size):
    punctuator = Punctuator(setup["models"][name], batch_size=batch_size)
    spans = sentence_spans(setup["labels"])
    assert len(spans) == 31 and max(end - start for start, end in spans) > WINDOW
    alone = one_sentence_at_a_time(punctuator, setup["words"], spans)
    assert len(set(alone)) > 1  # labels that vary: a sentence labelled differently would show

    calls = []
    model_predict = punctuator.model.predict
    punctuator.model.predict = lambda batch: calls.append(len(batch["mask"])) or model_predict(batch)
    assert label_segments(punctuator, setup["words"], spans) == alone
    windows = sum(len(window_starts(end - start, WINDOW, STRIDE)) for start, end in spans)
    assert sum(calls) == windows and len(calls) == -(-windows // batch_size)  # full batches across sentences

    # the cached-vector path (models reading per-token audio features) over the same rows
    embedded = punctuator.embedder.embed(setup["words"])
    by_rows = [label for start, end in spans for label in
               punctuator.label_vectors(embedded.vectors[start:end], embedded.ids[start:end], setup["words"][start:end])]
    assert label_vector_segments(punctuator, embedded.vectors, np.asarray(embedded.ids), setup["words"], spans) == by_rows


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_evaluate_stage_scores_the_batched_segmented_labels(setup, tmp_path, name):
    results = evaluate_model(setup["models"][name], setup["prepared"], tmp_path, splits=["ref"],
                             segmented_splits=["ref"], batch_size=4)
    spans = sentence_spans(setup["labels"])
    predicted = read_iwslt(tmp_path / f"ref{SEGMENTED_SUFFIX}.tsv")
    assert predicted.words == setup["words"]
    assert predicted.labels == one_sentence_at_a_time(Punctuator(setup["models"][name]), setup["words"], spans)
    assert results[f"ref{SEGMENTED_SUFFIX}"]["sentences"] == len(spans)
    assert results[f"ref{SEGMENTED_SUFFIX}"]["tokens"] == len(setup["words"])


def test_a_word_that_does_not_come_back_as_one_word_is_named(setup):
    punctuator = Punctuator(setup["models"]["blstm"])
    with pytest.raises(WordsChangedError, match=r"ref\.tsv, words 3-4"):
        label_segments(punctuator, ["so", "we", "say", "..."], [(0, 2), (2, 4)], source="ref.tsv")
