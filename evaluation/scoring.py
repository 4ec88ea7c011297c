"""The IWSLT2011 punctuation scorer.

The definitions follow the evaluation of Che et al. (2016) and Tilk & Alumäe's
``error_calculator.py``: reference and prediction are compared *slot by slot*, every
word slot carrying exactly one label (the mark that follows the word, ``O`` = none).

Per slot with reference ``r`` and prediction ``h``:

* correct       ``C``: ``r == h != O``
* substitution  ``S``: ``r != O``, ``h != O``, ``r != h``
* deletion      ``D``: ``r != O``, ``h == O``
* insertion     ``I``: ``r == O``, ``h != O``
* ``O``/``O`` slots are not counted at all.

Per class ``c`` in COMMA/PERIOD/QUESTION::

    precision = #(r == c and h == c) / #(h == c)
    recall    = #(r == c and h == c) / #(r == c)
    f1        = 2 * precision * recall / (precision + recall)

``OVERALL`` is micro-averaged over the three classes::

    precision = C / (C + S + I) = C / #(h != O)
    recall    = C / (C + S + D) = C / #(r != O)

and the slot error rate is ``SER = (S + D + I) / #(r != O)``; it can exceed 1.

Zero denominators: every ratio whose denominator is 0 is reported as ``0.0`` (a class
never predicted has precision 0, a class absent from the reference has recall 0, F1 is
0 when precision + recall is 0, and SER is 0 when the reference has no marks at all -
even if the prediction inserted some; the raw counts from :func:`score_details` show
those insertions). Every value is a plain Python ``float`` so the result is JSON-ready.

Files
-----
:func:`score_files` reads two ``word<TAB>LABEL`` files (:mod:`corpus.iwslt`: CRLF or LF, invalid UTF-8
bytes replaced, blank lines skipped) and compares them line by line, as the reference scorer does: every
token line is a slot and the words must agree (a word mismatch or a different token count is an error
naming both files and lines). ``dev2012`` as distributed has ten lines with an empty word (``\tCOMMA``, a
mark split off a speaker label); like any other line each is a slot, with the word ``''``, so the file
scores against itself (all ten carry a mark and count as reference marks). A prediction may leave those
lines out -- this project's prepared splits, and so its predictions, drop them
(``read_iwslt(skip_empty_words=True)``) -- and each missing one is then scored as predicted ``O`` (a
deletion). A label on an empty-word line must still be one of ``LABELS``. A file with no token at all is an
error naming it (:class:`EmptyFileError`): two empty files are not scored as zeros.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from corpus.iwslt import IwsltFormatError, read_iwslt
from corpus.labels import LABEL_TO_ID, LABELS, NO_MARK, NO_MARK_ID, PUNCTUATION_CLASSES

__all__ = [
    "EmptyFileError",
    "SlotCounts",
    "TokenMismatchError",
    "confusion_matrix",
    "count_slots",
    "format_table",
    "score_details",
    "score_files",
    "score_files_details",
    "score_labels",
]

_N = len(LABELS)


@dataclass(frozen=True)
class SlotCounts:
    """Raw slot counts of one comparison (see the module docstring for the definitions).

    The per-class mappings are keyed by the names in ``PUNCTUATION_CLASSES``.
    """

    correct: int
    substitutions: int
    deletions: int
    insertions: int
    #: ``#(r != O)`` = correct + substitutions + deletions
    reference_marks: int
    #: ``#(h != O)`` = correct + substitutions + insertions
    predicted_marks: int
    #: ``#(r == c and h == c)`` per class
    true_positive: dict[str, int] = field(hash=False)
    #: ``#(r == c)`` per class
    reference: dict[str, int] = field(hash=False)
    #: ``#(h == c)`` per class
    predicted: dict[str, int] = field(hash=False)

    @property
    def errors(self) -> int:
        """``S + D + I``."""
        return self.substitutions + self.deletions + self.insertions

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (plain ints and dicts)."""
        return asdict(self)


class TokenMismatchError(ValueError):
    """The reference and prediction files do not hold the same token sequence.

    ``index`` is the 0-based token index of the first mismatch; ``reference_line`` /
    ``prediction_line`` are the 1-based file lines of that token (``None`` where the
    file has already ended), ``reference_word`` / ``prediction_word`` the words found
    there (``None`` likewise).
    """

    def __init__(
        self,
        reference_path: Path,
        prediction_path: Path,
        index: int,
        reference_line: int | None,
        prediction_line: int | None,
        reference_word: str | None,
        prediction_word: str | None,
        reason: str,
    ) -> None:
        self.reference_path = Path(reference_path)
        self.prediction_path = Path(prediction_path)
        self.index = index
        self.reference_line = reference_line
        self.prediction_line = prediction_line
        self.reference_word = reference_word
        self.prediction_word = prediction_word
        self.reason = reason
        super().__init__(self._message())

    def _message(self) -> str:
        def where(path: Path, line: int | None) -> str:
            return f"{path}:{line}" if line is not None else f"{path}:<end of file>"

        return (
            f"token mismatch at token {self.index + 1} "
            f"({where(self.reference_path, self.reference_line)} vs "
            f"{where(self.prediction_path, self.prediction_line)}): {self.reason}"
        )


# --------------------------------------------------------------------------- counting


def _label_ids(labels: Iterable[Any], name: str) -> np.ndarray:
    """Label names (or integer ids) -> int64 id array; ValueError on anything unknown."""
    ids = []
    for i, label in enumerate(labels):
        if isinstance(label, str):
            label_id = LABEL_TO_ID.get(label)
        elif isinstance(label, (int, np.integer)) and not isinstance(label, bool):
            label_id = int(label) if 0 <= int(label) < _N else None
        else:
            label_id = None
        if label_id is None:
            raise ValueError(
                f"unknown label {label!r} at position {i} of the {name} labels "
                f"(expected one of {', '.join(LABELS)})"
            )
        ids.append(label_id)
    return np.asarray(ids, dtype=np.int64)


def confusion_matrix(
    reference_labels: Sequence[Any], predicted_labels: Sequence[Any]
) -> np.ndarray:
    """The 4x4 ``int64`` confusion matrix indexed in ``LABELS`` order.

    Rows are reference labels, columns predicted labels (``O`` slots included).
    Raises ValueError on different lengths or an unknown label.
    """
    ref = _label_ids(reference_labels, "reference")
    hyp = _label_ids(predicted_labels, "predicted")
    if len(ref) != len(hyp):
        raise ValueError(
            f"reference and prediction differ in length: {len(ref)} vs {len(hyp)} labels"
        )
    counts = np.bincount(ref * _N + hyp, minlength=_N * _N)
    return counts.reshape(_N, _N).astype(np.int64)


def _counts_from_matrix(matrix: np.ndarray) -> SlotCounts:
    o = NO_MARK_ID
    marks = [LABEL_TO_ID[c] for c in PUNCTUATION_CLASSES]
    correct = int(sum(matrix[i, i] for i in marks))
    substitutions = int(sum(matrix[i, j] for i in marks for j in marks if i != j))
    deletions = int(sum(matrix[i, o] for i in marks))
    insertions = int(sum(matrix[o, j] for j in marks))
    return SlotCounts(
        correct=correct,
        substitutions=substitutions,
        deletions=deletions,
        insertions=insertions,
        reference_marks=correct + substitutions + deletions,
        predicted_marks=correct + substitutions + insertions,
        true_positive={c: int(matrix[LABEL_TO_ID[c], LABEL_TO_ID[c]]) for c in PUNCTUATION_CLASSES},
        reference={c: int(matrix[LABEL_TO_ID[c], :].sum()) for c in PUNCTUATION_CLASSES},
        predicted={c: int(matrix[:, LABEL_TO_ID[c]].sum()) for c in PUNCTUATION_CLASSES},
    )


def count_slots(
    reference_labels: Sequence[Any], predicted_labels: Sequence[Any]
) -> SlotCounts:
    """Count correct/substituted/deleted/inserted slots and the per-class counts.

    Labels are names from ``LABELS`` (integer ids are accepted too). Raises ValueError
    on different lengths or an unknown label.
    """
    return _counts_from_matrix(confusion_matrix(reference_labels, predicted_labels))


# --------------------------------------------------------------------------- scores


def _ratio(numerator: int, denominator: int) -> float:
    return float(numerator) / float(denominator) if denominator else 0.0


def _prf(tp: int, predicted: int, reference: int) -> dict[str, float]:
    precision = _ratio(tp, predicted)
    recall = _ratio(tp, reference)
    f1 = 2.0 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": float(precision), "recall": float(recall), "f1": float(f1)}


def scores_from_counts(counts: SlotCounts) -> dict[str, Any]:
    """The benchmark scores (see :func:`score_labels`) of already computed counts."""
    scores: dict[str, Any] = {
        c: _prf(counts.true_positive[c], counts.predicted[c], counts.reference[c])
        for c in PUNCTUATION_CLASSES
    }
    scores["OVERALL"] = _prf(counts.correct, counts.predicted_marks, counts.reference_marks)
    scores["SER"] = _ratio(counts.errors, counts.reference_marks)
    return scores


def score_labels(
    reference_labels: Sequence[Any], predicted_labels: Sequence[Any]
) -> dict[str, Any]:
    """Score predicted labels against the reference.

    Returns exactly ``{"COMMA": {"precision", "recall", "f1"}, "PERIOD": {...},
    "QUESTION": {...}, "OVERALL": {...}, "SER": float}`` with values as fractions
    (not percentages) and Python floats. Zero denominators give 0.0 (module docstring).
    """
    return scores_from_counts(count_slots(reference_labels, predicted_labels))


def score_details(
    reference_labels: Sequence[Any], predicted_labels: Sequence[Any]
) -> dict[str, Any]:
    """Scores plus the raw counts, for reports (all JSON-ready).

    ``{"scores": <score_labels result>, "counts": <SlotCounts.as_dict()>,
    "confusion_matrix": {"labels": [...], "matrix": [[...], ...]}}``
    """
    matrix = confusion_matrix(reference_labels, predicted_labels)
    counts = _counts_from_matrix(matrix)
    return {
        "scores": scores_from_counts(counts),
        "counts": counts.as_dict(),
        "confusion_matrix": {"labels": list(LABELS), "matrix": matrix.tolist()},
    }


# --------------------------------------------------------------------------- files


class EmptyFileError(IwsltFormatError):
    """A file to score holds no token at all (empty, or blank lines only); the message names the file."""

    def __init__(self, path: str | Path, role: str) -> None:
        super().__init__(path, None, f"the {role} file holds no tokens; nothing to score")  # type: ignore[arg-type]
        self.role = role

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True)
class _Slots:
    """The slots of one file: a word ('' for an empty-word line), its label and its 1-based line."""

    path: Path
    words: list[str]
    labels: list[str]
    lines: list[int]


def _read_slots(path: str | Path, role: str) -> _Slots:
    """Read a ``word<TAB>LABEL`` file as slots; empty-word lines are slots with the word ``''``.

    Malformed lines raise ``read_iwslt``'s ``IwsltFormatError`` (file:line), also an unknown label on an
    empty-word line; a file without any slot raises :class:`EmptyFileError`.
    """
    path = Path(path)
    tokens = read_iwslt(path, skip_empty_words=True)
    empty = set(tokens.skipped_lines)
    words: list[str] = []
    labels: list[str] = []
    lines: list[int] = []
    token = 0
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        line = raw.removesuffix(b"\r").decode("utf-8", errors="replace")
        if number in empty:
            label = line.split("\t")[1].strip()
            if label not in LABEL_TO_ID:
                raise IwsltFormatError(
                    path, number, f"unknown label {label!r} (expected one of {', '.join(LABEL_TO_ID)})"
                )
            words.append("")
            labels.append(label)
            lines.append(number)
        elif line.strip():
            words.append(tokens.words[token])
            labels.append(tokens.labels[token])
            lines.append(number)
            token += 1
    if token != len(tokens.words):  # cannot happen while this walk mirrors read_iwslt's
        raise RuntimeError(f"{path}: read {len(tokens.words)} tokens but traced {token} to lines")
    if not words:
        raise EmptyFileError(path, role)
    return _Slots(path, words, labels, lines)


def _align(reference: _Slots, prediction: _Slots) -> tuple[list[str], list[str]]:
    """Pair the slots of both files; ``(reference_labels, predicted_labels)`` of equal length.

    Slots are compared line by line, word for word. A reference slot with an empty word that the prediction
    does not have (the prediction left the empty-word line out) is paired with ``O``. Anything else that
    differs raises :class:`TokenMismatchError` naming both files and lines.
    """
    ref_labels: list[str] = []
    hyp_labels: list[str] = []
    n_ref, n_hyp = len(reference.words), len(prediction.words)
    i = j = 0
    while i < n_ref:
        if j < n_hyp and reference.words[i] == prediction.words[j]:
            ref_labels.append(reference.labels[i])
            hyp_labels.append(prediction.labels[j])
            j += 1
        elif reference.words[i] == "":
            ref_labels.append(reference.labels[i])
            hyp_labels.append(NO_MARK)
        else:
            break
        i += 1
    if i == n_ref and j == n_hyp:
        return ref_labels, hyp_labels

    def at(seq: Sequence[Any], k: int) -> Any:
        return seq[k] if k < len(seq) else None

    ref_word, hyp_word = at(reference.words, i), at(prediction.words, j)
    if i < n_ref and j < n_hyp:
        reason = f"reference word {ref_word!r} != prediction word {hyp_word!r}"
    else:
        longer, extra = ("reference", ref_word) if i < n_ref else ("prediction", hyp_word)
        reason = (
            f"token counts differ ({n_ref} reference vs {n_hyp} prediction tokens); "
            f"the {longer} continues with {extra!r}"
        )
    raise TokenMismatchError(
        reference.path,
        prediction.path,
        index=i,
        reference_line=at(reference.lines, i),
        prediction_line=at(prediction.lines, j),
        reference_word=ref_word,
        prediction_word=hyp_word,
        reason=reason,
    )


def _read_pair(reference_path: str | Path, prediction_path: str | Path) -> tuple[list[str], list[str]]:
    reference = _read_slots(reference_path, "reference")
    prediction = _read_slots(prediction_path, "prediction")
    return _align(reference, prediction)


def score_files(reference_path: str | Path, prediction_path: str | Path) -> dict[str, Any]:
    """Score two ``word<TAB>LABEL`` files (see :func:`score_labels` for the result).

    Every file the benchmark ships is accepted, ``dev2012`` with its empty-word lines included (see
    "Files" in the module docstring). Raises ``IwsltFormatError`` naming file and line on a malformed
    file, :class:`EmptyFileError` (a subclass) on a file without tokens, and :class:`TokenMismatchError`
    when the two files do not hold the same words in the same order.
    """
    reference_labels, predicted_labels = _read_pair(reference_path, prediction_path)
    return score_labels(reference_labels, predicted_labels)


def score_files_details(
    reference_path: str | Path, prediction_path: str | Path
) -> dict[str, Any]:
    """Like :func:`score_files` but returns :func:`score_details`' richer dict."""
    reference_labels, predicted_labels = _read_pair(reference_path, prediction_path)
    return score_details(reference_labels, predicted_labels)


# --------------------------------------------------------------------------- report


def format_table(scores: dict[str, Any]) -> str:
    """A small Markdown table of a :func:`score_labels` result (values in %)."""
    rows = [
        "| Class | P (%) | R (%) | F1 (%) |",
        "|---|---:|---:|---:|",
    ]
    for name in (*PUNCTUATION_CLASSES, "OVERALL"):
        s = scores[name]
        rows.append(
            f"| {name} | {100 * s['precision']:.1f} | {100 * s['recall']:.1f} "
            f"| {100 * s['f1']:.1f} |"
        )
    rows.append("")
    rows.append(f"SER: {100 * scores['SER']:.1f}%")
    return "\n".join(rows)
