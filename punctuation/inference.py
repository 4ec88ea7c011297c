"""Punctuating new text with a trained model directory (the library behind the ``punctuate`` command).

The user's words are never changed: :mod:`corpus.user_text` splits the text into user words (kept byte for
byte, whitespace included) and gives each its benchmark tokens for the model (``won't`` -> ``wo`` ``n't``);
the label of a word's last token is the mark written after the word. See that module for every rule.

Speech: a model trained with timing cues (speech source ``pauses``, :mod:`embeddings.timing_features`) reads
the pause after each word and how long it was held, computed from word timings
(:mod:`punctuation.speech_input`); without timings every cue is flagged missing and the same model punctuates
from the text alone, as it learned to on the stretches of training text whose cues were dropped. Models
whose speech part needs the audio itself (per-token acoustic features, per-occurrence Speech2Vec) are refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from corpus.labels import LABELS
from corpus.user_text import UserText, model_tokens, render, split_user_text, word_labels
from embeddings.cache import SPEECH_JSON, TokenEmbedder
from embeddings.speech_sources import PAUSES, SpeechVectors, combine_vectors
from punctuation.model_dir import load_trained_model, to_device
from punctuation.speech_input import match_timings, timing_raw
from punctuation.windows import predict_stream


class Punctuator:
    """A trained model plus its token embedder, ready to label token sequences of any length."""

    def __init__(self, model_dir: str | Path, *, device: str = "cpu", window: int | None = None,
                 stride: int | None = None, batch_size: int = 64):
        model_dir = Path(model_dir)
        self.model, self.config = load_trained_model(model_dir, device=device)
        self.embedder = TokenEmbedder.load(model_dir / "embedder")
        self.speech: SpeechVectors | None = None
        self.timing: SpeechVectors | None = None
        self.combine = "sum"
        speech_json = model_dir / "embedder" / SPEECH_JSON
        if speech_json.is_file():
            speech = json.loads(speech_json.read_text(encoding="utf-8"))
            if speech["source"].get("type") == PAUSES:
                # timing cues: computed from word timings given at inference (nothing to load)
                self.timing = SpeechVectors(speech["source"])
                self.combine = speech["combine"]
            elif speech.get("needs_audio"):
                raise ValueError(
                    f"{model_dir}: this model reads per-token audio features (speech source "
                    f"{speech['source']['type']!r}), which text alone cannot give; punctuate text with a model trained "
                    f"on word vectors or type-level speech vectors (e.g. variant_artifacts/<run>/<experiment>/model "
                    f"of a speech2vec feature set)"
                )
            else:
                # type-level speech vectors: looked up by word, as in training (the model directory's own copy
                # of them where the cache saved one)
                self.speech = SpeechVectors.load_saved(model_dir / "embedder")
                self.combine = speech["combine"]
        self.device = torch.device(device)
        self.window = window or int(self.config["window"])
        self.stride = stride or int(self.config["stride"])
        self.batch_size = batch_size

    @property
    def reads_timings(self) -> bool:
        """Whether the model reads timing cues (it also punctuates text without them)."""
        return self.timing is not None

    def predict_labels(self, words: list[str], timing: np.ndarray | None = None) -> list[str]:
        """One label per model token (the mark that follows it); ``timing``: raw timing cues of the tokens
        (:func:`punctuation.speech_input.timing_raw`), used by a model that reads them (None: no speech)."""
        if not words:
            return []
        if timing is not None and len(timing) != len(words):
            raise ValueError(f"timing cues for {len(timing)} tokens, {len(words)} tokens to label")
        embedded = self.embedder.embed(words)
        vectors = embedded.vectors
        if self.speech is not None:
            vectors = combine_vectors(vectors, self.speech.type_level(words)[0], self.combine)
        if self.timing is not None:
            vectors = combine_vectors(vectors, self.timing.from_timing(timing, len(words)), self.combine)
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

    def punctuate_text(self, text: str, *, capitalise: bool = True, timings=None,
                       transcript: str = "the transcript") -> tuple[UserText, list[str], str]:
        """``(user_text, labels, rendered)``: the words of ``text``, one label per word, and the text with the
        predicted marks inserted (as :func:`corpus.user_text.punctuate_user_text`).

        ``timings`` (:class:`punctuation.speech_input.TimingRows`) are checked against the words of ``text``
        (errors name the timings file, its line and ``transcript``'s word) and, for a model that reads
        timing cues, give them; a model without speech inputs ignores them.
        """
        user_text = split_user_text(text)
        tokens = model_tokens(user_text)
        timing = None
        if timings is not None:
            starts, ends = match_timings(user_text, timings, transcript=transcript)
            timing = timing_raw(user_text, starts, ends) if self.reads_timings else None
        token_labels = self.predict_labels(tokens, timing) if tokens else []
        labels = word_labels(user_text, token_labels)
        return user_text, labels, render(user_text, labels, capitalise=capitalise)


def render_text(words: list[str], labels: list[str], *, capitalise: bool = True) -> str:
    """Readable text of user words and their labels (as :meth:`Punctuator.punctuate` gives them), one space
    between words: each label's mark after its word, sentence starts and "I" capitalised."""
    if len(words) != len(labels):
        raise ValueError(f"{len(words)} words but {len(labels)} labels")
    user_text = split_user_text(" ".join(words))
    if len(user_text.words) != len(words) or any(w != u.text for w, u in zip(words, user_text.words)):
        raise ValueError("render_text takes the user words of Punctuator.punctuate (no whitespace, no marks only)")
    return render(user_text, labels, capitalise=capitalise)
