"""The label set of the IWSLT2011 punctuation benchmark.

A label belongs to a word and names the mark that *follows* that word (``O`` = no mark).
The order of ``LABELS`` fixes the integer ids used in every array and model output.
"""

from __future__ import annotations

LABELS: tuple[str, ...] = ("O", "COMMA", "PERIOD", "QUESTION")
LABEL_TO_ID: dict[str, int] = {label: i for i, label in enumerate(LABELS)}
NO_MARK = "O"
NO_MARK_ID = LABEL_TO_ID[NO_MARK]
#: The classes scored by the benchmark (everything except ``O``).
PUNCTUATION_CLASSES: tuple[str, ...] = ("COMMA", "PERIOD", "QUESTION")
#: The written mark of each label, used when rendering readable text.
MARK_OF_LABEL: dict[str, str] = {"O": "", "COMMA": ",", "PERIOD": ".", "QUESTION": "?"}
#: Labels after which the next word starts a sentence (capitalised in readable output).
SENTENCE_END_LABELS: frozenset[str] = frozenset({"PERIOD", "QUESTION"})
