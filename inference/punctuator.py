"""Punctuating text with a trained model directory: the one decoding path of ``punctuate`` and the evaluate stage.

The user's words are never changed: :mod:`corpus.user_text` splits the text into user words (kept byte for
byte, whitespace included) and gives each its benchmark tokens for the model (``won't`` -> ``wo`` ``n't``);
the label of a word's last token is the mark written after the word. See that module for every rule.

:class:`Punctuator` turns tokens into model inputs (the model directory's own token embedder, plus speech
where the model reads it), decodes them in overlapping windows (:mod:`inference.windows`) and maps the labels
back to the words. The evaluate stage scores a model through :meth:`Punctuator.punctuate_words` -- the same
text handling, embedding and windows as ``punctuate`` -- so the F1 recorded for a model is the F1 a user gets.

Many texts at once (:meth:`Punctuator.punctuate_prepared`, what ``punctuate`` over a folder uses): each text
is read and checked on its own (:meth:`Punctuator.prepare_text`) and decoded in batches of its own windows, the
very batches it gets alone (:meth:`Punctuator.punctuate_text`, the single-file command), so that a text's
output never depends on the texts beside it. With ``share_batches`` the windows of all of them fill the model's
batches together (:func:`inference.windows.predict_streams`): fewer, fuller batches, which a GPU runs faster;
but a model's arithmetic is not always the same in batches of other sizes (an LSTM's is not: its probabilities
move in the last bit of a float32), so a text's probabilities then depend, in their last digits, on its
neighbours, and where two labels are that close to tied, its mark may too.

Confidence (``probabilities=True``): the model's probability of each label for each word (its last token's, as
for its label), from the very logits the label was taken from: the arg-max of a model's logits is its label (a
model that decodes label by label, the Transformer, gives the probabilities of each step given the labels it
decoded before it: what its greedy decoder took the arg-max of). The labels are the same whether or not the
probabilities are asked for.

Windows: a token's label comes from the window it is most central in, or, where the model directory says so
(``train.decode_combine: sum``, recorded at training like the window and stride, so dev evaluation, the evaluate
stage and ``punctuate`` decode alike), from its logits summed over every window covering it
(:mod:`inference.windows`); its probabilities are then the softmax of its windows' mean logits. A model with a
decoder of its own (the Transformer: labels, not logits, per window) keeps the centre rule
(:func:`combine_rule`).

Speech: a model trained with timing cues (speech source ``pauses``, :mod:`embeddings.timing_features`) reads
the pause after each word and how long it was held, computed from word timings
(:mod:`inference.speech_input`); without timings every cue is flagged missing and the same model punctuates
from the text alone, as it learned to on the stretches of training text whose cues were dropped. Models
whose speech part needs the audio itself (per-token acoustic features, per-occurrence Speech2Vec) are refused
unless ``audio_features=True``, which only the evaluate stage asks for: it hands such a model the cached
per-token vectors of a benchmark split (:meth:`Punctuator.label_vectors`), through the same windows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from corpus.labels import LABELS
from corpus.user_text import UserText, model_tokens, render, split_user_text, word_labels
from embeddings.cache import SPEECH_JSON, TokenEmbedder
from embeddings.speech_sources import PAUSES, SpeechVectors, combine_vectors
from embeddings.store import EMBEDDER_DIR
from inference.device import choose_device
from inference.model_dir import load_trained_model, to_device
from inference.speech_input import match_timings, timing_raw
from inference.windows import check_combine, predict_streams


class WordsChangedError(ValueError):
    """Words given one by one (:meth:`Punctuator.punctuate_words`) that do not come back one word each."""


@dataclass(frozen=True)
class PreparedText:
    """A text read for the model (:meth:`Punctuator.prepare_text`): its words, their model tokens and the tokens'
    raw timing cues (None: no speech)."""

    user_text: UserText
    tokens: list[str]
    timing: np.ndarray | None = None


@dataclass(frozen=True)
class Punctuated:
    """A text punctuated: its words, one label per word, the text with the predicted marks and, when asked, the
    model's probability of each label (columns: the model's labels) for each word; NaN for a word the model
    does not read (it gets no mark)."""

    user_text: UserText
    labels: list[str]
    rendered: str
    probabilities: np.ndarray | None = None


def decodes_by_argmax(model) -> bool:
    """Whether ``model.predict`` is the arg-max of its logits (not a decoder of its own, label by label)."""
    from models.registry import PunctuationModel

    return type(model).predict is PunctuationModel.predict


def combine_rule(model, requested: str) -> str:
    """The window combination ``model`` is decoded with when ``requested`` (:data:`inference.windows.COMBINE_RULES`):
    ``sum`` needs logits per window, so a model with a decoder of its own keeps ``centre``."""
    check_combine(requested)
    return requested if requested == "centre" or decodes_by_argmax(model) else "centre"


def window_logits(model, batch: dict) -> torch.Tensor:
    """The label logits (B, T, labels) of a batch's windows, in float32 (what ``combine="sum"`` adds up)."""
    with torch.no_grad():
        return model(batch).float()


def label_probabilities(model, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """``(label ids (B, T), probabilities (B, T, labels))`` of a batch: the ids are exactly ``model.predict``'s,
    the probabilities the softmax of the logits they are the arg-max of (module docstring)."""
    with torch.no_grad():
        if decodes_by_argmax(model):  # the arg-max of the logits: compute them once
            logits = model(batch)
            ids = logits.argmax(dim=-1)
        else:  # a decoder of its own (greedy, label by label): its logits at each step, given its own labels
            ids = model.predict(batch)
            logits = model({**batch, "labels": ids})
        return ids, torch.softmax(logits.float(), dim=-1)


class Punctuator:
    """A trained model plus its token embedder, ready to label token sequences of any length."""

    def __init__(self, model_dir: str | Path, *, device: str = "cpu", window: int | None = None,
                 stride: int | None = None, batch_size: int = 64, audio_features: bool = False,
                 decode_combine: str | None = None):
        model_dir = Path(model_dir)
        self.device = choose_device(device)  # a missing GPU is named before any file is opened
        self.model, self.config = load_trained_model(model_dir, device=str(self.device))
        self.embedder = TokenEmbedder.load(model_dir / EMBEDDER_DIR)
        self.speech: SpeechVectors | None = None
        self.timing: SpeechVectors | None = None
        self.needs_audio = False
        self.combine = "sum"
        speech_json = model_dir / EMBEDDER_DIR / SPEECH_JSON
        if speech_json.is_file():
            speech = json.loads(speech_json.read_text(encoding="utf-8"))
            self.combine = speech["combine"]
            if speech["source"].get("type") == PAUSES:
                # timing cues: computed from word timings given at inference (nothing to load)
                self.timing = SpeechVectors(speech["source"])
            elif speech.get("needs_audio"):
                if not audio_features:
                    raise ValueError(
                        f"{model_dir}: this model reads per-token audio features (speech source "
                        f"{speech['source']['type']!r}), which text alone cannot give; punctuate text with a model "
                        f"trained on word vectors or type-level speech vectors (e.g. "
                        f"variant_artifacts/<run>/<experiment>/model of a speech2vec feature set)")
                self.needs_audio = True
            else:
                # type-level speech vectors: looked up by word, as in training (the model directory's own copy
                # of them where the cache saved one)
                self.speech = SpeechVectors.load_saved(model_dir / EMBEDDER_DIR)
        self.window = window or int(self.config["window"])
        self.stride = stride or int(self.config["stride"])
        self.batch_size = batch_size
        # the window combination recorded at training (model directories before it: centre); an argument, as the
        # window and stride, only to measure another on a trained model
        recorded = (self.config.get("train") or {}).get("decode_combine", "centre")
        self.decode_combine = combine_rule(self.model, decode_combine or recorded)

    @property
    def reads_timings(self) -> bool:
        """Whether the model reads timing cues (it also punctuates text without them)."""
        return self.timing is not None

    # -- tokens -> labels ---------------------------------------------------------------------------------

    def _predict(self, probabilities: bool):  # noqa: ANN202 - batch -> label ids (and probabilities)
        if self.decode_combine == "sum":  # logits per window, combined by predict_streams
            return lambda batch: window_logits(self.model, to_device(batch, self.device))
        if probabilities:
            return lambda batch: label_probabilities(self.model, to_device(batch, self.device))
        return lambda batch: self.model.predict(to_device(batch, self.device))

    def _decode(self, streams: list, probabilities: bool, progress=None) -> list:
        """Per stream ``(vectors, ids, tokens)``, one label per token (and, with ``probabilities``, ``(labels,
        probabilities (N, labels))``): the windows and batches every prediction goes through."""
        results = predict_streams(
            self._predict(probabilities),
            [(vectors, np.asarray(ids, dtype=np.int64), words if self.model.reads_words else None)
             for vectors, ids, words in streams],
            window=self.window, stride=self.stride, batch_size=self.batch_size, progress=progress,
            combine=self.decode_combine)
        if self.decode_combine == "sum":  # (ids, mean logits): the probabilities are the latter's softmax
            results = [(ids, _softmax(mean) if probabilities else None) for ids, mean in results]
            if not probabilities:
                results = [ids for ids, _ in results]
        if probabilities:
            return [([LABELS[i] for i in ids], probs) for ids, probs in results]
        return [[LABELS[i] for i in ids] for ids in results]

    def label_vectors(self, vectors: np.ndarray, ids: np.ndarray, words: Sequence[str],
                      progress=None) -> list[str]:
        """One label per token from the model's input rows (``vectors``, vocabulary ``ids``) and the tokens
        themselves (read by models that tokenise text): the windows and batches every prediction goes through."""
        if len(ids) == 0:
            return []
        return self.label_vector_streams([(vectors, ids, words)], progress)[0]

    def label_vector_streams(self, streams: Sequence[tuple[np.ndarray, np.ndarray, Sequence[str]]],
                             progress=None) -> list[list[str]]:
        """:meth:`label_vectors` for several streams ``(vectors, ids, words)``, each labelled as a stream of its own,
        their windows sharing the model's batches (each holds at least one token)."""
        return self._decode(list(streams), False, progress)

    def _model_inputs(self, words: list[str], timing: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, list[str]]:
        if self.needs_audio:
            raise ValueError("this model reads per-token audio features: label the cached vectors of a split "
                             "(label_vectors), text alone cannot give them")
        if timing is not None and len(timing) != len(words):
            raise ValueError(f"timing cues for {len(timing)} tokens, {len(words)} tokens to label")
        embedded = self.embedder.embed(words)
        vectors = embedded.vectors
        if self.speech is not None:
            vectors = combine_vectors(vectors, self.speech.type_level(words)[0], self.combine)
        if self.timing is not None:
            vectors = combine_vectors(vectors, self.timing.from_timing(timing, len(words)), self.combine)
        return vectors, embedded.ids, words

    def predict_labels(self, words: list[str], timing: np.ndarray | None = None, progress=None) -> list[str]:
        """One label per model token (the mark that follows it); ``timing``: raw timing cues of the tokens
        (:func:`inference.speech_input.timing_raw`), used by a model that reads them (None: no speech)."""
        if not words:
            return []
        return self._decode([self._model_inputs(words, timing)], False, progress)[0]

    def predict_label_probabilities(self, words: list[str], timing: np.ndarray | None = None,
                                    progress=None) -> tuple[list[str], np.ndarray]:
        """:meth:`predict_labels` with each token's probability of each label ``(N, labels)``, in
        :data:`corpus.labels.LABELS` order: the labels are exactly :meth:`predict_labels`' (module docstring)."""
        if not words:
            return [], np.zeros((0, len(LABELS)), dtype=np.float32)
        labels, probabilities = self._decode([self._model_inputs(words, timing)], True, progress)[0]
        return labels, np.asarray(probabilities)

    # -- text -> labels -----------------------------------------------------------------------------------

    def punctuate(self, text: str) -> tuple[list[str], list[str]]:
        """The user words of ``text`` (as given, minus the marks the model replaces) and their labels."""
        user_text, labels, _ = self.punctuate_text(text)
        return [word.text for word in user_text.words], labels

    def prepare_text(self, text: str, *, timings=None, transcript: str = "the transcript") -> PreparedText:
        """``text`` split into words and model tokens, with the tokens' timing cues from ``timings``
        (:class:`inference.speech_input.TimingRows`), which are checked against the words of ``text`` (errors
        name the timings file, its line and ``transcript``'s word) and used by a model that reads them."""
        user_text = split_user_text(text)
        tokens = model_tokens(user_text)
        timing = None
        if timings is not None:
            starts, ends = match_timings(user_text, timings, transcript=transcript)
            timing = timing_raw(user_text, starts, ends) if self.reads_timings else None
        return PreparedText(user_text, tokens, timing)

    def punctuate_prepared(self, texts: Sequence[PreparedText], *, capitalise: bool = True,
                           probabilities: bool = False, share_batches: bool = False,
                           progress=None) -> list[Punctuated]:
        """Every text of ``texts`` punctuated, each in batches of its own windows, or with ``share_batches`` all
        their windows filling the model's batches together (module docstring)."""
        spoken = [index for index, text in enumerate(texts) if text.tokens]
        inputs = (self._model_inputs(texts[index].tokens, texts[index].timing) for index in spoken)
        if share_batches:
            streams = list(inputs)
            decoded = self._decode(streams, probabilities, progress) if streams else []
        else:  # one text at a time: only its own inputs in memory
            decoded = [self._decode([stream], probabilities, progress)[0] for stream in inputs]
        if not probabilities:
            decoded = [(labels, None) for labels in decoded]
        by_text = dict(zip(spoken, decoded))
        results = []
        for index, text in enumerate(texts):
            token_labels, token_probabilities = by_text.get(index, ([], None))
            labels = word_labels(text.user_text, token_labels)
            results.append(Punctuated(text.user_text, labels, render(text.user_text, labels, capitalise=capitalise),
                                      _word_rows(text.user_text, token_probabilities) if probabilities else None))
        return results

    def punctuate_text(self, text: str, *, capitalise: bool = True, timings=None,
                       transcript: str = "the transcript", progress=None) -> tuple[UserText, list[str], str]:
        """``(user_text, labels, rendered)``: the words of ``text``, one label per word, and the text with the
        predicted marks inserted (as :func:`corpus.user_text.punctuate_user_text`).

        ``timings`` (:class:`inference.speech_input.TimingRows`) are checked against the words of ``text``
        (errors name the timings file, its line and ``transcript``'s word) and, for a model that reads
        timing cues, give them; a model without speech inputs ignores them.
        """
        prepared = self.prepare_text(text, timings=timings, transcript=transcript)
        result = self.punctuate_prepared([prepared], capitalise=capitalise, progress=progress)[0]
        return result.user_text, result.labels, result.rendered

    def punctuate_words(self, words: Sequence[str], *, source: str = "the words", progress=None) -> list[str]:
        """One label per word of ``words`` given one by one (a benchmark file's first column), exactly as
        ``punctuate --format iwslt`` labels the same words written one line each.

        A word that does not come back as one word (whitespace inside it, or a piece of marks only, which
        ``punctuate`` treats as a mark to replace) is a :class:`WordsChangedError` naming it and ``source``.
        """
        for index, word in enumerate(words):
            if not word or any(char.isspace() for char in word):
                raise WordsChangedError(f"{source}, word {index + 1}: {word!r} is not one word without whitespace")
        user_text, labels, _ = self.punctuate_text("\n".join(words), capitalise=False, progress=progress)
        if len(user_text.words) != len(words):
            kept = [word.text for word in user_text.words]
            first = next((i for i, (a, b) in enumerate(zip(words, kept)) if a != b), min(len(words), len(kept)))
            raise WordsChangedError(f"{source}, word {first + 1}: {words[first]!r} is read as punctuation, not as a "
                                    f"word ({len(words)} words in, {len(kept)} out)")
        return labels


def _softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of (N, labels) float64 logits, as float32 (the probabilities :func:`label_probabilities`
    gives)."""
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)


def _word_rows(user_text: UserText, token_rows: np.ndarray | None) -> np.ndarray:
    """One row per user word: its last model token's (NaN for a word without tokens), as :func:`word_labels`."""
    rows = np.full((len(user_text.words), len(LABELS)), np.nan, dtype=np.float32)
    position = 0
    for index, word in enumerate(user_text.words):
        position += len(word.tokens)
        if word.tokens:
            rows[index] = token_rows[position - 1]
    return rows


def render_text(words: list[str], labels: list[str], *, capitalise: bool = True) -> str:
    """Readable text of user words and their labels (as :meth:`Punctuator.punctuate` gives them), one space
    between words: each label's mark after its word, sentence starts and "I" capitalised."""
    if len(words) != len(labels):
        raise ValueError(f"{len(words)} words but {len(labels)} labels")
    user_text = split_user_text(" ".join(words))
    if len(user_text.words) != len(words) or any(w != u.text for w, u in zip(words, user_text.words)):
        raise ValueError("render_text takes the user words of Punctuator.punctuate (no whitespace, no marks only)")
    return render(user_text, labels, capitalise=capitalise)
