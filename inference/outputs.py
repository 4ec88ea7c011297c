"""What ``punctuate`` writes for a text, in each of its formats: the one rendering of a punctuated text, used by
the single-file command and by ``punctuate`` over a folder alike, so that both write the same bytes.

* ``text``: the text as given, the predicted marks inserted (and sentence starts capitalised);
* ``iwslt``: one ``word<TAB>LABEL`` line per word, the word as given (``won't`` stays one word);
* ``json``: the labels, the punctuated text, and each word with its label and the model's probability of each
  label (:attr:`inference.punctuator.Punctuated.probabilities`; ``null`` for a word the model does not read,
  such as an emoji or ``(Laughter)``, which gets no mark)::

      {"labels": ["O", "COMMA", "PERIOD", "QUESTION"],
       "text": "Hello, world.",
       "words": [
        {"word": "hello", "label": "COMMA", "probabilities": {"O": 0.201, "COMMA": 0.77, "PERIOD": 0.0213, ...}},
        ...]}

  The probabilities are written with 9 significant digits, which keeps every float32 value apart: the largest
  of a word's probabilities is always the one of its label.
"""

from __future__ import annotations

import json
import math

from corpus.labels import LABELS

#: The formats ``punctuate`` writes, and the extension of each in an output folder.
FORMATS = {"text": ".txt", "iwslt": ".tsv", "json": ".json"}

__all__ = ["FORMATS", "format_punctuated"]


def _probability(value: float) -> float:
    return float(f"{value:.9g}")


def _json_words(result) -> list[str]:  # noqa: ANN001 - a Punctuated
    lines = []
    for index, (word, label) in enumerate(zip(result.user_text.words, result.labels)):
        row = result.probabilities[index]
        probabilities = None if any(math.isnan(value) for value in row) else \
            {name: _probability(value) for name, value in zip(LABELS, row.tolist())}
        lines.append(json.dumps({"word": word.text, "label": label, "probabilities": probabilities},
                                ensure_ascii=False))
    return lines


def format_punctuated(result, output_format: str) -> str:  # noqa: ANN001 - a Punctuated
    """The content ``punctuate`` writes for ``result`` (:class:`inference.punctuator.Punctuated`) in
    ``output_format`` (:data:`FORMATS`); ``json`` needs the result's probabilities."""
    if output_format == "text":
        return result.rendered
    if output_format == "iwslt":
        return "".join(f"{word.text}\t{label}\n" for word, label in zip(result.user_text.words, result.labels))
    if output_format == "json":
        if result.probabilities is None:
            raise ValueError("the json format writes the labels' probabilities: punctuate with probabilities=True")
        words = _json_words(result)
        return (f'{{"labels": {json.dumps(list(LABELS))},\n "text": {json.dumps(result.rendered, ensure_ascii=False)},'
                f'\n "words": [' + (("\n  " + ",\n  ".join(words) + "\n ") if words else "") + "]}\n")
    raise ValueError(f"unknown output format {output_format!r}; known: {', '.join(FORMATS)}")
