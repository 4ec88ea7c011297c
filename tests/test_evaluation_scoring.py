"""The IWSLT2011 scorer: a hand-computed golden case, edge cases and file scoring."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from corpus.iwslt import IwsltFormatError, read_iwslt, write_iwslt
from corpus.labels import LABELS, PUNCTUATION_CLASSES
from evaluation.scoring import (
    EmptyFileError,
    SlotCounts,
    TokenMismatchError,
    confusion_matrix,
    count_slots,
    format_table,
    score_details,
    score_files,
    score_files_details,
    score_labels,
)

IWSLT_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "iwslt2011"

O, C, P, Q = "O", "COMMA", "PERIOD", "QUESTION"

# ----------------------------------------------------------------------------- golden
# 20 slots (reference, prediction) and the kind of each slot:
GOLDEN = [
    (O, O),  # 1  O/O (not counted)
    (C, C),  # 2  correct COMMA
    (O, O),  # 3  O/O
    (P, P),  # 4  correct PERIOD
    (C, C),  # 5  correct COMMA
    (Q, Q),  # 6  correct QUESTION
    (C, P),  # 7  substitution COMMA -> PERIOD
    (P, C),  # 8  substitution PERIOD -> COMMA
    (Q, P),  # 9  substitution QUESTION -> PERIOD
    (P, Q),  # 10 substitution PERIOD -> QUESTION
    (C, O),  # 11 deletion COMMA
    (P, O),  # 12 deletion PERIOD
    (O, C),  # 13 insertion COMMA
    (O, C),  # 14 insertion COMMA
    (O, P),  # 15 insertion PERIOD
    (O, Q),  # 16 insertion QUESTION
    (O, O),  # 17 O/O
    (C, C),  # 18 correct COMMA
    (Q, O),  # 19 deletion QUESTION
    (P, P),  # 20 correct PERIOD
]
GOLDEN_REF = [r for r, _ in GOLDEN]
GOLDEN_HYP = [h for _, h in GOLDEN]

# Slot kinds:  C = slots 2,4,5,6,18,20 = 6   S = slots 7,8,9,10 = 4
#              D = slots 11,12,19 = 3        I = slots 13,14,15,16 = 4   O/O = 1,3,17 (3)
# #(r != O) = C+S+D = 13      #(h != O) = C+S+I = 14
#
# COMMA:    tp = slots 2,5,18 = 3; reference = 2,5,7,11,18 = 5; predicted = 2,5,8,13,14,18 = 6
#           P = 3/6 = 1/2, R = 3/5, F1 = 2*P*R/(P+R) = (3/5)/(11/10) = 6/11
# PERIOD:   tp = slots 4,20 = 2; reference = 4,8,10,12,20 = 5; predicted = 4,7,9,15,20 = 5
#           P = 2/5, R = 2/5, F1 = 2/5
# QUESTION: tp = slot 6 = 1; reference = 6,9,19 = 3; predicted = 6,10,16 = 3
#           P = 1/3, R = 1/3, F1 = 1/3
# OVERALL:  P = C/(C+S+I) = 6/14 = 3/7, R = C/(C+S+D) = 6/13,
#           F1 = 2*(3/7)*(6/13) / (3/7 + 6/13) = (36/91) / (81/91) = 36/81 = 4/9
# SER = (S+D+I) / #(r != O) = (4+3+4)/13 = 11/13
GOLDEN_SCORES = {
    "COMMA": {"precision": 1 / 2, "recall": 3 / 5, "f1": 6 / 11},
    "PERIOD": {"precision": 2 / 5, "recall": 2 / 5, "f1": 2 / 5},
    "QUESTION": {"precision": 1 / 3, "recall": 1 / 3, "f1": 1 / 3},
    "OVERALL": {"precision": 3 / 7, "recall": 6 / 13, "f1": 4 / 9},
    "SER": 11 / 13,
}
# Confusion matrix, rows = reference, columns = prediction, order O, COMMA, PERIOD, QUESTION:
# ref O:        slots 1,3,17 -> O; 13,14 -> COMMA; 15 -> PERIOD; 16 -> QUESTION
# ref COMMA:    11 -> O; 2,5,18 -> COMMA; 7 -> PERIOD
# ref PERIOD:   12 -> O; 8 -> COMMA; 4,20 -> PERIOD; 10 -> QUESTION
# ref QUESTION: 19 -> O; 9 -> PERIOD; 6 -> QUESTION
GOLDEN_MATRIX = [
    [3, 2, 1, 1],
    [1, 3, 1, 0],
    [1, 1, 2, 1],
    [1, 0, 1, 1],
]

KEYS = {"COMMA", "PERIOD", "QUESTION", "OVERALL", "SER"}
METRICS = {"precision", "recall", "f1"}


def assert_scores(actual: dict, expected: dict) -> None:
    assert set(actual) == KEYS
    for name in (*PUNCTUATION_CLASSES, "OVERALL"):
        assert set(actual[name]) == METRICS
        for metric in METRICS:
            value = actual[name][metric]
            assert type(value) is float, (name, metric, type(value))
            assert value == pytest.approx(expected[name][metric]), (name, metric)
    assert type(actual["SER"]) is float
    assert actual["SER"] == pytest.approx(expected["SER"])


def test_golden_counts():
    counts = count_slots(GOLDEN_REF, GOLDEN_HYP)
    assert isinstance(counts, SlotCounts)
    assert (counts.correct, counts.substitutions, counts.deletions, counts.insertions) == (6, 4, 3, 4)
    assert counts.reference_marks == 13
    assert counts.predicted_marks == 14
    assert counts.errors == 11
    assert counts.true_positive == {C: 3, P: 2, Q: 1}
    assert counts.reference == {C: 5, P: 5, Q: 3}
    assert counts.predicted == {C: 6, P: 5, Q: 3}


def test_golden_scores():
    assert_scores(score_labels(GOLDEN_REF, GOLDEN_HYP), GOLDEN_SCORES)


def test_golden_confusion_matrix():
    matrix = confusion_matrix(GOLDEN_REF, GOLDEN_HYP)
    assert matrix.dtype == np.int64
    assert matrix.shape == (4, 4)
    assert matrix.tolist() == GOLDEN_MATRIX


def test_golden_details_are_json_ready():
    details = score_details(GOLDEN_REF, GOLDEN_HYP)
    assert_scores(details["scores"], GOLDEN_SCORES)
    assert details["counts"]["correct"] == 6
    assert details["counts"]["reference"] == {C: 5, P: 5, Q: 3}
    assert details["confusion_matrix"] == {"labels": list(LABELS), "matrix": GOLDEN_MATRIX}
    json.dumps(details)


def test_integer_ids_are_accepted():
    ids = {label: i for i, label in enumerate(LABELS)}
    ref = np.array([ids[r] for r in GOLDEN_REF])
    hyp = [ids[h] for h in GOLDEN_HYP]
    assert score_labels(ref, hyp) == score_labels(GOLDEN_REF, GOLDEN_HYP)


def _naive_scores(ref, hyp):
    """Slot-by-slot loop written straight from the definitions (cross-check)."""
    c = s = d = i = 0
    tp = {k: 0 for k in PUNCTUATION_CLASSES}
    n_ref = {k: 0 for k in PUNCTUATION_CLASSES}
    n_hyp = {k: 0 for k in PUNCTUATION_CLASSES}
    for r, h in zip(ref, hyp):
        if r != O:
            n_ref[r] += 1
        if h != O:
            n_hyp[h] += 1
        if r == h != O:
            c += 1
            tp[r] += 1
        elif r != O and h != O:
            s += 1
        elif r != O:
            d += 1
        elif h != O:
            i += 1

    def prf(t, npred, nref):
        p = t / npred if npred else 0.0
        rc = t / nref if nref else 0.0
        return {"precision": p, "recall": rc, "f1": 2 * p * rc / (p + rc) if p + rc else 0.0}

    out = {k: prf(tp[k], n_hyp[k], n_ref[k]) for k in PUNCTUATION_CLASSES}
    out["OVERALL"] = prf(c, c + s + i, c + s + d)
    out["SER"] = (s + d + i) / (c + s + d) if c + s + d else 0.0
    return out


def test_random_sequences_match_naive_definition():
    rng = random.Random(2011)
    for _ in range(50):
        n = rng.randint(1, 60)
        ref = rng.choices(LABELS, weights=(6, 2, 1, 1), k=n)
        hyp = rng.choices(LABELS, weights=(6, 2, 1, 1), k=n)
        assert_scores(score_labels(ref, hyp), _naive_scores(ref, hyp))


# ----------------------------------------------------------------------------- edges


def _all(value: float, ser: float) -> dict:
    scores = {k: {m: value for m in METRICS} for k in (*PUNCTUATION_CLASSES, "OVERALL")}
    scores["SER"] = ser
    return scores


def test_all_o_everywhere_gives_zeros():
    assert_scores(score_labels([O] * 5, [O] * 5), _all(0.0, 0.0))


def test_empty_sequences_give_zeros():
    assert_scores(score_labels([], []), _all(0.0, 0.0))
    assert confusion_matrix([], []).tolist() == [[0] * 4] * 4


def test_no_marks_in_reference():
    # Only insertions: precision 0/2, recall 0/0 -> 0 by convention; SER 2/0 -> 0 by convention.
    counts = count_slots([O, O, O], [C, O, Q])
    assert counts.insertions == 2 and counts.reference_marks == 0
    assert_scores(score_labels([O, O, O], [C, O, Q]), _all(0.0, 0.0))


def test_no_predictions():
    # 3 reference marks, all deleted: P = 0/0 -> 0, R = 0/3, SER = 3/3 = 1.
    ref = [C, O, P, Q, O]
    assert_scores(score_labels(ref, [O] * 5), _all(0.0, 1.0))


def test_all_correct():
    ref = [C, O, P, O, Q, C]
    assert_scores(score_labels(ref, list(ref)), _all(1.0, 0.0))


def test_all_correct_with_absent_class():
    # QUESTION never occurs: its P/R/F1 are 0 (zero denominators), the rest are perfect.
    ref = [C, O, P, O]
    expected = _all(1.0, 0.0)
    expected[Q] = {m: 0.0 for m in METRICS}
    assert_scores(score_labels(ref, list(ref)), expected)


def test_ser_can_exceed_one():
    # 1 reference mark, 1 substitution + 2 insertions -> SER = 3/1.
    assert score_labels([C, O, O], [P, C, Q])["SER"] == pytest.approx(3.0)


def test_length_mismatch_raises():
    with pytest.raises(ValueError, match="length"):
        score_labels([O, C], [O])
    with pytest.raises(ValueError):
        count_slots([O], [O, O])


@pytest.mark.parametrize("bad", ["EXCLAMATION", "comma", "", None, 4, -1, 1.0])
def test_unknown_label_raises(bad):
    with pytest.raises(ValueError, match="unknown label"):
        score_labels([O, C], [O, bad])


def test_format_table():
    table = format_table(score_labels(GOLDEN_REF, GOLDEN_HYP))
    lines = table.splitlines()
    assert lines[0].startswith("| Class |")
    assert "| COMMA | 50.0 | 60.0 | 54.5 |" in lines
    assert "| OVERALL | 42.9 | 46.2 | 44.4 |" in lines
    assert "SER: 84.6%" in table


# ----------------------------------------------------------------------------- files


def _write(path, rows, newline="\n"):
    path.write_text(newline.join(rows) + newline, encoding="utf-8", newline="")
    return path


def test_score_files_golden(tmp_path):
    words = [f"w{i}" for i in range(len(GOLDEN))]
    ref = _write(tmp_path / "ref.txt", [f"{w}\t{r}" for w, r in zip(words, GOLDEN_REF)])
    hyp = _write(tmp_path / "hyp.txt", [f"{w}\t{h}" for w, h in zip(words, GOLDEN_HYP)], "\r\n")
    assert_scores(score_files(ref, hyp), GOLDEN_SCORES)


def test_score_files_word_mismatch_names_line(tmp_path):
    # A blank line in the reference shifts its file lines by one after line 2.
    ref = _write(tmp_path / "ref.txt", ["a\tO", "b\tCOMMA", "", "c\tO", "d\tPERIOD"])
    hyp = _write(tmp_path / "hyp.txt", ["a\tO", "b\tO", "x\tO", "d\tPERIOD"])
    with pytest.raises(TokenMismatchError) as info:
        score_files(ref, hyp)
    err = info.value
    assert (err.index, err.reference_line, err.prediction_line) == (2, 4, 3)
    assert (err.reference_word, err.prediction_word) == ("c", "x")
    message = str(err)
    assert f"{ref}:4" in message and f"{hyp}:3" in message
    assert "'c'" in message and "'x'" in message


def test_score_files_count_mismatch(tmp_path):
    ref = _write(tmp_path / "ref.txt", ["a\tO", "b\tCOMMA", "c\tPERIOD"])
    hyp = _write(tmp_path / "hyp.txt", ["a\tO", "b\tO"])
    with pytest.raises(TokenMismatchError) as info:
        score_files(ref, hyp)
    err = info.value
    assert (err.index, err.reference_line, err.prediction_line) == (2, 3, None)
    assert "token counts differ" in str(err) and f"{ref}:3" in str(err)


# ----------------------------------------------------------------------------- empty words and empty files
# dev2012 as distributed has ten lines with an empty word ("\tCOMMA"); the reference scorer compares line by
# line, so such a line is a slot like any other.


def test_empty_word_lines_are_slots(tmp_path):
    rows = ["diver\tO", "1\tO", "\tCOMMA", "what\tO", "kind\tQUESTION"]
    ref = _write(tmp_path / "ref.txt", rows, "\r\n")
    hyp = _write(tmp_path / "hyp.txt", ["diver\tO", "1\tO", "\tO", "what\tO", "kind\tQUESTION"])
    details = score_files_details(ref, hyp)
    assert details["counts"]["reference_marks"] == 2 and details["counts"]["deletions"] == 1
    assert score_files(ref, ref)["OVERALL"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0}


def test_a_prediction_may_leave_empty_word_lines_out(tmp_path):
    """This project's predictions come from prepared splits, which drop the empty words: each left-out
    slot is scored as O (here a deleted COMMA)."""
    ref = _write(tmp_path / "ref.txt", ["diver\tO", "1\tO", "\tCOMMA", "what\tO", "kind\tQUESTION", "\tPERIOD"])
    hyp = _write(tmp_path / "hyp.txt", ["diver\tO", "1\tO", "what\tO", "kind\tQUESTION"])
    details = score_files_details(ref, hyp)
    counts = details["counts"]
    assert (counts["correct"], counts["deletions"], counts["reference_marks"]) == (1, 2, 3)
    assert sum(map(sum, details["confusion_matrix"]["matrix"])) == 6


def test_an_empty_word_only_in_the_prediction_is_a_mismatch(tmp_path):
    ref = _write(tmp_path / "ref.txt", ["a\tO", "b\tCOMMA", "c\tPERIOD"])
    hyp = _write(tmp_path / "hyp.txt", ["a\tO", "\tCOMMA", "b\tCOMMA", "c\tPERIOD"])
    with pytest.raises(TokenMismatchError) as info:
        score_files(ref, hyp)
    err = info.value
    assert (err.reference_line, err.prediction_line) == (2, 2)
    assert (err.reference_word, err.prediction_word) == ("b", "")


def test_an_empty_word_line_with_an_unknown_label_names_the_line(tmp_path):
    ref = _write(tmp_path / "ref.txt", ["a\tO", "\tBANG", "c\tPERIOD"])
    with pytest.raises(IwsltFormatError) as info:
        score_files(ref, ref)
    assert str(info.value).startswith(f"{ref}:2: unknown label 'BANG'")


@pytest.mark.parametrize(
    ("reference", "prediction", "empty"),
    [("", "", "reference"), ("\r\n\n  \n", "", "reference"), ("a\tO\n", "", "prediction"),
     ("", "a\tO\n", "reference")],
)
def test_a_file_without_tokens_is_an_error_naming_it(tmp_path, reference, prediction, empty):
    ref = tmp_path / "ref.txt"
    hyp = tmp_path / "hyp.txt"
    ref.write_text(reference, encoding="utf-8")
    hyp.write_text(prediction, encoding="utf-8")
    with pytest.raises(EmptyFileError) as info:
        score_files(ref, hyp)
    path = ref if empty == "reference" else hyp
    assert str(info.value) == f"{path}: the {empty} file holds no tokens; nothing to score"
    assert isinstance(info.value, IwsltFormatError)


def test_other_format_errors_still_name_file_and_line(tmp_path):
    ref = _write(tmp_path / "ref.txt", ["a\tO", "b O", "c\tPERIOD"])
    with pytest.raises(IwsltFormatError, match=rf"{re.escape(str(ref))}:2: no tab"):
        score_files(ref, ref)


@pytest.mark.skipif(not (IWSLT_DIR / "dev2012").is_file(), reason=f"shared data not found at {IWSLT_DIR}")
def test_the_benchmark_files_score_against_themselves():
    for name in ("dev2012", "test2011", "test2011asr"):
        scores = score_files(IWSLT_DIR / name, IWSLT_DIR / name)
        assert scores["OVERALL"]["f1"] == 1.0 and scores["SER"] == 0.0, name


@pytest.mark.skipif(not (IWSLT_DIR / "dev2012").is_file(), reason=f"shared data not found at {IWSLT_DIR}")
def test_dev2012_against_a_prediction_without_its_empty_words(tmp_path):
    dev = read_iwslt(IWSLT_DIR / "dev2012", skip_empty_words=True)
    prediction = write_iwslt(tmp_path / "dev2012.tsv", dev.words, dev.labels)
    counts = score_files_details(IWSLT_DIR / "dev2012", prediction)["counts"]
    assert counts["deletions"] == 10 and counts["substitutions"] == counts["insertions"] == 0


def test_sentence_spans_end_at_each_period_and_question():
    from evaluation.benchmark import sentence_spans

    labels = ["O", "COMMA", "PERIOD", "O", "QUESTION", "O", "O"]
    assert sentence_spans(labels) == [(0, 3), (3, 5), (5, 7)]
    assert sentence_spans(["O", "PERIOD"]) == [(0, 2)]
    assert sentence_spans([]) == []
