"""Punctuating new text with a trained model directory (the library behind the ``punctuate`` command).

The user's words are never changed: :mod:`corpus.user_text` splits the text into user words (kept byte for
byte, whitespace included) and gives each its benchmark tokens for the model (``won't`` -> ``wo`` ``n't``);
the label of a word's last token is the mark written after the word. See that module for every rule.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from corpus.labels import LABELS
from corpus.user_text import UserText, punctuate_user_text, render, split_user_text
from embeddings.cache import SPEECH_JSON, TokenEmbedder
from embeddings.speech_sources import SpeechVectors, combine_vectors
from punctuation.training import load_trained_model, to_device
from punctuation.windows import predict_stream

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
        """The user words of ``text`` (as given, minus the marks the model replaces) and their labels."""
        user_text, labels, _ = self.punctuate_text(text)
        return [word.text for word in user_text.words], labels

    def punctuate_text(self, text: str, *, capitalise: bool = True) -> tuple[UserText, list[str], str]:
        """``(user_text, labels, rendered)``: the words of ``text``, one label per word, and the text with the
        predicted marks inserted (:func:`corpus.user_text.punctuate_user_text`)."""
        return punctuate_user_text(text, self.predict_labels, capitalise=capitalise)


def render_text(words: list[str], labels: list[str], *, capitalise: bool = True) -> str:
    """Readable text of user words and their labels (as :meth:`Punctuator.punctuate` gives them), one space
    between words: each label's mark after its word, sentence starts and "I" capitalised."""
    if len(words) != len(labels):
        raise ValueError(f"{len(words)} words but {len(labels)} labels")
    user_text = split_user_text(" ".join(words))
    if len(user_text.words) != len(words) or any(w != u.text for w, u in zip(words, user_text.words)):
        raise ValueError("render_text takes the user words of Punctuator.punctuate (no whitespace, no marks only)")
    return render(user_text, labels, capitalise=capitalise)
