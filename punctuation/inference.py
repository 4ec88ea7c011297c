"""Punctuating new text with a trained model directory (the library behind the ``punctuate`` command)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from embeddings.cache import SPEECH_JSON, TokenEmbedder
from embeddings.speech_sources import SpeechVectors, combine_vectors
from punctuation.labels import LABELS, MARK_OF_LABEL, SENTENCE_END_LABELS
from punctuation.text import tokenize_for_inference
from punctuation.training import load_trained_model, to_device
from punctuation.windows import predict_stream

# Benchmark tokens that were split off the word before them ("do n't", "i 'm") and are re-attached when
# writing readable text; "ca n't" and "wo n't" come back as "can't" and "won't".
_CLITICS = {"n't", "'s", "'m", "'re", "'ve", "'ll", "'d"}
_CLITIC_STEMS = {("ca", "n't"): "ca", ("wo", "n't"): "wo"}
_RESTORED_STEMS = {"ca": "can", "wo": "won"}


class Punctuator:
    """A trained model plus its token embedder, ready to label token sequences of any length."""

    def __init__(self, model_dir: str | Path, *, device: str = "cpu", window: int | None = None,
                 stride: int | None = None, batch_size: int = 64):
        model_dir = Path(model_dir)
        self.model, self.config = load_trained_model(model_dir, device=device)
        self.embedder = TokenEmbedder.load(model_dir / "embedder")
        self.speech: SpeechVectors | None = None
        self.combine = "sum"
        speech_json = model_dir / "embedder" / SPEECH_JSON
        if speech_json.is_file():
            import json

            speech = json.loads(speech_json.read_text(encoding="utf-8"))
            if speech.get("needs_audio"):
                raise ValueError(
                    f"{model_dir}: this model reads per-token audio features (speech source "
                    f"{speech['source']['type']!r}), which text alone cannot give; punctuate text with a model trained "
                    f"on word vectors or type-level speech vectors (e.g. variant_artifacts/<run>/<experiment>/model "
                    f"of a speech2vec feature set)"
                )
            # type-level speech vectors: looked up by word, as in training
            self.speech = SpeechVectors(speech["source"])
            self.combine = speech["combine"]
        self.device = torch.device(device)
        self.window = window or int(self.config["window"])
        self.stride = stride or int(self.config["stride"])
        self.batch_size = batch_size

    def predict_labels(self, words: list[str]) -> list[str]:
        """One label per word (the mark that follows it)."""
        if not words:
            return []
        embedded = self.embedder.embed(words)
        vectors = embedded.vectors
        if self.speech is not None:
            vectors = combine_vectors(vectors, self.speech.type_level(words)[0], self.combine)
        predicted = predict_stream(
            lambda batch: self.model.predict(to_device(batch, self.device)),
            vectors, embedded.ids.astype(np.int64), window=self.window, stride=self.stride,
            batch_size=self.batch_size, words=words if self.model.reads_words else None,
        )
        return [LABELS[i] for i in predicted]

    def punctuate(self, text: str) -> tuple[list[str], list[str]]:
        """Tokenise raw text like the benchmark (casing and marks stripped) and label every token."""
        words = tokenize_for_inference(text)
        return words, self.predict_labels(words)


def render_text(words: list[str], labels: list[str]) -> str:
    """Readable text: clitics re-attached, marks after their word, sentence starts and "I" capitalised."""
    pieces: list[str] = []
    capitalise_next = True
    for index, (word, label) in enumerate(zip(words, labels)):
        following = words[index + 1] if index + 1 < len(words) else None
        if word in _RESTORED_STEMS and (word, following) in _CLITIC_STEMS:
            word = _RESTORED_STEMS[word]
        if word == "i" or word.startswith("i'"):
            word = "I" + word[1:]
        if capitalise_next and word:
            word = word[0].upper() + word[1:]
        capitalise_next = label in SENTENCE_END_LABELS
        token = word + MARK_OF_LABEL[label]
        if word in _CLITICS and pieces:
            # the clitic carries the label of the joined word ("do n't" + PERIOD -> "don't.")
            pieces[-1] = pieces[-1] + token
        else:
            pieces.append(token)
    return " ".join(pieces)
